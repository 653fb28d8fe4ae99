package kafka_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/exactlyonce/exactly/connectors/kafka"
	"github.com/exactlyonce/exactly/internal/kafkatest"
	"github.com/exactlyonce/exactly/internal/testenv"
	"github.com/exactlyonce/exactly/sink"
)

// TestReproduceAbortedTransaction: a checkpoint's transaction is prepared
// and its process stops before the commit (an outage); the broker aborts
// the transaction at its timeout (3 s). Then a committer without
// SinkOptions.ReproduceAborted fails with the permanent "records are lost"
// error; a new owner's committer with it commits the checkpoint: every
// record once, each with the ReproducesHeader; the commit sent again (a
// restart after the reproduction) and the previous owner's committer (a
// zombie back after the outage) reproduce nothing more. A reproduction
// killed before its commit (its transaction open, its records written)
// neither counts nor blocks: the next takes the id, which aborts it. The
// new owner's TransactionTimeout is longer than the transaction's: it
// judges the abort by the transaction's own.
func TestReproduceAbortedTransaction(t *testing.T) {
	t.Parallel()
	brokers := testenv.Kafka(t)
	adm := kafkatest.Admin(t, brokers)
	topic, prefix := kafkatest.UniqueName("reproduce"), kafkatest.UniqueName("reproduce-txn")
	kafkatest.CreateTopic(t, adm, topic, 3)
	ctx := context.Background()
	newSink := func(reproduce bool, timeout time.Duration) *kafka.Sink[string] {
		s, err := kafka.NewSink(kafka.SinkOptions{Conn: kafka.Conn{Brokers: []string{brokers}}, Topic: topic, TransactionalIDPrefix: prefix,
			TransactionTimeout: timeout, ReproduceAborted: reproduce},
			func(v string) (kafka.Message, error) { return kafka.Message{Key: []byte(v), Value: []byte(v)}, nil })
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	first := newSink(true, 3*time.Second)
	zombie, err := first.NewCommitter(ctx, sink.CommitterInfo{Job: "t", Sink: "out", Owner: sink.Owner{Incarnation: "inc", Epoch: 1}})
	if err != nil {
		t.Fatal(err)
	}
	defer zombie.Close()
	w, err := first.NewWriter(ctx, sink.WriterInfo{Job: "t", Sink: "out", Subtask: 0, Parallelism: 1, CheckpointInterval: 500 * time.Millisecond,
		Owner: sink.Owner{Incarnation: "inc", Epoch: 1}})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	var want []string
	for i := range 40 {
		want = append(want, fmt.Sprintf("v%02d", i))
	}
	data, err := writeAndPrepare(ctx, w, 1, want...)
	if err != nil || data == nil {
		t.Fatalf("prepare: %q, %v", data, err)
	}
	cm := sink.Committable{Checkpoint: 1, Subtask: 0, Data: data}
	var fields map[string]any
	if err := json.Unmarshal(data, &fields); err != nil {
		t.Fatal(err)
	}
	delete(fields, "spans")
	delete(fields, "n")
	without, _ := json.Marshal(fields)
	t.Logf("the committable: %d bytes with the spans of 3 partitions, %d without them", len(data), len(without))

	// The outage: nothing commits until the broker has aborted the
	// transaction at its timeout.
	waitAbortedAtTimeout(t, adm, prefix)

	err = committer(t, newSink(false, 3*time.Second)).Commit(ctx, cm)
	t.Logf("without ReproduceAborted: %v", err)
	if err == nil || !sink.IsPermanent(err) || !strings.Contains(err.Error(), "records are lost") || !strings.Contains(err.Error(), "ReproduceAborted") {
		t.Fatalf("commit without ReproduceAborted: %v; want the permanent error that the records are lost, naming the option", err)
	}

	// A reproduction killed before its commit: its records, with the
	// header, in a transaction left open under the id.
	var d struct {
		TxnID     string `json:"txn"`
		Pid       int64  `json:"pid"`
		Epoch     int16  `json:"epoch"`
		Partition int32  `json:"part"`
	}
	if err := json.Unmarshal(cm.Data, &d); err != nil {
		t.Fatal(err)
	}
	dying, err := kgo.NewClient(kgo.SeedBrokers(brokers), kgo.TransactionalID(d.TxnID), kgo.TransactionTimeout(time.Minute),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer dying.Close()
	if err := dying.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	header := kgo.RecordHeader{Key: kafka.ReproducesHeader, Value: []byte(fmt.Sprintf("%s/%d/%d", d.TxnID, d.Pid, d.Epoch))}
	if err := dying.ProduceSync(ctx, &kgo.Record{Topic: topic, Partition: d.Partition, Value: []byte("v00"), Headers: []kgo.RecordHeader{header}}).FirstErr(); err != nil {
		t.Fatal(err)
	}

	// The new owner runs with a longer TransactionTimeout than the one the
	// transaction began with: it must judge the abort by the latter (a
	// timeout, not another producer taking the id).
	c := committer(t, newSink(true, 5*time.Minute))
	if err := c.Commit(ctx, cm); err != nil {
		t.Fatalf("commit with ReproduceAborted: %v", err)
	}
	if err := c.Commit(ctx, cm); err != nil {
		t.Fatalf("the commit sent again: %v", err)
	}
	if err := zombie.Commit(ctx, cm); err != nil {
		t.Fatalf("the previous owner's commit after the outage: %v", err)
	}
	recs := kafkatest.ReadCommitted(t, brokers, topic, len(want), 30*time.Second)
	var got []string
	for _, r := range recs {
		got = append(got, string(r.Value))
		tagged := false
		for _, h := range r.Headers {
			tagged = tagged || h.Key == kafka.ReproducesHeader && strings.HasPrefix(string(h.Value), prefix)
		}
		if !tagged {
			t.Errorf("record %q has no %s header naming the transaction: %v", r.Value, kafka.ReproducesHeader, r.Headers)
		}
	}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Fatalf("committed %d records %v, want each of %d once", len(got), got, len(want))
	}
}

// waitAbortedAtTimeout waits until the transactions under prefix have
// ended, the broker aborting them at their timeout.
func waitAbortedAtTimeout(t *testing.T, adm *kadm.Client, prefix string) {
	t.Helper()
	kafkatest.WaitFor(t, time.Minute, "the broker aborting the transaction at its timeout", func() bool {
		txns, err := adm.ListTransactions(context.Background(), nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		var states []string
		txns.Each(func(lt kadm.ListedTransaction) {
			if strings.HasPrefix(lt.TxnID, prefix) {
				states = append(states, lt.State)
			}
		})
		return len(states) > 0 && !slices.Contains(states, "Ongoing") && !slices.Contains(states, "PrepareAbort")
	})
}

// TestReproduceAbortedWithWatermarks: a sink with Watermarks (a
// repartition topic between stages) reproduces its control records too:
// after the broker aborted a prepared transaction of 30 records and a
// watermark, the reproduction commits every record once and the
// watermark into each partition, still read as control records.
func TestReproduceAbortedWithWatermarks(t *testing.T) {
	t.Parallel()
	brokers := testenv.Kafka(t)
	adm := kafkatest.Admin(t, brokers)
	topic, prefix := kafkatest.UniqueName("reproduce-wm"), kafkatest.UniqueName("reproduce-wm-txn")
	kafkatest.CreateTopic(t, adm, topic, 3)
	ctx := context.Background()
	s, err := kafka.NewSink(kafka.SinkOptions{Conn: kafka.Conn{Brokers: []string{brokers}}, Topic: topic, TransactionalIDPrefix: prefix,
		TransactionTimeout: 3 * time.Second, ReproduceAborted: true, Watermarks: true},
		func(v string) (kafka.Message, error) { return kafka.Message{Key: []byte(v), Value: []byte(v)}, nil })
	if err != nil {
		t.Fatal(err)
	}
	w, err := s.NewWriter(ctx, sink.WriterInfo{Job: "t", Sink: "out", Subtask: 0, Parallelism: 1, CheckpointInterval: 500 * time.Millisecond,
		Owner: sink.Owner{Incarnation: "inc", Epoch: 1}})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	var want []string
	for i := range 30 {
		want = append(want, fmt.Sprintf("w%02d", i))
	}
	w.(interface{ Watermark(int64) }).Watermark(1_700_000_000_000)
	data, err := writeAndPrepare(ctx, w, 1, want...)
	if err != nil || data == nil {
		t.Fatalf("prepare: %q, %v", data, err)
	}
	waitAbortedAtTimeout(t, adm, prefix)
	if err := committer(t, s).Commit(ctx, sink.Committable{Checkpoint: 1, Subtask: 0, Data: data}); err != nil {
		t.Fatalf("commit with ReproduceAborted: %v", err)
	}
	recs := kafkatest.ReadCommitted(t, brokers, topic, len(want)+3, 30*time.Second)
	var got []string
	marks := map[int32]int{}
	for _, r := range recs {
		if kafka.IsControlWatermark(r) {
			marks[r.Partition]++
			continue
		}
		got = append(got, string(r.Value))
	}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("committed %d records %v, want each of %d once", len(got), got, len(want))
	}
	if len(marks) != 3 || marks[0] != 1 || marks[1] != 1 || marks[2] != 1 {
		t.Errorf("watermark control records per partition %v, want one in each of 3", marks)
	}
}
