package runtime

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/exactlyonce/exactly/checkpoint"
	"github.com/exactlyonce/exactly/control"
)

// errStopRequested is the cause of the job context's cancellation by
// [Job.Stop].
var errStopRequested = errors.New("exactly: stop requested")

// Stop stops the job as a cancelled context does: the sinks commit what
// the last completed checkpoint covers and abort the rest; then
// [Job.Wait] returns nil. It returns at once.
func (j *Job) Stop() { j.cancel(errStopRequested) }

// Status returns what the control API shows of the job now: its state,
// graph, counters, checkpoint history, restarts and lag. Rates are left
// at 0 (the control server computes them from samples).
func (j *Job) Status() control.Status {
	o := &j.metrics.obs
	st := control.Status{
		Version: control.Version, Job: j.g.Job, Started: j.started,
		Incarnation: j.owner.Incarnation, Epoch: j.owner.Epoch, Storage: j.store.Location(),
		RestoredFrom: uint64(j.idFloor), Graph: j.graphStatus(), Operators: j.operatorStatus(),
		Configuration: j.configuration(),
	}
	st.Checkpoints.Completed = j.metrics.Completed.Load()
	st.Checkpoints.Aborted = j.metrics.Aborted.Load()
	o.mu.Lock()
	st.State, st.Error = o.state, o.lastErr
	st.Checkpoints.History = make([]control.Checkpoint, len(o.checkpoints))
	for i, c := range o.checkpoints {
		c.Commits = slices.Clone(c.Commits)
		slices.SortFunc(c.Commits, func(a, b control.Commit) int { return cmp.Compare(a.Sink, b.Sink) })
		st.Checkpoints.History[i] = c
	}
	st.Restarts = slices.Clone(o.restarts)
	completedAt := maps.Clone(o.completedAt)
	o.mu.Unlock()
	st.Checkpoints.Pending = pendingCommits(st.Checkpoints.History, completedAt, time.Now())
	if st.Restarts == nil {
		st.Restarts = []control.Restart{}
	}
	st.Lag = []control.SplitLag{}
	for _, l := range j.metrics.SourceLag() {
		st.Lag = append(st.Lag, control.SplitLag{Source: l.Source, Subtask: l.Subtask, Split: l.Split, Lag: l.Lag, Unit: l.Unit})
	}
	return st
}

// pendingCommits returns the sinks that have not committed all of the
// latest completed checkpoint of history.
func pendingCommits(history []control.Checkpoint, completedAt map[checkpoint.ID]time.Time, now time.Time) []control.PendingCommit {
	pending := []control.PendingCommit{}
	for i := len(history) - 1; i >= 0; i-- {
		c := history[i]
		if c.Status != control.CheckpointCompleted {
			continue
		}
		for _, s := range c.Commits {
			if s.Committed < s.Subtasks {
				pending = append(pending, control.PendingCommit{Checkpoint: c.ID, Sink: s.Sink, Waiting: s.Subtasks - s.Committed,
					SinceMillis: now.Sub(completedAt[checkpoint.ID(c.ID)]).Milliseconds()})
			}
		}
		break
	}
	return pending
}

// graphStatus describes the job's graph.
func (j *Job) graphStatus() control.Graph {
	g := control.Graph{Nodes: []control.Node{}, Edges: []control.Edge{}}
	read := make([]bool, len(j.g.Operators))
	for _, op := range j.g.Operators {
		for _, in := range op.Inputs {
			read[in.From] = true
		}
	}
	chain := j.g.chainedTo()
	for i, op := range j.g.Operators {
		kind := "operator"
		switch {
		case op.NewSource != nil:
			kind = "source"
		case !read[i]:
			kind = "sink"
		}
		g.Nodes = append(g.Nodes, control.Node{ID: i, Name: op.Name, Kind: kind, Parallelism: op.Parallelism, Keyed: op.Keyed, ChainedTo: chain[i]})
		for _, in := range op.Inputs {
			g.Edges = append(g.Edges, control.Edge{From: in.From, To: i, Output: in.Output, Partitioning: in.Partitioning.String()})
		}
	}
	return g
}

// operatorStatus returns every operator's counters and its tasks' times.
func (j *Job) operatorStatus() []control.Operator {
	head := j.g.chainHeads()
	names := j.g.taskNames()
	// first[h] is the index in names of the first subtask of head h.
	first := map[int]int{}
	n := 0
	for i, op := range j.g.Operators {
		if head[i] == i {
			first[i] = n
			n += op.Parallelism
		}
	}
	m := &j.metrics
	times := m.TaskTimes()
	eventTimes := m.EventTimes()
	ops := make([]control.Operator, 0, len(j.g.Operators))
	for i, op := range j.g.Operators {
		o := control.Operator{Name: op.Name, RecordsIn: m.Records(op.Name), RecordsOut: load(&m.out, op.Name), LateRecords: m.LateRecords(op.Name), Subtasks: []control.Subtask{}}
		h := head[i]
		for s := range j.g.Operators[h].Parallelism {
			key := fmt.Sprintf("%s[%d]", j.g.Operators[h].Name, s)
			sub := control.Subtask{Index: s, Task: names[first[h]+s]}
			if tt, ok := times[key]; ok {
				sub.BusyMillis, sub.BackpressuredMillis, sub.IdleMillis = tt.Busy.Milliseconds(), tt.Backpressured.Milliseconds(), tt.Idle.Milliseconds()
			}
			et, ok := eventTimes[key]
			sub.EventTime = statusEventTime(et, ok)
			o.Subtasks = append(o.Subtasks, sub)
		}
		o.EventTime = lowEventTime(o.Subtasks)
		ops = append(ops, o)
	}
	return ops
}

// statusEventTime returns where a task is in event time as the status
// shows it; ok says whether the task passed on a watermark or idleness.
func statusEventTime(e EventTime, ok bool) control.EventTime {
	switch {
	case !ok:
		return control.EventTime{}
	case e.Watermark == MaxWatermark:
		return control.EventTime{InputEnded: true}
	case e.Watermark == MinWatermark:
		return control.EventTime{Idle: e.Idle}
	}
	t := time.Unix(0, e.Watermark).UTC()
	return control.EventTime{Watermark: &t, Idle: e.Idle}
}

// lowEventTime returns where an operator is in event time from where its
// subtasks are: the least watermark of those not idle; none while one of
// them has none (it holds event time back); idle when all are idle or
// ended, ended when all ended.
func lowEventTime(subs []control.Subtask) control.EventTime {
	var low *time.Time
	ended, idle := 0, 0
	for _, s := range subs {
		switch {
		case s.InputEnded:
			ended++
		case s.Idle:
			idle++
		case s.Watermark == nil:
			return control.EventTime{}
		case low == nil || s.Watermark.Before(*low):
			low = s.Watermark
		}
	}
	switch {
	case len(subs) > 0 && ended == len(subs):
		return control.EventTime{InputEnded: true}
	case low == nil:
		return control.EventTime{Idle: idle > 0}
	}
	return control.EventTime{Watermark: low}
}
