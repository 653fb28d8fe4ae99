package torture

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/exactlyonce/exactly/checkpoint"
	"github.com/exactlyonce/exactly/connectors/file"
	"github.com/exactlyonce/exactly/connectors/kafka"
	"github.com/exactlyonce/exactly/connectors/postgres"
	"github.com/exactlyonce/exactly/internal/crashtest"
	"github.com/exactlyonce/exactly/state"
	"github.com/exactlyonce/exactly/stream"
)

// envJob carries the job's configuration (JSON) from the supervisor to
// the job process.
const envJob = "EXACTLY_TORTURE_JOB"

// Names of the job and its sinks: the sinks tag what they leave behind
// with them, and the checker looks for it.
const (
	jobName          = "torture"
	sinkKafka        = "kafka"
	sinkFenced       = "pg-fenced"
	sinkPrepared     = "pg-prepared"
	sinkFiles        = "files"
	sinkWindows      = "kafka-windows"
	jobParallelism   = 2
	inputPartitions  = 4
	outputPartitions = 3
)

// jobConfig is what the job process needs.
type jobConfig struct {
	Brokers     string // Kafka bootstrap address, through the fault proxy when there is one
	Input       string // input topic
	Output      string // output topic
	TxnPrefix   string // transactional id prefix of the Kafka sink
	Windows     string // output topic of the windowed branch
	WindowsTxn  string // transactional id prefix of the windowed branch's Kafka sink
	DSN         string // PostgreSQL, through the fault proxy when there is one
	Fenced      string // table of the fenced-mode sink
	Prepared    string // table of the prepared-mode sink
	Files       string // directory of the file sink
	Checkpoints string // checkpoint directory or s3:// URL
	StateDir    string // the Pebble backend's directory; "": keyed state on the heap
	Progress    string // file the job appends "c" to per completed checkpoint and "r" per restart
	Rate        float64
	Interval    time.Duration
	// TxnTimeout is the Kafka sinks' TransactionTimeout; 0: five minutes,
	// which outlasts every fault but FaultTxnOutage.
	TxnTimeout time.Duration
	// Cluster runs the job with cluster.RunJob, as one instance of a
	// cluster of processes (Config.Instances), under the name Job and the
	// consumer group Group: it reads its input unbounded (the loader ends
	// each partition with an end marker, whose time closes every window),
	// its Kafka sinks use the default transactional id prefixes (a fixed
	// one cannot be shared by the tasks of a stage), and it has no file
	// sink (the tasks of a stage cannot share a directory).
	Cluster bool
	Job     string
	Group   string
	// Unthrottle is a file whose existence lifts the throttle (Rate): the
	// supervisor of a cluster run creates it once every fault is made, so
	// that the running instances read the rest at full speed.
	Unthrottle string
}

// envInstance names the instance process of a cluster run (Config.Instances);
// envInstanceDir is its working directory.
const (
	envInstance    = "EXACTLY_TORTURE_INSTANCE"
	envInstanceDir = "EXACTLY_TORTURE_INSTANCE_DIR"
)

// endMarker is the value of the record that ends each input partition of
// a cluster run; the job drops it after reading its time.
const endMarker = "end"

// name returns the job's name.
func (c jobConfig) name() string {
	if c.Cluster {
		return c.Job
	}
	return jobName
}

// IsChild reports whether this process is a torture job started by [Run].
func IsChild() bool { return os.Getenv(envJob) != "" }

// RunChild runs the torture job in this process, as configured by the
// supervisor, until its bounded input is done and committed. SIGTERM (or
// the end of ctx) stops it cleanly: the job commits what its last
// completed checkpoint covers and RunChild returns its error (wrapping
// context.Canceled, or stream.ErrCommitPending when that commit failed).
func RunChild(ctx context.Context) error {
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGTERM)
	defer stop()
	// A SIGTERM that arrives once the job has ended, while the process
	// exits, must not kill it by the default action: the supervisor judges
	// the exit status. This channel keeps SIGTERM caught until the exit.
	signal.Notify(make(chan os.Signal, 1), syscall.SIGTERM)
	var c jobConfig
	if err := json.Unmarshal([]byte(os.Getenv(envJob)), &c); err != nil {
		return fmt.Errorf("torture: job configuration in %s: %w", envJob, err)
	}
	progress, err := os.OpenFile(c.Progress, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	defer progress.Close()
	if c.Cluster && c.StateDir != "" {
		// Each instance keeps its tasks' Pebble databases in its own
		// working directory, which a fault may wipe.
		c.StateDir = filepath.Join(os.Getenv(envInstanceDir), "pebble")
	}
	j, err := buildJob(c)
	if err != nil {
		return err
	}
	opts := jobOptions(c, progress)
	if c.Cluster {
		return runInstance(ctx, c, j, opts)
	}
	r, err := j.Start(ctx, opts)
	if err != nil {
		return err
	}
	done := make(chan error, 1)
	go func() { done <- r.Wait() }()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	var restarts int64
	for {
		select {
		case err := <-done:
			return err
		case <-tick.C:
			if n := r.Metrics().Restarts.Load(); n > restarts {
				_, _ = progress.WriteString(strings.Repeat("r", int(n-restarts)))
				restarts = n
			}
		}
	}
}

// jobOptions returns the options the torture job runs with: it appends a
// "c" to progress per completed checkpoint, and its probe kills the
// process where crashtest asked.
func jobOptions(c jobConfig, progress *os.File) stream.Options {
	kill := crashtest.Probe()
	return stream.Options{
		CheckpointDir:      c.Checkpoints,
		CheckpointInterval: c.Interval,
		CheckpointTimeout:  checkpointTimeout,
		// A short lease, so that a paused process becomes a zombie within
		// seconds (the zombie fault), and a wait of several (see
		// ownershipWait).
		OwnershipLease: ownershipLease,
		OwnershipWait:  ownershipWait,
		// Small batches: the throttle sleeps inside the source's task, and
		// a barrier waits behind the batch being throttled.
		BatchSize: 32,
		Logger:    slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
		Restart:   stream.RestartStrategy{MaxAttempts: 1000, InitialBackoff: 100 * time.Millisecond, MaxBackoff: 2 * time.Second},
		Probe: func(p stream.ProbePoint, id checkpoint.ID) {
			if p == stream.ProbeMetadataWritten {
				_, _ = progress.WriteString("c")
			}
			if kill != nil {
				kill(p, id)
			}
		},
	}
}

// buildJob builds Kafka input (with event time) → throttle → keyed totals
// → four exactly-once sinks: Kafka, PostgreSQL fenced, PostgreSQL prepared,
// files; and throttle → keyed event-time windows → a fifth, Kafka.
func buildJob(c jobConfig) (*stream.Job, error) {
	conn := kafka.Conn{Brokers: []string{c.Brokers}}
	src, err := kafka.NewSource(kafka.SourceOptions{Conn: conn, Topics: []string{c.Input}, Bounded: !c.Cluster}, kafka.String())
	if err != nil {
		return nil, err
	}
	j := stream.New(c.name())
	if c.StateDir != "" {
		j.SetStateBackend(state.BackendConfig{Kind: state.PebbleBackend, Dir: c.StateDir})
	}
	lim := newLimiter(c.Rate, c.Unthrottle)
	// The loader stamps each record with its event's time, in id order per
	// partition: no record trails its partition's newest, none is late.
	in := stream.SourceWithEventTime(j, "input", src, stream.EventTime[kafka.Record[string]]{
		Timestamp: func(r kafka.Record[string]) time.Time { return r.Timestamp },
	}, stream.Parallelism(jobParallelism))
	if c.Cluster {
		in = stream.Filter(in, func(r kafka.Record[string]) bool { return r.Value != endMarker }, stream.Name("drop-end-markers"))
	}
	events := stream.Map(in, func(r kafka.Record[string]) Event {
		lim.wait()
		e, err := parseEvent(r.Value)
		if err != nil || !r.Timestamp.Equal(e.Time()) {
			// The input is ours: a malformed record, or one whose
			// timestamp (the watermarks' event time) is not its event's
			// time (the windows'), is a bug. The checker reports it as
			// unexpected.
			return Event{ID: -1, Key: r.Value}
		}
		return e
	})
	outs := Totals(events, jobParallelism)

	ks, err := kafkaSink(conn, c, c.Output, c.sinkPrefix(c.TxnPrefix), func(o Out) kafka.Message {
		return kafka.Message{Key: []byte(o.Key), Value: appendOut(nil, o)}
	})
	if err != nil {
		return nil, err
	}
	stream.SinkTo(outs, sinkKafka, ks, stream.Parallelism(jobParallelism))
	for _, pg := range []struct {
		name, table string
		mode        postgres.CommitMode
	}{{sinkFenced, c.Fenced, postgres.Fenced}, {sinkPrepared, c.Prepared, postgres.Prepared}} {
		s, err := postgres.NewSink(postgres.Options{DSN: c.DSN, Table: pg.table, Columns: outColumns, Mode: pg.mode},
			func(o Out, row []any) []any { return append(row, o.ID, o.Key, o.Seq, o.Amount, o.Total, o.Gaps) })
		if err != nil {
			return nil, err
		}
		stream.SinkTo(outs, pg.name, s, stream.Parallelism(jobParallelism))
	}
	if !c.Cluster {
		fs, err := file.NewSink(c.Files, appendOut, file.SinkOptions{Prefix: "out", Suffix: ".csv"})
		if err != nil {
			return nil, err
		}
		stream.SinkTo(outs, sinkFiles, fs, stream.Parallelism(jobParallelism))
	}

	// Each window's record is stamped with the window's last millisecond:
	// event time long past, which is why the topic keeps records forever
	// (retention.ms=-1, see load).
	ws, err := kafkaSink(conn, c, c.Windows, c.sinkPrefix(c.WindowsTxn), func(w WindowOut) kafka.Message {
		return kafka.Message{Key: []byte(w.Key), Value: appendWindow(nil, w), Timestamp: time.UnixMilli(w.Start).Add(windowSize - time.Millisecond)}
	})
	if err != nil {
		return nil, err
	}
	stream.SinkTo(Windows(events, jobParallelism), sinkWindows, ws, stream.Parallelism(jobParallelism))
	return j, nil
}

// sinkPrefix returns the transactional id prefix of a Kafka sink: prefix,
// or in a cluster run the default one (empty).
func (c jobConfig) sinkPrefix(prefix string) string {
	if c.Cluster {
		return ""
	}
	return prefix
}

// kafkaSink returns an exactly-once Kafka sink writing encode's messages
// to topic under the transactional id prefix txnPrefix, with transactions
// that outlast the faults (but FaultTxnOutage's, which the sink survives
// by reproducing the aborted transactions) and a pool of ids that
// outlasts checkpoints failing in a row.
func kafkaSink[T any](conn kafka.Conn, c jobConfig, topic, txnPrefix string, encode func(T) kafka.Message) (*kafka.Sink[T], error) {
	return kafka.NewSink(kafka.SinkOptions{
		Conn: conn, Topic: topic, TransactionalIDPrefix: txnPrefix,
		TransactionTimeout: cmp.Or(c.TxnTimeout, 5*time.Minute), ReproduceAborted: !c.Cluster,
		CheckpointInterval: c.Interval, PoolSize: 20,
	}, func(v T) (kafka.Message, error) { return encode(v), nil })
}

// outColumns are the columns the PostgreSQL sinks fill, in the order of
// their row function.
var outColumns = []postgres.Column{
	{Name: "id", Type: "bigint"}, {Name: "key", Type: "text"}, {Name: "seq", Type: "bigint"},
	{Name: "amount", Type: "bigint"}, {Name: "total", Type: "bigint"}, {Name: "gaps", Type: "bigint"},
}

// limiter spaces calls to wait at a rate per second shared by every
// caller; a zero rate never waits, nor does any once the file lift names
// exists (looked for every second).
type limiter struct {
	mu      sync.Mutex
	every   time.Duration
	next    time.Time
	lift    string
	checked time.Time
}

func newLimiter(rate float64, lift string) *limiter {
	if rate <= 0 {
		return &limiter{}
	}
	return &limiter{every: time.Duration(float64(time.Second) / rate), lift: lift}
}

// wait returns when the caller's turn has come.
func (l *limiter) wait() {
	l.mu.Lock()
	if l.every == 0 {
		l.mu.Unlock()
		return
	}
	now := time.Now()
	if l.lift != "" && now.Sub(l.checked) > time.Second {
		l.checked = now
		if _, err := os.Stat(l.lift); err == nil {
			l.every = 0
			l.mu.Unlock()
			return
		}
	}
	if l.next.Before(now) {
		l.next = now
	}
	l.next = l.next.Add(l.every)
	at := l.next
	l.mu.Unlock()
	if d := time.Until(at); d > time.Millisecond {
		time.Sleep(d)
	}
}
