// Command cluster-bench measures a stream processor running as a cluster
// of instances on one broker (issue 30): a keyed count through one
// repartition and an event-time window (records "user:item" keyed by
// user, re-keyed by item, counted per item in tumbling windows), input
// produced at a fixed rate, on exactly (bench/cmd/exactly-cluster,
// automatic stages) and, with --systems, its peers. For each system it
// starts --instances instances, waits for output on every output
// partition, then:
//
//   - cost: over --steady seconds, the input events per CPU-second of the
//     whole cluster, and each instance's peak RSS;
//   - recovery: SIGKILL of one instance, and the longest gap in committed
//     output of any output partition over --observe (every output
//     partition holds the output of every task of the last stage, so a
//     dead instance's tasks show as a gap of all of them: its open
//     transactions hold their read_committed end back, and the window
//     stage's watermark waits for its moved tasks);
//   - join: a new instance joins; the longest gap in committed output of
//     any output partition over --observe;
//   - leave: one instance stops cleanly (SIGTERM); the same.
//
// The steady-state longest gap is reported beside them: output appears
// once per checkpoint (or commit) and window, so gaps of about an interval
// are normal. The machine should be quiet: the load average is printed at
// the start and the end.
//
//	go run ./bench/cmd/cluster-bench --brokers 127.0.0.1:29092
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/exactlyonce/exactly/bench/internal/child"
	"github.com/exactlyonce/exactly/bench/internal/procstat"
)

type options struct {
	brokers    string
	systems    string
	instances  int
	partitions int
	rate       float64
	users      int
	items      int
	session    time.Duration
	interval   time.Duration
	warmup     time.Duration
	steady     time.Duration
	observe    time.Duration
	work       string
}

func main() {
	var o options
	flag.StringVar(&o.brokers, "brokers", os.Getenv("EXACTLY_KAFKA_BROKERS"), "Kafka bootstrap address (default $EXACTLY_KAFKA_BROKERS)")
	flag.StringVar(&o.systems, "systems", "exactly,kstreams", "systems to measure, comma-separated: exactly, exactly-kip848 (exactly on KIP-848's consumer group protocol), kstreams")
	flag.IntVar(&o.instances, "instances", 3, "instances of each system")
	flag.IntVar(&o.partitions, "partitions", 6, "partitions of the input and the output topics")
	flag.Float64Var(&o.rate, "rate", 2000, "input events per second")
	flag.IntVar(&o.users, "users", 10_000, "distinct users (the input's keys)")
	flag.IntVar(&o.items, "items", 120, "distinct items (the re-keyed keys)")
	flag.DurationVar(&o.session, "session-timeout", 6*time.Second, "the consumer group's session timeout")
	flag.DurationVar(&o.interval, "interval", time.Second, "checkpoint (commit) interval")
	flag.DurationVar(&o.warmup, "warmup", 20*time.Second, "time after output flows on every partition before measuring")
	flag.DurationVar(&o.steady, "steady", 20*time.Second, "the steady-state window of the cost measurement")
	flag.DurationVar(&o.observe, "observe", 30*time.Second, "how long each fault is observed")
	flag.StringVar(&o.work, "work", ".tmp/cluster-bench", "scratch directory: builds, checkpoints, logs")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, "cluster-bench:", err)
		os.Exit(1)
	}
}

// result is one system's figures.
type result struct {
	system                           string
	eventsPerCPUSecond               float64
	peakRSS                          []int64 // per instance, bytes
	steadyGap, recovery, join, leave time.Duration
}

func run(ctx context.Context, o options) error {
	if o.brokers == "" {
		return errors.New("--brokers is required")
	}
	if err := os.MkdirAll(o.work, 0o755); err != nil {
		return err
	}
	fmt.Printf("cluster-bench: load average at the start: %s\n", loadAverage())
	var results []result
	for _, s := range strings.Split(o.systems, ",") {
		argv, err := system(o, s)
		if err != nil {
			return err
		}
		r, err := measure(ctx, o, s, argv)
		if err != nil {
			return fmt.Errorf("%s: %w", s, err)
		}
		results = append(results, r)
	}
	fmt.Printf("cluster-bench: load average at the end: %s\n", loadAverage())
	fmt.Printf("\n| system | instances | rate (events/s) | events/CPU-s | peak RSS per instance (MiB) | longest gap, steady | longest gap, SIGKILL | longest gap, join | longest gap, leave |\n|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range results {
		var rss []string
		for _, b := range r.peakRSS {
			rss = append(rss, fmt.Sprintf("%.0f", float64(b)/(1<<20)))
		}
		fmt.Printf("| %s | %d | %.0f | %.0f | %s | %v | %v | %v | %v |\n", r.system, o.instances, o.rate, r.eventsPerCPUSecond, strings.Join(rss, ", "),
			r.steadyGap.Round(10*time.Millisecond), r.recovery.Round(10*time.Millisecond), r.join.Round(10*time.Millisecond), r.leave.Round(10*time.Millisecond))
	}
	return nil
}

// system builds the system called name and returns the command of its
// instance n, of the job called id, from topic in to topic out, with its
// files under dir.
func system(o options, name string) (func(id, in, out, dir string, n int) []string, error) {
	switch name {
	case "exactly", "exactly-kip848":
		bin := filepath.Join(o.work, "exactly-cluster")
		if err := build("go", "build", "-o", bin, "./bench/cmd/exactly-cluster"); err != nil {
			return nil, err
		}
		protocol := map[string]string{"exactly": "classic", "exactly-kip848": "consumer"}[name]
		return func(id, in, out, dir string, _ int) []string {
			return []string{bin, "--brokers", o.brokers, "--in", in, "--out", out, "--name", id,
				"--checkpoints", filepath.Join(dir, "checkpoints"), "--interval", o.interval.String(), "--session-timeout", o.session.String(),
				"--group-protocol", protocol}
		}, nil
	case "kstreams":
		if err := build("mvn", "-q", "-B", "-f", "bench/peers/pom.xml", "-pl", "kstreams", "-am", "package"); err != nil {
			return nil, err
		}
		target := filepath.Join("bench", "peers", "kstreams", "target")
		return func(id, in, out, dir string, n int) []string {
			return []string{"java", "-Xmx1g", "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
				"-cp", filepath.Join(target, "classes") + string(os.PathListSeparator) + filepath.Join(target, "lib", "*"),
				"exactly.bench.kstreams.ClusterBench", "--brokers", o.brokers, "--in", in, "--out", out, "--app-id", id,
				"--state-dir", filepath.Join(dir, fmt.Sprintf("state-%d", n)),
				"--interval-ms", fmt.Sprint(o.interval.Milliseconds()), "--session-ms", fmt.Sprint(o.session.Milliseconds())}
		}, nil
	}
	return nil, fmt.Errorf("unknown system %q: use exactly, exactly-kip848 or kstreams", name)
}

// measure runs one system through the phases and deletes what it created.
func measure(ctx context.Context, o options, system string, argv func(id, in, out, dir string, n int) []string) (result, error) {
	res := result{system: system}
	id := fmt.Sprintf("cb-%s-%d", system, time.Now().UnixNano())
	in, out := id+"-in", id+"-out"
	dir := filepath.Join(o.work, id)
	cl, err := kgo.NewClient(kgo.SeedBrokers(o.brokers))
	if err != nil {
		return res, err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	if err := createTopics(ctx, adm, int32(o.partitions), in, out); err != nil {
		return res, err
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		topics := []string{in, out}
		if listed, err := adm.ListTopics(cctx); err == nil {
			for _, t := range listed.Names() {
				if strings.HasPrefix(t, id+"-") && t != in && t != out {
					topics = append(topics, t)
				}
			}
		}
		_, _ = adm.DeleteTopics(cctx, topics...)
		deleteGroup(cctx, adm, "exactly-"+id) // exactly's
		deleteGroup(cctx, adm, id)            // Kafka Streams'
		for _, sub := range []string{"checkpoints", "state-"} {
			matches, _ := filepath.Glob(filepath.Join(dir, sub+"*"))
			for _, m := range matches {
				_ = os.RemoveAll(m)
			}
		}
	}()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return res, err
	}

	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	produced := &atomic.Int64{}
	prodErr := make(chan error, 1)
	go func() { prodErr <- produce(cctx, o, in, produced) }()
	seen := newArrivals()
	go func() { _ = consume(cctx, o.brokers, out, seen) }()

	var procs []*child.Process
	startOne := func(n int) error {
		p, err := child.Start(argv(id, in, out, dir, n), filepath.Join(dir, fmt.Sprintf("instance-%d.log", n)))
		if err == nil {
			procs = append(procs, p)
		}
		return err
	}
	defer func() {
		for _, p := range procs {
			p.Stop(time.Minute)
		}
	}()
	for n := range o.instances {
		if err := startOne(n); err != nil {
			return res, err
		}
	}
	began := time.Now()
	if !waitFor(cctx, 3*time.Minute, func() bool { _, ok := allAfter(seen.snapshot(), int32(o.partitions), began); return ok }) {
		return res, fmt.Errorf("no output on every partition within 3 minutes of the start (logs in %s)", dir)
	}
	sleepCtx(cctx, o.warmup)

	// Cost: CPU of every instance over the steady window, input events produced in it.
	cpu := func() (float64, error) {
		var sum float64
		for _, p := range procs {
			s, err := procstat.CPUSeconds(p.Cmd.Process.Pid)
			if err != nil {
				return 0, err
			}
			sum += s
		}
		return sum, nil
	}
	c0, err := cpu()
	if err != nil {
		return res, err
	}
	e0, t0 := produced.Load(), time.Now()
	sleepCtx(cctx, o.steady)
	c1, err := cpu()
	if err != nil {
		return res, err
	}
	e1, t1 := produced.Load(), time.Now()
	res.eventsPerCPUSecond = float64(e1-e0) / (c1 - c0)
	res.steadyGap = longestGap(seen.snapshot(), int32(o.partitions), t0, t1)
	for _, p := range procs {
		m, err := procstat.ReadMemory(p.Cmd.Process.Pid)
		if err != nil {
			return res, err
		}
		res.peakRSS = append(res.peakRSS, m.Peak)
	}

	// Recovery: SIGKILL the last instance.
	killed := time.Now()
	procs[len(procs)-1].Kill()
	procs = procs[:len(procs)-1]
	sleepCtx(cctx, o.observe)
	res.recovery = longestGap(seen.snapshot(), int32(o.partitions), killed, time.Now())
	sleepCtx(cctx, o.observe/2)

	// Join: a new instance.
	joined := time.Now()
	if err := startOne(o.instances); err != nil {
		return res, err
	}
	sleepCtx(cctx, o.observe)
	res.join = longestGap(seen.snapshot(), int32(o.partitions), joined, time.Now())

	// Leave: the first instance stops cleanly.
	left := time.Now()
	procs[0].Stop(time.Minute)
	// A JVM ends with status 143 after its shutdown hooks ran on SIGTERM.
	if err := procs[0].Err; err != nil && err.Error() != "exit status 143" {
		return res, fmt.Errorf("the instance that left exited with %v (log in %s)", err, dir)
	}
	procs = procs[1:]
	sleepCtx(cctx, o.observe)
	res.leave = longestGap(seen.snapshot(), int32(o.partitions), left, time.Now())

	cancel()
	if err := <-prodErr; err != nil && !errors.Is(err, context.Canceled) {
		return res, fmt.Errorf("producing: %w", err)
	}
	return res, ctx.Err()
}

// createTopics creates topics of partitions partitions.
func createTopics(ctx context.Context, adm *kadm.Client, partitions int32, topics ...string) error {
	resp, err := adm.CreateTopics(ctx, partitions, 1, nil, topics...)
	if err != nil {
		return err
	}
	return resp.Error()
}

// produce writes records "user:item" keyed by user, stamped with the time
// they are sent, at o.rate per second until ctx ends.
func produce(ctx context.Context, o options, topic string, produced *atomic.Int64) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(o.brokers), kgo.DefaultProduceTopic(topic), kgo.ProducerLinger(5*time.Millisecond))
	if err != nil {
		return err
	}
	defer cl.Close()
	rng := rand.New(rand.NewPCG(1, 2))
	var failed atomic.Pointer[error]
	promise := func(_ *kgo.Record, err error) {
		if err != nil {
			failed.CompareAndSwap(nil, &err)
		}
	}
	began := time.Now()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	var i int64
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
		now := time.Now()
		for due := int64(now.Sub(began).Seconds() * o.rate); i < due; i++ {
			user := fmt.Sprintf("u%d", rng.IntN(o.users))
			item := fmt.Sprintf("i%d", rng.IntN(o.items))
			cl.Produce(ctx, &kgo.Record{Key: []byte(user), Value: []byte(user + ":" + item), Timestamp: now}, promise)
		}
		produced.Store(i)
		if p := failed.Load(); p != nil {
			return *p
		}
	}
}

// consume reads topic with read_committed from the start and records each
// partition's arrivals until ctx ends.
func consume(ctx context.Context, brokers, topic string, a *arrivals) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers), kgo.ConsumeTopics(topic),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(10*time.Millisecond))
	if err != nil {
		return err
	}
	defer cl.Close()
	for ctx.Err() == nil {
		fs := cl.PollFetches(ctx)
		now := time.Now()
		fs.EachPartition(func(p kgo.FetchTopicPartition) {
			if len(p.Records) > 0 {
				a.add(p.Partition, now)
			}
		})
	}
	return nil
}

// waitFor polls cond every 10 ms until it holds (true) or d passes.
func waitFor(ctx context.Context, d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		if cond() {
			return true
		}
		sleepCtx(ctx, 10*time.Millisecond)
	}
	return false
}

func sleepCtx(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// loadAverage returns /proc/loadavg's first three fields.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	return strings.Join(strings.Fields(string(b))[:3], " ")
}

// build runs a build command, its output going to stderr.
func build(name string, args ...string) error {
	cmd := exec.Command(name, args...)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s %v: %w", name, args, err)
	}
	return nil
}

// deleteGroup deletes group, again while the broker still counts members
// (NON_EMPTY_GROUP: a killed instance's session has not expired yet),
// until ctx ends. A group that does not exist is no error.
func deleteGroup(ctx context.Context, adm *kadm.Client, group string) {
	for {
		_, err := adm.DeleteGroup(ctx, group) // the group's own error included
		switch {
		case err == nil || errors.Is(err, kerr.GroupIDNotFound):
			return
		case !errors.Is(err, kerr.NonEmptyGroup):
			fmt.Fprintf(os.Stderr, "cluster-bench: deleting group %s: %v\n", group, err)
			return
		}
		select {
		case <-ctx.Done():
			fmt.Fprintf(os.Stderr, "cluster-bench: group %s still has members; delete it by hand: %v\n", group, err)
			return
		case <-time.After(time.Second):
		}
	}
}
