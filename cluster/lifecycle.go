package cluster

import (
	"fmt"
	"sort"
)

// lifecycle decides which tasks one instance runs, as the group's
// assignment changes and as its tasks end. It is a pure state machine in
// the style of the checkpoint coordinator (package internal/coordinator):
// it reads no clock, starts no goroutine and does no I/O. Its caller (run
// loop) feeds it the group's events and the tasks' exits and carries out
// the actions it returns, in order.
//
// The rules, each tested in lifecycle_test.go:
//
//   - An assigned task is started, unless an earlier run of it is still
//     stopping: then it starts when that run has exited, so that two runs
//     of one task never overlap in one instance.
//   - A revoked task is stopped cleanly (its completed checkpoint
//     committed, the rest aborted), and the revocation is answered only
//     when every revoked task has exited: the group hands the partition to
//     another instance only after this one released the task's ownership,
//     so the new owner takes over at once instead of waiting out a lease.
//   - A lost task (the instance fell out of the group: a session timeout,
//     a fenced generation) is stopped without waiting for it: another
//     instance may own it already, and if that one has taken over the
//     task's ownership, the stopping run's epoch is stale and every commit
//     it still tries is refused.
//   - A task whose checkpoint storage another instance took over while this
//     one still wants it running (this instance was paused or cut off past
//     its lease, and the group has not told it yet that the task is lost)
//     is started again: the new run waits for the other owner's lease, and
//     the group's lost or revoked event that follows stops it. It does not
//     fail the instance. (A sink that finds itself fenced, sink.ErrFenced,
//     is a failure of the task: the engine does not restart a fenced job,
//     and the instance parks it as any other; the group's event that
//     follows forgets it.)
//   - A task that fails while the instance wants it running (its job's
//     restarts spent, or it ended by itself) is parked: reported, not run
//     again, its partition kept, so that the group does not hand it to
//     another instance to fail there in turn; the other tasks go on. A
//     revocation or loss of the partition forgets it (an instance it is
//     assigned to later tries it afresh). With a limit of failed tasks
//     (Options.MaxFailedTasks), reaching it fails the instance: every
//     other task is stopped cleanly and the first failure returned (the
//     supervisor, e.g. Kubernetes, restarts the process).
//   - A shutdown stops every task cleanly and ends when all have exited; so
//     does a failure of the instance (another job in the group: fail),
//     which Run then returns.
type lifecycle struct {
	tasks     map[Task]*taskRun
	revoking  map[Task]bool  // revoked, the revocation waits for their exit
	parked    map[Task]error // failed and kept without a run, with their failures
	maxFailed int            // parked tasks that fail the instance; 0: no limit
	err       error          // the failure that shuts the instance down
	shutdown  bool
	finished  bool // finish was returned
}

// taskRun is the instance's view of one run of a task.
type taskRun struct {
	stopping bool // told to stop (revoked, lost or shutdown)
	again    bool // assigned again while stopping: start when it exits
}

// actionKind is what the caller must do.
type actionKind int

const (
	startTask    actionKind = iota // start a run of Task
	stopTask                       // stop Task's run (a clean stop: what its completed checkpoint covers is committed)
	answerRevoke                   // every revoked task has exited: let the group go on
	finish                         // every task has exited after a shutdown or failure: return err
	parkTask                       // Task failed with err and is parked: report it
)

func (k actionKind) String() string {
	switch k {
	case startTask:
		return "start"
	case stopTask:
		return "stop"
	case answerRevoke:
		return "answer-revoke"
	case finish:
		return "finish"
	case parkTask:
		return "park"
	}
	return fmt.Sprintf("actionKind(%d)", int(k))
}

// action is one step for the caller.
type action struct {
	kind actionKind
	task Task  // startTask, stopTask, parkTask
	err  error // finish: nil after a shutdown, the failure otherwise; parkTask: the failure
}

// newLifecycle returns the lifecycle of an instance that fails once
// maxFailed of its tasks are parked (0: never).
func newLifecycle(maxFailed int) *lifecycle {
	return &lifecycle{tasks: map[Task]*taskRun{}, revoking: map[Task]bool{}, parked: map[Task]error{}, maxFailed: maxFailed}
}

// assigned handles tasks the group assigned to this instance.
func (l *lifecycle) assigned(tasks []Task) []action {
	if l.shutdown {
		return nil
	}
	var acts []action
	for _, t := range sorted(tasks) {
		switch r := l.tasks[t]; {
		case r == nil:
			l.tasks[t] = &taskRun{}
			acts = append(acts, action{kind: startTask, task: t})
		case r.stopping:
			r.again = true
		}
	}
	return acts
}

// revoked handles tasks the group takes away in an orderly rebalance. The
// returned actions end with answerRevoke when no revoked task is running;
// otherwise exited returns it once the last one has exited.
func (l *lifecycle) revoked(tasks []Task) []action {
	acts := l.stopRuns(tasks, true)
	if len(l.revoking) == 0 {
		acts = append(acts, action{kind: answerRevoke})
	}
	return acts
}

// lost handles tasks this instance no longer owns without a revocation.
func (l *lifecycle) lost(tasks []Task) []action { return l.stopRuns(tasks, false) }

// stopRuns stops the runs of tasks that are not stopping already and
// forgets any start again; with awaited, a revocation waits for their exits.
func (l *lifecycle) stopRuns(tasks []Task, awaited bool) []action {
	var acts []action
	for _, t := range sorted(tasks) {
		delete(l.parked, t)
		r := l.tasks[t]
		if r == nil {
			continue
		}
		r.again = false
		if awaited {
			l.revoking[t] = true
		}
		if !r.stopping {
			r.stopping = true
			acts = append(acts, action{kind: stopTask, task: t})
		}
	}
	return acts
}

// stop shuts the instance down: every task is stopped cleanly.
func (l *lifecycle) stop() []action {
	l.shutdown = true
	return append(l.stopAll(), l.finishIfDone()...)
}

// finishIfDone returns finish, once, when the instance is shutting down and
// no task runs any more.
func (l *lifecycle) finishIfDone() []action {
	if !l.shutdown || l.finished || len(l.tasks) > 0 {
		return nil
	}
	l.finished = true
	return []action{{kind: finish, err: l.err}}
}

// takenOver handles the end of a task's run because another instance
// took the task's ownership over.
func (l *lifecycle) takenOver(t Task) []action {
	if r := l.tasks[t]; r != nil && !r.stopping && !l.shutdown {
		r.stopping, r.again = true, true
	}
	return l.exited(t, nil)
}

// exited handles the end of a task's run. err is the run's result: nil or
// a context cancellation after a stop is an orderly end.
func (l *lifecycle) exited(t Task, err error) []action {
	r := l.tasks[t]
	if r == nil {
		return nil
	}
	delete(l.tasks, t)
	var acts []action
	if !r.stopping && !l.shutdown {
		if err == nil {
			err = fmt.Errorf("task %s ended although it is assigned to this instance: a job run by a cluster must read an unbounded source", t)
		}
		err = fmt.Errorf("cluster: task %s failed: %w", t, err)
		l.parked[t] = err
		acts = append(acts, action{kind: parkTask, task: t, err: err})
		if l.maxFailed > 0 && len(l.parked) >= l.maxFailed {
			l.err = err
			l.shutdown = true
			acts = append(acts, l.stopAll()...)
		}
	}
	if l.revoking[t] {
		delete(l.revoking, t)
		if len(l.revoking) == 0 {
			acts = append(acts, action{kind: answerRevoke})
		}
	}
	if r.again && !l.shutdown {
		l.tasks[t] = &taskRun{}
		acts = append(acts, action{kind: startTask, task: t})
	}
	return append(acts, l.finishIfDone()...)
}

// fail shuts the instance down with err, which Wait returns: every task
// stops cleanly. A shutdown under way keeps its own cause.
func (l *lifecycle) fail(err error) []action {
	if l.shutdown {
		return nil
	}
	l.err, l.shutdown = err, true
	return append(l.stopAll(), l.finishIfDone()...)
}

// stopAll stops every running task cleanly.
func (l *lifecycle) stopAll() []action { return l.stopRuns(l.running(), false) }

// running lists the tasks with a run, sorted.
func (l *lifecycle) running() []Task {
	ts := make([]Task, 0, len(l.tasks))
	for t := range l.tasks {
		ts = append(ts, t)
	}
	return sorted(ts)
}

// sorted returns tasks in order, so that the actions are deterministic.
func sorted(tasks []Task) []Task {
	ts := append([]Task(nil), tasks...)
	sort.Slice(ts, func(i, j int) bool { return ts[i].less(ts[j]) })
	return ts
}
