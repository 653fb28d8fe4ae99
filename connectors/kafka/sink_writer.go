package kafka

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/exactlyonce/exactly/checkpoint"
	"github.com/exactlyonce/exactly/sink"
)

// writer is one subtask's writer. With ExactlyOnce it writes each
// transaction under a free transactional id of its pool, preferring one
// whose client the sink kept from its last transaction (producers); after
// Prepare the client is handed to the sink for the committer, which
// commits with it and keeps it for the id's next transaction, or, when it
// cannot, closes it and ends the transaction by protocol.
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
	// marks carries the input's watermark with SinkOptions.Watermarks;
	// nil without.
	marks *markWriter
	// spans collects where the open transaction's records are, with
	// SinkOptions.ReproduceAborted; nil without.
	spans *txnSpans
}

// markWriter is what a writer with SinkOptions.Watermarks knows of its
// input's watermark.
type markWriter struct {
	id         string // the writer's id in its control records
	partitions int32  // of SinkOptions.Topic, pinned (partitionPin)
	mark       upstreamMark
	heard      bool // mark was set
}

// Watermark records the input's watermark (sink.WatermarkWriter); the
// next Prepare writes it.
func (w *writer[T]) Watermark(wm int64) {
	if w.marks != nil {
		w.marks.mark, w.marks.heard = upstreamMark{wm: wm}, true
	}
}

// Idle records that the input is idle (sink.WatermarkWriter); the next
// Prepare writes it.
func (w *writer[T]) Idle() {
	if w.marks != nil {
		w.marks.mark.idle, w.marks.heard = true, true
	}
}

// writeWatermark writes the input's watermark into every partition of
// the topic, in every transaction, also when it has not moved since the
// last: a downstream task that starts after retention removed the older
// marks hears every live writer within one checkpoint (docs in
// watermarks.go).
func (w *writer[T]) writeWatermark(ctx context.Context) error {
	m := w.marks
	if m == nil || !m.heard {
		return nil
	}
	if w.cl == nil {
		if err := w.begin(ctx); err != nil {
			return err
		}
	}
	value := encodeWatermark(m.id, m.mark.wm, m.mark.idle)
	for p := range m.partitions {
		r := &kgo.Record{Topic: w.s.opts.Topic, Partition: p, Headers: []kgo.RecordHeader{{Key: watermarkHeader, Value: value}}}
		w.cl.Produce(ctx, r, w.acked)
	}
	return nil
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
	// The owner's epoch has a pool of its own (see poolBase): a zombie that
	// opens a producer runs InitProducerID on an id of its own pool and
	// cannot abort a newer owner's transactions.
	base := poolBase(w.s.opts.PoolSize, w.info.Owner.Epoch)
	for i := range w.s.opts.PoolSize {
		// An id whose client was kept first: its transaction costs no
		// new client.
		slot := (w.next + i) % w.s.opts.PoolSize
		if id := txnID(w.prefix, w.info.Subtask, base+slot); !w.s.busy[id] && w.s.producers.hasIdle(id) {
			w.s.busy[id] = true
			w.next = slot + 1
			return id, true
		}
	}
	for i := range w.s.opts.PoolSize {
		slot := (w.next + i) % w.s.opts.PoolSize
		if id := txnID(w.prefix, w.info.Subtask, base+slot); !w.s.busy[id] {
			w.s.busy[id] = true
			w.next = slot + 1
			return id, true
		}
	}
	return "", false
}

// open begins a transaction under id: in the client the sink kept for
// id, or else in a new one. With initID a new client also runs
// InitProducerID now instead of at the first produce. On failure the id
// is released.
func (w *writer[T]) open(ctx context.Context, id string, initID bool) producer {
	p := producer{id: id, opened: time.Now()}
	if k, ok := w.s.producers.takeIdle(id, w.s.opts.TransactionTimeout); ok {
		if err := k.cl.BeginTransaction(); err == nil {
			p.cl, p.hook = k.cl, k.hook
			return p
		}
		w.bg.Go(k.cl.Close)
	}
	p.hook = &versionHook{}
	w.s.producers.countOpened()
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
	if err := w.s.opts.Conn.refused(p.err, "Write", w.txnIDs()); err != nil {
		return err
	}
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
	// A Message without a timestamp is stamped now, once per batch: the
	// client's clock read per record cost 5% of a Kafka → count → Kafka
	// job's CPU on this machine.
	var now time.Time
	for i, v := range batch {
		m, err := w.s.encode(v)
		if err != nil {
			return fmt.Errorf("kafka: sink %q subtask %d: encoding record %d of the batch: %w", w.info.Sink, w.info.Subtask, i, err)
		}
		r := &recs[i]
		r.Topic, r.Key, r.Value, r.Timestamp = m.Topic, m.Key, m.Value, m.Timestamp
		if r.Timestamp.IsZero() {
			if now.IsZero() {
				now = time.Now()
			}
			r.Timestamp = now
		}
		if w.s.opts.ManualPartitions {
			if m.Partition < 0 {
				return sink.Permanent(fmt.Errorf("kafka: sink %q subtask %d: record %d of the batch names partition %d: name a partition of the topic, from 0", w.info.Sink, w.info.Subtask, i, m.Partition))
			}
			r.Partition = m.Partition
		}
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
	if err == nil && w.spans != nil {
		w.spans.note(r)
	}
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
	case errors.Is(err, kerr.TransactionalIDAuthorizationFailed):
		return w.s.opts.Conn.refused(err, "Write", w.txnIDs())
	case isAuthorization(err):
		return w.s.opts.Conn.refused(err, "Write", "topic "+r.Topic)
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
	if err := w.writeWatermark(ctx); err != nil {
		return nil, err
	}
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
	if pinned, now := w.s.pin.changed(); w.marks != nil && now != 0 {
		return nil, pinRefusal(w.info.Sink, w.s.opts.Topic, pinned, now)
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
		Topic: ev.Topic, Partition: ev.Partition, Offset: ev.Offset, Last: w.last.Load(), Began: w.began.UnixMilli(),
		Timeout: w.s.opts.TransactionTimeout.Milliseconds()}
	if w.hook.addPartitions.Load() {
		c.Version = 1
	}
	if w.marks != nil {
		c.Pin = w.s.pin.record()
	}
	if w.spans != nil {
		c.Spans, c.Records = w.spans.take()
	}
	data, err := encodeCommittable(c)
	if err != nil {
		return nil, err
	}
	// The committer commits with the client and keeps it for the id's
	// next transaction, or closes it, which leaves the transaction open
	// for the committer to end by protocol.
	w.s.producers.prepare(w.txnID, keptProducer{cl: w.cl, hook: w.hook, pid: pid, epoch: epoch})
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
	// The clients kept for the next transactions of this subtask's ids;
	// those of prepared transactions are the committer's.
	w.s.producers.dropIdle(w.ownID)
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

// txnIDs names the sink's transactional ids as an ACL's resource.
func (w *writer[T]) txnIDs() string { return txnIDsResource(w.prefix) }

// ownID reports whether id is one of this subtask's transactional ids,
// of any owner epoch.
func (w *writer[T]) ownID(id string) bool {
	return strings.HasPrefix(id, w.prefix+"-"+strconv.Itoa(w.info.Subtask)+"-") && ownID(w.prefix, id)
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
