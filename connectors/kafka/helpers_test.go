package kafka_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/exactlyonce/exactly/connectors/kafka"
	"github.com/exactlyonce/exactly/state"
	"github.com/exactlyonce/exactly/stream"
)

// knownTransactionalIDs lists the transactional ids with prefix that the
// broker knows, in any state.
func knownTransactionalIDs(t testing.TB, adm *kadm.Client, prefix string) []string {
	t.Helper()
	ls, err := adm.ListTransactions(context.Background(), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, id := range ls.TransactionalIDs() {
		if strings.HasPrefix(id, prefix+"-") {
			ids = append(ids, id)
		}
	}
	return ids
}

// stableOffsets returns the sums over topic's partitions of the last
// stable offsets (where read_committed readers stop) and of the high
// watermarks.
func stableOffsets(t testing.TB, adm *kadm.Client, topic string) (lso, hwm int64) {
	t.Helper()
	ctx := context.Background()
	committed, err := adm.ListCommittedOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	end, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	committed.Each(func(o kadm.ListedOffset) { lso += o.Offset })
	end.Each(func(o kadm.ListedOffset) { hwm += o.Offset })
	return lso, hwm
}

// produceInput writes perKey records "k{key}:{i}" for each of keys keys,
// keyed by "k{key}", interleaved.
func produceInput(t testing.TB, brokers, topic string, keys, perKey int) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers), kgo.DefaultProduceTopic(topic))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var recs []*kgo.Record
	for i := range perKey {
		for k := range keys {
			key := fmt.Sprintf("k%03d", k)
			recs = append(recs, &kgo.Record{Key: []byte(key), Value: []byte(key + ":" + strconv.Itoa(i))})
		}
	}
	if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// openTransactions lists the transactional ids with prefix that hold an
// open transaction.
func openTransactions(t testing.TB, adm *kadm.Client, prefix string) []string {
	t.Helper()
	ls, err := adm.ListTransactions(context.Background(), nil, []string{"Ongoing", "PrepareCommit", "PrepareAbort", "PrepareEpochFence"})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, id := range ls.TransactionalIDs() {
		if strings.HasPrefix(id, prefix+"-") {
			ids = append(ids, id)
		}
	}
	return ids
}

// countJob builds in → keyed running count → out: for every input record
// "k:i" it emits "k:c", where c counts the records of key k so far. Each
// record is delayed by delay, to keep the job running for a while.
func countJob(conn kafka.Conn, in, out, prefix string, par int, interval, delay time.Duration) (*stream.Job, error) {
	return countJobFrom(kafka.SourceOptions{Conn: conn, Topics: []string{in}, Bounded: true}, out, prefix, par, interval, delay)
}

// countJobFrom is countJob reading with the source options in.
func countJobFrom(in kafka.SourceOptions, out, prefix string, par int, interval, delay time.Duration) (*stream.Job, error) {
	return countJobInto(in, kafka.SinkOptions{Topic: out, TransactionalIDPrefix: prefix, TransactionTimeout: time.Minute}, par, interval, delay)
}

// countJobInto is countJob reading with the source options in and writing
// with the sink options out, their Conn and CheckpointInterval set from
// in's and interval.
func countJobInto(in kafka.SourceOptions, out kafka.SinkOptions, par int, interval, delay time.Duration) (*stream.Job, error) {
	src, err := kafka.NewSource(in, kafka.String())
	if err != nil {
		return nil, err
	}
	out.Conn, out.CheckpointInterval = in.Conn, interval
	snk, err := kafka.NewSink(out, func(v string) (kafka.Message, error) {
		k, _, _ := strings.Cut(v, ":")
		return kafka.Message{Key: []byte(k), Value: []byte(v)}, nil
	})
	if err != nil {
		return nil, err
	}
	j := stream.New("kcount")
	recs := stream.Map(stream.Source(j, "in", src, stream.Parallelism(par)), func(r kafka.Record[string]) kafka.Record[string] {
		time.Sleep(delay)
		return r
	})
	keyed := stream.KeyBy(recs, func(r kafka.Record[string]) string { return string(r.Key) }, state.StringCodec{})
	counts := stream.Process(keyed, "count", func(ctx *stream.Context[string]) (stream.ProcessFunc[string, kafka.Record[string], string], error) {
		n, err := state.NewValueState(ctx.State(), "n", state.IntCodec{})
		return stream.ProcessFunc[string, kafka.Record[string], string]{
			Process: func(ctx *stream.Context[string], r kafka.Record[string], o *stream.Output[string]) error {
				c, _ := n.Value()
				c++
				n.Update(c)
				o.Emit(ctx.Key() + ":" + strconv.Itoa(c))
				return nil
			},
		}, err
	}, stream.Parallelism(par))
	stream.SinkTo(counts, "out", snk, stream.Parallelism(par))
	return j, nil
}

// checkCounts verifies that out holds "k:c" for every key k and every
// c in [1, perKey] exactly once, and nothing else.
func checkCounts(t testing.TB, out []*kgo.Record, keys, perKey int) {
	t.Helper()
	var want []string
	for k := range keys {
		for c := 1; c <= perKey; c++ {
			want = append(want, fmt.Sprintf("k%03d:%d", k, c))
		}
	}
	checkOnce(t, out, want)
}

// checkOnce verifies that the values of out are want, each exactly once,
// and nothing else.
func checkOnce(t testing.TB, out []*kgo.Record, want []string) {
	t.Helper()
	seen := map[string]int{}
	for _, r := range out {
		seen[string(r.Value)]++
	}
	bad := 0
	for _, v := range want {
		if seen[v] != 1 && bad < 10 {
			t.Errorf("output %q seen %d times, want once", v, seen[v])
			bad++
		}
		delete(seen, v)
	}
	for v, n := range seen {
		if bad < 20 {
			t.Errorf("unexpected output %q (%d times)", v, n)
			bad++
		}
	}
	if len(out) != len(want) {
		t.Errorf("read %d committed output records, want %d", len(out), len(want))
	}
}
