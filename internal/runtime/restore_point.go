package runtime

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
	"time"

	"github.com/exactlyonce/exactly/checkpoint"
	"github.com/exactlyonce/exactly/checkpoint/store"
)

// initialRestorePoint finds what the first attempt restores: the latest
// checkpoint of the job's storage, or the RestoreFrom savepoint when the
// storage holds nothing newer (a process restarted with the same options
// resumes where it was instead of replaying from the savepoint).
func (j *Job) initialRestorePoint(ctx context.Context) (*restorePoint, error) {
	latest, err := j.latestRetrying(ctx)
	if err != nil && (j.opts.RestoreFrom == "" || !errors.Is(err, store.ErrCorrupt)) {
		if errors.Is(err, store.ErrCorruptCompleted) {
			names := j.opts.optionNames()
			err = fmt.Errorf("%w; or start with %s to fall back to the newest checkpoint that verifies (from scratch if none does), accepting duplicates of what was committed after it; or start from a savepoint with %s",
				err, names.SkipCorruptCheckpoints, names.RestoreFrom)
		}
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
		switch {
		case latest != nil && sameLocation(j.store.Dir(latest.ID, latest.Kind), j.opts.RestoreFrom):
			// The savepoint is the latest of the job's own storage (taken
			// into the same checkpoint directory): both name one restore.
		case latest != nil && latest.ID >= md.ID:
			j.opts.Logger.Info("RestoreFrom is ignored: the checkpoint directory holds a checkpoint of the job at least as new; resuming from it",
				"restore_from", j.opts.RestoreFrom, "savepoint", md.ID, "checkpoint", latest.ID)
		default:
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

// startReadWait is how long the start retries a failed read of the latest
// checkpoint: as long as acquiring ownership waits through an outage of
// object storage (store.DefaultOutageWait).
const startReadWait = store.DefaultOutageWait

// latestRetrying returns the storage's latest completed checkpoint,
// retrying a read (or the settling of a manifest write of unknown outcome) that failed for a reason that may pass (a connection cut
// while the S3 server restarted; TestCrashOnObjectStorage's child failed
// its start on "unexpected EOF") for up to startReadWait. A corrupt
// checkpoint, lost ownership, a missing or forbidden file fail at once.
func (j *Job) latestRetrying(ctx context.Context) (*checkpoint.Metadata, error) {
	deadline := time.Now().Add(startReadWait)
	backoff := 100 * time.Millisecond
	for {
		md, err := j.store.Latest()
		if err == nil || !mayPass(err) || time.Now().Add(backoff).After(deadline) {
			return md, err
		}
		j.opts.Logger.Warn("reading the latest checkpoint failed; retrying", "error", err, "retry_in", backoff)
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 2*time.Second)
	}
}

// mayPass reports whether a failed read of the checkpoint storage may
// succeed when tried again.
func mayPass(err error) bool {
	return !errors.Is(err, store.ErrCorrupt) && !errors.Is(err, store.ErrNotOwner) &&
		!errors.Is(err, fs.ErrNotExist) && !errors.Is(err, fs.ErrPermission)
}

// latestAbove returns the store's latest checkpoint if it is newer than rp,
// else rp. A read that may pass is retried as at the start: a restart after
// a brownout of object storage waits for the write of unknown outcome to
// settle (store.ObjectStore.Latest) instead of failing the job.
func (j *Job) latestAbove(ctx context.Context, rp *restorePoint) (*restorePoint, error) {
	md, err := j.latestRetrying(ctx)
	if err != nil || md == nil || (rp != nil && md.ID <= rp.md.ID) {
		return rp, err
	}
	latest := newRestorePoint(j.store, md, j.store.Dir(md.ID, md.Kind))
	if err := latest.validate(&j.g, j.opts.MaxParallelism); err != nil {
		return nil, err
	}
	return latest, nil
}

// sameLocation reports whether two checkpoint locations (directories or
// URLs) name the same place.
func sameLocation(a, b string) bool {
	if strings.Contains(a, "://") || strings.Contains(b, "://") {
		return strings.TrimRight(a, "/") == strings.TrimRight(b, "/")
	}
	absA, errA := filepath.Abs(a)
	absB, errB := filepath.Abs(b)
	return errA == nil && errB == nil && absA == absB
}
