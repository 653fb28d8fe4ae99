package runtime

import (
	"cmp"
	"maps"
	"slices"
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
// the attempts of a process; busy includes backpressured.
type taskTimes struct {
	busy, backpressured, idle atomic.Int64
}

// TaskTimes is where a task's time went in this process (see
// [Metrics.TaskTimes]).
type TaskTimes struct {
	// Busy is the time spent working: handling records, barriers and
	// timers, polling a source that had records.
	Busy time.Duration
	// Backpressured is the time spent waiting for room in a full channel
	// to a consumer.
	Backpressured time.Duration
	// Idle is the time spent waiting for input.
	Idle time.Duration
}

// TaskTimes returns, for every task by name ("head[s]", the head
// operator of its chain and its subtask), where its time went.
func (m *Metrics) TaskTimes() map[string]TaskTimes {
	out := map[string]TaskTimes{}
	m.times.Range(func(name, t any) bool {
		tt := t.(*taskTimes)
		bp := tt.backpressured.Load()
		out[name.(string)] = TaskTimes{Busy: time.Duration(max(tt.busy.Load()-bp, 0)), Backpressured: time.Duration(bp), Idle: time.Duration(tt.idle.Load())}
		return true
	})
	return out
}

// SourceLag is the lag of one split of a source subtask.
type SourceLag struct {
	// Source is the source operator's name, Subtask the subtask reading
	// the split.
	Source  string
	Subtask int
	SplitLag
}

// SourceLag returns the lag of every split whose source tells it, sorted
// by source, subtask and split.
func (m *Metrics) SourceLag() []SourceLag {
	o := &m.obs
	o.mu.Lock()
	lag := maps.Clone(o.lag)
	o.mu.Unlock()
	out := []SourceLag{}
	for k, r := range lag {
		for _, l := range r.Lag() {
			out = append(out, SourceLag{Source: k.source, Subtask: k.subtask, SplitLag: l})
		}
	}
	slices.SortFunc(out, func(a, b SourceLag) int {
		return cmp.Or(cmp.Compare(a.Source, b.Source), cmp.Compare(a.Subtask, b.Subtask), cmp.Compare(a.Split, b.Split))
	})
	return out
}

// CommitLatencies returns, for every sink, the time from the completion
// of the newest checkpoint all its subtasks committed to the last of
// those commits returning.
func (m *Metrics) CommitLatencies() map[string]time.Duration {
	o := &m.obs
	o.mu.Lock()
	defer o.mu.Unlock()
	out := map[string]time.Duration{}
	for i := len(o.checkpoints) - 1; i >= 0; i-- {
		for _, c := range o.checkpoints[i].Commits {
			if _, ok := out[c.Sink]; !ok && c.Committed == c.Subtasks {
				out[c.Sink] = time.Duration(c.LatencyMillis) * time.Millisecond
			}
		}
	}
	return out
}

// RecordsOutByOperator returns the records every operator emitted, on
// all its outputs, over its subtasks and attempts.
func (m *Metrics) RecordsOutByOperator() map[string]int64 { return counts(&m.out) }

// taskTimes returns the times of the task named name, created at its
// first attempt.
// taskEventTime is where a task is in event time: the last watermark it
// passed on and whether it announced itself idle since.
type taskEventTime struct {
	watermark atomic.Int64 // MinWatermark before the first
	idle      atomic.Bool
}

// EventTime is where a task is in event time (see [Metrics.EventTimes]).
type EventTime struct {
	// Watermark is the last watermark the task passed on, in nanoseconds
	// since the Unix epoch: MinWatermark before the first, MaxWatermark
	// once its input ended.
	Watermark int64
	// Idle: the task announced that it has nothing that could hold event
	// time back (an idle source split, all inputs idle); its consumers do
	// not wait for its watermark until it sends one again.
	Idle bool
}

// EventTimes returns, for every task that passed on a watermark or
// idleness by name ("head[s]", as [Metrics.TaskTimes]), where it is in
// event time. Every operator of a chain is where its task is.
func (m *Metrics) EventTimes() map[string]EventTime {
	out := map[string]EventTime{}
	m.eventTimes.Range(func(name, e any) bool {
		et := e.(*taskEventTime)
		out[name.(string)] = EventTime{Watermark: et.watermark.Load(), Idle: et.idle.Load()}
		return true
	})
	return out
}

// taskEventTime returns the event time of the task named name.
func (m *Metrics) taskEventTime(name string) *taskEventTime {
	if e, ok := m.eventTimes.Load(name); ok {
		return e.(*taskEventTime)
	}
	et := new(taskEventTime)
	et.watermark.Store(MinWatermark)
	e, _ := m.eventTimes.LoadOrStore(name, et)
	return e.(*taskEventTime)
}

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
