package kafka

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/exactlyonce/exactly/sink"
)

// Sink writes records to Kafka. It implements [sink.Sink].
//
// Fencing (see [sink.Committer.Fence]) rests on the producer epochs of the
// sink's transactional ids: a new owner's Fence bumps the idle ids of the
// owners before it, its AbortLingering every id of theirs with an open
// transaction, so that no committable of an earlier owner but the restored
// ones can be committed afterwards (docs/kafka.md, "Owners and zombies").
//
// With ExactlyOnce each writer subtask writes into a Kafka transaction
// under one of PoolSize transactional ids "{prefix}-{subtask}-{slot}" of
// its owner epoch e (slots PoolSize·e … PoolSize·e+PoolSize-1), so that a
// zombie, however many owners behind, never touches a newer owner's ids.
// Prepare flushes the open transaction; the committable records the
// transactional id, the producer id and epoch, the transaction protocol
// version (1, or 2 under KIP-890) and one record of the transaction. Commit
// sends EndTxn with exactly that identity, from any process, and when the
// coordinator answers that the identity is fenced or the state invalid it
// reads the record back to learn whether the transaction was committed
// (success) or aborted (a permanent error: the records are lost). See
// docs/kafka.md.
type Sink[T any] struct {
	opts   SinkOptions
	encode func(T) (Message, error)

	mu        sync.Mutex
	busy      map[string]bool // transactional ids holding an unfinished transaction in this process
	maxTxnTTL time.Duration   // broker's transaction.max.timeout.ms, once read
	// pin is the partition count of Topic the sink partitions by, with
	// Watermarks; it outlives the job's restarts in this process.
	pin partitionPin
	// producers keeps the transactional producers across transactions.
	producers *producers
}

var _ sink.Sink[int] = (*Sink[int])(nil)

// NewSink returns a sink writing the messages encode makes of the records.
// encode must be safe for concurrent use; an encode error stops the job.
func NewSink[T any](opts SinkOptions, encode func(T) (Message, error)) (*Sink[T], error) {
	if encode == nil {
		return nil, errors.New("kafka: NewSink: encode is nil: pass a function that turns a record into a Message")
	}
	if err := opts.validate(); err != nil {
		return nil, err
	}
	return &Sink[T]{opts: opts, encode: encode, busy: map[string]bool{}, producers: newProducers()}, nil
}

// prefix returns the transactional id prefix of the sink named name.
func (s *Sink[T]) prefix(job, name string) string {
	if s.opts.TransactionalIDPrefix != "" {
		return s.opts.TransactionalIDPrefix
	}
	return DefaultTransactionalIDPrefix(job, name)
}

// SharedByJobs reports whether jobs of different names may write through
// the sink at once, as the tasks of one stage of a cluster do (package
// cluster asks it when it plans a job): with SinkOptions.TransactionalIDPrefix
// set they would write under the same transactional ids and fence each
// other's transactions, and it returns why; with the default prefix, which
// is derived from the job's name, or without transactions, it returns nil.
func (s *Sink[T]) SharedByJobs() error {
	if s.opts.Guarantee != ExactlyOnce || s.opts.TransactionalIDPrefix == "" {
		return nil
	}
	return fmt.Errorf("kafka: the sink's transactional id prefix is %q (SinkOptions.TransactionalIDPrefix), the same for every job that uses it: the jobs would open the same transactional ids and abort each other's transactions. Leave TransactionalIDPrefix empty: the default prefix is derived from each job's name (DefaultTransactionalIDPrefix), and a prefixed ACL on \"exactly-\" covers them all", s.opts.TransactionalIDPrefix)
}

// DefaultTransactionalIDPrefix returns the transactional id prefix a sink
// named sinkName in job uses when SinkOptions.TransactionalIDPrefix is
// empty: "exactly-{job}.{sink}-{hash}", readable names and 16 hex digits of
// a SHA-256 of the length-prefixed pair, which no other pair shares. Use it
// to grant the prefixed ACLs or to find the sink's transactions by hand.
func DefaultTransactionalIDPrefix(job, sinkName string) string {
	sum := sha256.Sum256(fmt.Appendf(nil, "%d:%s%d:%s", len(job), job, len(sinkName), sinkName))
	return "exactly-" + readable(job) + "." + readable(sinkName) + "-" + hex.EncodeToString(sum[:8])
}

// readable returns name cut to 60 bytes, with the bytes a transactional
// id prefix does not allow replaced by '_'.
func readable(name string) string {
	b := []byte(name[:min(len(name), 60)])
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			b[i] = '_'
		}
	}
	return string(b)
}

// legacyPrefix returns the default prefix of versions before 2026-12,
// "exactly-{job}-{sink}", which two (job, sink) pairs can share. A
// committer still aborts the lingering transactions under it when it
// restores a checkpoint holding transactions of it (see committer.legacy).
func legacyPrefix(job, name string) string { return "exactly-" + job + "-" + name }

// setBusy marks id as holding an unfinished transaction, or not.
func (s *Sink[T]) setBusy(id string, busy bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if busy {
		s.busy[id] = true
	} else {
		delete(s.busy, id)
	}
}

// NewWriter opens the writer of one subtask. It checks that the cluster
// answers, that SinkOptions.Topic exists and, for ExactlyOnce, that
// TransactionTimeout is within the brokers' transaction.max.timeout.ms.
func (s *Sink[T]) NewWriter(ctx context.Context, info sink.WriterInfo) (sink.Writer[T], error) {
	logger := info.Logger
	if logger == nil {
		logger = slog.Default()
	}
	if t := s.opts.TransactionTimeout; s.opts.Guarantee == ExactlyOnce && info.CheckpointInterval > 0 && t < 3*info.CheckpointInterval {
		return nil, fmt.Errorf("kafka: sink %q: SinkOptions.TransactionTimeout %v is shorter than 3 checkpoint intervals of this job (%v): raise it, better to the longest outage the job must survive",
			info.Sink, t, 3*info.CheckpointInterval)
	}
	w := &writer[T]{s: s, info: info, logger: logger, prefix: s.prefix(info.Job, info.Sink)}
	if s.opts.ReproduceAborted {
		w.spans = &txnSpans{}
	}
	if len(w.prefix)+24 > 32767 {
		return nil, fmt.Errorf("kafka: sink %q: transactional id prefix is too long", info.Sink)
	}
	admin, err := s.opts.Conn.newClient(ctx)
	if err != nil {
		return nil, fmt.Errorf("kafka: sink %q: %w", info.Sink, err)
	}
	defer admin.Close()
	if err := s.checkCluster(ctx, admin); err != nil {
		return nil, fmt.Errorf("kafka: sink %q: %w", info.Sink, err)
	}
	if s.opts.Watermarks {
		td, err := listTopics(ctx, s.opts.Conn, []string{s.opts.Topic}, "SinkOptions.Topic", "Write")
		if err != nil {
			return nil, fmt.Errorf("kafka: sink %q: %w", info.Sink, err)
		}
		d := td[s.opts.Topic]
		pinned, changed := s.pin.open(d.ID, int32(len(d.Partitions)))
		if changed {
			return nil, pinRefusal(info.Sink, s.opts.Topic, pinned, int32(len(d.Partitions)))
		}
		w.marks = &markWriter{id: info.Job + "/" + info.Sink + "/" + strconv.Itoa(info.Subtask), partitions: pinned,
			mark: upstreamMark{wm: math.MinInt64}}
	}
	if s.opts.Guarantee == ExactlyOnce {
		w.bgCtx, w.bgCancel = context.WithCancel(context.WithoutCancel(ctx))
		w.openAhead()
		return w, nil
	}
	w.cl, err = s.opts.Conn.newClient(ctx, s.producerOpts(nil)...)
	if err != nil {
		return nil, fmt.Errorf("kafka: sink %q: %w", info.Sink, err)
	}
	return w, nil
}

// Check implements stream.Checker: the cluster answers (waited for while
// it cannot be reached, until ctx ends) and accepts the credentials,
// SinkOptions.Topic exists, and with ExactlyOnce the
// TransactionTimeout is within the brokers' transaction.max.timeout.ms.
func (s *Sink[T]) Check(ctx context.Context) error {
	return untilReachable(ctx, func() error {
		admin, err := s.opts.Conn.newClient(ctx)
		if err != nil {
			return err
		}
		defer admin.Close()
		return s.checkCluster(ctx, admin)
	})
}

// checkCluster checks the topic and, with ExactlyOnce, the transaction timeout.
func (s *Sink[T]) checkCluster(ctx context.Context, admin *kgo.Client) error {
	if err := s.checkTopic(ctx, admin); err != nil {
		return err
	}
	if s.opts.Guarantee == ExactlyOnce {
		return s.checkTimeout(ctx, admin)
	}
	return nil
}

// checkTopic fails when SinkOptions.Topic is set and missing.
func (s *Sink[T]) checkTopic(ctx context.Context, cl *kgo.Client) error {
	if s.opts.Topic == "" {
		return nil
	}
	td, err := kadm.NewClient(cl).ListTopics(ctx, s.opts.Topic)
	if refused := s.opts.Conn.refused(err, "Write", "topic "+s.opts.Topic); refused != nil {
		return refused
	}
	if err != nil {
		return s.opts.Conn.explain(err)
	}
	d, ok := td[s.opts.Topic]
	if err := s.opts.Conn.refused(d.Err, "Write", "topic "+s.opts.Topic); err != nil {
		return err
	}
	if !ok || d.Err != nil {
		return fmt.Errorf("SinkOptions.Topic %q does not exist (%v): create it first; the sink does not create topics", s.opts.Topic, d.Err)
	}
	return nil
}

// checkTimeout compares TransactionTimeout with the brokers'
// transaction.max.timeout.ms, read once per Sink.
func (s *Sink[T]) checkTimeout(ctx context.Context, cl *kgo.Client) error {
	s.mu.Lock()
	known := s.maxTxnTTL
	s.mu.Unlock()
	if known == 0 {
		rcs, err := kadm.NewClient(cl).DescribeBrokerConfigs(ctx)
		switch {
		case isAuthorization(err):
			// DescribeConfigs on the cluster is not granted: the check
			// assumes the brokers' default; a lower maximum still fails,
			// at the first transaction (docs/kafka.md, "ACLs").
			rcs = nil
		case err != nil:
			return fmt.Errorf("reading the brokers' transaction.max.timeout.ms: %w", s.opts.Conn.explain(err))
		}
		for _, rc := range rcs {
			for _, c := range rc.Configs {
				if c.Key != "transaction.max.timeout.ms" || c.Value == nil {
					continue
				}
				ms, err := strconv.ParseInt(*c.Value, 10, 64)
				if err == nil && (known == 0 || time.Duration(ms)*time.Millisecond < known) {
					known = time.Duration(ms) * time.Millisecond
				}
			}
		}
		if known == 0 {
			known = DefaultTransactionTimeout // not readable: the broker default
		}
		s.mu.Lock()
		s.maxTxnTTL = known
		s.mu.Unlock()
	}
	if s.opts.TransactionTimeout > known {
		return fmt.Errorf("SinkOptions.TransactionTimeout = %v exceeds the brokers' transaction.max.timeout.ms = %v: lower TransactionTimeout or raise transaction.max.timeout.ms on every broker", s.opts.TransactionTimeout, known)
	}
	return nil
}

// producerOpts returns the options of a producer client; txnID is nil
// for a non-transactional one.
func (s *Sink[T]) producerOpts(txnID *string, extra ...kgo.Opt) []kgo.Opt {
	var partitioner kgo.Partitioner = kgo.StickyKeyPartitioner(nil)
	if s.opts.ManualPartitions {
		partitioner = kgo.ManualPartitioner()
	}
	if s.opts.Watermarks {
		partitioner = controlPartitioner{inner: partitioner, topic: s.opts.Topic, pin: &s.pin}
	}
	o := append([]kgo.Opt{
		kgo.RecordPartitioner(partitioner),
		kgo.ProducerLinger(5 * time.Millisecond),
		kgo.ProducerBatchMaxBytes(1 << 20),
		kgo.UnknownTopicRetries(2),
		kgo.ProducerBatchCompression(compressions[s.opts.Compression]),
	}, extra...)
	if s.opts.Topic != "" {
		o = append(o, kgo.DefaultProduceTopic(s.opts.Topic))
	}
	if txnID != nil {
		o = append(o, kgo.TransactionalID(*txnID), kgo.TransactionTimeout(s.opts.TransactionTimeout))
	}
	if s.opts.Guarantee == NoGuarantee {
		o = append(o, kgo.DisableIdempotentWrite(), kgo.RequiredAcks(kgo.LeaderAck()))
	}
	return o
}

// NewCommitter opens a committer for the sink named by info.
func (s *Sink[T]) NewCommitter(ctx context.Context, info sink.CommitterInfo) (sink.Committer, error) {
	logger := info.Logger
	if logger == nil {
		logger = slog.Default()
	}
	c := &committer[T]{s: s, name: info.Sink, prefix: s.prefix(info.Job, info.Sink), owner: info.Owner, logger: logger}
	if s.opts.TransactionalIDPrefix == "" {
		c.legacy = legacyPrefix(info.Job, info.Sink)
	}
	if s.opts.Guarantee != ExactlyOnce {
		return c, nil
	}
	// The clients an earlier run of the job kept hold ids this run's owner
	// fences or aborts: none is trusted.
	s.producers.drop(c.mine)
	cl, err := s.opts.Conn.newClient(ctx)
	if err != nil {
		return nil, fmt.Errorf("kafka: sink %q: %w", info.Sink, err)
	}
	c.admin = &txnAdmin{cl: cl, timeout: s.opts.TransactionTimeout, retry: 30 * time.Second}
	return c, nil
}
