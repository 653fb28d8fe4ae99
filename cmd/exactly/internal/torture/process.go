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
	"syscall"
	"time"

	"github.com/exactlyonce/exactly/internal/crashtest"
)

// Process faults act on the job's processes themselves, in a run that the
// injector claims from crashtest (no kill planned: the fault ends the run).
const (
	// FaultCleanStop: the broker or the database becomes unreachable (its
	// proxy disabled), then the job gets SIGTERM (a clean stop) during the
	// outage; the network comes back and the next run must commit what the
	// stop could not.
	FaultCleanStop = "clean-stop-outage"
	// FaultSecondInstance: a second process of the job is started on the
	// same checkpoint directory while the first runs; it must wait, write
	// nothing and fail with the "another instance" error, and the first
	// must keep running.
	FaultSecondInstance = "second-instance"
	// FaultZombie: the job is paused (SIGSTOP) past its ownership lease, a
	// new instance takes over and runs, then the paused one is resumed
	// (SIGCONT): it must stop with a fencing error and commit nothing.
	FaultZombie = "zombie"
	// FaultCorrupt: with the job stopped, one byte of a file of the newest
	// completed checkpoint is flipped; the next start must fail with an
	// error naming the file; the byte is restored (the explicit recovery)
	// and the job restarts.
	FaultCorrupt = "checkpoint-corrupt"
	// FaultStuckWrite: the database stops reading (toxiproxy's timeout
	// toxic upstream, without closing: every sink write blocks), for
	// longer than the checkpoint timeout; the job must fail over (its
	// checkpoints fail TolerableCheckpointFailures times in a row), not
	// hang.
	FaultStuckWrite = "stuck-write"
	// FaultStateWiped: with the keyed state in the Pebble backend, the job
	// is SIGKILLed and its state directory (the databases and the local
	// copies of the checkpoint's shared files) removed, as when a machine
	// is replaced; the next run must restore everything from the
	// checkpoint storage.
	FaultStateWiped = "state-wiped"
)

// Bounds of the process faults.
const (
	// ownershipLease is the torture job's Options.OwnershipLease: short, so
	// that a zombie is made in seconds.
	ownershipLease = 2 * time.Second
	// ownershipWait is the torture job's Options.OwnershipWait, how long a
	// starting process waits for an owner that looks live: five leases,
	// not the default two. A process that starts while a network fault
	// heals sees the storage stop answering (healing recreates the proxy,
	// cutting its connections), and after such an outage it waits a whole
	// lease again, since the owner could not renew meanwhile: with two
	// leases in all, a start during a fault on S3 gave up on a SIGKILLed
	// owner (CI of 66f1eac, TestTortureObjectStorage, seed
	// 1796577335523151679). A second instance still fails, after this wait.
	ownershipWait = 5 * ownershipLease
	// stopBound bounds a clean stop and a fenced zombie's exit.
	stopBound = 2 * time.Minute
	// checkpointTimeout is the torture job's Options.CheckpointTimeout:
	// short enough that a stuck sink write ends in a failover within
	// stuckBound.
	checkpointTimeout = 5 * time.Second
	// stuckBound bounds the wait for the failover after a stuck write: the
	// default 3 tolerable failures, 4 timeouts, and slack.
	stuckBound = 90 * time.Second
	// startBound bounds a start that must fail (a second instance, a start
	// on a corrupt checkpoint).
	startBound = time.Minute
)

// Texts that the errors of the engine carry (checkpoint/store, sink,
// stream), which the injector looks for in the processes' output.
const (
	textAnotherInstance = "another instance of the job is running on this checkpoint storage"
	textNotOwner        = "no longer owns the checkpoint directory"         // store.ErrNotOwner
	textFenced          = "fenced: a newer owner of the job has taken over" // sink.ErrFenced
	textCommitPending   = "will be committed when the job starts again"     // stream.ErrCommitPending
	textCorrupt         = "corrupt checkpoint"
)

// processKinds are the process faults.
var processKinds = []string{FaultCleanStop, FaultSecondInstance, FaultZombie, FaultCorrupt, FaultStuckWrite, FaultCommitRejected, FaultRerun, FaultStateWiped, FaultTxnOutage}

// claim is crashtest's Options.Claim: it claims about one run in four (one
// in two until every process fault was made once) for a process fault,
// drawn from the seed and the run.
func (in *injector) claim(run int) bool {
	if in.enough() {
		return false
	}
	rng := rand.New(rand.NewPCG(in.seed^0xc1a1, uint64(run)))
	in.mu.Lock()
	defer in.mu.Unlock()
	kinds := in.processKinds()
	var missing []string
	for _, k := range kinds {
		if !in.made(k) {
			missing = append(missing, k)
		}
	}
	p := 4
	if len(missing) > 0 {
		p = 2
	}
	if rng.IntN(p) != 0 {
		return false
	}
	kind := kinds[rng.IntN(len(kinds))]
	if len(missing) > 0 {
		kind = missing[0]
	}
	in.claimed[run] = kind
	return true
}

// made reports whether a fault of kind (or kind:target) was counted;
// in.mu is held.
func (in *injector) made(kind string) bool {
	for k := range in.counts {
		if k == kind || strings.HasPrefix(k, kind+":") {
			return true
		}
	}
	return false
}

// outcome counts one outcome of a process fault for the report.
func (in *injector) outcome(what string) {
	in.logf("  outcome: %s", what)
	in.mu.Lock()
	in.outcomes[what]++
	in.mu.Unlock()
}

// fail records a process fault whose outcome broke the rules: the run
// fails with it.
func (in *injector) fail(err error) {
	in.logf("  RULE BROKEN: %v", err)
	in.mu.Lock()
	if in.err == nil {
		in.err = err
	}
	in.mu.Unlock()
}

// processFault makes the process fault of a claimed run. It returns the
// kind made ("" when the child ended by itself first and nothing was
// made) and an error when the fault could not be made or healed, or the
// engine broke a rule.
func (in *injector) processFault(ctx context.Context, run int, child *crashtest.Child) (string, error) {
	in.mu.Lock()
	kind := in.claimed[run]
	in.mu.Unlock()
	rng := rand.New(rand.NewPCG(in.seed, uint64(run)^0x9f0c))
	between := func(min, max time.Duration) time.Duration { return min + time.Duration(rng.Int64N(int64(max-min))) }
	// Let the job recover and run, so the fault hits a running job.
	if !sleep(ctx, between(1500*time.Millisecond, 4*time.Second)) {
		return "", nil
	}
	switch kind {
	case FaultCleanStop:
		if in.tp == nil {
			return in.endRun(child)
		}
		target := []string{"kafka", "postgres"}[rng.IntN(2)]
		return kind + ":" + target, in.cleanStop(ctx, child, target, between(500*time.Millisecond, 2500*time.Millisecond))
	case FaultStuckWrite:
		if in.tp == nil {
			return in.endRun(child)
		}
		return kind + ":postgres", in.stuckWrite(ctx, child, "postgres")
	case FaultSecondInstance:
		// The first must own the checkpoint storage when the second
		// starts: a first still waiting out the lease of the run before
		// may lose the race for it to the second, which is the engine's
		// rule working, not the fault (seed 20261220, run 111).
		if !in.nextCheckpoint(ctx, ownedBound) {
			return in.endRun(child)
		}
		return kind, in.secondInstance(ctx, child, between(200*time.Millisecond, 1500*time.Millisecond))
	case FaultZombie:
		return kind, in.zombie(ctx, child, ownershipLease+between(time.Second, 2*time.Second), between(time.Second, 3*time.Second))
	case FaultCorrupt:
		made, err := in.corrupt(child, rng)
		if !made {
			kind = ""
		}
		return kind, err
	case FaultCommitRejected:
		return kind, in.commitRejected(ctx, child, between(time.Millisecond, 1500*time.Millisecond))
	case FaultRerun:
		made, err := in.rerun(child, run)
		if !made {
			kind = ""
		}
		return kind, err
	case FaultStateWiped:
		return kind, in.wipeState(child)
	case FaultTxnOutage:
		return kind, in.txnOutage(child, 1+rng.IntN(3), rng.IntN(2) == 0)
	}
	return "", fmt.Errorf("torture: run %d claimed for an unknown fault %q", run, kind)
}

// endRun SIGKILLs a claimed child whose fault cannot be made, and counts
// nothing.
func (in *injector) endRun(child *crashtest.Child) (string, error) {
	_ = child.Process.Signal(syscall.SIGKILL)
	<-child.Exited()
	return "", nil
}

// wipeState makes FaultStateWiped: it SIGKILLs the job and, once it
// exited, removes its Pebble state directory.
func (in *injector) wipeState(child *crashtest.Child) error {
	if _, err := in.endRun(child); err != nil {
		return err
	}
	return os.RemoveAll(in.job.StateDir)
}

// cleanStop stops the job with SIGTERM while target is unreachable, the
// stop landing, when it can, between a checkpoint's completion and its
// commit: it slows target down (latency both ways), waits for the next
// checkpoint to complete (a "c" in the progress file, written when the
// metadata is durable and before anything is committed), recreates the
// proxy of target disabled at once (every connection closed, new ones
// refused: the commit in flight fails; the latency gone), waits hold,
// sends SIGTERM, waits for the job to exit (killing it after stopBound: a
// hang, reported) and recreates the proxy enabled. The stop may fail to
// commit (ErrCommitPending): the next run commits, which the checker
// verifies.
func (in *injector) cleanStop(ctx context.Context, child *crashtest.Child, target string, hold time.Duration) error {
	bg := context.Background()
	slow := map[string]any{"latency": 150, "jitter": 50}
	err := errors.Join(in.tp.toxic(bg, target, "lat-up", "latency", "upstream", slow),
		in.tp.toxic(bg, target, "lat-down", "latency", "downstream", slow))
	if err == nil {
		before, deadline := in.checkpoints(), time.Now().Add(10*time.Second)
		for in.checkpoints() == before && time.Now().Before(deadline) && sleep(ctx, time.Millisecond) {
		}
		if in.checkpoints() == before {
			in.outcome(FaultCleanStop + ": no checkpoint completed before the outage")
		}
	}
	// Reset disabled: every connection closed, new ones refused, the
	// latency gone for when the proxy is enabled again.
	if err = errors.Join(err, in.tp.reset(bg, target, false)); err != nil {
		_ = in.tp.reset(bg, target, true)
		return err
	}
	sleep(ctx, hold)
	_ = child.Process.Signal(syscall.SIGTERM)
	out, exit, hung := waitChild(child, stopBound)
	err = in.tp.reset(bg, target, true)
	if hung {
		in.fail(fmt.Errorf("%s:%s: the job did not stop within %v of SIGTERM during the outage (stacks dumped, killed)\n%s", FaultCleanStop, target, stopBound, in.hangReport(FaultCleanStop, out)))
		return err
	}
	in.stopped(FaultCleanStop+":"+target, out, exit)
	return err
}

// stuckWrite makes target stop reading without closing a connection, so
// that every write to it blocks, and waits (up to stuckBound) for the job
// to fail over (an "r" in the progress file); then it heals target (the
// proxy recreated without the toxic, the stuck connections cut) and kills the job after a
// pause, ending the run. No failover within the bound is a hang: the run
// fails.
func (in *injector) stuckWrite(ctx context.Context, child *crashtest.Child, target string) error {
	bg := context.Background()
	before, began := in.failovers(), time.Now()
	hung := false
	err := in.tp.toxic(bg, target, "timeout", "timeout", "upstream", map[string]any{"timeout": 0})
	if err == nil {
		for in.failovers() == before && time.Since(began) < stuckBound && sleep(ctx, 50*time.Millisecond) {
		}
		switch {
		case in.failovers() > before:
			in.outcome(fmt.Sprintf("%s:%s: failed over (within %v)", FaultStuckWrite, target, time.Since(began).Round(10*time.Second)))
		case ctx.Err() != nil:
			out, exit := child.Result()
			in.fail(fmt.Errorf("%s:%s: the job exited with %v during the stuck write instead of failing over\n%s", FaultStuckWrite, target, exit, tail(out)))
		default:
			hung = true
		}
	}
	err = errors.Join(err, in.tp.reset(bg, target, true))
	sleep(ctx, time.Second)
	_ = child.Process.Signal(syscall.SIGKILL)
	<-child.Exited()
	if hung {
		out, _ := child.Result()
		in.fail(fmt.Errorf("%s:%s: no failover within %v of a stuck sink write: the job hangs; its output:\n%s", FaultStuckWrite, target, stuckBound, tail(out)))
	}
	return err
}

// failovers returns the number of failovers inside the job processes so
// far (the progress file's "r"s).
func (in *injector) failovers() int {
	b, _ := os.ReadFile(in.progress)
	return strings.Count(string(b), "r")
}

// stopped judges the exit of a job process stopped by SIGTERM: exit 0,
// or an error that is the cancellation or says the output is safe and
// committed at the next start (stream.ErrCommitPending). Anything else
// fails the run.
func (in *injector) stopped(what, out string, exit error) {
	switch {
	case exit == nil:
		in.outcome(what + ": exited 0")
	case strings.Contains(out, textCommitPending):
		in.outcome(what + ": stopped, commit pending (ErrCommitPending), committed at the next start")
	case strings.Contains(out, "context canceled"):
		in.outcome(what + ": stopped, committed")
	default:
		in.fail(fmt.Errorf("%s: the job stopped by SIGTERM exited with %v\n%s", what, exit, tail(out)))
	}
}

// secondInstance starts a second process of the job on the same
// checkpoint directory: it must fail within startBound with the "another
// instance" error while the first keeps running, then the first is
// killed after a pause (the end of the run).
func (in *injector) secondInstance(ctx context.Context, child *crashtest.Child, after time.Duration) error {
	before := in.checkpoints()
	p, err := startProc(child.Command(context.Background()))
	if err != nil {
		return err
	}
	select {
	case <-p.done:
	case <-ctx.Done():
		// The first ended: the second may take over. End it too.
		p.kill()
		out, exit := child.Result()
		if exit != nil {
			in.fail(fmt.Errorf("%s: the first instance exited with %v while the second waited\n%s", FaultSecondInstance, exit, tail(out)))
		} else {
			in.outcome(FaultSecondInstance + ": the first instance finished the job while the second waited")
		}
		return nil
	case <-time.After(startBound):
		quitThenKill(p.cmd.Process, p.done)
		in.fail(fmt.Errorf("%s: the second instance still ran after %v (stacks dumped, killed)\n%s", FaultSecondInstance, startBound, in.hangReport(FaultSecondInstance, p.output())))
	}
	if out := p.output(); p.err == nil || !strings.Contains(out, textAnotherInstance) {
		in.fail(fmt.Errorf("%s: the second instance exited with %v, not the %q error\n%s", FaultSecondInstance, p.err, textAnotherInstance, tail(out)))
	} else {
		in.outcome(FaultSecondInstance + ": refused with the \"another instance\" error")
	}
	select {
	case <-child.Exited():
		if out, exit := child.Result(); exit != nil {
			in.fail(fmt.Errorf("%s: the first instance exited with %v while the second waited\n%s", FaultSecondInstance, exit, tail(out)))
		}
		return nil
	default:
	}
	if in.checkpoints() > before {
		in.outcome(FaultSecondInstance + ": the first completed checkpoints meanwhile")
	} else {
		in.outcome(FaultSecondInstance + ": the first completed no checkpoint meanwhile")
	}
	sleep(ctx, after)
	_ = child.Process.Signal(syscall.SIGKILL)
	<-child.Exited()
	return nil
}

// zombie pauses the job (SIGSTOP) for pause, longer than its lease,
// starts a new instance, which takes over, lets it run for run, resumes
// the paused one (SIGCONT), which must exit with a fencing error within
// stopBound (or is killed, and the run fails), then stops the new
// instance with SIGTERM.
func (in *injector) zombie(ctx context.Context, child *crashtest.Child, pause, run time.Duration) error {
	if err := child.Process.Signal(syscall.SIGSTOP); err != nil {
		return err
	}
	time.Sleep(pause) // the paused child cannot exit
	before := in.checkpoints()
	p, err := startProc(child.Command(context.Background()))
	if err != nil {
		_ = child.Process.Signal(syscall.SIGCONT)
		return err
	}
	select {
	case <-p.done:
		in.fail(fmt.Errorf("%s: the new instance exited with %v before the zombie resumed\n%s", FaultZombie, p.err, tail(p.output())))
	case <-time.After(run):
	}
	if err := child.Process.Signal(syscall.SIGCONT); err != nil {
		p.kill()
		return err
	}
	// SIGSTOP may land while the paused process holds the directory's lock
	// (it renews, reserves an id or completes a checkpoint under it): then
	// the new instance cannot take over until it resumes, finds the owner
	// alive and renewing, and fails with the "another instance" error,
	// while the resumed process stays the owner — correct, and no zombie.
	select {
	case <-child.Exited():
	case <-p.done:
		if strings.Contains(p.output(), textAnotherInstance) {
			in.outcome(FaultZombie + ": paused inside the directory lock: no takeover, the new instance refused, the resumed process stayed the owner")
			_ = child.Process.Signal(syscall.SIGKILL)
			<-child.Exited()
			return nil
		}
	case <-time.After(stopBound):
	}
	out, exit, hung := waitChild(child, stopBound)
	in.judgeZombie(FaultZombie, out, exit, hung)
	if in.checkpoints() > before {
		in.outcome(FaultZombie + ": the new owner completed checkpoints")
	}
	in.stopNewOwner(FaultZombie, p)
	return nil
}

// judgeZombie judges the exit of a resumed zombie, made by the fault kind:
// it must stop with a fencing error within stopBound.
func (in *injector) judgeZombie(kind, out string, exit error, hung bool) {
	switch {
	case hung:
		in.fail(fmt.Errorf("%s: the resumed zombie did not stop within %v (stacks dumped, killed)\n%s", kind, stopBound, in.hangReport(kind, out)))
	case exit == nil:
		in.fail(fmt.Errorf("%s: the resumed zombie exited 0\n%s", kind, tail(out)))
	case strings.Contains(out, textNotOwner):
		in.outcome(kind + ": the zombie stopped with ErrNotOwner")
	case strings.Contains(out, textFenced):
		in.outcome(kind + ": the zombie stopped with ErrFenced")
	case strings.Contains(out, textAnotherInstance):
		// Paused before it had taken ownership (on object storage a start
		// after a SIGKILL waits up to a lease): it never owned, and on
		// resume it found the new owner and refused.
		in.outcome(kind + ": paused before taking ownership: refused on resume with the \"another instance\" error")
	default:
		in.fail(fmt.Errorf("%s: the resumed zombie exited with %v, without a fencing error\n%s", kind, exit, tail(out)))
	}
}

// stopNewOwner stops p, the instance that took over from a zombie, with
// SIGTERM (judged as a clean stop), unless it exited already.
func (in *injector) stopNewOwner(kind string, p *proc) {
	select {
	case <-p.done:
		return // reported where it exited
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	if p.wait(stopBound) {
		in.fail(fmt.Errorf("%s: the new owner did not stop within %v of SIGTERM (stacks dumped, killed)\n%s", kind, stopBound, in.hangReport(kind, p.output())))
		return
	}
	in.stopped(kind+": the new owner, on SIGTERM", p.output(), p.err)
}

// corrupt kills the job, flips one bit of one file of the newest
// completed checkpoint, starts the job, which must fail within
// startBound with an error naming the file, and restores the bit. It
// reports false when there was no completed checkpoint to damage.
func (in *injector) corrupt(child *crashtest.Child, rng *rand.Rand) (bool, error) {
	_ = child.Process.Signal(syscall.SIGKILL)
	<-child.Exited()
	dir, err := in.newestCompleted()
	if err != nil || dir == "" {
		in.outcome(FaultCorrupt + ": no completed checkpoint yet: not made")
		return false, err
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return false, err
	}
	var files []string
	for _, e := range entries {
		if e.Type().IsRegular() && !strings.HasSuffix(e.Name(), ".tmp") {
			files = append(files, filepath.Join(dir, e.Name()))
		}
	}
	file := files[rng.IntN(len(files))]
	data, err := os.ReadFile(file)
	if err != nil || len(data) == 0 {
		return false, err
	}
	off, bit := rng.IntN(len(data)), byte(1)<<rng.IntN(8)
	flip := func() error {
		data[off] ^= bit
		return os.WriteFile(file, data, 0o644)
	}
	if err := flip(); err != nil {
		return false, err
	}
	name := filepath.Join(filepath.Base(dir), filepath.Base(file))
	p, err := startProc(child.Command(context.Background()))
	if err != nil {
		return true, errors.Join(err, flip())
	}
	hung := p.wait(startBound)
	// The explicit recovery: the byte is restored; the next run restarts.
	if err := flip(); err != nil {
		return true, err
	}
	out := p.output()
	switch {
	case hung:
		in.fail(fmt.Errorf("%s: a start with a flipped bit in %s (offset %d) still ran after %v (stacks dumped, killed)\n%s", FaultCorrupt, name, off, startBound, in.hangReport(FaultCorrupt, out)))
	case p.err == nil || !strings.Contains(out, textCorrupt) || !strings.Contains(out, name):
		in.fail(fmt.Errorf("%s: a start with a flipped bit in %s (offset %d) exited with %v, not an error naming the file\n%s", FaultCorrupt, name, off, p.err, tail(out)))
	case filepath.Base(file) == "_metadata":
		in.outcome(FaultCorrupt + ": start refused, error names the file (metadata)")
	default:
		in.outcome(FaultCorrupt + ": start refused, error names the file (state file)")
	}
	return true, nil
}

// newestCompleted returns the directory of the newest completed
// checkpoint; "" when there is none.
func (in *injector) newestCompleted() (string, error) {
	if in.s3 != nil {
		return in.newestCompletedObject()
	}
	return newestCompletedDir(in.ckpt)
}

// newestCompletedDir returns the directory of the newest checkpoint in
// ckpt that has its metadata (completed); "" when there is none.
func newestCompletedDir(ckpt string) (string, error) {
	entries, err := os.ReadDir(ckpt)
	if err != nil {
		return "", err
	}
	var names []string
	for _, e := range entries {
		if e.IsDir() && strings.HasPrefix(e.Name(), "chk-") {
			names = append(names, e.Name())
		}
	}
	slices.Sort(names) // ids are zero-padded: names sort like ids
	for _, n := range slices.Backward(names) {
		if _, err := os.Stat(filepath.Join(ckpt, n, "_metadata")); err == nil {
			return filepath.Join(ckpt, n), nil
		}
	}
	return "", nil
}

// ownedBound bounds the wait for the first checkpoint of a job process
// that a process fault needs to be running.
const ownedBound = 30 * time.Second

// nextCheckpoint waits up to bound for the job process to complete a
// checkpoint, proof that it owns the checkpoint storage; false if none
// completed, or ctx ended, first.
func (in *injector) nextCheckpoint(ctx context.Context, bound time.Duration) bool {
	start := in.checkpoints()
	deadline := time.Now().Add(bound)
	for time.Now().Before(deadline) {
		if in.checkpoints() > start {
			return true
		}
		if !sleep(ctx, 50*time.Millisecond) {
			return false
		}
	}
	return false
}

// checkpoints returns the number of checkpoints the job processes
// completed so far (the progress file's "c"s).
func (in *injector) checkpoints() int {
	b, _ := os.ReadFile(in.progress)
	return strings.Count(string(b), "c")
}

// waitChild waits for the child to exit, killing it after bound; it
// returns the child's output and exit error, and whether it was killed.
func waitChild(child *crashtest.Child, bound time.Duration) (out string, exit error, hung bool) {
	select {
	case <-child.Exited():
	case <-time.After(bound):
		quitThenKill(child.Process, child.Exited())
		hung = true
	}
	out, exit = child.Result()
	return out, exit, hung
}

// proc is a job process the injector starts itself.
type proc struct {
	cmd  *exec.Cmd
	out  strings.Builder
	done chan struct{}
	err  error // of Wait, set before done is closed
}

func startProc(cmd *exec.Cmd) (*proc, error) {
	p := &proc{cmd: cmd, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = &p.out, &p.out
	crashtest.DieWithParent(cmd)
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	go func() { p.err = cmd.Wait(); close(p.done) }()
	return p, nil
}

// wait waits for p to exit, killing it after bound (see quitThenKill); it
// reports whether it was killed.
func (p *proc) wait(bound time.Duration) bool {
	select {
	case <-p.done:
		return false
	case <-time.After(bound):
		quitThenKill(p.cmd.Process, p.done)
		return true
	}
}

// quitGrace is how long a hung process has to print its goroutines'
// stacks after SIGQUIT before it is SIGKILLed.
const quitGrace = 5 * time.Second

// quitThenKill ends a hung job process so that its output tells where it
// hung: SIGQUIT makes the Go runtime print every goroutine's stack and
// exit; SIGKILL follows if it has not exited within quitGrace.
func quitThenKill(p *os.Process, exited <-chan struct{}) {
	_ = p.Signal(syscall.SIGQUIT)
	select {
	case <-exited:
	case <-time.After(quitGrace):
		_ = p.Signal(syscall.SIGKILL)
		<-exited
	}
}

// hangReport returns the end of a hung process's output for an error and
// keeps the whole of it, goroutine stacks included, in a file of the run's
// directory named after what hung, which it names.
func (in *injector) hangReport(what, out string) string {
	name := filepath.Join(filepath.Dir(in.progress), fmt.Sprintf("hung-%d-%s.txt", in.total.Load(), strings.NewReplacer(":", "-", " ", "-", "/", "-").Replace(what)))
	if err := os.WriteFile(name, []byte(out), 0o644); err != nil {
		return tail(out) + fmt.Sprintf("\n(the whole output could not be kept: %v)", err)
	}
	return tail(out) + "\n(the whole output, with every goroutine's stack: " + name + ")"
}

// kill SIGKILLs p and waits for it.
func (p *proc) kill() {
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

// output returns p's output; p must have exited.
func (p *proc) output() string {
	<-p.done
	return p.out.String()
}

// tail returns the end of a process's output, for an error.
func tail(s string) string {
	const n = 3000
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}
