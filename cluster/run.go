package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"path"
	"path/filepath"
	"sync"
	"time"

	"github.com/exactlyonce/exactly/checkpoint/store"
	"github.com/exactlyonce/exactly/connectors/kafka"
	"github.com/exactlyonce/exactly/control"
	"github.com/exactlyonce/exactly/internal/runtime"
	"github.com/exactlyonce/exactly/sink"
	"github.com/exactlyonce/exactly/state"
	"github.com/exactlyonce/exactly/stream"
)

// Options configures one instance of a job run by a cluster. Every
// instance of the job must be given the same options.
type Options struct {
	// Group is the consumer group the instances share and the job's input
	// topics, whose partitions are the tasks. Group.Group defaults to
	// "exactly-" followed by the job's name.
	Group kafka.GroupOptions
	// Job holds the options of every task's job, but Job.Control, which
	// serves the instance's control API and web page (its tasks and the
	// group's assignment; Instance.Status). Job.CheckpointDir is
	// required and is the base of the tasks' checkpoint storage: task t
	// checkpoints under CheckpointDir/t.Name(). Use object storage (an
	// s3:// URL) when the instances run on different machines, so that a
	// task's checkpoints reach whichever instance takes it over.
	// Job.OwnershipWait is set to -1: a task assigned to this instance
	// waits for as long as the previous owner's lease lives (a paused
	// process's lease expires; a stopping one releases it).
	// Job.CheckTimeout (default 30s) bounds how long the instance's start
	// waits for brokers it cannot reach (a start during a broker's
	// restart) before it fails.
	Job stream.Options
	// MaxFailedTasks is how many failed tasks this instance keeps before it
	// gives up. A task fails when its job does (its restarts spent, such
	// as on a corrupt checkpoint); the instance parks it — logs the
	// failure, stops running it and keeps its partition, so that the group
	// does not hand it to the next instance to fail there in turn — and
	// its other tasks go on. Reaching MaxFailedTasks stops them too, and
	// Run returns the failure (for a supervisor to restart the process).
	// 0, the default, sets no limit; 1 gives up at the first failure. A
	// rebalance that takes a parked task away forgets it.
	MaxFailedTasks int
	// RepartitionPartitions is the number of partitions of each
	// repartition topic of a job run by RunJob, and so the number of tasks
	// of each stage that reads one; at most Job.MaxParallelism. It cannot
	// change once the topics exist. Default: the most partitions among the
	// job's input topics.
	RepartitionPartitions int32
	// StagePause is the Job.CheckpointOnCaughtUp of the tasks of every
	// stage after the first of a job run by RunJob, when Job sets none: a
	// task of such a stage checkpoints this long after its last checkpoint
	// as soon as it has read what the stage before it committed, so that
	// each stage adds about this pause and a checkpoint's duration to the
	// output's latency instead of up to a whole interval. 0 means a tenth
	// of Job.CheckpointInterval; negative turns it off (every task
	// checkpoints on the interval only).
	StagePause time.Duration
}

// Build returns the job of one task. It must create the job with
// stream.New(name) and read only the task's partition (see
// [Task.SourceOptions]). It is called again each time the task is assigned
// to this instance.
type Build func(name string, t Task) (*stream.Job, error)

// Run runs this instance of the job called name until ctx ends or a task
// fails. When ctx ends, every task is stopped cleanly (what its completed
// checkpoint covers is committed) and the instance leaves the group, so
// that the other instances take its tasks over at once; Run then returns
// nil. A task that fails (its restart budget spent) is parked (see
// Options.MaxFailedTasks); with a limit, reaching it stops the instance:
// Run returns the failure after stopping the other tasks. Run is Start
// followed by Wait; use Start to see the instance's parked tasks while it
// runs.
func Run(ctx context.Context, name string, opts Options, build Build) error {
	in, err := Start(ctx, name, opts, build)
	if err != nil {
		return err
	}
	return in.Wait()
}

// Start joins the group of the job called name and runs this instance of
// it in the background, as Run does, until ctx ends or the instance gives
// up; Wait returns Run's result. The Instance reports the tasks it parked
// (ParkedTasks), for a status page or clustermetrics.NewCollector.
func Start(ctx context.Context, name string, opts Options, build Build) (*Instance, error) {
	return start(ctx, name, opts, build, true, func(Task) int { return -1 })
}

// start is Start; checkSources says whether each task's job is checked to
// read only the task's partition (a job of Build's; the stage jobs of
// RunJob are made so), and stageOf gives a task's stage (-1 without
// stages).
func start(ctx context.Context, name string, opts Options, build Build, checkSources bool, stageOf func(Task) int) (*Instance, error) {
	if name == "" {
		return nil, errors.New("cluster: Run: the job name is empty: name the job")
	}
	if build == nil {
		return nil, errors.New("cluster: Run: build is nil: pass a function that returns the job of one task")
	}
	if opts.Job.CheckpointDir == "" {
		return nil, errors.New("cluster: Options.Job.CheckpointDir is empty: give the base directory or s3:// URL of the tasks' checkpoints")
	}
	if opts.RepartitionPartitions < 0 {
		return nil, fmt.Errorf("cluster: Options.RepartitionPartitions is %d: use 0 (the most partitions of the job's input topics) or a positive count", opts.RepartitionPartitions)
	}
	if opts.MaxFailedTasks < 0 {
		return nil, fmt.Errorf("cluster: Options.MaxFailedTasks is %d: use 0 for no limit, or the number of failed tasks at which the instance gives up", opts.MaxFailedTasks)
	}
	if opts.Group.Group == "" {
		opts.Group.Group = "exactly-" + name
	}
	opts.Job.OwnershipWait = -1
	log := opts.Job.Logger
	if log == nil {
		log = slog.Default()
	}
	// Options.Job.Control serves the instance's control API; the tasks'
	// jobs serve none (they would all take the one address).
	ctl := opts.Job.Control
	opts.Job.Control = stream.ControlOptions{}
	ln, token, err := openControl(ctl)
	if err != nil {
		return nil, fmt.Errorf("cluster: job %q: %w", name, err)
	}
	ctx, stop := context.WithCancel(ctx)
	in := &Instance{
		name: name, opts: opts, build: build, checkSources: checkSources, stageOf: stageOf, log: log.With("job", name),
		l: newLifecycle(opts.MaxFailedTasks), runs: map[Task]context.CancelFunc{}, running: map[Task]*stream.Running{}, parkedAt: map[Task]time.Time{},
		startedAt: map[Task]time.Time{}, starts: map[Task]int{}, started: time.Now(), stop: stop, joined: make(chan struct{}),
		finished: make(chan error, 1), done: make(chan struct{}),
	}
	taskCtx, cancelTasks := context.WithCancel(context.WithoutCancel(ctx))
	in.ctx = taskCtx
	joinCtx, cancelJoin := context.WithTimeout(ctx, startTimeout(opts.Job))
	defer cancelJoin()
	m, err := kafka.JoinGroup(joinCtx, opts.Group, kafka.GroupEvents{
		Assigned: func(p map[string][]int32) {
			in.assignment.changed()
			if !in.groupChecked {
				in.groupChecked = true
				if err := in.checkGroup(); err != nil {
					in.log.Error("cluster: stopping this instance", "err", err)
					in.do(func() []action { return in.l.fail(err) })
					return
				}
			}
			in.do(func() []action { return in.l.assigned(tasksOf(p)) })
		},
		Revoked: func(p map[string][]int32) {
			in.assignment.changed()
			in.revoked(p)
		},
		Lost: func(p map[string][]int32) {
			in.assignment.changed()
			in.do(func() []action { return in.l.lost(tasksOf(p)) })
		},
		Refused: func(err error) {
			in.log.Error("cluster: stopping this instance", "err", err)
			in.do(func() []action { return in.l.fail(err) })
		},
	})
	if err == nil {
		in.membership = m
	}
	close(in.joined)
	if err != nil {
		cancelTasks()
		stop()
		if ln != nil {
			_ = ln.Close()
		}
		return nil, fmt.Errorf("cluster: joining the group of job %q: %w", name, err)
	}
	in.log.Info("cluster: joined the group", "group", opts.Group.Group, "topics", opts.Group.Topics)
	var srv *control.Server
	if ln != nil {
		srv = control.Serve(ln, in, control.Config{Token: token, TokenOption: "Options.Job.Control.TokenFile or TokenEnv (exactly run --token-file or --token-env)"})
		in.controlAddr = srv.Addr()
		in.log.Info("cluster: control API and web page serving", "url", "http://"+srv.Addr()+"/", "token", token != "")
	}
	go func() {
		defer close(in.done)
		defer cancelTasks()
		if srv != nil {
			defer func() {
				cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				_ = srv.Close(cctx) // the instance has stopped; nothing is left to answer
			}()
		}
		var err error
		select {
		case <-ctx.Done():
			in.log.Info("cluster: stopping this instance's tasks", "cause", context.Cause(ctx))
			in.do(in.l.stop)
			err = <-in.finished
		case err = <-in.finished:
		}
		if leaveErr := m.Leave(context.WithoutCancel(ctx)); leaveErr != nil {
			in.log.Warn("cluster: leaving the group failed; the group hands this instance's tasks on after the session timeout", "err", leaveErr)
		}
		in.err = err
	}()
	return in, nil
}

// startTimeout bounds the requests that start an instance (the topics'
// partitions, the repartition topics, joining the group): each waits while
// the brokers cannot be reached, up to Job.CheckTimeout when positive.
func startTimeout(job stream.Options) time.Duration {
	if job.CheckTimeout > 0 {
		return job.CheckTimeout
	}
	return 30 * time.Second
}

// Instance is one running instance of a job run by a cluster (Start).
type Instance struct {
	name         string
	opts         Options
	build        Build
	checkSources bool           // see start
	stageOf      func(Task) int // a task's stage: RunJob's plan, -1 for Run
	log          *slog.Logger
	ctx          context.Context // the tasks' parent: not cancelled by Run's ctx, so that stops are clean

	membership   *kafka.Membership  // set before joined is closed; nil if joining failed
	joined       chan struct{}      // closed once JoinGroup returned (the group's events may come before)
	groupChecked bool               // the first assignment checked the group's members (only the group's callbacks use it)
	assignment   assignmentCache    // the group's assignment, for the status
	started      time.Time          // when Start was called
	stop         context.CancelFunc // stops the instance (control API's stop)
	controlAddr  string             // where the control API listens, "" if it does not

	mu         sync.Mutex
	l          *lifecycle
	runs       map[Task]context.CancelFunc
	running    map[Task]*stream.Running // each task's current run, once its job started
	parkedAt   map[Task]time.Time       // when each task the lifecycle holds parked was parked
	startedAt  map[Task]time.Time       // when each task's current run started
	starts     map[Task]int             // the runs of each task started here
	parkings   uint64                   // tasks parked since Start
	revokeDone chan struct{}            // closed by answerRevoke
	finished   chan error

	done chan struct{} // closed when the instance has stopped and left the group
	err  error         // Wait's result, set before done is closed
}

// Wait waits until the instance has stopped (its ctx ended, or it gave up
// at Options.MaxFailedTasks) and left the group, and returns what Run
// returns: nil after a stop, the failure that made it give up otherwise.
func (in *Instance) Wait() error {
	<-in.done
	return in.err
}

// ParkedTask is a task that failed on this instance and is parked: its
// partition kept, its job not run again, until a rebalance takes it away.
type ParkedTask struct {
	Task Task
	// Err is the task's failure, as logged when it was parked.
	Err error
	// Since is when the instance parked it.
	Since time.Time
}

// ParkedTasks lists the tasks parked on this instance now, in the order
// of their topics and partitions. A task leaves the list when a rebalance
// takes its partition away.
func (in *Instance) ParkedTasks() []ParkedTask {
	in.mu.Lock()
	defer in.mu.Unlock()
	ts := make([]Task, 0, len(in.l.parked))
	for t := range in.l.parked {
		ts = append(ts, t)
	}
	ps := make([]ParkedTask, 0, len(ts))
	for _, t := range sorted(ts) {
		ps = append(ps, ParkedTask{Task: t, Err: in.l.parked[t], Since: in.parkedAt[t]})
	}
	return ps
}

// TasksParked counts the tasks this instance parked since it started,
// including those a rebalance has taken away since.
func (in *Instance) TasksParked() uint64 {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.parkings
}

// do applies one lifecycle step and carries out its actions.
func (in *Instance) do(step func() []action) {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.carryOut(step())
}

// carryOut runs acts in order; in.mu is held.
func (in *Instance) carryOut(acts []action) {
	for _, a := range acts {
		switch a.kind {
		case startTask:
			ctx, cancel := context.WithCancel(in.ctx)
			in.runs[a.task] = cancel
			in.startedAt[a.task] = time.Now()
			in.starts[a.task]++
			in.log.Info("cluster: task assigned: starting it", "task", a.task.String())
			go in.run(ctx, a.task)
		case stopTask:
			in.log.Info("cluster: stopping task", "task", a.task.String())
			in.runs[a.task]()
		case answerRevoke:
			if in.revokeDone != nil {
				close(in.revokeDone)
				in.revokeDone = nil
			}
		case finish:
			in.finished <- a.err
		case parkTask:
			in.parkedAt[a.task] = time.Now()
			in.parkings++
			in.log.Error("cluster: task failed: it is parked, its partition kept but not processed, until a rebalance takes it away (Options.MaxFailedTasks)",
				"task", a.task.String(), "err", a.err)
		}
	}
}

// revoked handles a revocation: it returns when every revoked task has
// exited, so that the group hands the partitions on only then.
func (in *Instance) revoked(p map[string][]int32) {
	done := make(chan struct{})
	in.mu.Lock()
	in.revokeDone = done
	in.carryOut(in.l.revoked(tasksOf(p)))
	in.mu.Unlock()
	<-done
}

// run runs task t's job until ctx ends or it fails.
func (in *Instance) run(ctx context.Context, t Task) {
	err := in.runTask(ctx, t)
	if ctx.Err() != nil && err != nil {
		// A stop: a failed final commit leaves the output in the task's
		// completed checkpoint, which its next owner commits.
		if !errors.Is(err, context.Canceled) {
			in.log.Warn("cluster: task stopped with an error; its next owner restores its last completed checkpoint", "task", t.String(), "err", err)
		}
		err = nil
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	in.runs[t]()
	delete(in.runs, t)
	if errors.Is(err, store.ErrNotOwner) && !errors.Is(err, sink.ErrFenced) {
		in.log.Warn("cluster: task taken over by another instance (this one was paused or cut off past its lease); it commits nothing more here", "task", t.String(), "err", err)
		in.carryOut(in.l.takenOver(t))
		return
	}
	in.carryOut(in.l.exited(t, err))
}

func (in *Instance) runTask(ctx context.Context, t Task) error {
	name := in.name + "." + t.Name()
	j, err := in.build(name, t)
	if err != nil {
		return fmt.Errorf("building the job of task %s: %w", t, err)
	}
	if j == nil || j.Name() != name {
		return fmt.Errorf("the job built for task %s must be created with stream.New(%q), the name Build is given", t, name)
	}
	if in.checkSources {
		if err := readsOnly(j, t); err != nil {
			return err
		}
	}
	o := in.opts.Job
	o.CheckpointDir = taskLocation(o.CheckpointDir, t)
	if in.stageOf(t) > 0 && o.CheckpointOnCaughtUp == 0 {
		o.CheckpointOnCaughtUp = stagePause(in.opts)
	}
	// Every line of the task's job, its sinks' included, says which task
	// it is of (and which stage, for RunJob): an instance runs several.
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	attrs := []any{"task", t.String()}
	if s := in.stageOf(t); s >= 0 {
		attrs = append(attrs, "stage", s)
	}
	o.Logger = o.Logger.With(attrs...)
	j.SetStateBackend(taskStateBackend(j.StateBackend(), t))
	r, err := j.Start(ctx, o)
	if err != nil {
		return err
	}
	in.mu.Lock()
	in.running[t] = r
	in.mu.Unlock()
	defer func() {
		in.mu.Lock()
		delete(in.running, t)
		in.mu.Unlock()
	}()
	return r.Wait()
}

// stagePause is the CheckpointOnCaughtUp of a task of a stage after the
// first: Options.StagePause, or a tenth of the checkpoint interval (whose
// default is 1s), or 0 when StagePause is negative.
func stagePause(o Options) time.Duration {
	switch {
	case o.StagePause < 0:
		return 0
	case o.StagePause > 0:
		return o.StagePause
	}
	interval := o.Job.CheckpointInterval
	if interval == 0 {
		interval = runtime.DefaultCheckpointInterval
	}
	return interval / 10
}

// ControlAddr returns the address the instance's control API listens on
// (Options.Job.Control.Addr), "" when it serves none.
func (in *Instance) ControlAddr() string { return in.controlAddr }

// openControl opens the listener and token of the instance's control API;
// nil, "" when o serves nothing. /metrics is not served on an instance
// (clustermetrics.NewCollector reports its tasks to a registry of the
// program's own).
func openControl(o stream.ControlOptions) (net.Listener, string, error) {
	return runtime.OpenControl(runtime.ControlOptions{Addr: o.Addr, TokenFile: o.TokenFile, TokenEnv: o.TokenEnv}, runtime.OptionNames{
		ControlAddr:  "Options.Job.Control.Addr (exactly run --control-addr)",
		ControlToken: "Options.Job.Control.TokenFile or TokenEnv (exactly run --token-file or --token-env)",
	})
}

// taskStateBackend returns the state backend of task t's job, built with
// c: on Pebble, its databases go to a directory of the task's own under
// c.Dir. The tasks of an instance run the same job, whose keyed operators'
// subtasks have the same names and numbers in every task: in one
// directory, each task's pruning of its local checkpoint copies would
// remove the others', and their local recovery would be lost.
func taskStateBackend(c state.BackendConfig, t Task) state.BackendConfig {
	if c.Kind == state.PebbleBackend && c.Dir != "" {
		c.Dir = filepath.Join(c.Dir, t.Name())
	}
	return c
}

// taskLocation returns the checkpoint location of task t under base, a
// directory or a URL (whose query, the endpoint of object storage, stays).
func taskLocation(base string, t Task) string {
	u, err := url.Parse(base)
	if err != nil || u.Scheme == "" || len(u.Scheme) == 1 { // a plain path (or C:\...)
		return filepath.Join(base, t.Name())
	}
	u.Path = path.Join(u.Path, t.Name())
	return u.String()
}

// tasksOf lists the partitions of an assignment as tasks.
func tasksOf(p map[string][]int32) []Task {
	var ts []Task
	for topic, parts := range p {
		for _, part := range parts {
			ts = append(ts, Task{Topic: topic, Partition: part})
		}
	}
	return ts
}

// partitionReader is a source that says which partitions it reads
// (kafka.Source).
type partitionReader interface {
	ReadsPartitions() (topics []string, partitions []int32)
}

// readsOnly checks that every source of j reads task t's partition and
// nothing else: a file or generator source would be read whole by every
// task, and a source of several partitions would be read by several tasks.
func readsOnly(j *stream.Job, t Task) error {
	for name, src := range j.Sources() {
		pr, ok := src.(partitionReader)
		if !ok {
			return fmt.Errorf("source %q of the job of task %s is a %T, which every task would read whole: a job run by a cluster reads only Kafka partitions (build its source with kafka.NewSource(task.SourceOptions(...)))", name, t, src)
		}
		topics, parts := pr.ReadsPartitions()
		if len(topics) != 1 || topics[0] != t.Topic || len(parts) != 1 || parts[0] != t.Partition {
			return fmt.Errorf("source %q of the job of task %s reads topics %v partitions %v: a task reads only its own partition (build its source with kafka.NewSource(task.SourceOptions(...)))", name, t, topics, parts)
		}
	}
	return nil
}
