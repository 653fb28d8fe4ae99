package torture

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/exactlyonce/exactly/internal/crashtest"
)

// Kinds of fault the injector makes besides the SIGKILLs of the job
// (which crashtest makes, named "kill:" and the protocol point or
// "timed"). Network kinds are followed by ":kafka" or ":postgres".
const (
	FaultKafkaRestart    = "kafka-restart"         // SIGKILL and restart of the broker
	FaultPostgresRestart = "postgres-restart"      // immediate shutdown and restart of PostgreSQL
	FaultLatency         = "net-latency"           // added latency, both directions
	FaultReset           = "net-reset"             // every connection reset by peer
	FaultTimeout         = "net-timeout"           // data stops, connections closed after a timeout
	FaultPartition       = "net-partition"         // data blackholed for seconds, then connections cut
	FaultUnwritable      = "checkpoint-unwritable" // checkpoint directory immutable (chattr +i)
	FaultFull            = "checkpoint-full"       // checkpoint filesystem full (tmpfs filled up)
)

// Fault groups a run chooses from, with equal probability among those
// available.
const (
	groupKafka    = "kafka"
	groupPostgres = "postgres"
	groupNetwork  = "network"
	groupDisk     = "disk"
)

// injector makes the faults other than kills, while a job process runs.
type injector struct {
	seed     uint64
	scripts  string   // directory of kafka.sh and postgres.sh
	kafka    string   // the broker's address, reached directly
	kafkaEnv []string // environment of kafka.sh
	tp       *toxiproxy
	ckpt     string         // checkpoint directory (on object storage: the S3 server's directory of the objects)
	s3       *objectStorage // the checkpoints' object storage; nil: a local directory
	ckfs     string         // mount point of the tmpfs holding ckpt; "" when not mounted
	groups   []string
	// instances is set in a cluster run: its process faults are the
	// instance faults.
	instances bool
	logf      func(format string, args ...any)
	enough    func() bool // the fault budget or the time limit is reached

	progress string    // the job's progress file: a "c" per completed checkpoint
	job      jobConfig // the job's configuration, for the processes the injector starts
	pg       string    // the database's DSN, reached directly (not through the proxy)

	mu       sync.Mutex
	counts   map[string]int
	outcomes map[string]int // what the process faults saw, by outcome
	claimed  map[int]string // the process fault of each claimed run
	err      error          // first failure to inject or heal a fault, or of a process fault's rule
	total    atomic.Int64
	ordinary atomic.Int64 // the faults made by inject
}

// during is crashtest's Options.During: in each run but the final one it
// makes 0 to 2 faults (at least 1 while a kind was never made), at random
// moments drawn from the seed and the run.
func (in *injector) during(ctx context.Context, run int, final bool) {
	if final || len(in.groups) == 0 {
		return
	}
	if child := crashtest.ChildOf(ctx); child != nil && child.Claimed {
		kind, err := in.processFault(ctx, run, child)
		in.mu.Lock()
		if kind != "" {
			in.counts[kind]++
		}
		if err != nil && in.err == nil {
			in.err = fmt.Errorf("%s: %w", in.claimed[run], err)
		}
		in.mu.Unlock()
		if err != nil {
			in.logf("run %d: fault %s failed: %v", run, in.claimedKind(run), err)
		}
		if kind != "" {
			in.total.Add(1)
			in.logf("run %d: fault %s done", run, kind)
		}
		return
	}
	rng := rand.New(rand.NewPCG(in.seed, uint64(run)))
	n := rng.IntN(3)
	if n == 0 && !in.covered() {
		n = 1 // a run without a fault leaves a kind unmade for longer
	}
	for range n {
		wait := 200*time.Millisecond + time.Duration(rng.Int64N(int64(2300*time.Millisecond)))
		if !sleep(ctx, wait) || in.enough() {
			return
		}
		kind, err := in.inject(ctx, rng)
		in.mu.Lock()
		in.counts[kind]++
		if err != nil && in.err == nil {
			in.err = fmt.Errorf("%s: %w", kind, err)
		}
		in.mu.Unlock()
		if err != nil {
			in.logf("run %d: fault %s failed: %v", run, kind, err)
		}
		in.total.Add(1)
		in.ordinary.Add(1)
		in.logf("run %d: fault %s done", run, kind)
	}
}

// claimedKind returns the process fault of a claimed run.
func (in *injector) claimedKind(run int) string {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.claimed[run]
}

// covered reports whether a fault of every kind was made.
func (in *injector) covered() bool { return len(in.missing()) == 0 }

// missing returns the kinds of which no fault was made yet.
func (in *injector) missing() []string {
	in.mu.Lock()
	defer in.mu.Unlock()
	var ks []string
	for _, k := range slices.Concat(append(in.kinds(), in.processKinds())...) {
		if !in.made(k) {
			ks = append(ks, k)
		}
	}
	return ks
}

// failf records the run's first failure, made by the supervisor itself.
// failed reports whether a fault failed or a rule broke.
func (in *injector) failed() bool {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.err != nil
}

func (in *injector) failf(format string, args ...any) {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.err == nil {
		in.err = fmt.Errorf(format, args...)
	}
}

// processKinds returns the process faults that can be made: the clean
// stop during an outage needs toxiproxy, the wiped state the Pebble
// backend; a cluster run makes the instance faults instead.
func (in *injector) processKinds() []string {
	if in.instances {
		return instanceKinds()
	}
	return slices.DeleteFunc(slices.Clone(processKinds), func(k string) bool {
		return k == FaultCleanStop && in.tp == nil || k == FaultStateWiped && in.job.StateDir == ""
	})
}

// kinds returns the fault kinds of the available groups.
func (in *injector) kinds() [][]string {
	var ks [][]string
	for _, g := range in.groups {
		switch g {
		case groupKafka:
			ks = append(ks, []string{FaultKafkaRestart})
		case groupPostgres:
			ks = append(ks, []string{FaultPostgresRestart})
		case groupNetwork:
			ks = append(ks, []string{FaultLatency, FaultReset, FaultTimeout, FaultPartition})
		case groupObjectStore:
			ks = append(ks, in.objectStoreKinds())
		case groupDisk:
			k := []string{FaultUnwritable}
			if in.ckfs != "" {
				k = append(k, FaultFull)
			}
			ks = append(ks, k)
		}
	}
	return ks
}

// choose picks the next fault kind: the first faults visit every kind
// once, so that a short run covers them all; later ones draw a group, then
// a kind in it, from rng.
func (in *injector) choose(rng *rand.Rand) string {
	groups := in.kinds()
	all := slices.Concat(groups...)
	if n := int(in.ordinary.Load()); n < len(all) {
		return all[n]
	}
	g := groups[rng.IntN(len(groups))]
	return g[rng.IntN(len(g))]
}

// inject makes one fault drawn from rng, waits out its duration (cut
// short when ctx ends) and heals it.
func (in *injector) inject(ctx context.Context, rng *rand.Rand) (string, error) {
	hold := func(min, max time.Duration) { sleep(ctx, min+time.Duration(rng.Int64N(int64(max-min)))) }
	kind := in.choose(rng)
	switch kind {
	case FaultKafkaRestart:
		return kind, in.script(in.kafkaEnv, "kafka.sh", "restart")
	case FaultPostgresRestart:
		return kind, in.script(nil, "postgres.sh", "restart-immediate")
	case FaultFull:
		return kind, in.fill(func() { hold(time.Second, 5*time.Second) })
	case FaultUnwritable:
		return kind, in.immutable(func() { hold(time.Second, 5*time.Second) })
	case FaultS3Restart, FaultSlowUpload:
		return kind, in.injectObjectStore(ctx, kind, rng)
	}
	targets := in.proxies()
	target := targets[rng.IntN(len(targets))]
	bg := context.Background() // the proxy is reset even when ctx ended
	add := func(name, typ, stream string, attrs map[string]any) error {
		return in.tp.toxic(bg, target, name, typ, stream, attrs)
	}
	var err error
	switch kind {
	case FaultLatency:
		lat := 50 + rng.IntN(450)
		err = errors.Join(add("lat-up", "latency", "upstream", map[string]any{"latency": lat, "jitter": lat / 4}),
			add("lat-down", "latency", "downstream", map[string]any{"latency": lat, "jitter": lat / 4}))
		if err == nil {
			hold(time.Second, 4*time.Second)
		}
	case FaultReset:
		if err = add("reset", "reset_peer", "downstream", map[string]any{"timeout": 0}); err == nil {
			hold(300*time.Millisecond, time.Second)
		}
	case FaultTimeout:
		if err = add("timeout", "timeout", "upstream", map[string]any{"timeout": 500 + rng.IntN(1500)}); err == nil {
			hold(time.Second, 3*time.Second)
		}
	case FaultPartition:
		err = errors.Join(add("part-up", "timeout", "upstream", map[string]any{"timeout": 0}),
			add("part-down", "timeout", "downstream", map[string]any{"timeout": 0}))
		if err == nil {
			hold(3*time.Second, 8*time.Second)
		}
	}
	// Healing cuts the connections through target (toxiproxy's reset: see
	// its type): after a partition as one long enough for TCP to give up
	// would, after latency, resets and timeouts as a flapping link would.
	return kind + ":" + target, errors.Join(err, in.tp.reset(bg, target, true))
}

// proxies returns the names of the toxiproxy proxies the job goes through.
func (in *injector) proxies() []string {
	if in.s3 != nil {
		return []string{"kafka", "postgres", "s3"}
	}
	return []string{"kafka", "postgres"}
}

// script runs scripts/name with args and env added to ours.
func (in *injector) script(env []string, name string, args ...string) error {
	cmd := exec.Command(filepath.Join(in.scripts, name), args...)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %w\n%s", name, strings.Join(args, " "), err, out)
	}
	return nil
}

// immutable makes the checkpoint directory and everything in it immutable
// (chattr +i: even root cannot create, write, rename or remove there),
// calls hold, and undoes it.
func (in *injector) immutable(hold func()) error {
	err := exec.Command("chattr", "-R", "+i", in.ckpt).Run()
	if err == nil {
		hold()
	}
	// Undo even after a partial failure.
	if uerr := exec.Command("chattr", "-R", "-i", in.ckpt).Run(); uerr != nil {
		err = errors.Join(err, fmt.Errorf("chattr -R -i %s: %w", in.ckpt, uerr))
	}
	return err
}

// fill fills the checkpoint filesystem with a ballast file until it is
// full, calls hold, and removes the ballast.
func (in *injector) fill(hold func()) error {
	ballast := filepath.Join(in.ckfs, "ballast")
	f, err := os.Create(ballast)
	if err != nil {
		return err
	}
	chunk := make([]byte, 1<<20)
	for err == nil {
		_, err = f.Write(chunk)
	}
	if errors.Is(err, syscall.ENOSPC) {
		err = nil
		hold()
	}
	return errors.Join(err, f.Close(), os.Remove(ballast))
}

// heal undoes every fault that may be left: used at the end of a run.
func (in *injector) heal() error {
	var errs []error
	if in.tp != nil {
		errs = append(errs, in.tp.heal(context.Background()))
	}
	if slices.Contains(in.groups, groupDisk) {
		errs = append(errs, exec.Command("chattr", "-R", "-i", in.ckpt).Run())
	}
	return errors.Join(errs...)
}

// servicesUp starts the services the run restarts (idempotent: a running
// one is left alone), so that the sinks can be checked after a restart
// fault that did not finish in time.
func (in *injector) servicesUp() error {
	var errs []error
	if slices.Contains(in.groups, groupKafka) {
		errs = append(errs, in.script(in.kafkaEnv, "kafka.sh", "start"))
	}
	if slices.Contains(in.groups, groupPostgres) {
		errs = append(errs, in.script(nil, "postgres.sh", "start"))
	}
	return errors.Join(errs...)
}

// sleep waits d; it reports false when ctx ended first.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// listening reports whether something accepts connections on addr.
func listening(addr string) bool {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err == nil {
		c.Close()
	}
	return err == nil
}
