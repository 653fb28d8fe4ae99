package runtime

import (
	"context"
	"errors"
	"fmt"

	"github.com/exactlyonce/exactly/checkpoint"
)

// restoreSinks restores every operator with a Restore hook before any task
// runs, in two steps: first every sink fences earlier owners (where one
// refuses the start, nothing was committed or aborted in any sink), then
// each commits the restored committables and aborts lingering
// transactions.
func (j *Job) restoreSinks(ctx context.Context, rp *restorePoint) (err error) {
	var steps []Restoring
	defer func() {
		for _, s := range steps {
			err = errors.Join(err, s.Close())
		}
	}()
	var (
		names []string
		id    checkpoint.ID // the restored checkpoint, 0 on a fresh start
	)
	if rp != nil {
		id = rp.md.ID
	}
	for i := range j.g.Operators {
		op := &j.g.Operators[i]
		if op.Restore == nil {
			continue
		}
		var entries [][]byte
		if rp != nil {
			if entries, err = rp.entries(op.Name); err != nil {
				return err
			}
		}
		rc := RestoreContext{Job: j.g.Job, Operator: op.Name, Checkpoint: id, Entries: entries,
			Commit: j.opts.commitPolicy(), Owner: j.owner, TakeOverSinks: j.opts.TakeOverSinks,
			Logger: j.opts.Logger.With("operator", op.Name)}
		s, err := restoreOperator(ctx, op, rc)
		if err != nil {
			return fmt.Errorf("%s: restoring from checkpoint %d: %w", op.Name, id, err)
		}
		steps, names = append(steps, s), append(names, op.Name)
	}
	for i, s := range steps {
		if err := finishRestore(ctx, s); err != nil {
			return fmt.Errorf("%s: restoring from checkpoint %d: %w", names[i], id, err)
		}
	}
	return nil
}

// restoreOperator calls op's Restore hook; a panic in it becomes an error.
func restoreOperator(ctx context.Context, op *OperatorSpec, rc RestoreContext) (s Restoring, err error) {
	defer recoverAs("restore", &err)
	return op.Restore(ctx, rc)
}

// finishRestore runs the second step of a restore; a panic in it becomes an
// error.
func finishRestore(ctx context.Context, s Restoring) (err error) {
	defer recoverAs("restore", &err)
	return s.Finish(ctx)
}
