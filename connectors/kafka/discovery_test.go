package kafka_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/exactlyonce/exactly/connectors/kafka"
	"github.com/exactlyonce/exactly/internal/kafkatest"
	"github.com/exactlyonce/exactly/internal/testenv"
	"github.com/exactlyonce/exactly/stream"
)

// TestPartitionsDiscoveredWhileRunning adds partitions to the input topic of
// a running job and checks that their records, written before the job
// noticed them, are copied exactly once, and that the positions of completed
// checkpoints reach the consumer group (CommitOffsets).
func TestPartitionsDiscoveredWhileRunning(t *testing.T) {
	t.Parallel()
	brokers := testenv.Kafka(t)
	adm := kafkatest.Admin(t, brokers)
	in, out := kafkatest.UniqueName("disc-in"), kafkatest.UniqueName("disc-out")
	kafkatest.CreateTopic(t, adm, in, 1)
	kafkatest.CreateTopic(t, adm, out, 1)
	produce := func(partition int32, from, n int) {
		t.Helper()
		cl, err := kgo.NewClient(kgo.SeedBrokers(brokers), kgo.RecordPartitioner(kgo.ManualPartitioner()))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		var recs []*kgo.Record
		for i := from; i < from+n; i++ {
			recs = append(recs, &kgo.Record{Topic: in, Partition: partition, Value: []byte(fmt.Sprint(i))})
		}
		if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	produce(0, 0, 100)

	group := kafkatest.UniqueName("disc-group")
	src, err := kafka.NewSource(kafka.SourceOptions{Conn: kafka.Conn{Brokers: []string{brokers}}, Topics: []string{in},
		DiscoveryInterval: 100 * time.Millisecond, Group: group, CommitOffsets: true}, kafka.String())
	if err != nil {
		t.Fatal(err)
	}
	snk, err := kafka.NewSink(kafka.SinkOptions{Conn: kafka.Conn{Brokers: []string{brokers}}, Topic: out,
		TransactionalIDPrefix: kafkatest.UniqueName("disc"), TransactionTimeout: time.Minute, CheckpointInterval: 100 * time.Millisecond},
		func(v kafka.Record[string]) (kafka.Message, error) { return kafka.Message{Value: []byte(v.Value)}, nil })
	if err != nil {
		t.Fatal(err)
	}
	j := stream.New("discovery")
	stream.SinkTo(stream.Source(j, "in", src, stream.Parallelism(2)), "out", snk)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r, err := j.Start(ctx, stream.Options{CheckpointDir: filepath.Join(t.TempDir(), "ckpt"), CheckpointInterval: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if got := kafkatest.ReadCommitted(t, brokers, out, 100, 30*time.Second); len(got) != 100 {
		t.Fatalf("%d records copied before the new partitions, want 100", len(got))
	}
	kafkatest.AddPartitions(t, adm, in, 3)
	produce(1, 100, 100)
	produce(2, 200, 100)
	got := kafkatest.ReadCommitted(t, brokers, out, 300, 60*time.Second)
	var committed int64
	for deadline := time.Now().Add(30 * time.Second); committed != 300 && time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		offsets, err := adm.FetchOffsets(context.Background(), group)
		if err != nil {
			t.Fatal(err)
		}
		committed = 0
		offsets.Each(func(o kadm.OffsetResponse) { committed += o.At })
	}
	cancel()
	if err := r.Wait(); err != context.Canceled {
		t.Fatalf("Wait = %v", err)
	}
	seen := map[string]int{}
	for _, rec := range got {
		seen[string(rec.Value)]++
	}
	for i := range 300 {
		if n := seen[fmt.Sprint(i)]; n != 1 {
			t.Errorf("record %d copied %d times", i, n)
		}
	}
	if committed != 300 {
		t.Errorf("the group's committed offsets add up to %d, want 300 (100 per partition)", committed)
	}
}
