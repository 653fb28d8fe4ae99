package kafka

import (
	"fmt"
	"regexp"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Guarantee is the delivery guarantee of a [Sink].
type Guarantee int

const (
	// ExactlyOnce writes each checkpoint's records in Kafka transactions
	// committed when the checkpoint completes. read_committed readers see
	// every record once; records become visible at checkpoint pace.
	ExactlyOnce Guarantee = iota
	// AtLeastOnce flushes the idempotent producer at every checkpoint: no
	// record is lost, but records written after the last completed
	// checkpoint are written again after a failure.
	AtLeastOnce
	// NoGuarantee produces asynchronously and never waits: a failure may
	// lose or duplicate records.
	NoGuarantee
)

// String returns the guarantee's name: "exactly-once", "at-least-once" or "none".
func (g Guarantee) String() string {
	switch g {
	case ExactlyOnce:
		return "exactly-once"
	case AtLeastOnce:
		return "at-least-once"
	case NoGuarantee:
		return "none"
	}
	return "Guarantee(" + strconv.Itoa(int(g)) + ")"
}

const (
	// DefaultPoolSize is SinkOptions.PoolSize when zero.
	DefaultPoolSize = 5
	// DefaultTransactionTimeout is SinkOptions.TransactionTimeout when zero:
	// the broker's default transaction.max.timeout.ms.
	DefaultTransactionTimeout = 15 * time.Minute
)

// Message is one record to produce.
type Message struct {
	// Topic is the topic to write to; empty means SinkOptions.Topic.
	Topic string
	// Key picks the partition (murmur2, as the Java client) and is stored
	// with the record. Nil keys spread records over partitions.
	Key []byte
	// Value is the record's value.
	Value []byte
	// Headers are stored with the record.
	Headers []Header
	// Timestamp is the record's timestamp; zero means now.
	Timestamp time.Time
	// Partition is the partition the record goes to when
	// SinkOptions.ManualPartitions is set (then Key only travels with the
	// record); ignored otherwise.
	Partition int32
}

// Header is a record header.
type Header struct {
	// Key is the header's name.
	Key string
	// Value is the header's value.
	Value []byte
}

// SinkOptions configures a [Sink]. Zero values mean the documented defaults.
type SinkOptions struct {
	// Conn says how to reach the cluster. Conn.Brokers is required.
	Conn Conn
	// Topic is the topic of messages that name none. It must exist when
	// set: the sink does not create topics.
	Topic string
	// Guarantee is ExactlyOnce (default), AtLeastOnce or NoGuarantee.
	Guarantee Guarantee
	// TransactionalIDPrefix starts every transactional id of the sink:
	// "{prefix}-{subtask}-{slot}". It must be unique in the cluster to this
	// sink of this job and stay the same across restarts, or lingering
	// transactions are neither found nor aborted, and two sinks sharing it
	// abort each other's transactions. Default
	// "exactly-{job}.{sink}-{hash}": the names, cut to 60 bytes each with
	// characters other than letters, digits, '.', '_' and '-' replaced by
	// '_', and 16 hex digits of a SHA-256 of the exact (job, sink) pair, so
	// two sinks get the same default only if their job and sink names are
	// equal. Until 2026-12 the default was "exactly-{job}-{sink}", which
	// two pairs could share ("a-b"+"c" and "a"+"b-c"); see docs/kafka.md
	// for upgrading.
	TransactionalIDPrefix string
	// PoolSize is the number of transactional ids per subtask and owner
	// epoch (every owner of the job, a process that took it over, has ids
	// of its own; see docs/kafka.md), so the number of transactions a subtask can have open or prepared and not
	// yet committed: one open, one per checkpoint not yet completed. When
	// all are taken the writer fails and the job restarts. Default 5;
	// raise it if checkpoints often fail or time out in a row.
	PoolSize int
	// TransactionTimeout is the producer's transaction.timeout.ms: the
	// broker aborts a transaction still open this long after it began.
	// A transaction stays open from the first record after a checkpoint
	// barrier until the next checkpoint completes and is committed, and
	// across a crash until the restarted job commits it, so it must cover
	// the longest outage to survive. It must be at least three checkpoint
	// intervals and at most the brokers' transaction.max.timeout.ms.
	// Default 15m.
	TransactionTimeout time.Duration
	// CheckpointInterval, when set, checks TransactionTimeout against it
	// already in NewSink. It need not be set: each writer checks
	// TransactionTimeout against the checkpoint interval of the job it
	// runs in (sink.WriterInfo), so the interval is set once, in the job's
	// options. Default 0: only the writers check.
	CheckpointInterval time.Duration
	// Compression compresses produced batches: "none" (the default, as in
	// Kafka's own producer), "gzip", "snappy", "lz4" or "zstd". Compression
	// costs CPU in the job and saves network and disk.
	Compression string
	// Watermarks carries the job's event time to a downstream job that
	// reads Topic (a stage of a job split at a repartition topic): in
	// every transaction (one per checkpoint), once its input has a
	// watermark, the sink writes it, after the transaction's records, as a
	// control record into every partition of Topic, which must be set.
	// Topic is then a repartition topic: the sink partitions by the count
	// Topic had when the job first wrote it, and fails with a permanent
	// error if Topic gains partitions while the job runs. The downstream
	// source takes the least watermark of its upstream writers
	// (SourceOptions.Upstreams). The sink's input must have event time
	// (stream.SourceWithEventTime upstream), and an input partition that
	// may stay empty needs an IdleTimeout there, or it holds the
	// downstream's watermark back, as it would inside one job. Requires
	// Guarantee ExactlyOnce. See docs/kafka.md, "Watermarks between
	// jobs". Default false.
	Watermarks bool
	// ManualPartitions makes each Message's Partition choose its
	// partition instead of a hash of its Key, for a writer that decides
	// where each record goes (a stage of a job writing its repartition
	// topic by key group). A negative partition fails the job permanently;
	// a partition the topic does not have fails the checkpoint's
	// transaction, which is aborted, as any produce error. Default false.
	ManualPartitions bool
	// ReproduceAborted lets a completed checkpoint's output survive an
	// outage longer than TransactionTimeout: when the run that commits
	// the checkpoint finds that the broker aborted its transaction at the
	// timeout, it reads the transaction's records back from the log (an
	// abort deletes nothing) and writes them again in a new transaction
	// under the same transactional id, each with the header
	// ReproducesHeader naming the transaction it reproduces; however many
	// runs, restarts and zombies try, one reproduction commits. The output
	// topic's retention must outlast the outage, and it must not be
	// compacted (the cleaner removes aborted records). Costs a few offsets
	// in each checkpoint and a lock per acknowledged record. Requires
	// ExactlyOnce. See docs/kafka.md, "Outages longer
	// than the transaction timeout". Default false: the commit fails with a
	// permanent error saying the records are lost.
	ReproduceAborted bool
}

// compressions maps SinkOptions.Compression to franz-go's codecs.
var compressions = map[string]kgo.CompressionCodec{
	"none": kgo.NoCompression(), "gzip": kgo.GzipCompression(), "snappy": kgo.SnappyCompression(),
	"lz4": kgo.Lz4Compression(), "zstd": kgo.ZstdCompression(),
}

// validate checks o and fills in defaults.
func (o *SinkOptions) validate() error {
	if err := o.Conn.validate("SinkOptions"); err != nil {
		return err
	}
	if o.PoolSize == 0 {
		o.PoolSize = DefaultPoolSize
	}
	if o.TransactionTimeout == 0 {
		o.TransactionTimeout = DefaultTransactionTimeout
	}
	if o.Compression == "" {
		o.Compression = "none"
	}
	_, knownCompression := compressions[o.Compression]
	checks := []struct {
		bad   bool
		field string
		value any
		fix   string
	}{
		{o.Guarantee < ExactlyOnce || o.Guarantee > NoGuarantee, "Guarantee", o.Guarantee, "use ExactlyOnce, AtLeastOnce or NoGuarantee"},
		{o.PoolSize < 2 || o.PoolSize > 1000, "PoolSize", o.PoolSize, "use 0 (default 5) or a count in [2, 1000]: one transaction is open while the previous one waits for its commit"},
		{o.CheckpointInterval < 0, "CheckpointInterval", o.CheckpointInterval, "leave it 0 (the writers check against the job's interval) or set it to the job's checkpoint interval"},
		{o.TransactionTimeout < 0 || o.TransactionTimeout < 3*o.CheckpointInterval, "TransactionTimeout", o.TransactionTimeout,
			fmt.Sprintf("use at least 3 checkpoint intervals (%v), better the longest outage the job must survive", 3*o.CheckpointInterval)},
		{!knownCompression, "Compression", strconv.Quote(o.Compression), `use "none", "gzip", "snappy", "lz4" or "zstd"`},
		{o.TransactionalIDPrefix != "" && !validPrefix.MatchString(o.TransactionalIDPrefix), "TransactionalIDPrefix", strconv.Quote(o.TransactionalIDPrefix),
			"use letters, digits, '.', '_' and '-', at most 200 bytes"},
		{o.Watermarks && o.Topic == "", "Watermarks", o.Watermarks, "set SinkOptions.Topic too: the watermarks go into every partition of that topic"},
		{o.ReproduceAborted && o.Guarantee != ExactlyOnce, "ReproduceAborted", o.ReproduceAborted, "use it with Guarantee ExactlyOnce: only transactions are aborted"},
		{o.Watermarks && o.Guarantee != ExactlyOnce, "Watermarks", o.Watermarks,
			"use it with Guarantee ExactlyOnce: without transactions a watermark would be visible before the records it covers are safe, and a replay after a failure would arrive late downstream"},
	}
	for _, c := range checks {
		if c.bad {
			return fmt.Errorf("kafka: SinkOptions.%s = %v is invalid: %s", c.field, c.value, c.fix)
		}
	}
	return nil
}

// validPrefix matches acceptable transactional id prefixes.
var validPrefix = regexp.MustCompile(`^[A-Za-z0-9._-]{1,200}$`)
