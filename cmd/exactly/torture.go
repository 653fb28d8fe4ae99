package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/exactlyonce/exactly/cmd/exactly/internal/torture"
)

const tortureUsage = `Usage: exactly torture [flags]

Proves exactly-once end to end against real services: loads a deterministic
workload (events with unique ids and per-key sequence numbers) into a Kafka
topic, runs a job with keyed state (running total, last sequence per key)
writing to Kafka (exactly-once), PostgreSQL (fenced and prepared tables) and
files, and per-key event-time windows written to a second Kafka topic, in
child processes, and injects faults at random from the printed seed:
SIGKILLs of the job at protocol points and at random moments, broker restarts
(scripts/kafka.sh restart), PostgreSQL immediate restarts
(scripts/postgres.sh restart-immediate), network latency, resets, timeouts and
partitions through toxiproxy (scripts/toxiproxy.sh), an unwritable
(chattr +i) or full (tmpfs) checkpoint directory, and faults of the job's
processes: a clean stop (SIGTERM) during a sink outage, a second instance
on the same checkpoint directory, a zombie (SIGSTOP past the ownership
lease, a new instance, SIGCONT), a flipped byte in the newest completed
checkpoint (the start must fail naming the file; the byte is restored) and a
stuck PostgreSQL write (it must end in a failover), commits rejected by a
CHECK constraint (a clean stop whose commit fails, a start before the fix,
then the fix) and a rerun from scratch over the sinks (it must be refused
with sink.ErrForeignProgress). It then reads every sink
and reports missing, duplicated and out-of-order events, aborted data visible
to read_committed readers, wrong totals or window contents and lingering
transactions, deletes the topics and tables it created, and exits
non-zero on any anomaly or broken rule. Disk faults need root. The service scripts run with
this process's environment (KAFKA_DIR, EXACTLY_POSTGRES_DATA, ...). See
docs/reliability.md.

With --instances N the job runs as a cluster job (cluster.RunJob: stages
joined by repartition topics, its Kafka sinks and both PostgreSQL sinks, no
file sink) on N instance processes, and the process faults are instance
faults: SIGKILL of an instance, an instance restarted to kill itself at each
protocol point, SIGSTOP past the session timeout then SIGCONT (the zombie's
outcome is counted), SIGTERM (a clean leave, which must exit 0), a new
instance joining, two instances killed at once, and an instance restarted
with its working directory wiped; mixed with the service and network faults.

Flags:
`

func runTorture(ctx context.Context, args []string, out io.Writer) error {
	if torture.IsChild() {
		return torture.RunChild(ctx)
	}
	var c torture.Config
	var reportFile string
	fs := flag.NewFlagSet("torture", flag.ContinueOnError)
	fs.IntVar(&c.Events, "events", 100_000, "number of input events")
	fs.IntVar(&c.Keys, "keys", 500, "number of distinct keys")
	fs.IntVar(&c.Faults, "faults", 50, "least number of faults to inject (SIGKILLs included)")
	fs.Uint64Var(&c.Seed, "seed", 0, "seed of the input and of the fault schedule (0: random; printed)")
	fs.StringVar(&reportFile, "report", "torture-report.txt", "file the report is written to")
	fs.StringVar(&c.Kafka, "kafka", os.Getenv("EXACTLY_KAFKA_BROKERS"), "Kafka broker address (default $EXACTLY_KAFKA_BROKERS)")
	fs.StringVar(&c.Postgres, "postgres", os.Getenv("EXACTLY_POSTGRES_DSN"), "PostgreSQL URL (default $EXACTLY_POSTGRES_DSN)")
	fs.StringVar(&c.Toxiproxy, "toxiproxy", os.Getenv("EXACTLY_TOXIPROXY"), "toxiproxy API address (default $EXACTLY_TOXIPROXY; empty: no network faults)")
	fs.IntVar(&c.KafkaProxyPort, "kafka-proxy-port", 0, "port toxiproxy listens on for the broker (default: broker port + 3)")
	fs.IntVar(&c.PostgresProxyPort, "postgres-proxy-port", 0, "port toxiproxy listens on for PostgreSQL (default: database port + 10)")
	fs.DurationVar(&c.Duration, "duration", 0, "stop injecting faults after this long (0: no limit)")
	fs.Float64Var(&c.Rate, "rate", 1000, "events per second the job processes at most, so faults hit a busy job (0: no limit)")
	fs.DurationVar(&c.Interval, "interval", 300*time.Millisecond, "checkpoint interval")
	fs.StringVar(&c.Dir, "dir", "exactly-torture", "working directory: checkpoints and file output (cleared first)")
	fs.BoolVar(&c.NoDisk, "no-disk-faults", false, "no checkpoint directory faults (they need root)")
	fs.IntVar(&c.Instances, "instances", 0, "run the job as a cluster job on this many instance processes, with instance faults (0: one process)")
	fs.BoolVar(&c.Pebble, "pebble", false, "keep the job's keyed state in the Pebble backend (on disk) instead of on the heap")
	fs.StringVar(&c.S3, "s3", "", "endpoint of the S3 server (scripts/s3.sh prints it as EXACTLY_S3): keep the checkpoints there and make object-storage faults instead of checkpoint directory faults")
	if err := parseFlags(fs, tortureUsage, args, out); err != nil {
		return err
	}
	if c.Seed == 0 {
		c.Seed = rand.Uint64()
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	if err := os.RemoveAll(c.Dir); err != nil {
		return fmt.Errorf("torture: clearing --dir %s: %w", c.Dir, err)
	}
	fmt.Fprintf(out, "exactly torture: seed %d (replay: %s)\n", c.Seed, replayCommand(fs, args, c.Seed))
	c.Logf = func(format string, a ...any) { fmt.Fprintf(out, "  "+format+"\n", a...) }
	command := func(ctx context.Context) *exec.Cmd { return exec.CommandContext(ctx, self, "torture") }
	rep, err := torture.Run(ctx, c, command)
	if rep != nil {
		var b strings.Builder
		fmt.Fprintf(&b, "command: exactly torture %s\n", strings.Join(args, " "))
		rep.Print(&b)
		if err != nil {
			fmt.Fprintf(&b, "error: %v\n", err)
		}
		fmt.Fprint(out, b.String())
		if werr := os.WriteFile(reportFile, []byte(b.String()), 0o644); werr != nil {
			err = errors.Join(err, werr)
		}
	}
	if err == nil && rep.Anomalies() > 0 {
		err = fmt.Errorf("torture: %d anomalies (seed %d)", rep.Anomalies(), c.Seed)
	}
	return err
}

// replayCommand is the command that runs the torture of args again: args
// with --seed seed added, unless they set a seed already (fs has parsed
// them).
func replayCommand(fs *flag.FlagSet, args []string, seed uint64) string {
	seeded := false
	fs.Visit(func(f *flag.Flag) { seeded = seeded || f.Name == "seed" })
	if !seeded {
		args = append(slices.Clip(args), "--seed", strconv.FormatUint(seed, 10))
	}
	return strings.Join(append([]string{"exactly", "torture"}, args...), " ")
}
