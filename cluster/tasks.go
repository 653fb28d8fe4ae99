package cluster

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/exactlyonce/exactly/connectors/kafka"
	"github.com/exactlyonce/exactly/control"
	"github.com/exactlyonce/exactly/stream"
)

// Tasks lists the tasks of this instance — those it starts, runs, stops
// or keeps parked — in the order of their topics and partitions, each with
// its current run's epoch, last completed checkpoint and restarts: which
// part of the job this instance does (the control API's cluster part,
// exactly status).
func (in *Instance) Tasks() []control.Task {
	type entry struct {
		task    control.Task
		running *stream.Running
	}
	in.mu.Lock()
	var ts []Task
	for t := range in.l.tasks {
		ts = append(ts, t)
	}
	for t := range in.l.parked {
		if in.l.tasks[t] == nil {
			ts = append(ts, t)
		}
	}
	entries := make([]entry, 0, len(ts))
	for _, t := range sorted(ts) {
		ct := control.Task{Topic: t.Topic, Partition: t.Partition, Stage: in.stageOf(t), State: control.TaskStarting, Since: in.startedAt[t], Runs: in.starts[t]}
		r := in.running[t]
		if r != nil {
			ct.State = control.TaskRunning
		}
		if run := in.l.tasks[t]; run != nil && run.stopping {
			ct.State = control.TaskStopping
		}
		if err, ok := in.l.parked[t]; ok && in.l.tasks[t] == nil {
			ct.State, ct.Since, ct.Error, r = control.TaskParked, in.parkedAt[t], err.Error(), nil
		}
		entries = append(entries, entry{ct, r})
	}
	in.mu.Unlock()
	// A job's status takes its own locks: read it outside the instance's.
	out := make([]control.Task, len(entries))
	for i, e := range entries {
		if e.running != nil {
			describeRun(&e.task, e.running.Status())
		}
		out[i] = e.task
	}
	return out
}

// describeRun fills in what the status of a task's current run tells.
func describeRun(ct *control.Task, st control.Status) {
	ct.Epoch = st.Epoch
	ct.Restarts = len(st.Restarts)
	for i := len(st.Checkpoints.History) - 1; i >= 0; i-- {
		if c := st.Checkpoints.History[i]; c.Status == control.CheckpointCompleted {
			ct.Checkpoint, ct.CheckpointTime = c.ID, c.Triggered.Add(time.Duration(c.DurationMillis)*time.Millisecond)
			break
		}
	}
	if ct.Checkpoint == 0 && st.RestoredFrom > 0 {
		ct.Checkpoint = st.RestoredFrom
	}
	if st.State == control.StateRestarting {
		ct.Error = st.Error
	}
}

// Status is the instance's status for the control API (control.Job): the
// job's name, when the instance started, and its cluster part — the tasks
// and the group's assignment. The operators, checkpoints and lag of each
// task's job are not in it yet.
func (in *Instance) Status() control.Status {
	cl := &control.Cluster{Group: in.opts.Group.Group, Member: in.membership.Member(), Tasks: in.Tasks()}
	cl.Assignment, cl.AssignmentTime, cl.AssignmentError = in.assignment.get(in.membership)
	st := control.Status{
		Version: control.Version, Job: in.name, State: control.StateRunning, Started: in.started,
		Storage: in.opts.Job.CheckpointDir, Operators: []control.Operator{}, Restarts: []control.Restart{}, Lag: []control.SplitLag{},
		Configuration: []control.Setting{}, Cluster: cl,
	}
	st.Checkpoints.History, st.Checkpoints.Pending = []control.Checkpoint{}, []control.PendingCommit{}
	select {
	case <-in.done:
		st.State = control.StateFinished
		if in.err != nil {
			st.State, st.Error = control.StateFailed, in.err.Error()
		}
	default:
	}
	return st
}

// Savepoint is refused: a cluster job's tasks checkpoint on their own, and
// there is no savepoint of the whole job yet.
func (in *Instance) Savepoint(context.Context) (string, error) {
	return "", fmt.Errorf("cluster: job %q: a savepoint of a job run on a cluster is not supported yet: each task checkpoints on its own under %s", in.name, in.opts.Job.CheckpointDir)
}

// StopWithSavepoint is refused, as Savepoint is; Stop stops the instance.
func (in *Instance) StopWithSavepoint(ctx context.Context) (string, error) {
	return in.Savepoint(ctx)
}

// Stop stops this instance as its ctx ending would: its tasks stop
// cleanly, committing what their last checkpoints cover, and it leaves the
// group, whose other instances take its tasks over. It returns at once.
func (in *Instance) Stop() { in.stop() }

// assignmentCache holds the group's assignment as the broker last
// described it. The control server samples the status every second; the
// broker is asked at most every assignmentRefresh, or after this
// instance's assignment changed, in the background, so that a status never
// waits for it.
type assignmentCache struct {
	mu       sync.Mutex
	members  []control.Member
	at       time.Time // when the broker answered
	err      string
	fetching bool
	changes  uint64 // counts changed calls
	seen     uint64 // changes as of the last answer's question
}

// assignmentRefresh is how old a described assignment may get before a
// status asks the broker again.
const assignmentRefresh = 5 * time.Second

// get returns the last description, and starts a new one if it is old or
// this instance's assignment changed since it was asked for.
func (c *assignmentCache) get(m *kafka.Membership) ([]control.Member, time.Time, string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.fetching && (c.at.IsZero() || c.seen != c.changes || time.Since(c.at) >= assignmentRefresh) {
		c.fetching = true
		go c.fetch(m, c.changes)
	}
	members := c.members
	if members == nil {
		members = []control.Member{}
	}
	return members, c.at, c.err
}

// changed makes the next status ask the broker again: this instance's
// assignment changed, so the group's did.
func (c *assignmentCache) changed() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.changes++
}

// fetch asks the broker for the group's assignment; changes is the count
// of changes when it was asked.
func (c *assignmentCache) fetch(m *kafka.Membership, changes uint64) {
	ctx, cancel := context.WithTimeout(context.Background(), assignmentRefresh)
	defer cancel()
	g, err := m.Describe(ctx)
	gms := g.Members
	c.mu.Lock()
	defer c.mu.Unlock()
	c.fetching, c.at, c.seen = false, time.Now(), changes
	if err != nil {
		c.err = err.Error()
		return
	}
	c.err = ""
	c.members = make([]control.Member, 0, len(gms))
	for _, gm := range gms {
		tasks := []string{}
		for _, t := range sorted(tasksOf(gm.Partitions)) {
			tasks = append(tasks, t.String())
		}
		c.members = append(c.members, control.Member{Member: gm.Member, Client: gm.Client, Host: gm.Host, Tasks: tasks})
	}
}
