package torture

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/exactlyonce/exactly/internal/crashtest"
	"github.com/exactlyonce/exactly/stream"
)

// Instance faults of a cluster run (Config.Instances), made on the job's
// instance processes, which share the consumer group and the checkpoint
// storage.
const (
	// FaultInstanceKill: SIGKILL of one instance; it is restarted after a
	// moment, on its working directory.
	FaultInstanceKill = "instance-kill"
	// FaultInstanceKillAt: an instance is restarted to SIGKILL itself at a
	// protocol point (followed by ":" and the point), in whichever of its
	// tasks reaches it first; then restarted again.
	FaultInstanceKillAt = "instance-kill-at"
	// FaultInstancePause: SIGSTOP past the session timeout and the
	// ownership lease, then SIGCONT: the group moved its tasks, and the
	// resumed zombie must commit nothing (its outcome is counted).
	FaultInstancePause = "instance-pause"
	// FaultInstanceLeave: SIGTERM, a clean leave, which must end with exit
	// status 0; the instance is restarted after a moment.
	FaultInstanceLeave = "instance-leave"
	// FaultInstanceJoin: a new instance joins (one leaves cleanly first
	// when the cluster is at its largest).
	FaultInstanceJoin = "instance-join"
	// FaultInstancesTwo: two instances SIGKILLed at once, both restarted.
	FaultInstancesTwo = "instances-two-kill"
	// FaultInstanceWiped: SIGKILL, the instance's working directory (its
	// tasks' local state) deleted, and a restart on the empty directory.
	FaultInstanceWiped = "instance-wiped"
)

// killPoints are the protocol points of the FaultInstanceKillAt faults.
var killPoints = []stream.ProbePoint{stream.ProbeBarrierInjected, stream.ProbeSnapshotTaken, stream.ProbeMetadataWritten, stream.ProbeCommitted}

// instanceKinds lists every instance fault a run must make, the
// protocol-point kills once per point.
func instanceKinds() []string {
	ks := []string{FaultInstanceKill}
	for _, p := range killPoints {
		ks = append(ks, FaultInstanceKillAt+":"+string(p))
	}
	return append(ks, FaultInstancePause, FaultInstanceLeave, FaultInstanceJoin, FaultInstancesTwo, FaultInstanceWiped)
}

// Bounds of the instance faults.
const (
	// killAtBound bounds the wait for an instance to reach the protocol
	// point it kills itself at: a restarted instance has tasks and
	// checkpoints again within seconds.
	killAtBound = time.Minute
	// zombieWatch is how long a resumed zombie is watched for its fenced
	// tasks or its exit.
	zombieWatch = 20 * time.Second
	// zombieGrace is how long a zombie found fenced is watched further.
	zombieGrace = 3 * time.Second
)

// Texts of the cluster's and the engine's log lines the supervisor reads.
const (
	textTakenOver     = "task taken over by another instance"
	textLostOwnership = "lost ownership of the checkpoint directory"
	textParked        = "cluster: task failed: it is parked"
)

// fleet is the instance processes of a cluster run.
type fleet struct {
	size    int // the number of instances the run keeps, between size-2 and size+1
	env     []string
	command func(context.Context) *exec.Cmd
	dir     string // the instances' working directories and logs are under it
	in      *injector
	logf    func(format string, args ...any)

	mu      sync.Mutex
	running []*instanceProc // in start order
	started int             // processes started
	names   int             // instance names handed out
}

// instanceProc is one instance process of a cluster run.
type instanceProc struct {
	name string
	dir  string // working directory, kept across restarts of the name
	log  string // this process's output
	cmd  *exec.Cmd
	done chan struct{} // closed at exit; err is then set
	err  error
	// ended is set when the supervisor ends the process on purpose, or
	// lets it end (a resumed zombie).
	ended bool
}

// exited reports whether the process has exited.
func (p *instanceProc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// output returns the process's output so far.
func (p *instanceProc) output() string {
	b, _ := os.ReadFile(p.log)
	return string(b)
}

// start starts an instance named name (a new name when empty) with env
// added to the fleet's.
func (f *fleet) start(ctx context.Context, name string, env ...string) (*instanceProc, error) {
	f.mu.Lock()
	if name == "" {
		f.names++
		name = fmt.Sprintf("i%d", f.names)
	}
	f.started++
	n := f.started
	f.mu.Unlock()
	p := &instanceProc{name: name, dir: filepath.Join(f.dir, name), log: filepath.Join(f.dir, fmt.Sprintf("%s.%d.log", name, n)), done: make(chan struct{})}
	if err := os.MkdirAll(p.dir, 0o755); err != nil {
		return nil, err
	}
	out, err := os.Create(p.log)
	if err != nil {
		return nil, err
	}
	p.cmd = f.command(ctx)
	p.cmd.Env = append(append(append(os.Environ(), f.env...), envInstance+"="+name, envInstanceDir+"="+p.dir), env...)
	p.cmd.Stdout, p.cmd.Stderr = out, out
	crashtest.DieWithParent(p.cmd)
	if err := p.cmd.Start(); err != nil {
		out.Close()
		return nil, fmt.Errorf("torture: start instance %s: %w", name, err)
	}
	go func() {
		p.err = p.cmd.Wait()
		out.Close()
		close(p.done)
	}()
	f.mu.Lock()
	f.running = append(f.running, p)
	f.mu.Unlock()
	f.logf("instance %s started (pid %d)%s", name, p.cmd.Process.Pid, strings.Join(append([]string{""}, env...), " "))
	return p, nil
}

// pick returns n running instances drawn from rng, nil when fewer run.
func (f *fleet) pick(rng *rand.Rand, n int) []*instanceProc {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.running) < n {
		return nil
	}
	idx := rng.Perm(len(f.running))[:n]
	var ps []*instanceProc
	for _, i := range idx {
		ps = append(ps, f.running[i])
	}
	return ps
}

// forget removes p from the running instances.
func (f *fleet) forget(p *instanceProc) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.running = slices.DeleteFunc(f.running, func(q *instanceProc) bool { return q == p })
}

// count returns the number of running instances.
func (f *fleet) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.running)
}

// signal sends s to p; with SIGKILL it waits for the exit.
func (f *fleet) signal(p *instanceProc, s syscall.Signal) error {
	if s == syscall.SIGKILL || s == syscall.SIGTERM {
		p.ended = true
	}
	// A process that has exited, but whose exit the waiting goroutine has
	// not recorded yet, answers os.ErrProcessDone.
	if err := p.cmd.Process.Signal(s); err != nil && !errors.Is(err, os.ErrProcessDone) && !p.exited() {
		return fmt.Errorf("torture: %v to instance %s: %w", s, p.name, err)
	}
	if s == syscall.SIGKILL {
		<-p.done
		f.forget(p)
	}
	return nil
}

// stop ends p with SIGTERM: it must exit with status 0 within stopBound.
func (f *fleet) stop(p *instanceProc) error {
	if err := f.signal(p, syscall.SIGTERM); err != nil {
		return err
	}
	select {
	case <-p.done:
	case <-time.After(stopBound):
		quitThenKill(p.cmd.Process, p.done) // its stacks go to its log
		f.forget(p)
		return fmt.Errorf("torture: instance %s did not stop within %v of SIGTERM\n%s", p.name, stopBound, tail(p.output()))
	}
	f.forget(p)
	if p.err != nil {
		return fmt.Errorf("torture: instance %s stopped by SIGTERM: exit %v, want 0\n%s", p.name, p.err, tail(p.output()))
	}
	return nil
}

// unexpected returns an error for each instance that exited although the
// supervisor did not end it.
func (f *fleet) unexpected() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	var errs []error
	for _, p := range f.running {
		if !p.ended && p.exited() {
			errs = append(errs, fmt.Errorf("torture: instance %s exited on its own: %v\n%s", p.name, p.err, tail(p.output())))
			p.ended = true
		}
	}
	return errors.Join(errs...)
}

// fill starts instances until size run.
func (f *fleet) fill(ctx context.Context) error {
	for f.count() < f.size {
		if _, err := f.start(ctx, ""); err != nil {
			return err
		}
	}
	return nil
}

// fault makes the instance fault kind, drawing its targets and timing
// from rng; it returns the kind as counted (a protocol-point kill names
// its point) and an error when the fault could not be made or its
// outcome broke a rule.
func (f *fleet) fault(ctx context.Context, rng *rand.Rand, kind string) error {
	pause := func(min, max time.Duration) { sleep(ctx, min+time.Duration(rng.Int64N(int64(max-min)))) }
	one := f.pick(rng, 1)
	if len(one) == 0 {
		return fmt.Errorf("no instance runs")
	}
	p := one[0]
	restart := func(p *instanceProc, env ...string) (*instanceProc, error) { return f.start(ctx, p.name, env...) }
	switch {
	case kind == FaultInstanceKill:
		if err := f.signal(p, syscall.SIGKILL); err != nil {
			return err
		}
		pause(200*time.Millisecond, 3*time.Second)
		_, err := restart(p)
		return err
	case strings.HasPrefix(kind, FaultInstanceKillAt+":"):
		point := stream.ProbePoint(strings.TrimPrefix(kind, FaultInstanceKillAt+":"))
		if err := f.signal(p, syscall.SIGKILL); err != nil {
			return err
		}
		q, err := restart(p, crashtest.KillAt(point, 1+rng.IntN(3)))
		if err != nil {
			return err
		}
		q.ended = true // it kills itself
		select {
		case <-q.done:
			f.forget(q)
			if q.err == nil || !strings.Contains(q.err.Error(), "killed") {
				return fmt.Errorf("instance %s, to be killed at %s, exited otherwise: %v\n%s", q.name, point, q.err, tail(q.output()))
			}
			f.in.outcome("instance killed at " + string(point) + ": killed itself there")
		case <-time.After(killAtBound):
			f.in.outcome("instance killed at " + string(point) + ": did not reach it within " + killAtBound.String() + ", killed by the supervisor")
			if err := f.signal(q, syscall.SIGKILL); err != nil {
				return err
			}
		}
		pause(200*time.Millisecond, 2*time.Second)
		_, err = restart(q)
		return err
	case kind == FaultInstancePause:
		return f.zombie(ctx, rng, p)
	case kind == FaultInstanceLeave:
		if err := f.stop(p); err != nil {
			return err
		}
		pause(500*time.Millisecond, 4*time.Second)
		_, err := restart(p)
		return err
	case kind == FaultInstanceJoin:
		if f.count() > f.size {
			f.in.mu.Lock()
			f.in.counts[FaultInstanceLeave]++
			f.in.mu.Unlock()
			if err := f.stop(p); err != nil {
				return err
			}
		}
		_, err := f.start(ctx, "")
		return err
	case kind == FaultInstancesTwo:
		two := f.pick(rng, 2)
		if two == nil {
			return fmt.Errorf("fewer than two instances run")
		}
		for _, q := range two {
			_ = q.cmd.Process.Signal(syscall.SIGKILL)
		}
		for _, q := range two {
			if err := f.signal(q, syscall.SIGKILL); err != nil {
				return err
			}
		}
		pause(200*time.Millisecond, 3*time.Second)
		for _, q := range two {
			if _, err := restart(q); err != nil {
				return err
			}
		}
		return nil
	case kind == FaultInstanceWiped:
		if err := f.signal(p, syscall.SIGKILL); err != nil {
			return err
		}
		if err := os.RemoveAll(p.dir); err != nil {
			return err
		}
		_, err := restart(p)
		return err
	}
	return fmt.Errorf("unknown instance fault %q", kind)
}

// zombie pauses p past the session timeout and the ownership lease,
// resumes it and watches it: its tasks moved to other instances while it
// was paused, and must find themselves fenced (the sinks' checks prove
// that it committed nothing). It may go on, or exit fenced (then it is
// restarted); any other exit breaks a rule.
func (f *fleet) zombie(ctx context.Context, rng *rand.Rand, p *instanceProc) error {
	if err := f.signal(p, syscall.SIGSTOP); err != nil {
		return err
	}
	sleep(ctx, instanceSession+ownershipLease+time.Second+time.Duration(rng.Int64N(int64(2*time.Second))))
	before := len(p.output())
	p.ended = true // it may exit fenced
	if err := f.signal(p, syscall.SIGCONT); err != nil {
		return err
	}
	isFenced := func(out string) bool {
		return strings.Contains(out, textTakenOver) || strings.Contains(out, textLostOwnership) || strings.Contains(out, textFenced)
	}
	// Watched until it is fenced, and a little longer: a fenced zombie may
	// be on its way out.
	deadline := time.Now().Add(zombieWatch)
	for time.Now().Before(deadline) && !p.exited() {
		if grace := time.Now().Add(zombieGrace); grace.Before(deadline) && isFenced(p.output()[before:]) {
			deadline = grace
		}
		sleep(ctx, 200*time.Millisecond)
	}
	after := p.output()[before:]
	fenced := isFenced(after)
	switch {
	case p.exited() && !fenced:
		f.forget(p)
		return fmt.Errorf("instance %s exited after its pause without being fenced: %v\n%s", p.name, p.err, tail(after))
	case p.exited():
		f.forget(p)
		f.in.outcome("paused instance: fenced on resume, exited")
		_, err := f.start(ctx, p.name)
		return err
	case fenced:
		f.in.outcome("paused instance: its moved tasks fenced on resume, the instance went on")
	default:
		f.in.outcome("paused instance: no task of its was fenced on resume within " + zombieWatch.String())
	}
	p.ended = false
	return nil
}

// shutdown ends every instance with SIGTERM, each of which must exit with
// status 0.
func (f *fleet) shutdown() error {
	f.mu.Lock()
	ps := slices.Clone(f.running)
	f.mu.Unlock()
	var errs []error
	for _, p := range ps {
		if p.exited() {
			f.forget(p)
			continue
		}
		errs = append(errs, f.stop(p))
	}
	return errors.Join(errs...)
}

// kill SIGKILLs every instance (after a failure).
func (f *fleet) kill() {
	f.mu.Lock()
	ps := slices.Clone(f.running)
	f.mu.Unlock()
	for _, p := range ps {
		_ = p.cmd.Process.Signal(syscall.SIGCONT)
		_ = f.signal(p, syscall.SIGKILL)
	}
}

// parked returns the instances' log lines that report a parked task.
func (f *fleet) parked() []string {
	entries, _ := os.ReadDir(f.dir)
	var lines []string
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".log") {
			continue
		}
		b, _ := os.ReadFile(filepath.Join(f.dir, e.Name()))
		for _, l := range strings.Split(string(b), "\n") {
			if strings.Contains(l, textParked) {
				lines = append(lines, e.Name()+": "+l)
			}
		}
	}
	return lines
}
