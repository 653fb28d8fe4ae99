// Command exactly runs exactly-once streaming jobs. Today it runs the demo
// job on embedded defaults; see `exactly demo --help`.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/exactlyonce/exactly/checkpoint"
	"github.com/exactlyonce/exactly/cmd/exactly/internal/demo"
	"github.com/exactlyonce/exactly/internal/crashtest"
	"github.com/exactlyonce/exactly/metrics"
	"github.com/exactlyonce/exactly/stream"
)

const usage = `exactly — an exactly-once stream-processing engine for Go

Usage:
  exactly demo [flags]    run the demo job on embedded sources and sinks
  exactly run FILE        run the pipeline a YAML file describes (see docs/pipelines.md)
  exactly validate FILE   check a pipeline file without running it
  exactly bench [flags]   measure the engine's throughput (see docs/benchmarks.md)
  exactly torture [flags] prove exactly-once under injected faults (see docs/reliability.md)
  exactly status [flags]  print the status of a running job (its control API)
  exactly savepoint [flags]
                          take a savepoint of a running job
  exactly stop [--savepoint] [flags]
                          stop a running job, after a savepoint with --savepoint
  exactly checkpoints ls|inspect DIR_OR_URL
                          list a job's checkpoints, or tell what one holds (offline)
  exactly version         print the version the binary was built from

Run 'exactly <command> --help' for the flags of a command.
`

func main() {
	if len(os.Args) < 2 {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var err error
	switch os.Args[1] {
	case "demo":
		err = runDemo(ctx, os.Args[2:], os.Stdout)
	case "run":
		err = runPipeline(ctx, os.Args[2:], os.Stdout)
	case "validate":
		err = runValidate(os.Args[2:], os.Stdout)
	case "bench":
		err = runBench(ctx, os.Args[2:], os.Stdout)
	case "torture":
		err = runTorture(ctx, os.Args[2:], os.Stdout)
	case "status", "savepoint", "stop":
		err = runControl(ctx, os.Args[1], os.Args[2:], os.Stdout)
	case "checkpoints":
		err = runCheckpoints(os.Args[2:], os.Stdout)
	case "version", "--version":
		fmt.Println(version())
		return
	case "-h", "--help", "help":
		fmt.Print(usage)
		return
	default:
		fmt.Fprintf(os.Stderr, "exactly: unknown command %q\n\n%s", os.Args[1], usage)
		os.Exit(2)
	}
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, errorLine(err))
		os.Exit(1)
	}
}

// errorLine is the line the command prints for err: prefixed "exactly: "
// once, though the engine's own errors start with it too.
func errorLine(err error) string {
	return "exactly: " + strings.TrimPrefix(err.Error(), "exactly: ")
}

const demoUsage = `Usage: exactly demo [flags]

Runs the demo job on embedded defaults, with no external service:

  generated orders (deterministic, seeded)
    → per-customer running totals in keyed state
    → an exactly-once SQLite table and exactly-once CSV files

It prints progress while it runs and ends with a verification report: orders
in, rows out per sink, missing and duplicated orders, and whether every
customer's running total equals the total computed directly from the input.

With --chaos N the job runs in a child process that is killed with SIGKILL N
times, at random moments and at points of the checkpoint protocol (barrier
injected, snapshot taken, checkpoint metadata written but not yet committed,
committed), and restarted from the last checkpoint each time.

Flags:
`

type demoFlags struct {
	cfg         demo.Config
	chaos       int
	keep        bool
	seed        uint64
	child       bool
	metricsAddr string
}

func parseDemoFlags(args []string, out io.Writer) (demoFlags, error) {
	var f demoFlags
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	fs.StringVar(&f.cfg.Dir, "dir", "exactly-demo", "directory for checkpoints, the SQLite database and the output files")
	fs.Uint64Var(&f.cfg.Events, "events", 200_000, "number of orders to generate")
	fs.IntVar(&f.cfg.Customers, "customers", 1_000, "number of distinct customers")
	fs.Uint64Var(&f.cfg.Seed, "seed", 1, "seed of the generated orders")
	fs.Float64Var(&f.cfg.Rate, "rate", 0, "orders per second (0: as fast as possible; with --chaos the default is 50000)")
	fs.IntVar(&f.cfg.Parallelism, "parallelism", 2, "parallel subtasks of each operator")
	fs.StringVar(&f.cfg.State, "state", "heap", "keyed-state backend: heap (in memory) or pebble (on disk, under --dir)")
	fs.DurationVar(&f.cfg.CheckpointInterval, "interval", 500*time.Millisecond, "checkpoint interval: output becomes visible at this pace")
	fs.IntVar(&f.chaos, "chaos", 0, "kill the job with SIGKILL this many times at random moments and restart it")
	fs.Uint64Var(&f.seed, "chaos-seed", 0, "seed of the --chaos schedule (0: random; printed so a run can be replayed)")
	fs.BoolVar(&f.keep, "resume", false, "keep the directory's earlier state and resume from its last checkpoint instead of starting afresh (a directory the demo did not create is never cleared: it is refused)")
	fs.BoolVar(&f.child, "child", false, "internal: run as the child of a --chaos run")
	fs.StringVar(&f.metricsAddr, "metrics-addr", "", "serve the job's Prometheus metrics at http://ADDR/metrics (e.g. 127.0.0.1:9464; empty: off)")
	if err := parseFlags(fs, demoUsage, args, out); err != nil {
		return f, err
	}
	if f.chaos < 0 {
		return f, fmt.Errorf("demo: --chaos is %d: use 0 or a positive number of kills", f.chaos)
	}
	if f.chaos > 0 && f.metricsAddr != "" {
		return f, errors.New("demo: --metrics-addr and --chaos together: the killed child processes would serve the metrics; drop one")
	}
	if f.chaos > 0 && f.cfg.Rate == 0 {
		f.cfg.Rate = 50_000
	}
	return f, f.cfg.Validate()
}

func runDemo(ctx context.Context, args []string, out io.Writer) error {
	f, err := parseDemoFlags(args, out)
	if err != nil {
		return err
	}
	f.cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	if f.child {
		f.cfg.Probe = crashtest.Probe()
		return demo.Run(ctx, f.cfg, nil)
	}
	if err := demo.PrepareDir(f.cfg.Dir, f.keep); err != nil {
		return err
	}
	fmt.Fprintf(out, "exactly demo: %d orders, %d customers, parallelism %d, checkpoints every %v, output in %s\n",
		f.cfg.Events, f.cfg.Customers, f.cfg.Parallelism, f.cfg.CheckpointInterval, f.cfg.Dir)
	if f.metricsAddr != "" {
		stop, err := serveMetrics(f.metricsAddr, &f.cfg, out)
		if err != nil {
			return err
		}
		defer stop()
	}
	start := time.Now()
	if f.chaos > 0 {
		if err := superviseDemo(f, args, out); err != nil {
			return err
		}
	} else if err := demo.Run(ctx, f.cfg, func(m *stream.Metrics) { printProgress(out, f.cfg.Events, m, start) }); err != nil {
		return err
	}
	fmt.Fprintf(out, "done in %v\n", time.Since(start).Round(time.Millisecond))
	rep, err := demo.Verify(f.cfg)
	if err != nil {
		return err
	}
	rep.Print(out)
	if !rep.OK() {
		return errors.New("demo: verification failed")
	}
	return nil
}

// serveMetrics serves the Prometheus metrics of the job c runs at
// http://addr/metrics from the moment it starts; stop closes the server.
func serveMetrics(addr string, c *demo.Config, out io.Writer) (stop func(), err error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("demo: --metrics-addr %s: %w: give a free host:port", addr, err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})) // process_start_time_seconds shows crashes
	var once sync.Once
	c.OnStart = func(m *stream.Metrics) { once.Do(func() { reg.MustRegister(metrics.NewCollector("demo", m)) }) }
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			fmt.Fprintf(out, "metrics server: %v\n", err)
		}
	}()
	fmt.Fprintf(out, "metrics at http://%s/metrics\n", ln.Addr())
	return func() { _ = srv.Close() }, nil
}

func printProgress(out io.Writer, total uint64, m *stream.Metrics, start time.Time) {
	var last checkpoint.ID
	if c := m.LastCheckpoint.Load(); c != nil {
		last = c.ID
	}
	fmt.Fprintf(out, "  %6.1fs  orders read %9d / %d  rows written %9d  checkpoints %4d (last #%d)  restarts %d\n",
		time.Since(start).Seconds(), m.Records("orders"), total, m.Records("sqlite"), m.Completed.Load(), last, m.Restarts.Load())
}

// superviseDemo runs the demo in child processes and kills them f.chaos times.
func superviseDemo(f demoFlags, args []string, out io.Writer) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	childArgs := append([]string{"demo"}, args...)
	childArgs = append(childArgs, "--child", "--resume")
	command := func(ctx context.Context) *exec.Cmd { return exec.CommandContext(ctx, self, childArgs...) }
	logf := func(format string, a ...any) { fmt.Fprintf(out, "  "+format+"\n", a...) }
	rep, err := crashtest.Supervise(crashtest.Options{Kills: f.chaos, Seed: f.seed, MaxDelay: 2 * time.Second, Timeout: 10 * time.Minute}, command, logf)
	fmt.Fprintf(out, "chaos: %v\n", rep)
	return err
}
