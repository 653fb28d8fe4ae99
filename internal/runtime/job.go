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

// Job is a running job.
type Job struct {
	g     Graph
	opts  Options
	store store.Storage
	coord *coordinator.Coordinator

	requests chan savepointRequest
	// savepoints holds the requests not yet answered, by request id; only
	// the driver goroutine touches it and nextRequest.
	savepoints  map[uint64]savepointRequest
	nextRequest uint64
	// ended is closed when the job has ended, before the control server
	// closes; done after it closes.
	ended, done chan struct{}
	err         error
	stopped     bool                    // asked to stop; set before done is closed
	cancel      context.CancelCauseFunc // cancels the job's context
	started     time.Time
	control     *control.Server // nil without Options.Control.Addr

	metrics Metrics
	idFloor checkpoint.ID // the restored checkpoint's id: new ids must be higher
	owner   sink.Owner    // this process's incarnation and epoch
}

// Run runs the job until its sources are finished and all output is
// committed, or until ctx is cancelled, in which case it stops cleanly and
// returns ctx.Err().
func Run(ctx context.Context, g Graph, opts Options) error {
	j, err := Start(ctx, g, opts)
	if err != nil {
		return err
	}
	return j.Wait()
}

// Start validates the job, opens its checkpoint storage and starts it in
// the background.
func Start(ctx context.Context, g Graph, opts Options) (*Job, error) {
	if err := opts.validate(); err != nil {
		return nil, err
	}
	opts = opts.withDefaults()
	if err := g.validate(opts.MaxParallelism); err != nil {
		return nil, err
	}
	ln, token, err := OpenControl(opts.Control, opts.optionNames())
	if err != nil {
		return nil, err
	}
	started := false
	defer func() {
		if !started && ln != nil {
			_ = ln.Close()
		}
	}()
	// The sources' and sinks' checks run while the storage is opened and
	// acquired (which may wait for another owner): a failed check ends the
	// wait and fails the start with every check's error.
	actx, cancelAcquire := context.WithCancelCause(ctx)
	defer cancelAcquire(nil)
	checked := make(chan error, 1)
	go func() {
		err := g.check(ctx, opts.CheckTimeout)
		if err != nil {
			cancelAcquire(err)
		}
		checked <- err
	}()
	st, own, err := acquire(actx, g.Job, opts)
	if cerr := <-checked; cerr != nil {
		if err == nil {
			_ = st.Release() // the job never ran; the next start takes over at once
		}
		return nil, cerr
	}
	if err != nil {
		return nil, err
	}
	defer func() {
		if !started {
			_ = st.Release() // the job never ran; the next start takes over at once
		}
	}()
	names := g.taskNames()
	coord, err := coordinator.NewCoordinator(coordinator.Config{
		Job:               g.Job,
		MaxParallelism:    opts.MaxParallelism,
		Interval:          opts.CheckpointInterval,
		Timeout:           opts.CheckpointTimeout,
		MinPause:          opts.MinPauseBetweenCheckpoints,
		CaughtUpPause:     opts.CheckpointOnCaughtUp,
		Incarnation:       own.Incarnation,
		Epoch:             own.Epoch,
		Subtasks:          len(names),
		SubtaskNames:      names,
		TolerableFailures: opts.TolerableCheckpointFailures,
	})
	if err != nil {
		return nil, err
	}
	if opts.Probe == nil {
		opts.Probe = func(ProbePoint, checkpoint.ID) {}
	}
	j := &Job{g: g, opts: opts, store: st, coord: coord, requests: make(chan savepointRequest),
		metrics:    Metrics{skipped: st.Skipped},
		owner:      sink.Owner{Incarnation: own.Incarnation, Epoch: own.Epoch},
		savepoints: map[uint64]savepointRequest{}, ended: make(chan struct{}), done: make(chan struct{}), started: time.Now()}
	rp, err := j.initialRestorePoint(ctx)
	if err != nil {
		if zerr := j.zombie(err); zerr != nil {
			return nil, zerr // taken over while it read the checkpoint (it was paused)
		}
		return nil, err
	}
	if rp != nil {
		j.idFloor = rp.md.ID
		// The job's last completed checkpoint, until this process
		// completes one: a restart does not make it unknown.
		j.metrics.LastCheckpoint.Store(newCheckpointStats(rp.md, rp.md.Completed))
	}
	started = true
	j.logStart(rp, len(names))
	jctx, cancel := context.WithCancelCause(ctx)
	j.cancel = cancel
	j.metrics.obs.setState(control.StateRunning, "")
	if ln != nil {
		j.serveControl(ln, token)
	}
	renewing := make(chan struct{})
	go func() {
		defer close(renewing)
		j.keepOwnership(jctx, cancel)
	}()
	go func() {
		defer close(j.done)
		err := j.drive(jctx, rp)
		if context.Cause(jctx) == errStopRequested && err == jctx.Err() {
			err = nil // stopped cleanly by Stop, which is no failure
			j.stopped = true
		}
		j.err = err
		cancel(nil)
		<-renewing
		if err := st.Release(); err != nil {
			j.opts.Logger.Warn("releasing the checkpoint directory failed; the next owner waits for the lease to expire", "error", err)
		}
		for id, req := range j.savepoints {
			req.reply <- savepointResult{err: fmt.Errorf("savepoint request %d: the job ended before it completed", id)}
		}
		if j.err != nil && !errors.Is(j.err, context.Canceled) {
			j.metrics.obs.setState(control.StateFailed, j.err.Error())
		} else {
			j.metrics.obs.setState(control.StateFinished, "")
		}
		close(j.ended)
		j.closeControl()
	}()
	return j, nil
}

// acquire opens the job's checkpoint storage and takes its ownership.
func acquire(ctx context.Context, job string, opts Options) (store.Storage, store.Ownership, error) {
	st, err := store.OpenStorage(opts.CheckpointDir, store.Options{FS: opts.fs, Retained: opts.RetainedCheckpoints, Logger: opts.Logger, SkipCorrupt: opts.SkipCorruptCheckpoints,
		RequestTimeout: opts.StorageRequestTimeout, MinTransferRate: opts.StorageMinTransferRate})
	if err != nil {
		return nil, store.Ownership{}, err
	}
	own, err := st.Acquire(ctx, store.OwnershipOptions{Lease: opts.OwnershipLease, Wait: opts.OwnershipWait})
	if err != nil {
		return nil, store.Ownership{}, fmt.Errorf("exactly: job %q: %w", job, err)
	}
	return st, own, nil
}

// logStart says at INFO what starts: the job, this process's ownership,
// its storage, and where its input resumes.
func (j *Job) logStart(rp *restorePoint, subtasks int) {
	attrs := []any{"job", j.g.Job, "incarnation", j.owner.Incarnation, "epoch", j.owner.Epoch,
		"storage", j.store.Location(), "operators", len(j.g.Operators), "subtasks", subtasks}
	if rp == nil {
		j.opts.Logger.Info("job started from the beginning of its input: no completed checkpoint", attrs...)
		return
	}
	attrs = append(attrs, "checkpoint", rp.md.ID, "kind", rp.md.Kind, "completed", rp.md.Completed, "from", rp.dir)
	what := "its latest checkpoint"
	if j.opts.RestoreFrom != "" && sameLocation(rp.dir, j.opts.RestoreFrom) {
		what = "the savepoint it was given (RestoreFrom)"
	}
	j.opts.Logger.Info("job started from "+what+": committing what it covers, aborting what it does not, replaying from its positions", attrs...)
}

// keepOwnership renews the job's ownership of its checkpoint directory
// until ctx ends. When another process took the directory over, it cancels
// ctx with the cause: this process is a zombie and must stop without
// committing or aborting anything.
func (j *Job) keepOwnership(ctx context.Context, cancel context.CancelCauseFunc) {
	t := time.NewTicker(j.store.RenewInterval())
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		err := j.store.Renew()
		if errors.Is(err, store.ErrNotOwner) {
			j.opts.Logger.Error("lost ownership of the checkpoint directory: stopping", "job", j.g.Job, "error", err)
			cancel(err)
			return
		}
		if err != nil {
			j.opts.Logger.Warn("renewing ownership of the checkpoint directory failed; retrying", "job", j.g.Job, "error", err)
		}
	}
}

// fenced reports whether ctx was cancelled because another process took
// the job over.
func fenced(ctx context.Context) bool { return errors.Is(context.Cause(ctx), store.ErrNotOwner) }

// Wait blocks until the job ends and returns why.
func (j *Job) Wait() error {
	<-j.done
	return j.err
}

// Stopped reports, once [Job.Wait] returned nil, whether the job ended
// because it was asked to stop ([Job.Stop], [Job.StopWithSavepoint], the
// control API) rather than because its input was done.
func (j *Job) Stopped() bool {
	<-j.done
	return j.stopped
}

// Metrics returns the job's counters.
func (j *Job) Metrics() *Metrics { return &j.metrics }
