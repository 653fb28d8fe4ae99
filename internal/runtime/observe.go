package runtime

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/exactlyonce/exactly/checkpoint"
	"github.com/exactlyonce/exactly/control"
)

// LagReporter is implemented by a source operator that can tell how much
// of its input it has not read yet. Lag is called from other goroutines
// than the one polling the source (the control API's), so it must be safe
// for concurrent use and must not block.
type LagReporter interface {
	Lag() []SplitLag
}

// SplitLag is the input of one split not read yet.
type SplitLag struct {
	// Split names the split.
	Split string
	// Lag is how far the split's end is ahead of the source's position.
	Lag int64
	// Unit is the unit of Lag: "records", "bytes" or "offsets".
	Unit string
}

// taskTimes accumulates where a task's time goes, in nanoseconds, over
// the attempts of a process.
type taskTimes struct {
	busy, backpressured, idle atomic.Int64
}

// taskTimes returns the times of the task named name, created at its
// first attempt.
func (m *Metrics) taskTimes(name string) *taskTimes {
	t, _ := m.times.LoadOrStore(name, new(taskTimes))
	return t.(*taskTimes)
}

// observations are what the control API shows besides the counters: the
// checkpoint history, the restarts, the sinks and the sources' lag. They
// are guarded by mu; every method is safe for concurrent use.
type observations struct {
	mu          sync.Mutex
	checkpoints []control.Checkpoint // oldest first, at most control.MaxCheckpoints
	completedAt map[checkpoint.ID]time.Time
	restarts    []control.Restart
	sinks       map[string]int         // sink operator -> parallelism
	lag         map[lagKey]LagReporter // source subtask -> its current attempt's operator
	state       string
	lastErr     string
}

// entry returns the history entry of id, nil when it is not there.
func (o *observations) entry(id checkpoint.ID) *control.Checkpoint {
	for i := len(o.checkpoints) - 1; i >= 0; i-- {
		if o.checkpoints[i].ID == uint64(id) {
			return &o.checkpoints[i]
		}
	}
	return nil
}

func (o *observations) triggered(id checkpoint.ID, kind checkpoint.Kind, at time.Time) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.checkpoints) == control.MaxCheckpoints {
		old := o.checkpoints[0]
		delete(o.completedAt, checkpoint.ID(old.ID))
		o.checkpoints = append(o.checkpoints[:0], o.checkpoints[1:]...)
	}
	o.checkpoints = append(o.checkpoints, control.Checkpoint{ID: uint64(id), Kind: string(kind), Status: control.CheckpointInProgress, Triggered: at, Commits: []control.Commit{}})
}

func (o *observations) aligned(id checkpoint.ID, alignment time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if e := o.entry(id); e != nil {
		e.AlignmentMillis = max(e.AlignmentMillis, alignment.Milliseconds())
	}
}

// completed records that the checkpoint s describes completed; every sink
// now owes its commit.
func (o *observations) completed(s *CheckpointStats) {
	o.mu.Lock()
	defer o.mu.Unlock()
	e := o.entry(s.ID)
	if e == nil {
		return
	}
	e.Status = control.CheckpointCompleted
	e.Triggered = s.Triggered
	e.DurationMillis = s.Completed.Sub(s.Triggered).Milliseconds()
	e.StateBytes, e.SharedBytes = s.StateBytes, s.SharedBytes
	if o.completedAt == nil {
		o.completedAt = map[checkpoint.ID]time.Time{}
	}
	o.completedAt[s.ID] = s.Completed
	for name, p := range o.sinks {
		e.Commits = append(e.Commits, control.Commit{Sink: name, Subtasks: p})
	}
}

func (o *observations) aborted(id checkpoint.ID, reason string, at time.Time) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if e := o.entry(id); e != nil && e.Status == control.CheckpointInProgress {
		e.Status = control.CheckpointAborted
		e.Reason = reason
		e.DurationMillis = at.Sub(e.Triggered).Milliseconds()
	}
}

// committed records that a subtask of sink committed checkpoint id.
func (o *observations) committed(id checkpoint.ID, sink string, at time.Time) {
	o.mu.Lock()
	defer o.mu.Unlock()
	e := o.entry(id)
	if e == nil {
		return
	}
	for i := range e.Commits {
		if c := &e.Commits[i]; c.Sink == sink {
			c.Committed++
			c.LatencyMillis = max(c.LatencyMillis, at.Sub(o.completedAt[id]).Milliseconds())
		}
	}
}

func (o *observations) restarted(r control.Restart) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.restarts) == control.MaxRestarts {
		o.restarts = append(o.restarts[:0], o.restarts[1:]...)
	}
	o.restarts = append(o.restarts, r)
	o.lastErr = r.Error
}

func (o *observations) setState(state, err string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.state = state
	if err != "" || state == control.StateRunning {
		o.lastErr = err
	}
}

func (o *observations) addSink(name string, parallelism int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.sinks == nil {
		o.sinks = map[string]int{}
	}
	o.sinks[name] = parallelism
}

// lagKey names a source subtask.
type lagKey struct {
	source  string
	subtask int
}

func (o *observations) setLag(source string, subtask int, r LagReporter) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.lag == nil {
		o.lag = map[lagKey]LagReporter{}
	}
	o.lag[lagKey{source, subtask}] = r
}
