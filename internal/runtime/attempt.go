package runtime

import (
	"context"
	"errors"
	"sync"
	"time"
)

// attemptResult is how one attempt ended.
type attemptResult struct {
	err          error
	checkpointed bool          // a checkpoint completed during the attempt
	restorePoint *restorePoint // the latest completed checkpoint, if one completed
	final        bool          // a final checkpoint completed: the job has nothing left to run
	reloadLatest bool          // the outcome of a metadata write is unknown: restore from the store's latest
	// outcomeUnknown: a checkpoint newer than the last completed one may be
	// complete in storage; closing must abort nothing.
	outcomeUnknown bool
	closeErr       error // what closing the operators reported
}

// attempt runs the job once, from rp (nil: from scratch).
func (j *Job) attempt(ctx context.Context, rp *restorePoint) attemptResult {
	actx, cancel := context.WithCancel(ctx)
	defer cancel()
	if err := j.restoreSinks(actx, rp); err != nil {
		return attemptResult{err: err}
	}
	events := make(chan event, 64)
	var async sync.WaitGroup
	tasks, err := j.build(actx, rp, events, &async)
	if err != nil {
		return attemptResult{err: err}
	}
	var running sync.WaitGroup
	for _, t := range tasks {
		running.Go(func() {
			if err := t.runRecovered(actx); err != nil && actx.Err() == nil {
				t.report(actx, event{kind: evTaskFailed, err: err})
			}
		})
	}
	d := &driver{job: j, tasks: tasks}
	if rp != nil {
		d.completed = rp.md.ID
	}
	res := d.loop(ctx, actx, events)
	cancel()
	running.Wait()
	async.Wait()
	// A deliberate stop commits what the last completed checkpoint covers
	// and aborts the rest; after a failure, or when a checkpoint may have
	// completed unseen, both are left to recovery.
	clean := (res.err == nil || ctx.Err() != nil) && !res.outcomeUnknown && !fenced(ctx)
	closeCtx, stop := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer stop()
	for _, t := range tasks {
		if err := t.close(closeCtx, d.completed, clean); err != nil {
			j.opts.Logger.Warn("closing an operator failed", "error", err)
			res.closeErr = errors.Join(res.closeErr, err)
		}
	}
	if res.err == nil {
		res.err = res.closeErr
	}
	for _, a := range j.coord.Reset(time.Now()) {
		d.do(actx, a)
	}
	return res
}
