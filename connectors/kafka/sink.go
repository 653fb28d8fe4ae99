package kafka

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/exactlyonce/exactly/checkpoint"
	"github.com/exactlyonce/exactly/sink"
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
	// PoolSize is the number of transactional ids per subtask, so the
	// number of transactions a subtask can have open or prepared and not
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
	// CheckpointInterval is the job's checkpoint interval, used only to
	// check TransactionTimeout. Default 1s, the engine's default.
	CheckpointInterval time.Duration
	// Compression compresses produced batches: "none" (the default, as in
	// Kafka's own producer), "gzip", "snappy", "lz4" or "zstd". Compression
	// costs CPU in the job and saves network and disk.
	Compression string
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
	if o.CheckpointInterval == 0 {
		o.CheckpointInterval = time.Second
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
		{o.CheckpointInterval < 0, "CheckpointInterval", o.CheckpointInterval, "set it to the job's checkpoint interval"},
		{o.TransactionTimeout < 3*o.CheckpointInterval, "TransactionTimeout", o.TransactionTimeout,
			fmt.Sprintf("use at least 3 checkpoint intervals (%v), better the longest outage the job must survive", 3*o.CheckpointInterval)},
		{!knownCompression, "Compression", strconv.Quote(o.Compression), `use "none", "gzip", "snappy", "lz4" or "zstd"`},
		{o.TransactionalIDPrefix != "" && !validPrefix.MatchString(o.TransactionalIDPrefix), "TransactionalIDPrefix", strconv.Quote(o.TransactionalIDPrefix),
			"use letters, digits, '.', '_' and '-', at most 200 bytes"},
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

// Sink writes records to Kafka. It implements [sink.Sink].
//
// Fencing (see [sink.Committer.Fence]) rests on the producer epochs of the
// sink's transactional ids: a new owner's Fence bumps every idle id, its
// AbortLingering every id, so that no committable of an earlier owner but
// the restored ones can be committed afterwards (docs/kafka.md, "Owners and
// zombies").
//
// With ExactlyOnce each writer subtask writes into a Kafka transaction
// under one of PoolSize transactional ids "{prefix}-{subtask}-{slot}".
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
	return &Sink[T]{opts: opts, encode: encode, busy: map[string]bool{}}, nil
}

// prefix returns the transactional id prefix of the sink named name.
func (s *Sink[T]) prefix(job, name string) string {
	if s.opts.TransactionalIDPrefix != "" {
		return s.opts.TransactionalIDPrefix
	}
	return DefaultTransactionalIDPrefix(job, name)
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
	if err != nil {
		return s.opts.Conn.explain(err)
	}
	if d, ok := td[s.opts.Topic]; !ok || d.Err != nil {
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
		if err != nil {
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
	o := append([]kgo.Opt{
		kgo.RecordPartitioner(kgo.StickyKeyPartitioner(nil)),
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
	cl, err := s.opts.Conn.newClient(ctx)
	if err != nil {
		return nil, fmt.Errorf("kafka: sink %q: %w", info.Sink, err)
	}
	c.admin = &txnAdmin{cl: cl, timeout: s.opts.TransactionTimeout, retry: 30 * time.Second}
	return c, nil
}

// writer is one subtask's writer. With ExactlyOnce it writes each
// transaction with its own producer client, under a free transactional id
// of its pool; the client is closed after Prepare (closing ends no
// transaction) and the committer ends the transaction by protocol.
//
// The producer of the next transaction is opened ahead of time, in the
// background, when the writer opens and when a transaction begins (or, if
// no id was free then, after Prepare): a new client, its connections and
// its InitProducerID then cost the task nothing when the first record
// after a barrier arrives, and do not delay the commit of the previous
// checkpoint, which the same task carries out. The id it holds is the one
// the writer uses next, so the pool holds as many prepared transactions
// as before.
type writer[T any] struct {
	s      *Sink[T]
	info   sink.WriterInfo
	logger *slog.Logger
	prefix string

	cl    *kgo.Client // open producer; for ExactlyOnce only while a transaction is open
	txnID string      // transactional id of the open transaction
	began time.Time   // when the open transaction began, before its first record
	hook  *versionHook
	next  int // slot to try first for the next transaction

	// ahead delivers the next transaction's producer, opened in the
	// background; nil when none is being opened. Its id is taken from the
	// moment it is claimed.
	ahead    chan producer
	bgCtx    context.Context // cancelled by Close
	bgCancel context.CancelFunc
	bg       sync.WaitGroup // background opens and closes

	mu       sync.Mutex
	err      error       // first produce error; the writer is then unusable
	evidence *kgo.Record // first acknowledged record of the open transaction
	// haveEvidence is set with evidence: later acknowledgements then skip
	// the mutex.
	haveEvidence atomic.Bool
	// last is the offset of the last acknowledged record in evidence's
	// partition (committable.Last).
	last atomic.Int64
}

// producer is a transactional client under one id of the pool, with a
// transaction begun in it and nothing written yet.
type producer struct {
	cl     *kgo.Client
	id     string
	hook   *versionHook
	opened time.Time
	err    error // opening failed; the id is released
}

// versionHook notices AddPartitionsToTxn requests: a transaction that
// sends one runs under transaction protocol 1; under protocol 2 (KIP-890)
// produce requests add partitions implicitly.
type versionHook struct{ addPartitions atomic.Bool }

// OnBrokerWrite implements kgo.HookBrokerWrite.
func (h *versionHook) OnBrokerWrite(_ kgo.BrokerMetadata, key int16, _ int, _, _ time.Duration, err error) {
	if key == int16(kmsg.AddPartitionsToTxn) && err == nil {
		h.addPartitions.Store(true)
	}
}

// claim takes a free transactional id of the pool; ok is false when every
// id is taken.
func (w *writer[T]) claim() (id string, ok bool) {
	w.s.mu.Lock()
	defer w.s.mu.Unlock()
	for i := range w.s.opts.PoolSize {
		slot := (w.next + i) % w.s.opts.PoolSize
		if id := txnID(w.prefix, w.info.Subtask, slot); !w.s.busy[id] {
			w.s.busy[id] = true
			w.next = slot + 1
			return id, true
		}
	}
	return "", false
}

// open opens a producer under id and begins a transaction in it. With
// initID it also runs InitProducerID now instead of at the first produce.
// On failure the id is released.
func (w *writer[T]) open(ctx context.Context, id string, initID bool) producer {
	p := producer{id: id, hook: &versionHook{}, opened: time.Now()}
	p.cl, p.err = w.s.opts.Conn.newClient(ctx, w.s.producerOpts(&id, kgo.WithHooks(p.hook))...)
	if p.err == nil {
		p.err = p.cl.BeginTransaction()
	}
	if p.err == nil && initID {
		_, _, p.err = p.cl.ProducerID(ctx)
	}
	if p.err != nil {
		if p.cl != nil {
			p.cl.Close()
			p.cl = nil
		}
		w.s.setBusy(id, false)
	}
	return p
}

// openAhead starts opening the next transaction's producer in the
// background, if an id is free; if none is, the next Write opens one.
func (w *writer[T]) openAhead() {
	id, ok := w.claim()
	if !ok {
		return
	}
	ahead := make(chan producer, 1)
	w.ahead = ahead
	w.bg.Go(func() { ahead <- w.open(w.bgCtx, id, true) })
}

// discard closes the unused producer p, in the background, and releases its id.
func (w *writer[T]) discard(p producer) {
	if p.cl != nil {
		w.bg.Go(p.cl.Close)
		w.s.setBusy(p.id, false)
	}
}

// begin opens a transaction: in the producer opened ahead, or else in a
// new one under a free transactional id; then it opens the next one ahead.
func (w *writer[T]) begin(ctx context.Context) error {
	if err := w.take(ctx); err != nil {
		return err
	}
	w.openAhead()
	return nil
}

// take makes the producer opened ahead, or a new one, the open transaction's.
func (w *writer[T]) take(ctx context.Context) error {
	if w.ahead != nil {
		var p producer
		select {
		case p = <-w.ahead:
		case <-ctx.Done():
			return fmt.Errorf("kafka: sink %q subtask %d: begin a transaction: %w", w.info.Sink, w.info.Subtask, ctx.Err())
		}
		w.ahead = nil
		// A producer that waited longer than a transaction may last is
		// not trusted: the coordinator may have expired its id.
		if p.err == nil && time.Since(p.opened) < w.s.opts.TransactionTimeout {
			w.cl, w.txnID, w.hook, w.began = p.cl, p.id, p.hook, time.Now()
			return nil
		}
		w.logger.Debug("kafka: producer opened ahead not used; opening another", "sink", w.info.Sink, "subtask", w.info.Subtask,
			"txn", p.id, "age", time.Since(p.opened), "error", p.err)
		w.discard(p)
	}
	id, ok := w.claim()
	if !ok {
		return fmt.Errorf("kafka: sink %q subtask %d: all %d transactional ids hold prepared transactions waiting for a checkpoint to complete: fix what makes checkpoints fail, or raise SinkOptions.PoolSize", w.info.Sink, w.info.Subtask, w.s.opts.PoolSize)
	}
	p := w.open(ctx, id, false)
	if p.err != nil {
		return fmt.Errorf("kafka: sink %q subtask %d: begin a transaction under %q: %w", w.info.Sink, w.info.Subtask, id, p.err)
	}
	w.cl, w.txnID, w.hook, w.began = p.cl, p.id, p.hook, time.Now()
	return nil
}

// Write produces batch asynchronously into the open transaction, opening
// one if needed. It reports the first failure of an earlier write.
func (w *writer[T]) Write(ctx context.Context, batch []T) error {
	if err := w.failed(); err != nil {
		return err
	}
	if w.cl == nil {
		if err := w.begin(ctx); err != nil {
			return err
		}
	}
	recs := make([]kgo.Record, len(batch)) // one allocation per batch, not per record
	for i, v := range batch {
		m, err := w.s.encode(v)
		if err != nil {
			return fmt.Errorf("kafka: sink %q subtask %d: encoding record %d of the batch: %w", w.info.Sink, w.info.Subtask, i, err)
		}
		r := &recs[i]
		r.Topic, r.Key, r.Value, r.Timestamp = m.Topic, m.Key, m.Value, m.Timestamp
		if r.Topic == "" && w.s.opts.Topic == "" {
			return fmt.Errorf("kafka: sink %q subtask %d: record %d of the batch names no topic and SinkOptions.Topic is empty: set one of them", w.info.Sink, w.info.Subtask, i)
		}
		for _, h := range m.Headers {
			r.Headers = append(r.Headers, kgo.RecordHeader{Key: h.Key, Value: h.Value})
		}
		w.cl.Produce(ctx, r, w.acked)
	}
	return nil
}

// acked is the produce promise.
func (w *writer[T]) acked(r *kgo.Record, err error) {
	if err == nil && w.haveEvidence.Load() {
		// evidence was set before haveEvidence, and stays until Prepare,
		// which runs once every acknowledgement is made.
		w.raiseLast(w.evidence, r)
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case err != nil && w.err == nil:
		w.err = w.explain(r, err)
	case err == nil && w.evidence == nil:
		w.evidence = r
		w.last.Store(r.Offset)
		w.haveEvidence.Store(true)
	case err == nil:
		w.raiseLast(w.evidence, r)
	}
}

// raiseLast records r's offset as the last acknowledged in ev's partition
// when r is in it and after every other acknowledged there.
func (w *writer[T]) raiseLast(ev, r *kgo.Record) {
	if r.Partition != ev.Partition || r.Topic != ev.Topic {
		return
	}
	for last := w.last.Load(); r.Offset > last && !w.last.CompareAndSwap(last, r.Offset); last = w.last.Load() {
	}
}

// explain wraps a produce error with what to do about it.
func (w *writer[T]) explain(r *kgo.Record, err error) error {
	where := fmt.Sprintf("kafka: sink %q subtask %d: producing to topic %q", w.info.Sink, w.info.Subtask, r.Topic)
	switch {
	case errors.Is(err, kerr.UnknownTopicOrPartition):
		return fmt.Errorf("%s: the topic does not exist: create it first: %w", where, err)
	case isAuthorization(err):
		return fmt.Errorf("%s: not authorized: grant Write on the topic and on transactional ids %q*: %w", where, w.prefix, err)
	case errors.Is(err, kerr.ProducerFenced), errors.Is(err, kerr.InvalidProducerEpoch):
		return fmt.Errorf("%s: the broker ended transaction %q (%w): %w", where, w.txnID, err,
			endedBy(w.txnID, w.prefix, w.info.Owner, w.began, w.s.opts.TransactionTimeout))
	case errors.Is(err, kerr.TransactionAbortable), errors.Is(err, kerr.InvalidTxnState):
		return fmt.Errorf("%s: the broker ended transaction %q after %v (SinkOptions.TransactionTimeout = %v): the job restarts from its last checkpoint: %w",
			where, w.txnID, time.Since(w.began).Round(time.Millisecond), w.s.opts.TransactionTimeout, err)
	}
	return fmt.Errorf("%s: %w", where, err)
}

// failed returns the first produce error since the last Prepare.
func (w *writer[T]) failed() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

// Prepare flushes the open transaction and returns its committable, or
// nil when nothing was written. With AtLeastOnce it flushes and returns
// nil; with NoGuarantee it only reports earlier failures. Prepare runs at
// the barrier and delays the checkpoint by its duration, so it does no
// more than that: the client is closed in the background, and the next
// transaction's producer is opened in the background if it is not already
// (see writer).
func (w *writer[T]) Prepare(ctx context.Context, id checkpoint.ID) ([]byte, error) {
	if w.cl == nil || w.s.opts.Guarantee == NoGuarantee {
		return nil, w.failed()
	}
	start := time.Now()
	if err := w.cl.Flush(ctx); err != nil {
		return nil, errors.Join(w.failed(), fmt.Errorf("kafka: sink %q subtask %d: flush for checkpoint %d: %w", w.info.Sink, w.info.Subtask, id, err))
	}
	if err := w.failed(); err != nil {
		return nil, err
	}
	if w.s.opts.Guarantee == AtLeastOnce {
		return nil, nil
	}
	pid, epoch, err := w.cl.ProducerID(ctx)
	if err != nil {
		return nil, fmt.Errorf("kafka: sink %q subtask %d: producer id of %q: %w", w.info.Sink, w.info.Subtask, w.txnID, err)
	}
	ev := w.evidence
	c := committable{TxnID: w.txnID, ProducerID: pid, Epoch: epoch, Version: 2,
		Topic: ev.Topic, Partition: ev.Partition, Offset: ev.Offset, Last: w.last.Load(), Began: w.began.UnixMilli()}
	if w.hook.addPartitions.Load() {
		c.Version = 1
	}
	data, err := encodeCommittable(c)
	if err != nil {
		return nil, err
	}
	// Closing leaves the transaction open (the committer ends it); it is
	// done in the background, as it can wait for the client's goroutines.
	w.bg.Go(w.cl.Close)
	w.cl, w.evidence, w.txnID = nil, nil, ""
	w.haveEvidence.Store(false)
	if w.ahead == nil {
		w.openAhead()
	}
	w.logger.Debug("kafka: transaction prepared", "sink", w.info.Sink, "subtask", w.info.Subtask, "checkpoint", id,
		"txn", c.TxnID, "took", time.Since(start))
	return data, nil
}

// Close closes the producers. With ExactlyOnce it aborts the open,
// unprepared transaction, whose records no checkpoint covers (the next run
// replays them), so that it does not hold back read_committed readers
// until the transaction timeout; prepared transactions are left to the
// committer. With NoGuarantee buffered records get a last chance to be
// sent.
func (w *writer[T]) Close() error {
	if w.bgCancel != nil {
		w.bgCancel()
	}
	if w.ahead != nil {
		p := <-w.ahead
		w.ahead = nil
		w.discard(p)
	}
	defer w.bg.Wait()
	if w.cl == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	switch w.s.opts.Guarantee {
	case NoGuarantee:
		_ = w.cl.Flush(ctx)
	case ExactlyOnce:
		w.abortOpen(ctx)
	}
	w.cl.Close()
	w.cl = nil
	if w.txnID != "" {
		w.s.setBusy(w.txnID, false)
	}
	return nil
}

// abortOpen aborts the open transaction. A failure (brokers unreachable,
// the id already fenced by a newer owner) is logged: the transaction is
// then aborted by the next start's AbortLingering, by a newer owner, or by
// the broker when the transaction timeout passes.
func (w *writer[T]) abortOpen(ctx context.Context) {
	err := w.cl.AbortBufferedRecords(ctx)
	if err == nil {
		err = w.cl.EndTransaction(ctx, kgo.TryAbort)
	}
	if errors.Is(err, kerr.ProducerFenced) || errors.Is(err, kerr.InvalidProducerEpoch) {
		w.logger.Debug("kafka: the open transaction was already aborted by another producer with the same transactional id", "sink", w.info.Sink, "subtask", w.info.Subtask, "txn", w.txnID, "error", err)
		return
	}
	if err != nil {
		w.logger.Warn("kafka: aborting the open transaction at close failed; read_committed readers of its partitions wait until the next start aborts it, or until SinkOptions.TransactionTimeout passes",
			"sink", w.info.Sink, "subtask", w.info.Subtask, "txn", w.txnID, "timeout", w.s.opts.TransactionTimeout, "error", err)
		return
	}
	w.logger.Debug("kafka: open transaction aborted at close", "sink", w.info.Sink, "subtask", w.info.Subtask, "txn", w.txnID)
}

// endedBy explains why the broker ended transaction id of the sink with
// prefix before its owner did, from how long ago it began: another
// producer with the same transactional id took over (wrapping
// [sink.ErrFenced]) when the transaction timeout cannot have passed yet,
// else most likely the timeout. began is zero when unknown (a committable
// written before 2026-12).
func endedBy(id, prefix string, owner sink.Owner, began time.Time, timeout time.Duration) error {
	age := time.Since(began)
	// The broker's clock starts the timeout at the transaction's first
	// partition, after began; the margin covers clock skew between the
	// writer's and the committer's machines.
	if !began.IsZero() && age < timeout-min(timeout/10, 30*time.Second) {
		return fmt.Errorf("another producer with the same transactional id %q took over: it ran InitProducerID, which bumped the producer epoch and aborted this transaction %v after it began, before SinkOptions.TransactionTimeout = %v could pass. "+
			"Either a newer owner of this job took over (a restart or another instance; this process, owner %s, is then an old instance and must stop: the new owner replays these records), "+
			"or an administrator aborted it, or another job or sink uses the transactional id prefix %q too: give each sink its own SinkOptions.TransactionalIDPrefix (or leave it empty for the default, unique to the job and sink names), then rerun from a checkpoint taken before these records: %w",
			id, age.Round(time.Millisecond), timeout, owner, prefix, sink.ErrFenced)
	}
	since := "an unknown time ago"
	if !began.IsZero() {
		since = age.Round(time.Second).String() + " ago"
	}
	return fmt.Errorf("the transaction began %s and SinkOptions.TransactionTimeout = %v: the usual cause is that the timeout passed (during an outage or a long recovery) and the broker aborted it; another producer with the same transactional id %q (another instance of this job, or another job or sink with the prefix %q) may have taken over too. "+
		"Raise SinkOptions.TransactionTimeout (and the brokers' transaction.max.timeout.ms) above the longest outage to survive", since, timeout, id, prefix)
}

// committer ends the transactions of one sink by protocol.
type committer[T any] struct {
	s      *Sink[T]
	name   string
	prefix string
	owner  sink.Owner
	logger *slog.Logger
	admin  *txnAdmin // nil unless ExactlyOnce
	// legacy is the default prefix of versions before 2026-12 when the
	// sink uses the default prefix, else empty; legacySeen is set when a
	// committable under it was committed, i.e. the job was restored from
	// a checkpoint of such a version: AbortLingering then aborts the
	// lingering transactions under legacy too.
	legacy     string
	legacySeen bool
}

// decode parses a committable; a malformed one is a permanent error.
func (c *committer[T]) decode(cm sink.Committable) (committable, error) {
	d, err := decodeCommittable(cm.Data)
	if err != nil {
		return d, sink.Permanent(fmt.Errorf("kafka: sink %q: committable of checkpoint %d subtask %d is malformed (%q): the checkpoint is corrupt or was written by another sink: %w", c.name, cm.Checkpoint, cm.Subtask, cm.Data, err))
	}
	return d, nil
}

// Commit commits the transaction with EndTxn under its recorded producer
// id and epoch. When the coordinator answers that the identity is fenced
// or the state invalid, the record the committable points at tells the
// outcome: committed (success, nothing to do), aborted (permanent error:
// the records are lost), undecided (retried).
func (c *committer[T]) Commit(ctx context.Context, cm sink.Committable) error {
	if c.admin == nil {
		return nil
	}
	d, err := c.decode(cm)
	if err != nil {
		return err
	}
	if c.legacy != "" && ownID(c.legacy, d.TxnID) {
		c.legacySeen = true
	}
	where := fmt.Sprintf("kafka: sink %q: commit checkpoint %d subtask %d (transactional id %q, producer id %d, epoch %d, protocol %d)", c.name, cm.Checkpoint, cm.Subtask, d.TxnID, d.ProducerID, d.Epoch, d.Version)
	start := time.Now()
	code, err := c.admin.endTxn(ctx, d, true)
	switch {
	case err != nil:
		return fmt.Errorf("%s: %w", where, c.s.opts.Conn.explain(err))
	case code == 0:
		c.s.setBusy(d.TxnID, false)
		c.logger.Debug("kafka: transaction committed", "sink", c.name, "checkpoint", cm.Checkpoint, "subtask", cm.Subtask,
			"txn", d.TxnID, "took", time.Since(start))
		return nil
	case !fencedOrInvalid(code):
		return fmt.Errorf("%s: %w", where, kerr.ErrorForCode(code))
	}
	answer := kerr.ErrorForCode(code)
	out, err := c.admin.outcome(ctx, d)
	if errors.Is(err, errOutcomeGone) {
		return sink.Permanent(fmt.Errorf("%s: the coordinator answered %v and the outcome cannot be read back: %w; inspect the transaction with kafka-transactions.sh describe --transactional-id %s (docs/kafka.md, manual recovery)", where, answer, err, d.TxnID))
	}
	if err != nil {
		return fmt.Errorf("%s: the coordinator answered %v, and reading the transaction's outcome from the log failed; retrying: %w", where, answer, err)
	}
	switch out {
	case outcomeCommitted:
		c.logger.Info("kafka: transaction was already committed", "sink", c.name, "checkpoint", cm.Checkpoint, "subtask", cm.Subtask, "txn", d.TxnID, "answer", answer)
		c.s.setBusy(d.TxnID, false)
		return nil
	case outcomeAborted:
		cause := endedBy(d.TxnID, c.prefix, c.owner, d.began(), c.s.opts.TransactionTimeout)
		if errors.Is(cause, sink.ErrFenced) {
			return fmt.Errorf("%s: the broker aborted the transaction before it could be committed (coordinator answer %v): %w", where, answer, cause)
		}
		return sink.Permanent(fmt.Errorf("%s: the broker aborted the transaction before it could be committed (coordinator answer %v): its records are lost from the output. %w, then rerun the job from a savepoint or checkpoint taken before checkpoint %d to reproduce the lost records", where, answer, cause, cm.Checkpoint))
	}
	return fmt.Errorf("%s: the coordinator answered %v while the transaction is not decided in the log yet; retrying", where, answer)
}

// Abort aborts the committable's transaction with InitProducerID on the
// condition that its producer id and epoch are still current (see
// txnAdmin.abortIfCurrent). When they are not, the transaction already
// ended and Abort changes nothing: it fails with [sink.ErrFenced] when
// another producer took the id over before the transaction timeout could
// pass (this committer's owner was fenced: bumping the epoch now would
// fence the newer owner's producer), and succeeds otherwise (the broker
// aborted it at its timeout).
func (c *committer[T]) Abort(ctx context.Context, cm sink.Committable) error {
	if c.admin == nil {
		return nil
	}
	d, err := c.decode(cm)
	if err != nil {
		return err
	}
	where := fmt.Sprintf("kafka: sink %q: abort checkpoint %d subtask %d (transactional id %q, producer id %d, epoch %d)", c.name, cm.Checkpoint, cm.Subtask, d.TxnID, d.ProducerID, d.Epoch)
	code, err := c.admin.abortIfCurrent(ctx, d)
	switch {
	case err != nil:
		return fmt.Errorf("%s: %w", where, c.s.opts.Conn.explain(err))
	case code != 0 && !fencedOrInvalid(code):
		return fmt.Errorf("%s: %w", where, kerr.ErrorForCode(code))
	case code != 0:
		if cause := endedBy(d.TxnID, c.prefix, c.owner, d.began(), c.s.opts.TransactionTimeout); errors.Is(cause, sink.ErrFenced) {
			return fmt.Errorf("%s: the coordinator answered %v: %w", where, kerr.ErrorForCode(code), cause)
		}
		c.logger.Info("kafka: transaction to abort had already ended", "sink", c.name, "checkpoint", cm.Checkpoint, "txn", d.TxnID, "answer", kerr.ErrorForCode(code))
	}
	c.s.setBusy(d.TxnID, false)
	return nil
}

// Fence fences earlier owners' producers before anything is committed: it
// bumps the producer epoch (InitProducerID) of every transactional id of
// the sink that holds no open transaction, so that an old instance (a
// zombie) can write no new transaction under it. Ids holding an open
// transaction are left alone: one of them may hold a transaction of the
// restored checkpoint, which the engine commits next, and bumping the
// epoch would abort it (Kafka's InitProducerID aborts the open
// transaction; keeping it needs KIP-939, not available here). They are
// fenced by AbortLingering, after those commits.
//
// Kafka records no owner of its own: the producer epochs of the sink's
// transactional ids are its fencing state, so Fence cannot find a newer
// owner (it never fails with [sink.ErrFenced]) and no progress of another
// incarnation ([sink.ErrForeignProgress]): a rerun from scratch with empty
// checkpoint storage uses the same ids and fences the earlier run's
// transactions, as it should.
func (c *committer[T]) Fence(ctx context.Context, id checkpoint.ID) error {
	if c.admin == nil {
		return nil
	}
	if err := c.fenceIDs(ctx, []string{c.prefix}, false, id); err != nil {
		return fmt.Errorf("kafka: sink %q: fence earlier owners (as owner %s, restoring checkpoint %d): %w", c.name, c.owner, id, err)
	}
	return nil
}

// fenceIDs bumps the producer epoch of the transactional ids under
// prefixes that the brokers know; with open false only of those that hold
// no open transaction.
func (c *committer[T]) fenceIDs(ctx context.Context, prefixes []string, open bool, restored checkpoint.ID) error {
	ids, err := c.admin.sinkIDs(ctx, prefixes...)
	if err != nil {
		return err
	}
	for _, t := range ids {
		if openState(t.State) && !open {
			continue
		}
		if t.State == "Ongoing" || t.State == "PrepareEpochFence" {
			c.logger.Info("kafka: aborting lingering transaction", "sink", c.name, "txn", t.TxnID, "state", t.State, "restored", restored)
		}
		if err := c.admin.fence(ctx, t.TxnID); err != nil {
			return fmt.Errorf("fencing %q: %w", t.TxnID, err)
		}
	}
	return nil
}

// AbortLingering bumps the producer epoch of every transactional id of the
// form "{prefix}-{subtask}-{slot}" that the brokers know, for any subtask,
// including subtasks that no longer exist: it aborts the open transactions
// of earlier attempts and fences every producer of an earlier owner. After
// it, no committable an earlier owner prepared can be committed except
// those of the restored checkpoint, which are committed already: their
// EndTxn presents an old epoch and fails with [sink.ErrFenced]. When the
// restored checkpoint held transactions under the default prefix of
// versions before 2026-12, the ids under that prefix are fenced too.
func (c *committer[T]) AbortLingering(ctx context.Context, id checkpoint.ID) error {
	if c.admin == nil {
		return nil
	}
	prefixes := []string{c.prefix}
	if c.legacySeen {
		prefixes = append(prefixes, c.legacy)
	}
	if err := c.fenceIDs(ctx, prefixes, true, id); err != nil {
		return fmt.Errorf("kafka: sink %q: abort lingering transactions after restoring checkpoint %d: %w", c.name, id, err)
	}
	c.s.mu.Lock()
	for txnID := range c.s.busy {
		if slices.ContainsFunc(prefixes, func(p string) bool { return ownID(p, txnID) }) {
			delete(c.s.busy, txnID)
		}
	}
	c.s.mu.Unlock()
	return nil
}

// Close closes the committer's client.
func (c *committer[T]) Close() error {
	if c.admin != nil {
		c.admin.cl.Close()
	}
	return nil
}
