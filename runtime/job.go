package runtime

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/exactlyonce/exactly/checkpoint"
	"github.com/exactlyonce/exactly/checkpoint/store"
	"github.com/exactlyonce/exactly/sink"
)

// Job is a running job.
type Job struct {
	g     Graph
	opts  Options
	store *store.Store
	coord *checkpoint.Coordinator

	requests chan savepointRequest
	// savepoints holds the requests not yet answered, by request id; only
	// the driver goroutine touches it and nextRequest.
	savepoints  map[uint64]savepointRequest
	nextRequest uint64
	done        chan struct{}
	err         error

	metrics Metrics
	idFloor uint64     // the restored checkpoint's id: new ids must be higher
	owner   sink.Owner // this process's incarnation and epoch
}

// Metrics are counters of a running job, safe to read at any time.
type Metrics struct {
	// Completed counts completed checkpoints and savepoints.
	Completed atomic.Int64
	// Aborted counts aborted checkpoints.
	Aborted atomic.Int64
	// Restarts counts restarts after failures.
	Restarts atomic.Int64
	// skipped returns the corrupt completed checkpoints skipped at restore
	// (see Options.SkipCorruptCheckpoints); nil before the store opens.
	skipped func() int64
	// LastCheckpoint describes the last completed checkpoint or savepoint:
	// at first the one the job restored (its Completed is when its last
	// acknowledgement arrived), nil when it started afresh.
	LastCheckpoint atomic.Pointer[CheckpointStats]
	// CheckpointDurations counts the checkpoints and savepoints completed
	// in this process by their time from trigger to metadata written.
	CheckpointDurations DurationHistogram
	// records counts records per operator subtask; see Records.
	records sync.Map // operator name -> *atomic.Int64
	// late counts records dropped for arriving behind the watermark.
	late sync.Map // operator name -> *atomic.Int64
}

// CheckpointStats describes a completed checkpoint.
type CheckpointStats struct {
	// ID is the checkpoint's id.
	ID uint64
	// Triggered is when it was triggered, Completed when its metadata was
	// written (wall clock).
	Triggered, Completed time.Time
	// StateBytes is the size of its state files.
	StateBytes int64
}

// SkippedCheckpoints returns how many completed checkpoints that did not
// verify were skipped at restore under [Options].SkipCorruptCheckpoints.
func (m *Metrics) SkippedCheckpoints() int64 {
	if m.skipped == nil {
		return 0
	}
	return m.skipped()
}

// Records returns the number of records the named operator handled, summed
// over its subtasks and attempts.
func (m *Metrics) Records(operator string) int64 {
	if c, ok := m.records.Load(operator); ok {
		return c.(*atomic.Int64).Load()
	}
	return 0
}

// LateRecords returns the number of records the named event-time operator
// dropped because they arrived after the watermark had passed their time,
// summed over its subtasks and attempts.
func (m *Metrics) LateRecords(operator string) int64 {
	if c, ok := m.late.Load(operator); ok {
		return c.(*atomic.Int64).Load()
	}
	return 0
}

// RecordsByOperator returns Records of every operator.
func (m *Metrics) RecordsByOperator() map[string]int64 { return counts(&m.records) }

// LateRecordsByOperator returns LateRecords of every operator (0 for those
// without event time).
func (m *Metrics) LateRecordsByOperator() map[string]int64 { return counts(&m.late) }

func counts(counters *sync.Map) map[string]int64 {
	out := map[string]int64{}
	counters.Range(func(op, c any) bool {
		out[op.(string)] = c.(*atomic.Int64).Load()
		return true
	})
	return out
}

func counter(counters *sync.Map, operator string) *atomic.Int64 {
	c, _ := counters.LoadOrStore(operator, new(atomic.Int64))
	return c.(*atomic.Int64)
}

type savepointRequest struct {
	stop  bool
	reply chan savepointResult
}

type savepointResult struct {
	path string
	err  error
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
	st, err := store.Open(opts.CheckpointDir, store.Options{FS: opts.fs, Retained: opts.RetainedCheckpoints, Logger: opts.Logger, SkipCorrupt: opts.SkipCorruptCheckpoints})
	if err != nil {
		return nil, err
	}
	own, err := st.Acquire(ctx, store.OwnershipOptions{Lease: opts.OwnershipLease, Wait: opts.OwnershipWait})
	if err != nil {
		return nil, fmt.Errorf("exactly: job %q: %w", g.Job, err)
	}
	started := false
	defer func() {
		if !started {
			_ = st.Release() // the job never ran; the next start takes over at once
		}
	}()
	names := g.taskNames()
	coord, err := checkpoint.NewCoordinator(checkpoint.Config{
		Job:               g.Job,
		MaxParallelism:    opts.MaxParallelism,
		Interval:          opts.CheckpointInterval,
		Timeout:           opts.CheckpointTimeout,
		MinPause:          opts.MinPauseBetweenCheckpoints,
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
		opts.Probe = func(ProbePoint, uint64) {}
	}
	j := &Job{g: g, opts: opts, store: st, coord: coord, requests: make(chan savepointRequest),
		metrics:    Metrics{skipped: st.Skipped},
		owner:      sink.Owner{Incarnation: own.Incarnation, Epoch: own.Epoch},
		savepoints: map[uint64]savepointRequest{}, done: make(chan struct{})}
	rp, err := j.initialRestorePoint()
	if err != nil {
		return nil, err
	}
	if rp != nil {
		j.idFloor = rp.md.ID
		// The job's last completed checkpoint, until this process
		// completes one: a restart does not make it unknown.
		j.metrics.LastCheckpoint.Store(&CheckpointStats{ID: rp.md.ID, Triggered: rp.md.Triggered, Completed: rp.md.Completed, StateBytes: rp.md.StateBytes()})
	}
	started = true
	jctx, cancel := context.WithCancelCause(ctx)
	renewing := make(chan struct{})
	go func() {
		defer close(renewing)
		j.keepOwnership(jctx, cancel)
	}()
	go func() {
		defer close(j.done)
		j.err = j.drive(jctx, rp)
		cancel(nil)
		<-renewing
		if err := st.Release(); err != nil {
			j.opts.Logger.Warn("releasing the checkpoint directory failed; the next owner waits for the lease to expire", "error", err)
		}
		for id, req := range j.savepoints {
			req.reply <- savepointResult{err: fmt.Errorf("savepoint request %d: the job ended before it completed", id)}
		}
	}()
	return j, nil
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

// Metrics returns the job's counters.
func (j *Job) Metrics() *Metrics { return &j.metrics }

// Savepoint takes a savepoint and returns its directory. The job goes on.
func (j *Job) Savepoint(ctx context.Context) (string, error) {
	return j.savepoint(ctx, false)
}

// StopWithSavepoint takes a savepoint, commits its output and stops the job;
// [Job.Wait] then returns nil. It returns the savepoint's directory.
func (j *Job) StopWithSavepoint(ctx context.Context) (string, error) {
	return j.savepoint(ctx, true)
}

func (j *Job) savepoint(ctx context.Context, stop bool) (string, error) {
	req := savepointRequest{stop: stop, reply: make(chan savepointResult, 1)}
	select {
	case j.requests <- req:
	case <-j.done:
		return "", fmt.Errorf("savepoint: the job has ended: %v", j.err)
	case <-ctx.Done():
		return "", ctx.Err()
	}
	select {
	case r := <-req.reply:
		return r.path, r.err
	case <-j.done:
		return "", fmt.Errorf("savepoint: the job ended before the savepoint completed: %v", j.err)
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

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

// drive runs attempts until the job finishes, is cancelled, or the restart
// strategy gives up.
func (j *Job) drive(ctx context.Context, rp *restorePoint) error {
	r := j.opts.Restart
	// A job restored from its final checkpoint (its input ended) has only
	// that checkpoint's commits left to make: it runs nothing again.
	finished := rp != nil && rp.md.EndOfInput && !j.opts.RunFinished
	if finished {
		j.opts.Logger.Info("the job finished: its last checkpoint is the final one of its input; committing what it covers and running nothing (set RunFinished to run it on from there, for new input; or start with an empty checkpoint directory to run it again from scratch)",
			"job", j.g.Job, "checkpoint", rp.md.ID)
	}
	recovery := checkpoint.NewRecovery(checkpoint.RecoveryConfig{MaxAttempts: r.MaxAttempts, InitialBackoff: r.InitialBackoff, MaxBackoff: r.MaxBackoff}, finished)
	for {
		var res attemptResult
		if recovery.CommitOnly() {
			res = attemptResult{err: j.restoreSinks(ctx, rp)}
		} else {
			res = j.attempt(ctx, rp)
		}
		d := recovery.AttemptEnded(checkpoint.AttemptEnd{Failure: j.classify(ctx, res.err), Checkpointed: res.checkpointed,
			Final: res.final, OutcomeUnknown: res.outcomeUnknown, CommitPending: res.closeErr != nil})
		if !d.Restart {
			return j.endError(ctx, res, d)
		}
		j.opts.Logger.Warn("job failed; restarting from the latest completed checkpoint",
			"job", j.g.Job, "error", res.err, "restart", d.Attempt, "of", r.MaxAttempts, "backoff", d.Backoff)
		j.metrics.Restarts.Add(1)
		select {
		case <-time.After(d.Backoff):
		case <-ctx.Done():
			return ctx.Err()
		}
		switch d.Restore {
		case checkpoint.RestoreCompleted:
			rp = res.restorePoint
		case checkpoint.RestoreLatestInStorage:
			if res.restorePoint != nil {
				rp = res.restorePoint
			}
			latest, err := j.latestAbove(rp)
			if err != nil {
				return fmt.Errorf("exactly: job %q failed: %w (after: %w)", j.g.Job, err, res.err)
			}
			rp = latest
		}
	}
}

// classify tells the recovery decision how an attempt ended.
func (j *Job) classify(ctx context.Context, err error) checkpoint.Failure {
	switch {
	case err == nil:
		return checkpoint.Succeeded
	case fenced(ctx) || errors.Is(err, store.ErrNotOwner) || errors.Is(err, sink.ErrFenced):
		return checkpoint.Fenced
	case ctx.Err() != nil:
		return checkpoint.Stopped
	case sink.IsPermanent(err) || errors.Is(err, checkpoint.ErrCorrupt) || errors.Is(err, errJobStructure):
		return checkpoint.Permanent
	}
	return checkpoint.Transient
}

// endError is what Run returns when the recovery decision ends the job.
func (j *Job) endError(ctx context.Context, res attemptResult, d checkpoint.Decision) error {
	switch {
	case res.err == nil:
		return nil
	case fenced(ctx):
		return fmt.Errorf("exactly: job %q stopped: %w", j.g.Job, context.Cause(ctx))
	case ctx.Err() != nil && res.closeErr != nil:
		// A commit that failed while stopping is the user's to know
		// about: the output is safe in the checkpoint.
		return fmt.Errorf("exactly: job %q stopped: %w", j.g.Job, errors.Join(ctx.Err(), res.closeErr))
	case ctx.Err() != nil:
		return ctx.Err()
	}
	return fmt.Errorf("exactly: job %q failed (%s): %w", j.g.Job, d.Reason, res.err)
}

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
	restoredID := uint64(0)
	if rp != nil {
		restoredID = rp.md.ID
	}
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
	d := &driver{job: j, tasks: tasks, completed: restoredID}
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
		id    uint64 // the restored checkpoint, 0 on a fresh start
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
		rc := RestoreContext{Job: j.g.Job, Operator: op.Name, CheckpointID: id, Entries: entries,
			CommitRetries: j.opts.CommitRetries, Owner: j.owner, TakeOverSinks: j.opts.TakeOverSinks,
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

// driver is one attempt's coordinator loop.
type driver struct {
	job        *Job
	tasks      []*task
	completed  uint64           // last completed checkpoint
	persisted  *CheckpointStats // the checkpoint whose metadata was written, until it is announced complete
	sourcesOut int              // source subtasks that reported finished
	tasksDone  int
	result     attemptResult
	finished   bool
}

func (d *driver) loop(ctx, actx context.Context, events <-chan event) attemptResult {
	j := d.job
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for !d.finished {
		// Tick the coordinator exactly when it is due: a checkpoint
		// triggered late makes its output visible late.
		var tick <-chan time.Time
		if at, ok := j.coord.NextTick(); ok {
			timer.Reset(max(time.Until(at), 0))
			tick = timer.C
		}
		var actions []checkpoint.Action
		select {
		case <-ctx.Done():
			d.result.err = ctx.Err()
			return d.result
		case now := <-tick:
			actions = j.coord.Tick(now)
		case req := <-j.requests:
			j.nextRequest++
			j.savepoints[j.nextRequest] = req
			actions = j.coord.RequestSavepoint(time.Now(), j.nextRequest, req.stop)
		case e := <-events:
			actions = d.handle(e)
		}
		for len(actions) > 0 {
			a := actions[0]
			actions = append(actions[1:], d.do(actx, a)...)
		}
	}
	return d.result
}

func (d *driver) handle(e event) []checkpoint.Action {
	now := time.Now()
	switch e.kind {
	case evAck:
		return d.job.coord.Ack(now, e.id, e.task, e.states)
	case evDecline:
		return d.job.coord.Decline(now, e.id, e.task, e.err.Error())
	case evSourceFinished:
		d.sourcesOut++
		if d.sourcesOut == d.sourceSubtasks() {
			return d.job.coord.SourcesFinished(now)
		}
	case evTaskDone:
		d.tasksDone++
		if d.tasksDone == len(d.tasks) {
			d.finished = true
		}
	case evTaskFailed:
		d.result.err = e.err
		d.finished = true
	}
	return nil
}

func (d *driver) sourceSubtasks() int {
	n := 0
	for _, t := range d.tasks {
		if t.members[0].source != nil {
			n++
		}
	}
	return n
}

// do carries out one coordinator action and returns the actions that follow.
func (d *driver) do(ctx context.Context, a checkpoint.Action) []checkpoint.Action {
	j := d.job
	switch a := a.(type) {
	case checkpoint.ReserveID:
		id, err := j.store.ReserveAbove(j.idFloor)
		if errors.Is(err, store.ErrNotOwner) {
			return j.coord.Fenced(time.Now(), err)
		}
		if err != nil {
			return j.coord.BeginFailed(time.Now(), err)
		}
		return j.coord.Begin(time.Now(), id)
	case checkpoint.InjectBarriers:
		for _, t := range d.tasks {
			if t.members[0].source != nil {
				t.mail.post(func(m *mailbox) {
					m.triggers = append(m.triggers, trigger{id: a.ID, kind: a.Kind, endOfInput: a.EndOfInput})
				})
			}
		}
	case checkpoint.PersistMetadata:
		_, err := j.store.Complete(a.Metadata)
		if errors.Is(err, store.ErrNotOwner) {
			return j.coord.Fenced(time.Now(), err)
		}
		if err != nil {
			return j.coord.MetadataPersisted(time.Now(), a.Metadata.ID, err)
		}
		j.opts.Probe(ProbeMetadataWritten, a.Metadata.ID)
		md := a.Metadata
		d.persisted = &CheckpointStats{ID: md.ID, Triggered: md.Triggered, Completed: time.Now(), StateBytes: md.StateBytes()}
		d.result.restorePoint = newRestorePoint(j.store, &md, j.store.Dir(md.ID, md.Kind))
		return j.coord.MetadataPersisted(time.Now(), a.Metadata.ID, nil)
	case checkpoint.NotifyComplete:
		d.completed = a.ID
		d.result.checkpointed = true
		d.result.final = d.result.final || a.Final
		j.metrics.Completed.Add(1)
		if d.persisted != nil && d.persisted.ID == a.ID {
			j.metrics.LastCheckpoint.Store(d.persisted)
			j.metrics.CheckpointDurations.Observe(d.persisted.Completed.Sub(d.persisted.Triggered))
		}
		// Every task learns of the completion before any source is told to
		// finish, so that sinks commit on the notification rather than in Close.
		for _, t := range d.tasks {
			t.mail.post(func(m *mailbox) { m.completed = max(m.completed, a.ID) })
		}
		if a.Final {
			for _, t := range d.tasks {
				if t.members[0].source != nil {
					t.mail.post(func(m *mailbox) { m.finish = true })
				}
			}
		}
		if req, ok := j.savepoints[a.Request]; ok {
			delete(j.savepoints, a.Request)
			req.reply <- savepointResult{path: j.store.Dir(a.ID, a.Kind)}
		}
	case checkpoint.FailOver:
		d.result.err = a.Err
		if req, ok := j.savepoints[a.Request]; ok {
			delete(j.savepoints, a.Request)
			req.reply <- savepointResult{err: fmt.Errorf("savepoint: %w", a.Err)}
		}
		if a.OutcomeUnknown != 0 {
			d.result.reloadLatest = true
			d.result.outcomeUnknown = true
		}
		d.finished = true
	case checkpoint.Abort:
		j.metrics.Aborted.Add(1)
		j.opts.Logger.Warn("checkpoint aborted", "checkpoint", a.ID, "kind", a.Kind, "reason", a.Reason)
		if a.ID != 0 {
			if err := j.store.Discard(a.ID, a.Kind); err != nil {
				j.opts.Logger.Warn("discarding an aborted checkpoint failed", "checkpoint", a.ID, "error", err)
			}
		}
		if req, ok := j.savepoints[a.Request]; ok {
			delete(j.savepoints, a.Request)
			req.reply <- savepointResult{err: fmt.Errorf("savepoint aborted: %s", a.Reason)}
		}
	}
	return nil
}

// errJobStructure marks a mismatch between a checkpoint and the job.
var errJobStructure = errors.New("exactly: the checkpoint does not match the job")
