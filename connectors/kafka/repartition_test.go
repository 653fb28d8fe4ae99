package kafka_test

import (
	"context"
	"fmt"
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

// stageSink returns the sink of an upstream stage into the repartition
// topic mid: exactly-once, with watermarks, each string its own key.
func stageSink(t *testing.T, brokers, mid string) *kafka.Sink[string] {
	t.Helper()
	s, err := kafka.NewSink(kafka.SinkOptions{Conn: kafka.Conn{Brokers: []string{brokers}}, Topic: mid, Watermarks: true,
		TransactionalIDPrefix: mid, TransactionTimeout: time.Minute},
		func(v string) (kafka.Message, error) { return kafka.Message{Key: []byte(v), Value: []byte(v)}, nil })
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// stageWriter is the writer of subtask 0 of a stage sink, and the
// watermark side of it.
type stageWriter struct {
	sink.Writer[string]
	sink.WatermarkWriter
}

func openStageWriter(t *testing.T, s *kafka.Sink[string]) (stageWriter, error) {
	t.Helper()
	w, err := s.NewWriter(context.Background(), sink.WriterInfo{Job: "stage", Sink: "out", Subtask: 0, Parallelism: 1, Owner: writerOwner})
	if err != nil {
		return stageWriter{}, err
	}
	t.Cleanup(func() { w.Close() })
	return stageWriter{w, w.(sink.WatermarkWriter)}, nil
}

// checkpointOnce writes keys and the watermark wm into w's transaction of
// checkpoint cp, prepares it and commits it with c; it returns the
// committable (nil when the transaction wrote nothing) or Prepare's error.
func checkpointOnce(t *testing.T, w stageWriter, c sink.Committer, cp checkpoint.ID, wm int64, keys ...string) (*sink.Committable, error) {
	t.Helper()
	ctx := context.Background()
	if len(keys) > 0 {
		if err := w.Write(ctx, keys); err != nil {
			return nil, err
		}
	}
	w.Watermark(wm)
	data, err := w.Prepare(ctx, cp)
	if err != nil || data == nil {
		return nil, err
	}
	cm := sink.Committable{Checkpoint: cp, Subtask: 0, Data: data}
	if err := c.Commit(ctx, cm); err != nil {
		t.Fatalf("commit checkpoint %d: %v", cp, err)
	}
	return &cm, nil
}

// TestRepartitionTopicThatGainsPartitionsIsRefused adds a partition to a
// repartition topic while an upstream stage writes into it (issue 27,
// item 7). The writer pins the partition count it started with: its
// records and watermarks never reach the new partition (whose downstream
// task would hear no watermark, and would hold part of a key's state
// while the task of its old partition holds the rest), and it fails with
// a permanent error naming the topic, both counts and the fix. A new
// process that restores the stage's checkpoint refuses to open its writer
// too: the checkpoint's transactions carry the count.
func TestRepartitionTopicThatGainsPartitionsIsRefused(t *testing.T) {
	brokers := testenv.Kafka(t)
	adm := kafkatest.Admin(t, brokers)
	mid := kafkatest.UniqueName("repartition")
	kafkatest.CreateTopic(t, adm, mid, 2)
	keys := make([]string, 24)
	for i := range keys {
		keys[i] = fmt.Sprintf("k%d", i)
	}
	s := stageSink(t, brokers, mid)
	w, err := openStageWriter(t, s)
	if err != nil {
		t.Fatal(err)
	}
	restored, err := checkpointOnce(t, w, committer(t, s), 1, 1000, keys...)
	if err != nil || restored == nil {
		t.Fatalf("checkpoint 1 on 2 partitions: %v, %v", restored, err)
	}

	ctx := context.Background()
	kafkatest.AddPartitions(t, adm, mid, 3)
	var refused error
	for cp := checkpoint.ID(2); cp <= 4 && refused == nil; cp++ {
		// Each transaction's producer is a new client with fresh metadata:
		// the first one opened after the new partition shows it.
		_, refused = checkpointOnce(t, w, committer(t, s), cp, 1000*int64(cp), keys...)
	}
	if n := endOffset(t, adm, mid, 2); refused == nil || n != 0 {
		t.Fatalf("after topic %s gained partition 2 the writer went on (error %v), and partition 2 holds %d offsets: its keys' state splits downstream and its task hears no watermark", mid, refused, n)
	}
	wantRefusal(t, "the running writer", refused, mid)

	again := stageSink(t, brokers, mid) // a new process restores checkpoint 1
	if err := committer(t, again).Commit(ctx, *restored); err != nil {
		t.Fatal(err)
	}
	_, err = openStageWriter(t, again)
	wantRefusal(t, "the writer of a restored job", err, mid)
}

// wantRefusal checks that err refuses a repartition topic that gained a
// partition: permanent, naming the topic, both counts and the fix.
func wantRefusal(t *testing.T, who string, err error, topic string) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s wrote into topic %s after it gained a partition", who, topic)
	}
	msg := err.Error()
	for _, want := range []string{topic, "2 partitions", "has 3", "recreate the topic"} {
		if !strings.Contains(msg, want) {
			t.Errorf("%s's error does not name %q: %v", who, want, err)
		}
	}
	if !sink.IsPermanent(err) {
		t.Errorf("%s's error is not permanent (a restart would fail the same way): %v", who, err)
	}
	t.Logf("%s refused: %v", who, err)
}

// endOffset returns the end offset of a partition of topic.
func endOffset(t *testing.T, adm *kadm.Client, topic string, partition int32) int64 {
	t.Helper()
	ends, err := adm.ListEndOffsets(context.Background(), topic)
	if err != nil {
		t.Fatal(err)
	}
	o, ok := ends.Lookup(topic, partition)
	if !ok || o.Err != nil {
		t.Fatalf("end offset of %s/%d: %v", topic, partition, o.Err)
	}
	return o.Offset
}

// TestWatermarkReachesAReaderAfterRetention writes an upstream writer's
// watermark once, lets retention remove it (records deleted up to the end
// of the topic), and takes another checkpoint in which the writer's input
// brings no record and its watermark does not move (issue 27, item 7). A
// downstream task that starts now reads the topic from its start: it must
// hear the writer in every partition, or its watermark, which waits for
// every writer, never moves and its windows never fire.
func TestWatermarkReachesAReaderAfterRetention(t *testing.T) {
	brokers := testenv.Kafka(t)
	adm := kafkatest.Admin(t, brokers)
	mid := kafkatest.UniqueName("retained-marks")
	kafkatest.CreateTopic(t, adm, mid, 2)
	s := stageSink(t, brokers, mid)
	w, err := openStageWriter(t, s)
	if err != nil {
		t.Fatal(err)
	}
	c := committer(t, s)
	if _, err := checkpointOnce(t, w, c, 1, 5000, "a", "b"); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	ends, err := adm.ListEndOffsets(ctx, mid)
	if err != nil {
		t.Fatal(err)
	}
	deleted, err := adm.DeleteRecords(ctx, ends.Offsets()) // what retention does to old segments
	if err == nil {
		err = deleted.Error()
	}
	if err != nil {
		t.Fatal(err)
	}
	if _, err := checkpointOnce(t, w, c, 2, 5000); err != nil {
		t.Fatal(err)
	}

	heard := map[int32]int{}
	for _, r := range kafkatest.ReadCommitted(t, brokers, mid, 2, 10*time.Second) {
		for _, h := range r.Headers {
			if h.Key == "exactly-watermark" && strings.HasSuffix(string(h.Value), "stage/out/0") {
				heard[r.Partition]++
			}
		}
	}
	for p := range int32(2) {
		if heard[p] == 0 {
			t.Errorf("partition %d: no watermark of writer stage/out/0 after retention removed the first: a downstream task starting now never hears the writer, and its windows never fire", p)
		}
	}
}
