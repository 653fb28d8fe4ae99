// Command nexmark-bench runs the Nexmark queries of bench/nexmark on exactly,
// Apache Flink and Kafka Streams in turn, on the same input, each with
// exactly-once on, and reports for each system and query:
//
//   - events/s and events per CPU-second of the system (utime+stime from
//     /proc/<pid>/stat), over a backlog written to Kafka once. The runner
//     polls the output topic's last stable offsets every 50ms; the window
//     runs from the first commit of output to the last-but-one, so neither
//     start-up (reported apart) nor the wait of the backlog's tail for a
//     last checkpoint counts. Input events in the window are estimated as
//     the outputs made visible in it times events/outputs of the query
//     (offsets include a few transaction markers: a slight overestimate for
//     q2, whose output is small);
//   - peak RSS (VmHWM) of the system in that run;
//   - p50/p99 visibility latency, input record timestamp to receipt by a
//     read_committed consumer, with input produced at --rate events/s;
//   - the time to recover after a SIGKILL: the system is killed during the
//     latency run and started again at once; recovery is the time from the
//     kill to the first visible output of an input produced after it;
//   - whether the output had exactly the expected number of records in
//     every run.
//
// The windowed queries q5 and q7 (see bench/nexmark) differ in two ways. As
// a system's watermark never reaches the end of its input, only the outputs
// of the windows ending at least 3 s of event time before the last input
// event are counted, waited for and compared, value by value, with those of
// the reference implementation in bench/nexmark; the input events in the
// measured window are estimated from the event time by which the ends of
// the visible windows advanced in it. And they have no latency run: the
// generator's event time is synthetic (10,000 events per second of event
// time), so the time a window's result takes to become visible has no
// meaning in wall time — unless the input comes at that pace, which
// --windowed-latency does (see measureWindowedLatency; not in the table of
// --doc). Instead each system runs them over the backlog a
// second time, SIGKILLed up to --kills times (0.1-0.8 s after its first
// visible output, then after each recovery) and started again once the
// output's stable offsets settled; the checked outputs of that run are
// compared value by value too, and its recovery is the longest time from
// a kill to the first output not visible at it. The stateful per-event
// queries (count, q3) have that kill run too, their outputs compared by
// digest, beside their latency run.
//
// The updating queries (q4, q6, q9, q15-q19) write a table, each change of a row as a
// record keyed by the row's key: their output is checked as the table the
// last value of each key makes, key by key against the reference's, and
// the run is done when it is that table. Their input events in the window
// are what the rows say of the input behind them (see
// nexmark.RowProgress). They have a kill run, and no latency run.
//
// It prints a Markdown table with the ratios exactly/Flink and
// exactly/Kafka Streams and, with --doc, writes it into that file between
// the markers of its section (appended when absent).
//
//	eval "$(scripts/kafka.sh start | tail -1 | sed 's/^/export /')"
//	go run ./bench/cmd/nexmark-bench --doc docs/benchmarks.md
//
// Run it from the repository root. It builds bench/cmd/exactly-nexmark with
// go build and the Java peers with mvn -q package (bench/peers/pom.xml).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/exactlyonce/exactly/bench/nexmark"
)

// options are the command's flags.
type options struct {
	brokers, systems, queries, work, doc, results, brokerPIDFile string
	maxLoad                                                      float64
	events, seed                                                 uint64
	plan                                                         latencyPlan
	timeout, interval, windowedLatency, watermarkInterval        time.Duration
	kills                                                        int
	latency, profile, keepTopics                                 bool
}

// main parses the flags and runs the benchmark.
func main() {
	var o options
	flag.StringVar(&o.brokers, "brokers", os.Getenv("EXACTLY_KAFKA_BROKERS"), "Kafka bootstrap brokers, comma-separated")
	flag.StringVar(&o.systems, "systems", "exactly,flink-sql,flink,kstreams", "systems to run, comma-separated: exactly, flink-sql (Flink SQL, as Flink's Nexmark suite runs), flink (Flink's DataStream API), kstreams")
	flag.StringVar(&o.queries, "queries", strings.Join(nexmark.Queries, ","), "queries to run, comma-separated")
	flag.StringVar(&o.work, "work", ".tmp/nexmark-bench", "scratch directory: binaries, checkpoints, logs of every run")
	flag.StringVar(&o.doc, "doc", "", "write the results into this Markdown file (docs/benchmarks.md): the table of every query measured so far (--results), this run's rows replacing those of the same query and system")
	flag.StringVar(&o.results, "results", "docs/nexmark-results.json", "with --doc: the rows of every run so far, from which the table is rendered")
	flag.Float64Var(&o.maxLoad, "max-load", 1.5, "with --doc: refuse to run when the 1-minute load average at the start is above this (a figure taken under load is not quoted)")
	flag.Uint64Var(&o.events, "events", 5_000_000, "events in the backlog of the throughput runs")
	flag.Uint64Var(&o.seed, "seed", 1, "seed of the event stream")
	flag.StringVar(&o.brokerPIDFile, "broker-pidfile", "", "file holding the Kafka broker's pid (scripts/kafka.sh writes .tmp/kafka/broker.pid), to report the broker's CPU time too")
	flag.Float64Var(&o.plan.rate, "rate", 10_000, "events/s of the latency runs")
	flag.DurationVar(&o.plan.warm, "warm", 3*time.Second, "latency runs: time from the first visible output to the measured window")
	flag.DurationVar(&o.plan.span, "span", 8*time.Second, "latency runs: length of the measured window")
	flag.DurationVar(&o.plan.gap, "gap", 2*time.Second, "latency runs: time from the window's end to the SIGKILL")
	flag.DurationVar(&o.plan.others, "after", 8*time.Second, "latency runs: input produced after the SIGKILL")
	flag.DurationVar(&o.timeout, "timeout", 5*time.Minute, "longest wait for a system's output")
	flag.BoolVar(&o.latency, "latency", true, "run the latency and recovery runs")
	flag.DurationVar(&o.interval, "interval", time.Second, "every system's checkpoint interval (Kafka Streams: commit.interval.ms); the table of --doc is of 1 s, which other intervals do not write into")
	flag.DurationVar(&o.watermarkInterval, "watermark-interval", 0, "how often exactly's and Flink's sources send watermarks (exactly --watermark-interval, Flink pipeline.auto-watermark-interval); 0: their default, 200ms on both. Kafka Streams has no watermarks. Not with --doc")
	flag.DurationVar(&o.windowedLatency, "windowed-latency", 0, "the windowed queries (q5, q7, q8, q11): a latency run too, the windows closing in this span measured, the input at about the generator's pace (2.5% above --rate, whose default is that pace) so that event time follows the wall clock; 0: none. Not with --doc, whose table has no such run")
	flag.IntVar(&o.kills, "kills", 3, "stateful queries (windowed, count, q3): SIGKILLs of the second run over the backlog, each system restarted at once (0: no such run)")
	flag.BoolVar(&o.keepTopics, "keep-topics", false, "keep the run's topics on the broker (deleted after a successful run by default; a failed run keeps them)")
	flag.BoolVar(&o.profile, "profile", false, "make exactly write a CPU profile of every run (cpu.pprof in the run's directory)")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, "nexmark-bench:", err)
		os.Exit(1)
	}
}

// run builds the systems, writes the backlog, runs every query on every
// system and reports.
func run(ctx context.Context, o options) error {
	if o.brokers == "" {
		return fmt.Errorf("no broker: set --brokers or EXACTLY_KAFKA_BROKERS (scripts/kafka.sh start prints it)")
	}
	if _, err := os.Stat("go.mod"); err != nil {
		return fmt.Errorf("run from the repository root: %w", err)
	}
	// The commit of the measured tree, before the run builds it.
	started, loadBefore, commit := time.Now(), loadAverage(), gitCommit()
	if o.doc != "" && o.interval != time.Second {
		return fmt.Errorf("--interval %v with --doc: the table of %s is of 1 s intervals; run other intervals without --doc", o.interval, o.doc)
	}
	if o.doc != "" && o.watermarkInterval != 0 {
		return fmt.Errorf("--watermark-interval with --doc: the table of %s is of the systems' default watermark intervals; run it without --doc", o.doc)
	}
	if o.doc != "" && o.windowedLatency != 0 {
		return fmt.Errorf("--windowed-latency with --doc: the table of %s has no latency for the windowed queries; run it without --doc", o.doc)
	}
	if load, ok := oneMinuteLoad(loadBefore); o.doc != "" && (!ok || load > o.maxLoad) {
		return fmt.Errorf("load average %s at the start, above --max-load %.1f: a figure taken under load is not written into %s; wait for a quiet machine, or run without --doc", loadBefore, o.maxLoad, o.doc)
	}
	queries := strings.Split(o.queries, ",")
	for _, q := range queries {
		if _, err := nexmark.Expected(q, o.seed, 0, 0); err != nil {
			return err
		}
	}
	work, err := filepath.Abs(o.work)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(work, 0o755); err != nil {
		return err
	}
	repo, err := os.Getwd()
	if err != nil {
		return err
	}
	brokerPID := 0
	if o.brokerPIDFile != "" {
		pid, err := os.ReadFile(o.brokerPIDFile)
		if err != nil {
			return err
		}
		if brokerPID, err = strconv.Atoi(strings.TrimSpace(string(pid))); err != nil {
			return fmt.Errorf("%s: %w", o.brokerPIDFile, err)
		}
	}
	b, err := dial(strings.Split(o.brokers, ","))
	if err != nil {
		return err
	}
	defer b.close()
	e := env{b: b, work: work, prefix: fmt.Sprintf("nxb%d", time.Now().Unix()), seed: o.seed, brokerPID: brokerPID, timeout: o.timeout}
	syss, err := systems(repo, work, o.brokers, strings.Split(o.systems, ","), o.profile, o.interval, o.watermarkInterval)
	if err != nil {
		return err
	}
	in := e.prefix + "-events"
	if err := b.createTopics(ctx, nil, in); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "writing %d events to %s\n", o.events, in)
	if err := b.load(ctx, in, o.seed, o.events); err != nil {
		return err
	}
	var rows []row
	for _, q := range queries {
		// The reference outputs, computed once: their number is what the
		// run waits for.
		windowed := nexmark.Windowed(q)
		var (
			want     reference
			expected uint64
		)
		switch {
		case windowed:
			want.byValue = map[string]uint64{}
			if err := nexmark.CheckedOutputs(q, o.seed, 0, o.events, func(v []byte) { want.byValue[string(v)]++; expected++ }); err != nil {
				return err
			}
		case nexmark.PerEvent(q):
			if want.digest, err = nexmark.ReferenceDigest(q, o.seed, 0, o.events); err != nil {
				return err
			}
			expected = want.digest.N
		case nexmark.Updating(q):
			table, err := nexmark.ReferenceTable(q, o.seed, 0, o.events)
			if err != nil {
				return err
			}
			want = tableReference(table)
			expected = want.digest.N
		}
		if expected == 0 {
			return fmt.Errorf("%s makes no output of %d events that the run checks: use more --events", q, o.events)
		}
		for _, s := range syss {
			if why, ok := s.lacks[q]; ok {
				fmt.Fprintf(os.Stderr, "%s %s: skipped, not implemented: %s\n", s.name, q, why)
				continue
			}
			r := result{query: q, system: s.name, kill: killRun{recovery: -1}}
			fmt.Fprintf(os.Stderr, "%s %s: throughput over %d events (%d outputs)\n", s.name, q, o.events, expected)
			if r.tput, err = e.measureThroughput(ctx, s, q, in, o.events, expected, want); err != nil {
				return err
			}
			if nexmark.Stateful(q) && o.kills > 0 {
				fmt.Fprintf(os.Stderr, "%s %s: over the backlog again, with up to %d SIGKILLs\n", s.name, q, o.kills)
				if r.kill, err = e.measureKills(ctx, s, q, in, o.events, expected, want, o.kills); err != nil {
					return err
				}
			}
			if o.latency && !windowed && !nexmark.Updating(q) {
				fmt.Fprintf(os.Stderr, "%s %s: latency at %.0f events/s, SIGKILL, recovery\n", s.name, q, o.plan.rate)
				if r.lat, err = e.measureLatency(ctx, s, q, o.plan); err != nil {
					return err
				}
			}
			if windowed && o.windowedLatency > 0 {
				fmt.Fprintf(os.Stderr, "%s %s: latency of the windows closing in %v, at %.0f events/s\n", s.name, q, o.windowedLatency, windowedRate(o.plan.rate))
				if r.lat, err = e.measureWindowedLatency(ctx, s, q, o.plan, o.windowedLatency); err != nil {
					return err
				}
			}
			fmt.Fprintln(os.Stderr, r.line())
			rows = append(rows, newRow(r, o.latency, o.kills))
		}
		// Each query's rows are written as soon as it is done: a later
		// query's failure keeps them.
		if err := o.record(started, loadBefore, commit, rows); err != nil {
			return err
		}
	}
	this := &store{}
	this.add(o.runInfo(started, loadBefore, commit), rows)
	fmt.Println(this.markdown())
	if o.keepTopics {
		return nil
	}
	if err := b.deleteCreated(ctx); err != nil {
		return fmt.Errorf("deleting the run's topics (%s*): %w", e.prefix, err)
	}
	return nil
}

// runInfo describes this run for the rows it measured: its end is now.
func (o options) runInfo(started time.Time, loadBefore, commit string) runInfo {
	return runInfo{
		Date:    started.UTC().Format("2006-01-02 15:04 MST"),
		Commit:  commit,
		Load:    fmt.Sprintf("load average %s at the start, %s at the end", loadBefore, loadAverage()),
		Events:  o.events,
		Plan:    o.planText(),
		Command: commandLine(),
	}
}

// record writes the rows this run measured so far into --results and
// --doc, replacing what it wrote before; without --doc it does nothing.
func (o options) record(started time.Time, loadBefore, commit string, rows []row) error {
	if o.doc == "" {
		return nil
	}
	all, err := loadStore(o.results)
	if err != nil {
		return err
	}
	all.add(o.runInfo(started, loadBefore, commit), rows)
	if err := all.save(o.results); err != nil {
		return err
	}
	return writeSection(o.doc, section(all.markdown()))
}

// loadAverage returns the 1-, 5- and 15-minute load averages.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

// commandLine is the command that reproduces this run.
func commandLine() string {
	var args []string
	for i := 1; i < len(os.Args); i++ {
		a := os.Args[i]
		switch {
		case a == "--brokers" || a == "-brokers":
			i++ // and its value: the reader's broker comes from EXACTLY_KAFKA_BROKERS
		case strings.HasPrefix(a, "--brokers=") || strings.HasPrefix(a, "-brokers="):
		default:
			args = append(args, a)
		}
	}
	return strings.TrimSpace("go run ./bench/cmd/nexmark-bench " + strings.Join(args, " "))
}
