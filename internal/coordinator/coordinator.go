package coordinator

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/exactlyonce/exactly/checkpoint"
)

// Config holds the coordinator's timing rules. All durations are positive
// except MinPause, which may be zero.
type Config struct {
	// Job is the job's name, recorded in the metadata.
	Job string
	// MaxParallelism is the job's number of key groups, recorded in the metadata.
	MaxParallelism int
	// Incarnation and Epoch identify the owner of the checkpoint storage,
	// recorded in the metadata.
	Incarnation string
	Epoch       uint64
	// Interval is the time between the triggers of two periodic checkpoints.
	Interval time.Duration
	// Timeout aborts a checkpoint that has not completed this long after its trigger.
	Timeout time.Duration
	// MinPause is the least time between the end of one checkpoint and the
	// trigger of the next periodic one.
	MinPause time.Duration
	// CaughtUpPause, when positive, lets a checkpoint be triggered before
	// Interval: as soon as a source caught up after reading new input
	// ([Coordinator.CaughtUp]), once CaughtUpPause (and MinPause) have
	// passed since the last checkpoint ended. Output derived from input
	// that just became visible — a stage reading what the stage before it
	// committed — is then committed without waiting out the interval. 0
	// triggers on Interval only.
	CaughtUpPause time.Duration
	// Subtasks is the number of subtasks that acknowledge every checkpoint.
	Subtasks int
	// SubtaskNames optionally names the subtasks ("sink[0]"), by index, for
	// the reasons of aborts and failovers.
	SubtaskNames []string
	// TolerableFailures is how many checkpoints in a row may fail (time out,
	// be declined, fail to reserve an id) before the coordinator asks for a
	// failover with [FailOver]. A stuck subtask then restarts the job
	// instead of stalling it forever. Negative: never fail over.
	TolerableFailures int
}

// Action is something the coordinator asks its driver to do.
type Action interface {
	isAction()
	String() string
}

// ReserveID asks the driver to reserve a fresh checkpoint id durably and to
// call [Coordinator.Begin] with it.
type ReserveID struct {
	// checkpoint.Kind is the kind of the checkpoint about to begin.
	Kind checkpoint.Kind
}

// InjectBarriers asks the driver to have every source subtask emit the
// barrier of checkpoint ID.
type InjectBarriers struct {
	// ID is the checkpoint id.
	ID checkpoint.ID
	// checkpoint.Kind is checkpoint or savepoint.
	Kind checkpoint.Kind
	// EndOfInput marks the final checkpoint, triggered after every source
	// finished: nothing may be emitted after its barrier.
	EndOfInput bool
}

// PersistMetadata asks the driver to write the metadata durably and to call
// [Coordinator.MetadataPersisted].
type PersistMetadata struct {
	// checkpoint.Metadata is the complete description of the checkpoint.
	Metadata checkpoint.Metadata
}

// NotifyComplete tells the driver that checkpoint ID is complete: subtasks
// may now commit what it covers.
type NotifyComplete struct {
	// ID is the checkpoint id.
	ID checkpoint.ID
	// checkpoint.Kind is checkpoint or savepoint.
	Kind checkpoint.Kind
	// Request is the savepoint request this completion answers, or 0.
	Request uint64
	// Final is true when this checkpoint ends the job: either it was a stop
	// with savepoint, or it was triggered after every source had finished.
	Final bool
	// EndOfInput is true when it was triggered after every source had
	// finished: the job is done and must not run again from it.
	EndOfInput bool
}

// Abort tells the driver that checkpoint ID will never complete: its
// partial files may be discarded.
type Abort struct {
	// ID is the checkpoint id, or 0 when no id had been reserved yet.
	ID checkpoint.ID
	// checkpoint.Kind is checkpoint or savepoint.
	Kind checkpoint.Kind
	// Request is the savepoint request that failed with it, or 0.
	Request uint64
	// Reason says why.
	Reason string
	// Routine says the checkpoint was abandoned because its attempt ends
	// (the job stops or restarts): a normal event, not a failure.
	Routine bool
}

// FailOver asks the driver to end the attempt with Err and recover: too
// many checkpoints failed in a row, or the outcome of a metadata write is
// unknown. The coordinator triggers nothing more until [Coordinator.Reset].
type FailOver struct {
	// Err says why.
	Err error
	// OutcomeUnknown is the id of a checkpoint whose metadata write failed
	// in a way that leaves it unknown whether the checkpoint completed, or
	// 0. Such a checkpoint must be treated as possibly complete: nothing it
	// covers may be aborted, and recovery reads the storage to decide.
	OutcomeUnknown checkpoint.ID
	// Request is the savepoint request the unknown checkpoint served, or 0:
	// it is answered with Err.
	Request uint64
}

func (ReserveID) isAction()       {}
func (InjectBarriers) isAction()  {}
func (PersistMetadata) isAction() {}
func (NotifyComplete) isAction()  {}
func (Abort) isAction()           {}
func (FailOver) isAction()        {}

func (a ReserveID) String() string { return fmt.Sprintf("reserve-id kind=%s", a.Kind) }
func (a InjectBarriers) String() string {
	return fmt.Sprintf("inject-barriers id=%d kind=%s end-of-input=%t", a.ID, a.Kind, a.EndOfInput)
}
func (a PersistMetadata) String() string {
	var ops []string
	for _, op := range a.Metadata.Operators {
		ops = append(ops, fmt.Sprintf("%s/%d", op.Name, len(op.Subtasks)))
	}
	return fmt.Sprintf("persist-metadata id=%d kind=%s operators=[%s]",
		a.Metadata.ID, a.Metadata.Kind, strings.Join(ops, " "))
}
func (a NotifyComplete) String() string {
	return fmt.Sprintf("notify-complete id=%d kind=%s request=%d final=%t end-of-input=%t", a.ID, a.Kind, a.Request, a.Final, a.EndOfInput)
}
func (a FailOver) String() string {
	return fmt.Sprintf("fail-over outcome-unknown=%d request=%d error=%q", a.OutcomeUnknown, a.Request, a.Err)
}
func (a Abort) String() string {
	return fmt.Sprintf("abort id=%d kind=%s request=%d reason=%q routine=%t", a.ID, a.Kind, a.Request, a.Reason, a.Routine)
}

// SubtaskState is the state one subtask contributes for one of its operators.
type SubtaskState struct {
	// Operator is the operator's name.
	Operator string
	// Parallelism is the operator's parallelism.
	Parallelism int
	// Handle points at the written state file.
	Handle checkpoint.StateHandle
}

type phase int

const (
	idle       phase = iota // no checkpoint in flight
	reserving               // ReserveID returned, waiting for Begin
	acking                  // barriers injected, waiting for acknowledgements
	persisting              // metadata being written
	unknown                 // a metadata write failed: the checkpoint may be complete; waiting for Reset
	failed                  // too many checkpoints failed in a row: waiting for Reset
)

type savepointRequest struct {
	id   uint64
	stop bool
}

// Coordinator decides when checkpoints are triggered, collects the
// acknowledgements and decides when a checkpoint is complete. At most one
// checkpoint is in flight at a time. See the package documentation.
type Coordinator struct {
	cfg Config

	phase       phase
	id          checkpoint.ID // in-flight checkpoint id (acking, persisting)
	kind        checkpoint.Kind
	request     savepointRequest // savepoint request served by the in-flight checkpoint
	final       bool             // in-flight checkpoint was triggered after all sources finished
	triggeredAt time.Time
	acked       map[int][]SubtaskState

	started     bool
	lastTrigger time.Time
	lastEnd     time.Time

	caughtUp        bool               // a source caught up after new input since the last trigger (CaughtUpPause)
	savepoints      []savepointRequest // queued requests
	failures        int                // checkpoints failed in a row
	sourcesFinished bool
	stopped         bool // a final checkpoint completed; nothing more is triggered
}

// NewCoordinator returns a coordinator in the idle state.
func NewCoordinator(cfg Config) (*Coordinator, error) {
	switch {
	case cfg.Interval <= 0:
		return nil, fmt.Errorf("checkpoint: interval %v must be positive: set CheckpointInterval, for example to 1s", cfg.Interval)
	case cfg.Timeout <= 0:
		return nil, fmt.Errorf("checkpoint: timeout %v must be positive: set CheckpointTimeout, for example to 1m", cfg.Timeout)
	case cfg.MinPause < 0:
		return nil, fmt.Errorf("checkpoint: min pause %v must not be negative: set MinPauseBetweenCheckpoints to 0 or more", cfg.MinPause)
	case cfg.CaughtUpPause < 0:
		return nil, fmt.Errorf("checkpoint: caught-up pause %v must not be negative: use 0 (checkpoints on the interval only) or more", cfg.CaughtUpPause)
	case cfg.Subtasks <= 0:
		return nil, fmt.Errorf("checkpoint: %d subtasks: a job needs at least one subtask", cfg.Subtasks)
	case cfg.SubtaskNames != nil && len(cfg.SubtaskNames) != cfg.Subtasks:
		return nil, fmt.Errorf("checkpoint: %d subtask names for %d subtasks: name every subtask or none", len(cfg.SubtaskNames), cfg.Subtasks)
	}
	return &Coordinator{cfg: cfg}, nil
}

// Tick advances the coordinator's clock to now. It may trigger a periodic
// checkpoint, a queued savepoint, the final checkpoint, or abort a checkpoint
// that timed out.
func (c *Coordinator) Tick(now time.Time) []Action {
	if !c.started {
		c.started = true
		c.lastTrigger = now
		c.lastEnd = now
	}
	if (c.phase == acking || c.phase == persisting) && now.Sub(c.triggeredAt) >= c.cfg.Timeout {
		if c.phase == acking {
			return c.fail(now, fmt.Sprintf("not acknowledged by every subtask within the timeout of %v (%d of %d acknowledged; waiting for %s)",
				c.cfg.Timeout, len(c.acked), c.cfg.Subtasks, c.missing()))
		}
		// A metadata write in progress cannot be cancelled; its result decides.
		return nil
	}
	if c.phase != idle || c.stopped {
		return nil
	}
	switch {
	case len(c.savepoints) > 0:
		c.request = c.savepoints[0]
		c.savepoints = c.savepoints[1:]
		return c.reserve(now, checkpoint.KindSavepoint)
	case c.sourcesFinished:
		c.final = true
		return c.reserve(now, checkpoint.KindCheckpoint)
	case now.Sub(c.lastTrigger) >= c.cfg.Interval && now.Sub(c.lastEnd) >= c.cfg.MinPause:
		return c.reserve(now, checkpoint.KindCheckpoint)
	case c.caughtUp && now.Sub(c.lastEnd) >= max(c.cfg.CaughtUpPause, c.cfg.MinPause):
		return c.reserve(now, checkpoint.KindCheckpoint)
	}
	return nil
}

// CaughtUp records that a source subtask read new input since the last
// checkpoint was triggered and has now read all the input visible to it.
// With Config.CaughtUpPause set, the next checkpoint is then due
// CaughtUpPause after the last one ended, if that is before the interval;
// without, CaughtUp does nothing.
func (c *Coordinator) CaughtUp(now time.Time) []Action {
	if c.cfg.CaughtUpPause <= 0 || c.stopped {
		return nil
	}
	c.caughtUp = true
	return c.Tick(now)
}

// NextTick returns when Tick next has something to do: trigger the
// periodic checkpoint, or abort the one in flight for its timeout. The
// zero time means at once (the first tick, a queued savepoint, the final
// checkpoint); ok is false when only an event (an acknowledgement, a
// metadata write) can move the coordinator on. A driver that ticks at this
// time triggers checkpoints on time instead of up to a polling period late.
func (c *Coordinator) NextTick() (at time.Time, ok bool) {
	switch {
	case !c.started:
		return time.Time{}, true
	case c.phase == acking:
		return c.triggeredAt.Add(c.cfg.Timeout), true
	case c.phase != idle || c.stopped:
		return time.Time{}, false
	case len(c.savepoints) > 0 || c.sourcesFinished:
		return time.Time{}, true
	}
	due := c.lastTrigger.Add(c.cfg.Interval)
	if pause := c.lastEnd.Add(c.cfg.MinPause); pause.After(due) {
		due = pause
	}
	if early := c.lastEnd.Add(max(c.cfg.CaughtUpPause, c.cfg.MinPause)); c.caughtUp && early.Before(due) {
		due = early
	}
	return due, true
}

// RequestSavepoint queues a savepoint. request identifies it in the
// [NotifyComplete] or [Abort] that answers it; stop makes it the job's last
// checkpoint. The savepoint is triggered as soon as no checkpoint is in flight.
func (c *Coordinator) RequestSavepoint(now time.Time, request uint64, stop bool) []Action {
	if c.stopped {
		return []Action{Abort{Kind: checkpoint.KindSavepoint, Request: request, Reason: "the job is finishing"}}
	}
	c.savepoints = append(c.savepoints, savepointRequest{id: request, stop: stop})
	return c.Tick(now)
}

// SourcesFinished records that every source has emitted its last record.
// The next checkpoint triggered is the final one; it is triggered at once.
func (c *Coordinator) SourcesFinished(now time.Time) []Action {
	c.sourcesFinished = true
	return c.Tick(now)
}

// Begin starts the checkpoint whose id the driver reserved after [ReserveID].
func (c *Coordinator) Begin(now time.Time, id checkpoint.ID) []Action {
	if c.phase != reserving {
		return nil
	}
	c.phase = acking
	c.id = id
	c.triggeredAt = now
	c.acked = make(map[int][]SubtaskState, c.cfg.Subtasks)
	return []Action{InjectBarriers{ID: id, Kind: c.kind, EndOfInput: c.final}}
}

// BeginFailed reports that no id could be reserved after [ReserveID].
func (c *Coordinator) BeginFailed(now time.Time, err error) []Action {
	if c.phase != reserving {
		return nil
	}
	return c.fail(now, fmt.Sprintf("reserving a checkpoint id: %v", err))
}

// Ack records that subtask (an index in [0, Config.Subtasks)) has durably
// written its state for checkpoint id. Acknowledgements of checkpoints that
// are no longer in flight are ignored.
func (c *Coordinator) Ack(now time.Time, id checkpoint.ID, subtask int, states []SubtaskState) []Action {
	if c.phase != acking || id != c.id || subtask < 0 || subtask >= c.cfg.Subtasks {
		return nil
	}
	if _, dup := c.acked[subtask]; dup {
		return nil
	}
	c.acked[subtask] = states
	if len(c.acked) < c.cfg.Subtasks {
		return nil
	}
	c.phase = persisting
	return []Action{PersistMetadata{Metadata: c.metadata(now)}}
}

// Decline records that a subtask could not take its part of checkpoint id;
// the checkpoint is aborted.
func (c *Coordinator) Decline(now time.Time, id checkpoint.ID, subtask int, reason string) []Action {
	if c.phase != acking || id != c.id {
		return nil
	}
	return c.fail(now, fmt.Sprintf("declined by %s: %s", c.subtaskName(subtask), reason))
}

// MetadataPersisted reports the result of [PersistMetadata]. With a nil err
// the checkpoint is complete.
//
// A non-nil err means the outcome is unknown: a failed write or sync says
// nothing about what reached the storage, so the checkpoint may be
// complete. It is never aborted: the coordinator asks for a [FailOver]
// with OutcomeUnknown set and waits for [Coordinator.Reset]; recovery
// reads the storage to learn whether the checkpoint completed. A write
// that certainly did not happen is reported with
// [Coordinator.MetadataRejected] instead.
func (c *Coordinator) MetadataPersisted(now time.Time, id checkpoint.ID, err error) []Action {
	if c.phase != persisting || id != c.id {
		return nil
	}
	if err != nil {
		c.phase = unknown
		return []Action{FailOver{
			Err:            fmt.Errorf("checkpoint %d: writing its metadata: %w (it may have completed: recovering from the latest checkpoint in storage)", id, err),
			OutcomeUnknown: id,
			Request:        c.request.id,
		}}
	}
	c.failures = 0
	done := NotifyComplete{ID: c.id, Kind: c.kind, Request: c.request.id, Final: c.final || c.request.stop, EndOfInput: c.final}
	c.finish(now)
	if done.Final {
		c.stopped = true
		return []Action{done}
	}
	return append([]Action{done}, c.Tick(now)...)
}

// Fenced reports that the checkpoint storage refused to reserve an id or
// to write metadata, before writing anything, because another process took
// the job over (err says who). The checkpoint in flight, if any, is
// aborted and the coordinator asks for a [FailOver] with err: this process
// is a zombie and the driver stops the job.
func (c *Coordinator) Fenced(now time.Time, err error) []Action {
	var actions []Action
	if c.phase == reserving || c.phase == acking || c.phase == persisting {
		actions = c.abort(now, fmt.Sprintf("fenced: %v", err))
	}
	c.phase = failed
	return append(actions, FailOver{Err: err})
}

// Reset aborts the checkpoint in flight, if any, because the job is being
// restarted or stopped. Queued savepoint requests stay queued. Finished
// sources are forgotten: after a restart they replay from the restored
// positions and must report again. A final checkpoint that completed before
// the reset no longer stops the coordinator: the restarted attempt needs
// checkpoints, at least its own final one.
func (c *Coordinator) Reset(now time.Time) []Action {
	c.sourcesFinished = false
	c.stopped = false
	c.failures = 0
	switch c.phase {
	case idle:
		return nil
	case unknown, failed:
		// Nothing to abort: an unknown checkpoint may be complete, and a
		// failed one was aborted already.
		c.finish(now)
		return nil
	}
	acts := c.abort(now, "the job is stopping or restarting")
	a := acts[0].(Abort)
	a.Routine = true
	acts[0] = a
	return acts
}

// fail aborts the checkpoint in flight for a failure that counts towards
// TolerableFailures, and asks for a failover when there were too many.
func (c *Coordinator) fail(now time.Time, reason string) []Action {
	id := c.id
	if c.phase == reserving {
		id = 0
	}
	actions := c.abort(now, reason)
	c.failures++
	if c.cfg.TolerableFailures < 0 || c.failures <= c.cfg.TolerableFailures {
		return actions
	}
	c.phase = failed
	return append(actions, FailOver{Err: fmt.Errorf("%d checkpoints failed in a row, more than the %d tolerated (TolerableCheckpointFailures); the last, %d: %s",
		c.failures, c.cfg.TolerableFailures, id, reason)})
}

// missing names the subtasks that have not acknowledged the checkpoint in
// flight, at most five of them.
func (c *Coordinator) missing() string {
	var names []string
	for i := 0; i < c.cfg.Subtasks; i++ {
		if _, ok := c.acked[i]; ok {
			continue
		}
		if len(names) == 5 {
			names = append(names, "…")
			break
		}
		names = append(names, c.subtaskName(i))
	}
	return strings.Join(names, ", ")
}

func (c *Coordinator) subtaskName(i int) string {
	if i >= 0 && i < len(c.cfg.SubtaskNames) {
		return c.cfg.SubtaskNames[i]
	}
	return fmt.Sprintf("subtask %d", i)
}

// InFlight returns the id of the checkpoint in flight, or 0.
func (c *Coordinator) InFlight() checkpoint.ID {
	if c.phase == acking || c.phase == persisting {
		return c.id
	}
	return 0
}

func (c *Coordinator) reserve(now time.Time, kind checkpoint.Kind) []Action {
	c.phase = reserving
	c.kind = kind
	c.lastTrigger = now
	c.caughtUp = false
	return []Action{ReserveID{Kind: kind}}
}

func (c *Coordinator) abort(now time.Time, reason string) []Action {
	a := Abort{ID: c.id, Kind: c.kind, Request: c.request.id, Reason: reason}
	if c.phase == reserving {
		a.ID = 0
	}
	c.finish(now)
	return []Action{a}
}

// finish returns the coordinator to idle after a checkpoint ended either way.
func (c *Coordinator) finish(now time.Time) {
	c.phase = idle
	c.id = 0
	c.kind = ""
	c.request = savepointRequest{}
	c.final = false
	c.acked = nil
	c.lastEnd = now
}

func (c *Coordinator) metadata(now time.Time) checkpoint.Metadata {
	byOp := map[string]*checkpoint.OperatorState{}
	for _, states := range c.acked {
		for _, s := range states {
			op := byOp[s.Operator]
			if op == nil {
				op = &checkpoint.OperatorState{Name: s.Operator, Parallelism: s.Parallelism}
				byOp[s.Operator] = op
			}
			op.Subtasks = append(op.Subtasks, s.Handle)
		}
	}
	m := checkpoint.Metadata{
		FormatVersion:  checkpoint.FormatVersion,
		ID:             c.id,
		Kind:           c.kind,
		Job:            c.cfg.Job,
		Incarnation:    c.cfg.Incarnation,
		Epoch:          c.cfg.Epoch,
		MaxParallelism: c.cfg.MaxParallelism,
		EndOfInput:     c.final,
		Triggered:      c.triggeredAt,
		Completed:      now,
	}
	for _, op := range byOp {
		slices.SortFunc(op.Subtasks, func(a, b checkpoint.StateHandle) int { return a.Subtask - b.Subtask })
		m.Operators = append(m.Operators, *op)
	}
	slices.SortFunc(m.Operators, func(a, b checkpoint.OperatorState) int { return strings.Compare(a.Name, b.Name) })
	return m
}
