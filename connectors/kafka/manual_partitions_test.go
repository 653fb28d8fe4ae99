package kafka_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/exactlyonce/exactly/checkpoint"
	"github.com/exactlyonce/exactly/connectors/kafka"
	"github.com/exactlyonce/exactly/internal/kafkatest"
	"github.com/exactlyonce/exactly/internal/testenv"
	"github.com/exactlyonce/exactly/sink"
)

// TestManualPartitions writes with SinkOptions.ManualPartitions: each
// record goes to the partition its Message names, whatever its key, and a
// partition the topic does not have fails the checkpoint instead of
// landing anywhere.
func TestManualPartitions(t *testing.T) {
	brokers := testenv.Kafka(t)
	adm := kafkatest.Admin(t, brokers)
	topic := kafkatest.UniqueName("manual")
	kafkatest.CreateTopic(t, adm, topic, 3)
	s, err := kafka.NewSink(kafka.SinkOptions{Conn: kafka.Conn{Brokers: []string{brokers}}, Topic: topic, ManualPartitions: true,
		TransactionalIDPrefix: topic, TransactionTimeout: time.Minute},
		func(v string) (kafka.Message, error) {
			var p int32
			fmt.Sscanf(v, "p%d", &p)
			return kafka.Message{Key: []byte("same key"), Value: []byte(v), Partition: p}, nil
		})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	w, err := s.NewWriter(ctx, sink.WriterInfo{Job: "manual", Sink: "out", Subtask: 0, Parallelism: 1, Owner: writerOwner})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	var values []string
	for i := range 30 {
		values = append(values, fmt.Sprintf("p%d-%d", i%3, i))
	}
	if err := w.Write(ctx, values); err != nil {
		t.Fatal(err)
	}
	data, err := w.Prepare(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := committer(t, s).Commit(ctx, sink.Committable{Checkpoint: 1, Subtask: 0, Data: data}); err != nil {
		t.Fatal(err)
	}
	recs := kafkatest.ReadCommitted(t, brokers, topic, len(values), 30*time.Second)
	if len(recs) != len(values) {
		t.Fatalf("read %d records, want %d", len(recs), len(values))
	}
	for _, r := range recs {
		if want := fmt.Sprintf("p%d-", r.Partition); !strings.HasPrefix(string(r.Value), want) {
			t.Errorf("record %s is in partition %d", r.Value, r.Partition)
		}
	}

	err = w.Write(ctx, []string{"p7-0"})
	if err == nil {
		_, err = w.Prepare(ctx, checkpoint.ID(2))
	}
	if err == nil {
		t.Fatal("a record for partition 7 of a 3-partition topic was written")
	}
	t.Logf("partition 7 of 3: %v", err)
}
