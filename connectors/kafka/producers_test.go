package kafka_test

import (
	"context"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

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
		data, err := writeAndPrepare(ctx, w, cp, v)
		if err != nil || data == nil {
			t.Fatalf("checkpoint %d: %q, %v", cp, data, err)
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

// TestRecommitWhileTheIdWritesAgain, under transaction protocols 1 and 2:
// a transaction committed through its kept client is committed again by
// a new process (as after a restart that restores its checkpoint) while
// the same id holds its next, prepared transaction. The second commit must
// not end that transaction, which then commits on its own: under protocol
// 1, whose commit keeps the producer epoch, the client is therefore not
// kept, and the next transaction's InitProducerID bumps the epoch.
func TestRecommitWhileTheIdWritesAgain(t *testing.T) {
	t.Parallel()
	testenv.Exclusive(t, testenv.KafkaService) // it changes the cluster's transaction.version
	brokers := testenv.Kafka(t)
	for _, tv := range []int16{1, 2} {
		t.Run("tv"+strconv.Itoa(int(tv)), func(t *testing.T) {
			old := setTransactionVersion(t, brokers, tv)
			t.Cleanup(func() { setTransactionVersion(t, brokers, old) })
			adm := kafkatest.Admin(t, brokers)
			topic, prefix := kafkatest.UniqueName("recommit"), kafkatest.UniqueName("recommit-txn")
			kafkatest.CreateTopic(t, adm, topic, 1)
			ctx := context.Background()
			s, err := kafka.NewSink(kafka.SinkOptions{Conn: kafka.Conn{Brokers: []string{brokers}}, Topic: topic,
				TransactionalIDPrefix: prefix, TransactionTimeout: time.Minute, PoolSize: 2},
				func(v string) (kafka.Message, error) { return kafka.Message{Value: []byte(v)}, nil })
			if err != nil {
				t.Fatal(err)
			}
			c := committer(t, s)
			w, err := s.NewWriter(ctx, sink.WriterInfo{Job: "t", Sink: "out", Subtask: 0, Parallelism: 1})
			if err != nil {
				t.Fatal(err)
			}
			defer w.Close()
			prepare := func(cp checkpoint.ID, v string) sink.Committable {
				t.Helper()
				data, err := writeAndPrepare(ctx, w, cp, v)
				if err != nil || data == nil {
					t.Fatalf("prepare %d: %q, %v", cp, data, err)
				}
				return sink.Committable{Checkpoint: cp, Subtask: 0, Data: data}
			}
			// With two ids, the third transaction runs under the first's.
			cm1 := prepare(1, "a")
			if err := c.Commit(ctx, cm1); err != nil {
				t.Fatal(err)
			}
			if err := c.Commit(ctx, prepare(2, "b")); err != nil {
				t.Fatal(err)
			}
			cm3 := prepare(3, "c")
			if txnOf(t, cm3) != txnOf(t, cm1) {
				t.Fatalf("the third transaction runs under %q, not under the first's %q", txnOf(t, cm3), txnOf(t, cm1))
			}
			if err := committer(t, bytesSink(t, brokers, topic, prefix)).Commit(ctx, cm1); err != nil {
				t.Fatalf("commit again: %v", err)
			}
			// The next transaction must still be open, and commit on its own.
			described, err := adm.DescribeTransactions(ctx, txnOf(t, cm3))
			if err != nil {
				t.Fatal(err)
			}
			described.Each(func(d kadm.DescribedTransaction) {
				if d.State != "Ongoing" {
					t.Errorf("transaction %q is %s after the first one's commit was sent again, want Ongoing: that commit ended it", d.TxnID, d.State)
				}
			})
			if err := c.Commit(ctx, cm3); err != nil {
				t.Fatal(err)
			}
			if got := values(t, brokers, topic, 3); strings.Join(got, ",") != "a,b,c" {
				t.Fatalf("committed %q, want a, b, c", got)
			}
		})
	}
}

// txnOf returns the transactional id of a committable.
func txnOf(t *testing.T, cm sink.Committable) string {
	t.Helper()
	var d struct {
		TxnID string `json:"txn"`
	}
	if err := json.Unmarshal(cm.Data, &d); err != nil {
		t.Fatal(err)
	}
	return d.TxnID
}
