package runtime

import (
	"fmt"

	"github.com/exactlyonce/exactly/checkpoint"
	"github.com/exactlyonce/exactly/checkpoint/store"
	"github.com/exactlyonce/exactly/internal/format"
	"github.com/exactlyonce/exactly/state"
)

// restorePoint is a completed checkpoint an attempt starts from. It reads
// each state file at most once per attempt.
type restorePoint struct {
	md    *checkpoint.Metadata
	dir   string // the checkpoint's directory
	store store.Storage
	cache map[string]checkpoint.SubtaskSnapshot // by file name
}

func newRestorePoint(st store.Storage, md *checkpoint.Metadata, dir string) *restorePoint {
	return &restorePoint{md: md, dir: dir, store: st, cache: map[string]checkpoint.SubtaskSnapshot{}}
}

// inStorage reports whether the checkpoint is in the storage it was read
// from under its own id, rather than at a path of RestoreFrom elsewhere.
func (rp *restorePoint) inStorage() bool {
	return rp.dir == rp.store.Dir(rp.md.ID, rp.md.Kind)
}

// validate checks that the checkpoint fits the job.
func (rp *restorePoint) validate(g *Graph, maxParallelism int) error {
	if rp.md.MaxParallelism != maxParallelism {
		return fmt.Errorf("%w: checkpoint %d of job %q has max parallelism %d, the job %d: key groups cannot change; set MaxParallelism to %d",
			errJobStructure, rp.md.ID, rp.md.Job, rp.md.MaxParallelism, maxParallelism, rp.md.MaxParallelism)
	}
	ops := map[string]*OperatorSpec{}
	for i := range g.Operators {
		ops[g.Operators[i].Name] = &g.Operators[i]
	}
	for _, op := range rp.md.Operators {
		if ops[op.Name] == nil {
			return fmt.Errorf("%w: checkpoint %d has state for operator %q, which the job does not have: restore the operator under that name, or start from another checkpoint",
				errJobStructure, rp.md.ID, op.Name)
		}
	}
	return nil
}

func (rp *restorePoint) operator(name string) *checkpoint.OperatorState {
	for i := range rp.md.Operators {
		if rp.md.Operators[i].Name == name {
			return &rp.md.Operators[i]
		}
	}
	return nil
}

func (rp *restorePoint) read(h checkpoint.StateHandle) (checkpoint.SubtaskSnapshot, error) {
	if snap, ok := rp.cache[h.File]; ok {
		return snap, nil
	}
	snap, err := rp.store.ReadStateAt(rp.dir, h)
	if err != nil {
		return snap, fmt.Errorf("restoring checkpoint %d: %w", rp.md.ID, err)
	}
	rp.cache[h.File] = snap
	return snap, nil
}

// entries returns the operator entries of every former subtask of the operator.
func (rp *restorePoint) entries(operator string) ([][]byte, error) {
	op := rp.operator(operator)
	if op == nil {
		return nil, nil
	}
	var all [][]byte
	for _, h := range op.Subtasks {
		snap, err := rp.read(h)
		if err != nil {
			return nil, err
		}
		all = append(all, snap.Entries...)
	}
	return all, nil
}

// snapshotFor assembles what one subtask restores: the key groups it owns
// (keys), gathered from every former subtask, and the operator entries of
// all former subtasks — none for operators whose Restore hook took them.
func (rp *restorePoint) snapshotFor(spec *OperatorSpec, keys state.KeyGroupRange) (*checkpoint.SubtaskSnapshot, error) {
	op := rp.operator(spec.Name)
	if op == nil {
		return nil, nil
	}
	out := &checkpoint.SubtaskSnapshot{}
	for _, h := range op.Subtasks {
		overlaps := h.KeyGroupStart < keys.End && keys.Start < h.KeyGroupEnd
		if !overlaps && spec.BroadcastState && h.Subtask == 0 {
			snap, err := rp.read(h)
			if err != nil {
				return nil, err
			}
			for _, e := range snap.Entries {
				if format.IsBroadcastState(e) {
					out.Entries = append(out.Entries, e)
				}
			}
			continue
		}
		if !overlaps && (spec.Restore != nil || !hasEntries(h)) {
			continue
		}
		snap, err := rp.read(h)
		if err != nil {
			return nil, err
		}
		for kg, blob := range snap.KeyGroups {
			if keys.Contains(kg) {
				if out.KeyGroups == nil {
					out.KeyGroups = map[int][]byte{}
				}
				out.KeyGroups[kg] = blob
			}
		}
		for _, db := range snap.DBs {
			if db.KeyGroupStart < keys.End && keys.Start < db.KeyGroupEnd {
				out.DBs = append(out.DBs, db)
			}
		}
		if spec.Restore == nil {
			out.Entries = append(out.Entries, snap.Entries...)
		}
	}
	return out, nil
}

// hasEntries reports whether a handle may hold operator entries: only
// non-keyed subtasks record an empty key-group range.
func hasEntries(h checkpoint.StateHandle) bool { return h.KeyGroupStart == h.KeyGroupEnd }
