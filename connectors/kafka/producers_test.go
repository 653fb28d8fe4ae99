package kafka_test

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/exactlyonce/exactly/checkpoint"
	"github.com/exactlyonce/exactly/connectors/kafka"
	"github.com/exactlyonce/exactly/internal/kafkatest"
	"github.com/exactlyonce/exactly/internal/testenv"
	"github.com/exactlyonce/exactly/sink"
)

// TestProducersKeptAcrossTransactions runs one writer through twenty
// checkpoints, each committed before the next: the committer commits with
// the client that wrote the transaction and the writer begins later
// transactions in the kept clients, so a few clients serve them all. Then
// the kept clients of two prepared transactions are broken: their commits
// fall back to EndTxn by protocol and still commit. Every value is
// committed once; nothing is left open.
func TestProducersKeptAcrossTransactions(t *testing.T) {
	t.Parallel()
	brokers := testenv.Kafka(t)
	adm := kafkatest.Admin(t, brokers)
	topic, prefix := kafkatest.UniqueName("kept"), kafkatest.UniqueName("kept-txn")
	kafkatest.CreateTopic(t, adm, topic, 2)
	ctx := context.Background()
	s := bytesSink(t, brokers, topic, prefix)
	c := committer(t, s)
	w, err := s.NewWriter(ctx, sink.WriterInfo{Job: "t", Sink: "out", Subtask: 0, Parallelism: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	var want []string
	prepare := func(cp checkpoint.ID) sink.Committable {
		t.Helper()
		v := "v" + strconv.Itoa(int(cp))
		want = append(want, v)
		if err := w.Write(ctx, []string{v}); err != nil {
			t.Fatalf("checkpoint %d: write: %v", cp, err)
		}
		data, err := w.Prepare(ctx, cp)
		if err != nil || data == nil {
			t.Fatalf("checkpoint %d: prepare: %q, %v", cp, data, err)
		}
		return sink.Committable{Checkpoint: cp, Subtask: 0, Data: data}
	}
	const checkpoints = 20
	for cp := checkpoint.ID(1); cp <= checkpoints; cp++ {
		if err := c.Commit(ctx, prepare(cp)); err != nil {
			t.Fatal(err)
		}
	}
	opened, reused := kafka.ProducerCounts(s)
	t.Logf("%d transactions: %d clients opened, %d transactions began in a kept client", checkpoints, opened, reused)
	if opened > 3 || reused < checkpoints-3 {
		t.Errorf("%d clients opened and %d kept ones reused for %d transactions: want at most 3 opened, the rest reused", opened, reused, checkpoints)
	}

	cm1, cm2 := prepare(checkpoints+1), prepare(checkpoints+2)
	if n := kafka.BreakPreparedProducers(s); n != 2 {
		t.Fatalf("%d kept clients of prepared transactions, want 2", n)
	}
	for _, cm := range []sink.Committable{cm2, cm1} {
		if err := c.Commit(ctx, cm); err != nil {
			t.Fatalf("commit of checkpoint %d after its client broke: %v", cm.Checkpoint, err)
		}
	}
	if err := c.Commit(ctx, prepare(checkpoints+3)); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	got := values(t, brokers, topic, len(want))
	slices.Sort(got)
	slices.Sort(want)
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("committed %v, want %v", got, want)
	}
	if ids := openTransactions(t, adm, prefix); len(ids) > 0 {
		t.Fatalf("open transactions left: %v", ids)
	}
}
