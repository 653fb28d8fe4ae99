// Command state-bench is the large-state benchmark of issue 12: a keyed job
// whose state grows to a target size (new keys of 1 KiB values, and a fixed
// number of updates of existing keys per insert), on the Pebble or the heap
// backend, with checkpoints to a directory or to S3. It prints, per
// checkpoint, the state size, the throughput, the checkpoint's duration,
// the bytes it uploaded and the process's RSS, then a summary by state
// size. With --restore it then starts the job again from the last
// checkpoint with an empty state directory (a new machine) and measures
// the restore; with --download it also downloads the checkpoint's shared
// files from S3 with a plain client, for the server's bandwidth (into
// io.Discard, then into files beside the restore's, for the disk's). With
// --system flink it runs the same job on Apache Flink with RocksDB and
// incremental checkpoints (bench/peers/flink, StateBench.java) instead.
// docs/benchmarks.md records results and the commands.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	_ "net/http/pprof"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"runtime/pprof"
	"strings"
	"syscall"
	"time"

	"github.com/exactlyonce/exactly/state"
)

// config is the benchmark's flags.
type config struct {
	system      string
	backend     string
	budgetMiB   int64
	processMiB  int64
	timers      bool
	downloads   int
	stateGB     float64
	work        workload
	rate        float64
	parallelism int
	interval    time.Duration
	checkpoints string
	dir         string
	rssCapMiB   int64
	restore     bool
	restoreOnly bool
	download    bool
	cleanup     bool
	bucketGB    float64
	flinkPort   int
	flinkHeap   string
	cpuProfile  string
	pprofAddr   string
}

func main() {
	var c config
	flag.StringVar(&c.system, "system", "exactly", "exactly, or flink (bench/peers/flink, RocksDB with incremental checkpoints)")
	flag.StringVar(&c.backend, "state", "pebble", "exactly's keyed-state backend: pebble or heap")
	flag.Int64Var(&c.budgetMiB, "memory-budget-mib", 0, "pebble: state.BackendConfig.MemoryBudget per subtask, MiB; 0: the default (256 MiB)")
	flag.Int64Var(&c.processMiB, "process-memory-mib", 0, "pebble: a state.Memory of this many MiB that every subtask shares (block cache, write buffers, value caches) instead of --memory-budget-mib each; set GOMEMLIMIT beside it for the Go heap")
	flag.BoolVar(&c.timers, "timers", false, "each insert also registers a processing-time timer for its key a year ahead (never fired): as many pending timers as keys")
	flag.IntVar(&c.downloads, "download-concurrency", 0, "state.BackendConfig.DownloadConcurrency: shared files a subtask's restore downloads at a time; 0: the default (state.DefaultDownloadConcurrency)")
	flag.Float64Var(&c.stateGB, "state-gb", 1, "logical state to reach, GiB: keys × --value-bytes")
	flag.IntVar(&c.work.ValueBytes, "value-bytes", 1024, "bytes of every value")
	flag.Uint64Var(&c.work.UpdatesPerInsert, "updates-per-insert", 1, "updates of existing keys after each new key")
	flag.Float64Var(&c.rate, "rate", 0, "events per second; 0 means as fast as possible")
	flag.IntVar(&c.parallelism, "parallelism", 2, "subtasks of the source and of the keyed operator")
	flag.DurationVar(&c.interval, "interval", 10*time.Second, "checkpoint interval")
	flag.StringVar(&c.checkpoints, "checkpoints", "", "checkpoint storage: a directory or s3://bucket/prefix?endpoint=host:port (default <dir>/checkpoints; flink: a directory only)")
	flag.StringVar(&c.dir, "dir", ".tmp/state-bench", "working directory: local state, logs")
	flag.Int64Var(&c.rssCapMiB, "rss-cap-mib", 0, "fail the run when the process's RSS (VmRSS) exceeds this many MiB; 0: no cap")
	flag.BoolVar(&c.restore, "restore", false, "exactly: after the run, restore its last checkpoint into an empty state directory and measure it")
	flag.BoolVar(&c.restoreOnly, "restore-only", false, "exactly: run no job; restore the latest checkpoint in --checkpoints (of a run stopped by SIGKILL, or with --cleanup=false) and measure it")
	flag.BoolVar(&c.download, "download", false, "exactly with s3:// checkpoints: after the run, download its shared files with a plain S3 client, discarding them and then into files, and measure it")
	flag.BoolVar(&c.cleanup, "cleanup", true, "delete the state directories and the checkpoints (directory or S3 prefix) at the end")
	flag.Float64Var(&c.bucketGB, "bucket-gb", 1, "state-size step of the summary table, GiB")
	flag.IntVar(&c.flinkPort, "flink-rest-port", 31081, "flink: the MiniCluster's REST port, polled for checkpoint statistics")
	flag.StringVar(&c.flinkHeap, "flink-heap", "1g", "flink: the JVM's -Xmx")
	flag.StringVar(&c.pprofAddr, "pprof", "", "serve net/http/pprof on this address (such as 127.0.0.1:6060) during the run, for heap profiles")
	flag.StringVar(&c.cpuProfile, "cpuprofile", "", "exactly: write a CPU profile of the run (restore and download included) to this file")
	flag.Parse()
	c.work.Seed = 1
	if err := c.validate(); err != nil {
		fmt.Fprintln(os.Stderr, "state-bench:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, c); err != nil {
		fmt.Fprintln(os.Stderr, "state-bench:", err)
		os.Exit(1)
	}
}

// validate checks the flags and derives the workload's number of keys.
func (c *config) validate() error {
	switch {
	case c.system != "exactly" && c.system != "flink":
		return fmt.Errorf("--system is %q: use exactly or flink", c.system)
	case c.backend != "pebble" && c.backend != "heap":
		return fmt.Errorf("--state is %q: use pebble or heap", c.backend)
	case c.budgetMiB < 0:
		return fmt.Errorf("--memory-budget-mib is %d: use 0 for the default or a size in MiB", c.budgetMiB)
	case c.processMiB < 0 || c.processMiB > 0 && c.budgetMiB > 0:
		return fmt.Errorf("--process-memory-mib is %d with --memory-budget-mib %d: give a size in MiB to one of them, 0 to the other", c.processMiB, c.budgetMiB)
	case c.downloads < 0:
		return fmt.Errorf("--download-concurrency is %d: use 0 for the default or a positive number", c.downloads)
	case c.stateGB <= 0:
		return fmt.Errorf("--state-gb is %v: use a positive size", c.stateGB)
	case c.work.ValueBytes < 8:
		return fmt.Errorf("--value-bytes is %d: use at least 8 (a value starts with its write count)", c.work.ValueBytes)
	case c.parallelism < 1:
		return fmt.Errorf("--parallelism is %d: use at least 1", c.parallelism)
	case c.interval <= 0:
		return fmt.Errorf("--interval is %v: use a positive duration", c.interval)
	case c.bucketGB <= 0:
		return fmt.Errorf("--bucket-gb is %v: use a positive size", c.bucketGB)
	case c.system == "flink" && strings.HasPrefix(c.checkpoints, "s3://"):
		return errors.New("--checkpoints: the Flink peer checkpoints to a local directory only (Flink's S3 file systems are plugins)")
	case c.timers && c.system != "exactly":
		return errors.New("--timers runs on exactly only")
	case (c.restore || c.restoreOnly || c.download) && c.system != "exactly":
		return errors.New("--restore, --restore-only and --download measure exactly only")
	case c.download && !strings.HasPrefix(c.checkpoints, "s3://"):
		return errors.New("--download needs --checkpoints s3://…")
	}
	c.work.Keys = uint64(c.stateGB * gib / float64(c.work.ValueBytes))
	if c.checkpoints == "" {
		c.checkpoints = filepath.Join(c.dir, "checkpoints")
	}
	return nil
}

// budget returns the Pebble backend's memory budget per subtask.
func (c config) budget() int64 {
	if c.budgetMiB == 0 {
		return state.DefaultMemoryBudget
	}
	return c.budgetMiB << 20
}

// run runs the benchmark that c selects.
func run(ctx context.Context, c config) error {
	if err := os.MkdirAll(c.dir, 0o755); err != nil {
		return err
	}
	limit := "none"
	if l := debug.SetMemoryLimit(-1); l != 1<<63-1 {
		limit = bytesStr(l)
	}
	backend := c.backend
	if backend == "pebble" {
		backend = fmt.Sprintf("pebble, memory budget %s per subtask", bytesStr(c.budget()))
		if c.processMiB > 0 {
			backend = fmt.Sprintf("pebble, memory budget %s shared by the subtasks", bytesStr(c.processMiB<<20))
		}
	}
	if c.system == "flink" {
		backend = "rocksdb, incremental checkpoints"
	}
	fmt.Printf("state-bench: %s (%s), %d keys × %d B = %s of values, %d updates per insert (%d events), parallelism %d, checkpoints every %v to %s, rate %s, GOMEMLIMIT %s, RSS cap %d MiB, %s\n",
		c.system, backend, c.work.Keys, c.work.ValueBytes, bytesStr(int64(c.work.Keys)*int64(c.work.ValueBytes)),
		c.work.UpdatesPerInsert, c.work.events(), c.parallelism, c.interval, c.checkpoints, rateOrMax(c.rate), limit, c.rssCapMiB,
		time.Now().UTC().Format("2006-01-02 15:04 UTC"))
	if c.timers {
		fmt.Printf("state-bench: each insert registers a processing-time timer a year ahead: %d pending timers at the end\n", c.work.Keys)
	}
	if c.system == "flink" {
		return runFlink(ctx, c)
	}
	if c.pprofAddr != "" {
		go func() { _ = http.ListenAndServe(c.pprofAddr, nil) }()
	}
	if c.cpuProfile != "" {
		f, err := os.Create(c.cpuProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	return runExactly(ctx, c)
}

func rateOrMax(r float64) string {
	if r == 0 {
		return "unlimited"
	}
	return rateStr(r) + " events/s"
}
