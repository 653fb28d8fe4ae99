// Package crashtest proves exactly-once by killing things: it runs a job in
// a child process, kills the child with SIGKILL again and again, at random
// moments and at chosen points of the checkpoint protocol, restarts it each
// time, and lets the test verify the committed output at the end.
//
// [Supervise] runs any child command; in a test the child is the test
// binary itself, re-executed to run one test by crashtesting.Run (package
// internal/crashtest/crashtesting, kept apart so that this package does not
// import testing: the exactly binary links it).
//
// Every run is seeded; the seed is printed and can be replayed with the
// EXACTLY_CRASH_SEED environment variable.
package crashtest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/exactlyonce/exactly/checkpoint"
	"github.com/exactlyonce/exactly/internal/runtime"
)

const (
	envChild   = "EXACTLY_CRASH_CHILD"
	envCrashAt = "EXACTLY_CRASH_AT"
	envSeed    = "EXACTLY_CRASH_SEED"
)

// IsChild reports whether this process is a child started by [Supervise].
func IsChild() bool { return os.Getenv(envChild) != "" }

// Probe returns the probe a child passes to runtime.Options.Probe. When the
// parent asked for a kill at a protocol point ("metadata-written:3": at the
// third time the point is reached) the probe SIGKILLs its own process there;
// asked for a stop ("metadata-written:3:stop", [StopAt]) it SIGSTOPs it,
// and the process goes on from there when it gets SIGCONT. Outside a child
// it returns nil.
func Probe() func(runtime.ProbePoint, checkpoint.ID) {
	spec := os.Getenv(envCrashAt)
	point, rest, ok := strings.Cut(spec, ":")
	nth, how, _ := strings.Cut(rest, ":")
	n, err := strconv.Atoi(nth)
	if !ok || err != nil || n <= 0 || how != "" && how != "stop" {
		return nil
	}
	var hits atomic.Int64
	return func(p runtime.ProbePoint, _ checkpoint.ID) {
		if string(p) != point || hits.Add(1) != int64(n) {
			return
		}
		if how == "stop" {
			_ = syscall.Kill(os.Getpid(), syscall.SIGSTOP) // returns once continued
			return
		}
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {} // the signal is on its way
	}
}

// KillAt returns the environment entry that makes [Probe], in a process
// started with it, SIGKILL that process the nth time it reaches point:
// for supervisors of their own (the torture suite's cluster runs).
func KillAt(point runtime.ProbePoint, n int) string {
	return fmt.Sprintf("%s=%s:%d", envCrashAt, point, n)
}

// StopAt is KillAt with SIGSTOP instead of SIGKILL: the process stops
// itself there, and goes on when it gets SIGCONT (a zombie in the making).
func StopAt(point runtime.ProbePoint, n int) string {
	return KillAt(point, n) + ":stop"
}

// Stopped reports whether the process pid is stopped by a signal (its
// state in /proc is T).
func Stopped(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// The state follows the command's closing parenthesis.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i >= 0 && i+2 < len(s) && s[i+2] == 'T'
}

// Options configures a crash run.
type Options struct {
	// Kills is the number of kills to make before the child may finish. Default 20.
	Kills int
	// Seed seeds the schedule; 0 takes EXACTLY_CRASH_SEED or a random seed.
	Seed uint64
	// MaxDelay bounds the random delay before a timed kill. Default 1s.
	MaxDelay time.Duration
	// Points are the protocol points where probe kills happen; default all
	// of them, with the metadata-written point (checkpoint complete, commit
	// not yet done) twice as likely.
	Points []runtime.ProbePoint
	// Env is added to the child's environment.
	Env []string
	// FinalEnv is added after Env to the environment of the final run, the
	// one no kill is planned for; a later value of a variable overrides an
	// earlier one. The torture suite lifts its throttle there, so the input
	// left after the last fault is read at full speed.
	FinalEnv []string
	// Timeout bounds one child run. Default 2m.
	Timeout time.Duration
	// More, when set, keeps the kills going after Kills kills for as long
	// as it returns true; it is asked before each run with the kills made
	// so far and whether the job has finished (a child exited 0: later
	// runs restore a finished job, which only commits). A caller that
	// injects faults of its own (see During) uses it to stop when it has
	// made enough, or when the job finished before it could.
	More func(kills int, finished bool) bool
	// During, when set, runs in its own goroutine alongside each child,
	// with a context that is cancelled when the child has exited;
	// Supervise waits for it to return before it starts the next child.
	// Callers inject faults other than the kill here (a broker restart, a
	// network partition) and must undo them before returning. final is
	// true for a run in which no kill is planned.
	During func(ctx context.Context, run int, final bool)
	// Claim, when set, is asked before each run that would get a kill;
	// when it returns true no kill is planned for that run: During owns
	// it (see [ChildOf]: Child.Claimed is set) and ends the child itself,
	// by a signal of its choice. Any exit of a claimed run is accepted —
	// During judges it — and none counts as a kill; an exit 0 counts as
	// the job having finished.
	Claim func(run int) bool
}

// Child is the child process of one run, as During sees it ([ChildOf]).
type Child struct {
	// Process is the running child.
	Process *os.Process
	// Claimed reports that Options.Claim claimed this run: no kill is
	// planned, During must end the child.
	Claimed bool

	command func(context.Context) *exec.Cmd
	env     []string // the child's environment, without a planned kill
	out     *strings.Builder
	exited  chan struct{}
	err     error // of cmd.Wait, set before exited is closed
}

type childKey struct{}

// ChildOf returns the child of the run whose During received ctx; nil
// outside During.
func ChildOf(ctx context.Context) *Child {
	c, _ := ctx.Value(childKey{}).(*Child)
	return c
}

// Command returns a command for another instance of the child, with the
// child's environment (no kill planned) and env added: a second process
// of the same job.
func (c *Child) Command(ctx context.Context, env ...string) *exec.Cmd {
	cmd := c.command(ctx)
	cmd.Env = append(slices.Clone(c.env), env...)
	return cmd
}

// Exited is closed once the child has exited.
func (c *Child) Exited() <-chan struct{} { return c.exited }

// Result returns the child's output, stdout and stderr, and the error of
// its exit (nil: status 0); it waits for the child to exit.
func (c *Child) Result() (string, error) {
	<-c.exited
	return c.out.String(), c.err
}

// Report says what a crash run did.
type Report struct {
	// Seed replays the run.
	Seed uint64
	// Runs counts child processes started.
	Runs int
	// Kills counts child processes that died by SIGKILL.
	Kills int
	// ByKind counts kills by kind: "timed" or the protocol point.
	ByKind map[string]int
	// KillsBeforeDone counts the kills made before any child had exited 0,
	// that is while the job still had input to process. Kills after that
	// only restart a finished job; a test sizes its input so that this
	// count reaches its quota.
	KillsBeforeDone int
	// Claimed counts the runs Options.Claim claimed.
	Claimed int
	// done is set once a child exited 0.
	done bool
}

func (r Report) String() string {
	kinds := make([]string, 0, len(r.ByKind))
	for k := range r.ByKind {
		kinds = append(kinds, k)
	}
	slices.Sort(kinds)
	var parts []string
	for _, k := range kinds {
		parts = append(parts, fmt.Sprintf("%s=%d", k, r.ByKind[k]))
	}
	return fmt.Sprintf("crash run seed=%d: %d runs, %d SIGKILLs (%s), %d of them before the job first finished",
		r.Seed, r.Runs, r.Kills, strings.Join(parts, " "), r.KillsBeforeDone)
}

// Supervise runs the child command until it exits successfully after at
// least o.Kills SIGKILLs. The first kills are probe kills at each protocol
// point in turn, so every point is covered; after that half of the kills,
// chosen at random, are timed (the supervisor kills the child after a
// random delay) and the others are probe kills at a random occurrence of a protocol point (the child must
// pass [Probe] to its job). A probe kill whose point is never reached lets
// the child finish; the next run then starts from where the job stands.
// Any other failure of a child ends the run with an error. Options.More
// extends the kills beyond Options.Kills, and Options.During injects other
// faults while each child runs (cmd/exactly/internal/torture uses both).
func Supervise(o Options, command func(ctx context.Context) *exec.Cmd, logf func(format string, args ...any)) (Report, error) {
	if o.Kills == 0 {
		o.Kills = 20
	}
	if o.MaxDelay == 0 {
		o.MaxDelay = time.Second
	}
	if o.Timeout == 0 {
		o.Timeout = 2 * time.Minute
	}
	if len(o.Points) == 0 {
		o.Points = []runtime.ProbePoint{runtime.ProbeBarrierInjected, runtime.ProbeSnapshotTaken,
			runtime.ProbeMetadataWritten, runtime.ProbeMetadataWritten, runtime.ProbeCommitted}
	}
	if o.Seed == 0 {
		o.Seed, _ = strconv.ParseUint(os.Getenv(envSeed), 10, 64)
	}
	if o.Seed == 0 {
		o.Seed = rand.Uint64()
	}
	logf("crashtest: seed %d (replay with %s=%d)", o.Seed, envSeed, o.Seed)
	rng := rand.New(rand.NewPCG(o.Seed, 0x5eed))
	rep := Report{Seed: o.Seed, ByKind: map[string]int{}}
	for {
		rep.Runs++
		kill := rep.Kills < o.Kills || o.More != nil && o.More(rep.Kills, rep.done)
		env := append(os.Environ(), envChild+"=1")
		env = append(env, o.Env...)
		if !kill {
			env = append(env, o.FinalEnv...)
		}
		base := slices.Clone(env)
		kind := "none"
		var delay time.Duration
		claimed := kill && o.Claim != nil && o.Claim(rep.Runs)
		if claimed {
			kind = "claimed"
		} else if kill {
			distinct := slices.Compact(slices.Sorted(slices.Values(o.Points)))
			if covered := rep.Kills - rep.ByKind["timed"]; covered < len(distinct) && rep.ByKind[string(distinct[covered])] == 0 {
				// The first probe kills visit every point once.
				kind = string(distinct[covered])
				env = append(env, fmt.Sprintf("%s=%s:%d", envCrashAt, kind, 1+rng.IntN(2)))
			} else if rng.IntN(2) == 0 {
				kind = "timed"
				delay = time.Duration(rng.Int64N(int64(o.MaxDelay))) + time.Millisecond
			} else {
				p := o.Points[rng.IntN(len(o.Points))]
				kind = string(p)
				env = append(env, fmt.Sprintf("%s=%s:%d", envCrashAt, p, 1+rng.IntN(4)))
			}
		}
		began := time.Now()
		child := &Child{Claimed: claimed, command: command, env: base, exited: make(chan struct{})}
		killed, err := runChild(command, env, delay, o.Timeout, during(o.During, rep.Runs, !kill), child)
		outcome := "exited 0: the job finished"
		switch {
		case killed:
			outcome = "SIGKILLed"
		case err != nil:
			outcome = "exited: " + firstLine(err.Error())
		}
		logf("run %d: kill %s: %s after %v", rep.Runs, killSpec(kind, env), outcome, time.Since(began).Round(time.Millisecond))
		switch {
		case claimed:
			rep.Claimed++
			if !killed && err == nil {
				rep.done = true
			}
		case killed:
			rep.Kills++
			rep.ByKind[kind]++
			if !rep.done {
				rep.KillsBeforeDone++
			}
		case err != nil:
			return rep, fmt.Errorf("run %d (%s) failed: %w\n%s", rep.Runs, kind, err, rep)
		case !kill:
			return rep, nil
		default:
			rep.done = true
		}
	}
}

// killSpec describes the kill planned for a run.
func killSpec(kind string, env []string) string {
	for _, e := range slices.Backward(env) {
		if at, ok := strings.CutPrefix(e, envCrashAt+"="); ok {
			return "at " + at
		}
	}
	return kind
}

// during binds Options.During to one run; nil when there is none.
func during(f func(ctx context.Context, run int, final bool), run int, final bool) func(context.Context) {
	if f == nil {
		return nil
	}
	return func(ctx context.Context) { f(ctx, run, final) }
}

// DieWithParent makes the process cmd starts get SIGKILL when its
// parent dies: a test that times out or panics leaves no job running
// against the services, as a SIGKILLed test would. (Linux sends it when
// the thread that started the child exits; Go's threads outlive the
// process's goroutines but for a locked one's.)
func DieWithParent(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
}

// runChild runs the child once, and alongside (when not nil) in another
// goroutine with a context cancelled once the child has exited; it reports
// whether SIGKILL ended the child.
func runChild(command func(context.Context) *exec.Cmd, env []string, delay, timeout time.Duration, alongside func(context.Context), child *Child) (killed bool, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := command(ctx)
	cmd.Env = env
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	DieWithParent(cmd)
	if err := cmd.Start(); err != nil {
		return false, err
	}
	child.Process, child.out = cmd.Process, &out
	if delay > 0 {
		timer := time.AfterFunc(delay, func() { _ = cmd.Process.Signal(syscall.SIGKILL) })
		defer timer.Stop()
	}
	if alongside != nil {
		actx, stop := context.WithCancel(context.WithValue(ctx, childKey{}, child))
		done := make(chan struct{})
		go func() { defer close(done); alongside(actx) }()
		defer func() { stop(); <-done }()
	}
	err = cmd.Wait()
	child.err = err
	close(child.exited)
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL && ctx.Err() == nil {
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("%w\n--- child output ---\n%s", err, tail(out.String(), 4000))
	}
	return false, nil
}

// firstLine returns s up to its first newline.
func firstLine(s string) string {
	l, _, _ := strings.Cut(s, "\n")
	return l
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}
