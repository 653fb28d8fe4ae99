package kafka

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/exactlyonce/exactly/sink"
)

// Reproducing a transaction the broker aborted (SinkOptions.ReproduceAborted).
//
// A completed checkpoint's transaction is committed by the run after it;
// when that run comes later than the transaction timeout, the broker has
// aborted the transaction. Its records are still in the log (an abort
// writes a marker, it deletes nothing: they go by the topic's retention),
// so the committer reads them back, uncommitted, by the producer identity
// and the offsets the committable records, and writes them again in a new
// transaction under the same transactional id, each with the header
// ReproducesHeader naming the aborted transaction.
//
// Exactly once: the committer first takes the transactional id
// (InitProducerID), which fences every other producer of it and waits
// until a transaction of it in flight has ended, committed or aborted;
// only then does it look for a committed reproduction (a record with the
// header after the aborted transaction's records, whose transaction's
// marker is a commit), and writes one only if there is none. Two
// committers of one committable (a restart, a zombie of the previous
// owner) thus take turns, and the second finds the first's.

// ReproducesHeader is the header of every record a reproduction writes:
// its value names the aborted transaction it reproduces,
// "{transactional id}/{producer id}/{epoch}", so that a reader can tell.
const ReproducesHeader = "exactly-reproduces"

// txnSpan is the offsets of a transaction's acknowledged records in one
// partition.
type txnSpan struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"part"`
	First     int64  `json:"first"`
	Last      int64  `json:"last"`
}

// txnSpans collects the spans of the open transaction, for a sink with
// ReproduceAborted; the produce promises call note concurrently.
type txnSpans struct {
	mu      sync.Mutex
	spans   map[topicPartition]*txnSpan
	records int64
}

type topicPartition struct {
	topic     string
	partition int32
}

// note records the acknowledged record r.
func (s *txnSpans) note(r *kgo.Record) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.records++
	tp := topicPartition{r.Topic, r.Partition}
	sp, ok := s.spans[tp]
	if !ok {
		if s.spans == nil {
			s.spans = map[topicPartition]*txnSpan{}
		}
		s.spans[tp] = &txnSpan{Topic: r.Topic, Partition: r.Partition, First: r.Offset, Last: r.Offset}
		return
	}
	sp.First, sp.Last = min(sp.First, r.Offset), max(sp.Last, r.Offset)
}

// take returns the spans, in the order of their topics and partitions,
// and the number of records, and starts over for the next transaction.
func (s *txnSpans) take() ([]txnSpan, int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]txnSpan, 0, len(s.spans))
	for _, tp := range slices.SortedFunc(maps.Keys(s.spans), func(a, b topicPartition) int {
		return cmp.Or(strings.Compare(a.topic, b.topic), cmp.Compare(a.partition, b.partition))
	}) {
		out = append(out, *s.spans[tp])
	}
	n := s.records
	s.spans, s.records = nil, 0
	return out, n
}

// The points of a reproduction that reproduceProbe is told of: its
// records written in its transaction, and the transaction committed.
const (
	reproduceWritten   = "written"
	reproduceCommitted = "committed"
)

// reproduceProbe is called at each point of a reproduction; the crash
// tests set it to kill their process there (SetReproduceProbe).
var reproduceProbe = func(point string) {}

// reproducesValue is the ReproducesHeader value of d's reproduction.
func reproducesValue(d committable) string {
	return fmt.Sprintf("%s/%d/%d", d.TxnID, d.ProducerID, d.Epoch)
}

// reproduce makes the aborted transaction d's records committed once: it
// takes d's transactional id, and unless a reproduction of d committed
// already, writes d's records again and commits them.
func (c *committer[T]) reproduce(ctx context.Context, d committable, where string) error {
	if len(d.Spans) == 0 {
		return sink.Permanent(fmt.Errorf("%s: the broker aborted the transaction (its timeout passed before the commit), and its committable records no spans to reproduce it from: it was written without SinkOptions.ReproduceAborted; rerun the job from a savepoint or checkpoint taken before it to reproduce the lost records", where))
	}
	start := time.Now()
	cl, err := c.s.opts.Conn.newClient(ctx, kgo.TransactionalID(d.TxnID), kgo.TransactionTimeout(c.s.opts.TransactionTimeout),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0))
	if err != nil {
		return fmt.Errorf("%s: reproducing the aborted transaction: %w", where, err)
	}
	defer cl.Close()
	// InitProducerID: from here on no other producer writes under the id,
	// and a reproduction in flight under it has ended.
	if _, _, err := cl.ProducerID(ctx); err != nil {
		if refused := c.s.opts.Conn.refused(err, "Write", txnIDsResource(c.prefix)); refused != nil {
			return fmt.Errorf("%s: %w", where, refused)
		}
		return fmt.Errorf("%s: taking the transactional id to reproduce the aborted transaction: %w", where, c.s.opts.Conn.explain(err))
	}
	done, err := c.reproduced(ctx, d)
	if refused := c.s.opts.Conn.refused(err, "Read", "topic "+d.Topic); refused != nil {
		return fmt.Errorf("%s: reproducing the aborted transaction reads its records back: %w", where, refused)
	}
	if err != nil {
		return fmt.Errorf("%s: looking for a committed reproduction of the aborted transaction: %w", where, err)
	}
	if done {
		c.logger.Info("kafka: the aborted transaction was reproduced before (by a run that was stopped, or another owner)", "sink", c.name, "txn", d.TxnID)
		return nil
	}
	recs, err := c.abortedRecords(ctx, d)
	if refused := c.s.opts.Conn.refused(err, "Read", "the output topics"); refused != nil {
		return fmt.Errorf("%s: reproducing the aborted transaction reads its records back: %w", where, refused)
	}
	if err != nil {
		if errors.Is(err, errOutcomeGone) {
			return sink.Permanent(fmt.Errorf("%s: the broker aborted the transaction and its records cannot be read back to reproduce it: %w; the output topic's retention (retention.ms) must outlast the outage, and the topic must not be compacted. Rerun the job from a savepoint or checkpoint taken before it to reproduce the lost records", where, err))
		}
		return fmt.Errorf("%s: reading the aborted transaction's records back: %w", where, err)
	}
	if err := cl.BeginTransaction(); err != nil {
		return fmt.Errorf("%s: reproducing the aborted transaction: %w", where, err)
	}
	var mu sync.Mutex
	var produceErr error
	header := kgo.RecordHeader{Key: ReproducesHeader, Value: []byte(reproducesValue(d))}
	for _, r := range recs {
		cp := &kgo.Record{Topic: r.Topic, Partition: r.Partition, Key: r.Key, Value: r.Value, Timestamp: r.Timestamp,
			Headers: append(slices.Clip(r.Headers), header)}
		cl.Produce(ctx, cp, func(_ *kgo.Record, err error) {
			if err != nil {
				mu.Lock()
				produceErr = cmp.Or(produceErr, err)
				mu.Unlock()
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		return fmt.Errorf("%s: reproducing the aborted transaction: %w", where, err)
	}
	if produceErr != nil {
		_ = cl.EndTransaction(ctx, kgo.TryAbort)
		return fmt.Errorf("%s: reproducing the aborted transaction: %w", where, c.s.opts.Conn.explain(produceErr))
	}
	reproduceProbe(reproduceWritten)
	if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
		return fmt.Errorf("%s: committing the reproduction of the aborted transaction: %w", where, c.s.opts.Conn.explain(err))
	}
	reproduceProbe(reproduceCommitted)
	c.logger.Warn("kafka: the broker had aborted the transaction (its timeout passed before the commit, during an outage); its records are written again and committed, each with the header "+ReproducesHeader,
		"sink", c.name, "txn", d.TxnID, "records", len(recs), "partitions", len(d.Spans), "took", time.Since(start))
	return nil
}

// reproduced reports whether a reproduction of d is committed: a record
// with d's ReproducesHeader after d's records in d's recorded partition
// (every reproduction writes there too) whose transaction's marker is a
// commit.
func (c *committer[T]) reproduced(ctx context.Context, d committable) (bool, error) {
	from := max(d.Offset, d.Last) + 1
	want := reproducesValue(d)
	// The first record of each reproduction attempt. Every attempt runs
	// under the same transactional id, so the same producer id: each took
	// the id anew, so each has an epoch of its own.
	var found []committable
	type identity struct {
		pid   int64
		epoch int16
	}
	seen := map[identity]bool{}
	err := c.readUncommitted(ctx, []txnSpan{{Topic: d.Topic, Partition: d.Partition, First: from, Last: -1}}, func(r *kgo.Record) {
		if seen[identity{r.ProducerID, r.ProducerEpoch}] {
			return
		}
		for _, h := range r.Headers {
			if h.Key == ReproducesHeader && string(h.Value) == want {
				seen[identity{r.ProducerID, r.ProducerEpoch}] = true
				found = append(found, committable{TxnID: d.TxnID, ProducerID: r.ProducerID, Epoch: r.ProducerEpoch,
					Topic: r.Topic, Partition: r.Partition, Offset: r.Offset})
			}
		}
	})
	if err != nil {
		return false, err
	}
	for _, attempt := range found {
		out, err := c.admin.outcome(ctx, attempt)
		if err != nil {
			return false, err
		}
		if out == outcomeCommitted {
			return true, nil
		}
	}
	return false, nil
}

// abortedRecords reads d's records back: in each span, the records of d's
// producer identity. It fails with errOutcomeGone when they are not all
// there any more (retention, compaction, a recreated topic).
func (c *committer[T]) abortedRecords(ctx context.Context, d committable) ([]*kgo.Record, error) {
	var recs []*kgo.Record
	err := c.readUncommitted(ctx, d.Spans, func(r *kgo.Record) {
		if r.ProducerID == d.ProducerID && r.ProducerEpoch == d.Epoch {
			recs = append(recs, r)
		}
	})
	if err != nil {
		return nil, err
	}
	if int64(len(recs)) != d.Records {
		return nil, fmt.Errorf("%d of the transaction's %d records are in the log: %w", len(recs), d.Records, errOutcomeGone)
	}
	return recs, nil
}

// readUncommitted passes each data record of the spans, read without
// isolation, to f, in each partition in offset order; a span with Last -1
// ends at the partition's high watermark when the read began. A span that
// starts before its partition's log start (retention deleted records) is
// errOutcomeGone.
func (c *committer[T]) readUncommitted(ctx context.Context, spans []txnSpan, f func(*kgo.Record)) error {
	adm := kadm.NewClient(c.admin.cl)
	var topics []string
	for _, sp := range spans {
		topics = append(topics, sp.Topic)
	}
	firsts, err := adm.ListStartOffsets(ctx, topics...)
	if err != nil {
		return err
	}
	lasts, err := adm.ListEndOffsets(ctx, topics...)
	if err != nil {
		return err
	}
	ends := map[topicPartition]int64{} // the offset after the span
	starts := map[string]map[int32]kgo.Offset{}
	for _, sp := range spans {
		first, ok := firsts.Lookup(sp.Topic, sp.Partition)
		if !ok || first.Err != nil {
			return fmt.Errorf("the start offset of %s/%d: %v: %w", sp.Topic, sp.Partition, first.Err, errOutcomeGone)
		}
		if first.Offset > sp.First {
			return fmt.Errorf("%s/%d starts at offset %d now, after offset %d: retention deleted records: %w", sp.Topic, sp.Partition, first.Offset, sp.First, errOutcomeGone)
		}
		end := sp.Last + 1
		if sp.Last < 0 {
			hw, _ := lasts.Lookup(sp.Topic, sp.Partition)
			if hw.Err != nil {
				return fmt.Errorf("the end offset of %s/%d: %w", sp.Topic, sp.Partition, hw.Err)
			}
			end = hw.Offset
		}
		if end <= sp.First {
			continue
		}
		if starts[sp.Topic] == nil {
			starts[sp.Topic] = map[int32]kgo.Offset{}
		}
		starts[sp.Topic][sp.Partition] = kgo.NewOffset().At(sp.First)
		ends[topicPartition{sp.Topic, sp.Partition}] = end
	}
	if len(ends) == 0 {
		return nil
	}
	// Control records kept: every offset of the log is a record, so the
	// read of a partition is done at the record before its end.
	cl, err := c.s.opts.Conn.newClient(ctx, kgo.ConsumePartitions(starts), kgo.FetchIsolationLevel(kgo.ReadUncommitted()),
		kgo.KeepControlRecords(), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		return err
	}
	defer cl.Close()
	rctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for len(ends) > 0 {
		fs := cl.PollFetches(rctx)
		if err := rctx.Err(); err != nil {
			return fmt.Errorf("reading %d partitions back: %w", len(ends), err)
		}
		for _, fe := range fs.Errors() {
			return fmt.Errorf("reading %s/%d back: %w", fe.Topic, fe.Partition, fe.Err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			tp := topicPartition{r.Topic, r.Partition}
			end, open := ends[tp]
			if !open || r.Offset >= end {
				return
			}
			if !r.Attrs.IsControl() {
				f(r)
			}
			if r.Offset >= end-1 {
				delete(ends, tp)
			}
		})
	}
	return nil
}
