package runtime

import (
	"errors"
	"fmt"

	"github.com/exactlyonce/exactly/checkpoint/store"
)

// initialRestorePoint finds what the first attempt restores: the latest
// checkpoint of the job's storage, or the RestoreFrom savepoint when the
// storage holds nothing newer (a process restarted with the same options
// resumes where it was instead of replaying from the savepoint).
func (j *Job) initialRestorePoint() (*restorePoint, error) {
	latest, err := j.store.Latest()
	if err != nil && (j.opts.RestoreFrom == "" || !errors.Is(err, store.ErrCorrupt)) {
		return nil, err
	}
	if err != nil {
		j.opts.Logger.Warn("the job's latest checkpoint does not verify; restoring from RestoreFrom as asked", "error", err, "restore_from", j.opts.RestoreFrom)
		latest = nil
	}
	var rp *restorePoint
	if latest != nil {
		rp = newRestorePoint(j.store, latest, j.store.Dir(latest.ID, latest.Kind))
	}
	if j.opts.RestoreFrom != "" {
		md, err := j.store.Load(j.opts.RestoreFrom)
		if err != nil {
			return nil, fmt.Errorf("exactly: option RestoreFrom = %q: %w", j.opts.RestoreFrom, err)
		}
		if latest != nil && latest.ID >= md.ID {
			j.opts.Logger.Info("RestoreFrom is ignored: the checkpoint directory holds a checkpoint of the job at least as new; resuming from it",
				"restore_from", j.opts.RestoreFrom, "savepoint", md.ID, "checkpoint", latest.ID)
		} else {
			rp = newRestorePoint(j.store, md, j.opts.RestoreFrom)
		}
	}
	if rp == nil {
		return nil, nil
	}
	if err := rp.validate(&j.g, j.opts.MaxParallelism); err != nil {
		return nil, err
	}
	return rp, nil
}

// latestAbove returns the store's latest checkpoint if it is newer than rp,
// else rp.
func (j *Job) latestAbove(rp *restorePoint) (*restorePoint, error) {
	md, err := j.store.Latest()
	if err != nil || md == nil || (rp != nil && md.ID <= rp.md.ID) {
		return rp, err
	}
	latest := newRestorePoint(j.store, md, j.store.Dir(md.ID, md.Kind))
	if err := latest.validate(&j.g, j.opts.MaxParallelism); err != nil {
		return nil, err
	}
	return latest, nil
}
