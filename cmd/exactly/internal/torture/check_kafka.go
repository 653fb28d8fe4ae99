package torture

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/exactlyonce/exactly/connectors/kafka"
)

// CheckKafka checks the output topic of the exactly-once Kafka sink of the
// keyed totals: the committed records that readCommitted finds, partition
// by partition in offset order, are checked against x.
func CheckKafka(ctx context.Context, x *Expected, name, brokers, topic string, txnPrefixes []string) (SinkResult, error) {
	return checkTopic(ctx, name, brokers, topic, txnPrefixes, parseOut, x.Check)
}

// checkTopic reads topic as readCommitted does, parses each partition's
// records with parse and checks the streams with check.
func checkTopic[T any](ctx context.Context, name, brokers, topic string, txnPrefixes []string,
	parse func(string) (T, error), check func(SinkResult, [][]T) SinkResult) (SinkResult, error) {
	res := SinkResult{Sink: name}
	parts, err := readCommitted(ctx, &res, brokers, topic, txnPrefixes)
	if err != nil {
		return res, err
	}
	return check(res, parseStreams(&res, parts, parse)), nil
}

// readCommitted returns the values of the records a read_committed reader
// reads from topic, one stream per partition (in partition order), each in
// offset order, and counts in res the transaction anomalies of the
// exactly-once Kafka sink that wrote them under txnPrefixes.
//
// It first scans the topic with a read_uncommitted reader that keeps the
// control records, and works out from the transaction markers, without
// trusting the broker's read_committed filtering, which record offsets
// belong to committed transactions, to aborted ones, and to transactions
// never ended. It then reads the topic with a read_committed reader: a
// record it returns that is not committed by the markers is an aborted or
// uncommitted record made visible (AbortedVisible); a transaction left
// open, by the markers or in the broker's transaction list under
// one of txnPrefixes, is Lingering. A record written outside a transaction is
// Unexpected.
func readCommitted(ctx context.Context, res *SinkResult, brokers, topic string, txnPrefixes []string) ([][]string, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("end offsets of %s: %w", topic, err)
	}
	end := map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) { end[o.Partition] = o.Offset })

	raw, err := readTopic(ctx, brokers, topic, end, kgo.FetchIsolationLevel(kgo.ReadUncommitted()), kgo.KeepControlRecords())
	if err != nil {
		return nil, fmt.Errorf("read_uncommitted scan: %w", err)
	}
	committed := map[int32]map[int64]bool{} // partition → offsets of committed data records
	for p, recs := range raw {
		committed[p] = map[int64]bool{}
		pending := map[int64][]int64{} // producer id → offsets of its open transaction
		for _, r := range recs {
			if !r.Attrs.IsControl() {
				if !r.Attrs.IsTransactional() {
					res.Unexpected++
					res.example("partition %d offset %d: a non-transactional record", p, r.Offset)
				}
				pending[r.ProducerID] = append(pending[r.ProducerID], r.Offset)
				continue
			}
			commit := len(r.Key) >= 4 && binary.BigEndian.Uint16(r.Key[2:4]) == 1
			for _, off := range pending[r.ProducerID] {
				committed[p][off] = commit
			}
			delete(pending, r.ProducerID)
		}
		for pid, offs := range pending {
			res.Lingering++
			res.example("partition %d: transaction of producer %d (%d records from offset %d) never ended", p, pid, len(offs), offs[0])
		}
	}

	// read_committed must return exactly the committed records; wait for
	// the last of them in each partition.
	lastCommitted := map[int32]int64{}
	for p, offs := range committed {
		lastCommitted[p] = -1
		for off, ok := range offs {
			if ok {
				lastCommitted[p] = max(lastCommitted[p], off+1)
			}
		}
	}
	rc, err := readTopic(ctx, brokers, topic, lastCommitted, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	if err != nil {
		return nil, fmt.Errorf("read_committed read: %w", err)
	}
	var streams [][]string
	for _, p := range slices.Sorted(maps.Keys(rc)) {
		var lines []string
		for _, r := range rc[p] {
			if !committed[p][r.Offset] {
				res.AbortedVisible++
				res.example("partition %d offset %d (%s): read_committed returns a record of an aborted or open transaction", p, r.Offset, r.Value)
			}
			if slices.ContainsFunc(r.Headers, func(h kgo.RecordHeader) bool { return h.Key == kafka.ReproducesHeader }) {
				res.Reproduced++
			}
			lines = append(lines, string(r.Value))
		}
		streams = append(streams, lines)
	}

	open, err := adm.ListTransactions(ctx, nil, []string{"Ongoing", "PrepareCommit", "PrepareAbort", "PrepareEpochFence"})
	if err != nil {
		return nil, fmt.Errorf("list transactions: %w", err)
	}
	for _, id := range open.TransactionalIDs() {
		if slices.ContainsFunc(txnPrefixes, func(p string) bool { return strings.HasPrefix(id, p+"-") }) {
			res.Lingering++
			res.example("transaction %s still open", id)
		}
	}
	return streams, nil
}

// readTopic reads topic from the start until, in every partition of
// until, a record at or above the offset until[p]-1 arrived (or the
// partition's until is 0 or less), and returns each partition's records in
// offset order. It gives up after two minutes.
func readTopic(ctx context.Context, brokers, topic string, until map[int32]int64, opts ...kgo.Opt) (map[int32][]*kgo.Record, error) {
	opts = append(opts, kgo.SeedBrokers(brokers), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	out := map[int32][]*kgo.Record{}
	next := map[int32]int64{}
	done := func() bool {
		for p, u := range until {
			if next[p] < u {
				return false
			}
		}
		return true
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	for !done() {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return out, fmt.Errorf("%s: reached %v of the offsets %v: %w", topic, next, until, ctx.Err())
		}
		for _, fe := range fs.Errors() {
			if !errors.Is(fe.Err, context.Canceled) {
				return out, fmt.Errorf("%s partition %d: %w", topic, fe.Partition, fe.Err)
			}
		}
		fs.EachRecord(func(r *kgo.Record) {
			out[r.Partition] = append(out[r.Partition], r)
			next[r.Partition] = r.Offset + 1
		})
	}
	return out, nil
}
