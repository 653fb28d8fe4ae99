package runtime

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/exactlyonce/exactly/checkpoint"
	"github.com/exactlyonce/exactly/checkpoint/store"
	"github.com/exactlyonce/exactly/control"
	"github.com/exactlyonce/exactly/internal/coordinator"
	"github.com/exactlyonce/exactly/sink"
)

// drive runs attempts until the job finishes, is cancelled, or the restart
// strategy gives up.
func (j *Job) drive(ctx context.Context, rp *restorePoint) error {
	r := j.opts.Restart
	// A job restored from its final checkpoint (its input ended) has only
	// that checkpoint's commits left to make: it runs nothing again.
	finished := rp != nil && rp.md.EndOfInput && !j.opts.RunFinished
	if finished {
		j.opts.Logger.Info("the job finished: its last checkpoint is the final one of its input; committing what it covers and running nothing (start it with "+j.opts.optionNames().RunFinished+" to run it on from there, for new input; or with an empty checkpoint directory to run it again from scratch)",
			"job", j.g.Job, "checkpoint", rp.md.ID)
	}
	recovery := coordinator.NewRecovery(coordinator.RecoveryConfig{MaxAttempts: r.MaxAttempts, MaxAttemptsOption: j.opts.optionNames().RestartMaxAttempts,
		InitialBackoff: r.InitialBackoff, MaxBackoff: r.MaxBackoff}, finished)
	for {
		var res attemptResult
		if recovery.CommitOnly() {
			res = attemptResult{err: j.restoreSinks(ctx, rp)}
		} else {
			res = j.attempt(ctx, rp)
		}
		failure := j.classify(ctx, res.err)
		if failure == coordinator.Permanent {
			if err := j.zombie(res.err); err != nil {
				return err
			}
		}
		d := recovery.AttemptEnded(coordinator.AttemptEnd{Failure: failure, Checkpointed: res.checkpointed,
			Final: res.final, OutcomeUnknown: res.outcomeUnknown, CommitPending: res.closeErr != nil})
		if !d.Restart {
			return j.endError(ctx, res, d)
		}
		j.opts.Logger.Warn("job failed; restarting from the latest completed checkpoint",
			"job", j.g.Job, "error", res.err, "restart", d.Attempt, "of", r.MaxAttempts, "backoff", d.Backoff)
		j.metrics.Restarts.Add(1)
		j.metrics.obs.restarted(control.Restart{Time: time.Now(), Attempt: d.Attempt, Error: res.err.Error(), BackoffMillis: d.Backoff.Milliseconds()})
		j.metrics.obs.setState(control.StateRestarting, res.err.Error())
		select {
		case <-time.After(d.Backoff):
		case <-ctx.Done():
			return j.cancelled(ctx)
		}
		// A restart restores the sinks, which fences and aborts what no
		// restored checkpoint covers: a process that lost the job to a newer
		// owner while it failed (it was paused) must not, or it would abort
		// the new owner's transactions. Its renewal loop notices the loss at
		// its next tick; the restart asks now.
		if err := j.zombie(res.err); err != nil {
			return err
		}
		switch d.Restore {
		case coordinator.RestoreCompleted:
			rp = res.restorePoint
		case coordinator.RestoreLatestInStorage:
			if res.restorePoint != nil {
				rp = res.restorePoint
			}
			latest, err := j.latestAbove(ctx, rp)
			if err != nil {
				if zerr := j.zombie(err); zerr != nil {
					return zerr
				}
				return fmt.Errorf("exactly: job %q failed: %w (after: %w)", j.g.Job, err, res.err)
			}
			rp = latest
		}
		j.metrics.obs.setState(control.StateRunning, "")
		if rp != nil {
			j.opts.Logger.Info("restarting from checkpoint", "job", j.g.Job, "checkpoint", rp.md.ID, "restart", d.Attempt)
		} else {
			j.opts.Logger.Info("restarting from the beginning of the input: no checkpoint completed yet", "job", j.g.Job, "restart", d.Attempt)
		}
	}
}

// zombie returns a fencing error wrapping err when this process no longer
// owns the job's checkpoint storage, nil otherwise. It is asked before a
// restart and before a failure ends the job: a process that lost the job
// while it was paused must not restart (its restore would abort the new
// owner's transactions), and its failures are its loss of the job, not
// damage to report — the newer owner's retention removes checkpoint files
// that the zombie's restore still reads, which looks like a corrupt
// checkpoint (the torture suite's zombie fault on object storage).
func (j *Job) zombie(err error) error {
	rerr := j.store.Renew()
	if !errors.Is(rerr, store.ErrNotOwner) {
		return nil
	}
	return fmt.Errorf("exactly: job %q stopped: %w (after: %w)", j.g.Job, rerr, err)
}

// classify tells the recovery decision how an attempt ended.
func (j *Job) classify(ctx context.Context, err error) coordinator.Failure {
	switch {
	case err == nil:
		return coordinator.Succeeded
	case fenced(ctx) || errors.Is(err, store.ErrNotOwner) || errors.Is(err, sink.ErrFenced):
		return coordinator.Fenced
	case ctx.Err() != nil:
		return coordinator.Stopped
	case sink.IsPermanent(err) || errors.Is(err, checkpoint.ErrCorrupt) || errors.Is(err, store.ErrRefused) || errors.Is(err, errJobStructure):
		return coordinator.Permanent
	}
	return coordinator.Transient
}

// endError is what Run returns when the recovery decision ends the job.
func (j *Job) endError(ctx context.Context, res attemptResult, d coordinator.Decision) error {
	switch {
	case res.err == nil:
		return nil
	case fenced(ctx):
		return j.cancelled(ctx)
	case ctx.Err() != nil && res.closeErr != nil:
		// A commit that failed while stopping is the user's to know
		// about: the output is safe in the checkpoint.
		return fmt.Errorf("exactly: job %q stopped: %w", j.g.Job, errors.Join(ctx.Err(), res.closeErr))
	case ctx.Err() != nil:
		return ctx.Err()
	}
	if errors.Is(res.err, sink.ErrForeignProgress) {
		return fmt.Errorf("exactly: job %q failed (%s): %w (to take the output over, start it with %s)", j.g.Job, d.Reason, res.err, j.opts.optionNames().TakeOverSinks)
	}
	return fmt.Errorf("exactly: job %q failed (%s): %w", j.g.Job, d.Reason, res.err)
}

// cancelled is why the job ended when ctx did: the ownership error when
// the renewal loop cancelled it (another process took the job over: a
// caller such as the cluster must not take that for a stop, nor for a
// failure), ctx's error otherwise.
func (j *Job) cancelled(ctx context.Context) error {
	if fenced(ctx) {
		return fmt.Errorf("exactly: job %q stopped: %w", j.g.Job, context.Cause(ctx))
	}
	return ctx.Err()
}

// errJobStructure marks a mismatch between a checkpoint and the job.
var errJobStructure = errors.New("exactly: the checkpoint does not match the job")
