package kafka_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/exactlyonce/exactly/connectors/kafka"
	"github.com/exactlyonce/exactly/internal/kafkatest"
	"github.com/exactlyonce/exactly/internal/testenv"
	"github.com/exactlyonce/exactly/state"
	"github.com/exactlyonce/exactly/stream"
)

const (
	stageKeys    = 12 // keys k0..k11: k0..k5 in input partition 0, k6..k11 in 1
	stageSeconds = 20 // one record per key and second of event time
	stageWindow  = 5 * time.Second
)

// stageRecord is "k{key}:{second}": its event time is that second.
func stageTime(v string) time.Time {
	_, s, _ := strings.Cut(v, ":")
	n, _ := strconv.Atoi(s)
	return time.Unix(int64(n), 0)
}

// TestWatermarksBetweenJobs: a job split into two stages at a
// repartition topic keeps event time exact across it. The upstream stage
// is two jobs, one per input partition (as a cluster runs it: a task per
// partition, each with its own checkpoints), one of them slow, each
// writing its records into a 3-partition topic with
// SinkOptions.Watermarks; the downstream job reads that topic with
// SourceOptions.Upstreams = 2 and counts each key's records per 5 s
// tumbling window; it is stopped and started again half-way. Each partition of the topic holds records of both
// upstream jobs, far apart in event time: a watermark taken from the
// records (the newest seen, as Kafka Streams' stream time) makes the slow
// job's records late (with Upstreams = 0 this test fails so: late records,
// wrong counts, the last windows never fire). With the least watermark of
// the writers no record is late, every window counts 5, and the last
// windows fire because the finished upstream jobs wrote the end of event
// time.
func TestWatermarksBetweenJobs(t *testing.T) {
	t.Parallel()
	brokers := testenv.Kafka(t)
	adm := kafkatest.Admin(t, brokers)
	in, mid, out := kafkatest.UniqueName("wm-in"), kafkatest.UniqueName("wm-mid"), kafkatest.UniqueName("wm-out")
	kafkatest.CreateTopic(t, adm, in, 2)
	kafkatest.CreateTopic(t, adm, mid, 3)
	kafkatest.CreateTopic(t, adm, out, 1)
	t.Cleanup(func() { _, _ = adm.DeleteTopics(context.Background(), in, mid, out) })
	produceStageInput(t, brokers, in)
	conn := kafka.Conn{Brokers: []string{brokers}}
	opts := func() stream.Options {
		// One record per batch: the slow job checkpoints, and so commits,
		// while it makes its way through its partition.
		return stream.Options{CheckpointDir: t.TempDir(), CheckpointInterval: 100 * time.Millisecond, BatchSize: 1}
	}

	// The fast upstream job runs first and ends, writing the end of event
	// time; the slow one runs beside the downstream job, which is stopped
	// and started again once it committed its first windows: the fast
	// writer, finished, is known to the restarted job only from its
	// checkpoint (its position holds what each writer said last).
	if err := upstreamJob(t, conn, in, mid, 0).Run(context.Background(), opts()); err != nil {
		t.Fatalf("upstream job 0: %v", err)
	}
	slow := make(chan error, 1)
	go func() { slow <- upstreamJob(t, conn, in, mid, 1).Run(context.Background(), opts()) }()
	downOpts := opts()
	ctx, cancel := context.WithCancel(context.Background())
	first, err := downstreamJob(t, conn, mid, out).Start(ctx, downOpts)
	if err != nil {
		t.Fatal(err)
	}
	kafkatest.WaitFor(t, time.Minute, "the downstream job's first windows", func() bool {
		lso, _ := stableOffsets(t, adm, out)
		return lso > 0
	})
	cancel()
	if err := first.Wait(); !errors.Is(err, context.Canceled) {
		t.Fatalf("the downstream job's first run: %v", err)
	}
	ctx, cancel = context.WithCancel(context.Background())
	defer cancel()
	running, err := downstreamJob(t, conn, mid, out).Start(ctx, downOpts)
	if err != nil {
		t.Fatal(err)
	}
	if err := <-slow; err != nil {
		t.Fatalf("upstream job 1: %v", err)
	}

	got := kafkatest.ReadCommitted(t, brokers, out, stageKeys*stageSeconds/int(stageWindow/time.Second), time.Minute)
	late := first.Metrics().LateRecords("windows") + running.Metrics().LateRecords("windows")
	cancel()
	if err := running.Wait(); err != nil && ctx.Err() == nil {
		t.Fatalf("downstream job: %v", err)
	}
	var results []string
	for k := range stageKeys {
		for w := 0; w < stageSeconds; w += int(stageWindow / time.Second) {
			results = append(results, fmt.Sprintf("k%d@%d:5", k, w))
		}
	}
	checkOnce(t, got, results)
	if late != 0 {
		t.Errorf("the downstream window saw %d late records, want 0", late)
	}
	t.Logf("%d window results across the repartition topic, %d late records", len(got), late)
}

// produceStageInput writes, for every second of event time in order, one
// record per key, the first half of the keys into partition 0, the other
// half into 1.
func produceStageInput(t *testing.T, brokers, topic string) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var recs []*kgo.Record
	for s := range stageSeconds {
		for k := range stageKeys {
			v := fmt.Sprintf("k%d:%d", k, s)
			recs = append(recs, &kgo.Record{Topic: topic, Partition: int32(k * 2 / stageKeys), Key: fmt.Appendf(nil, "k%d", k), Value: []byte(v)})
		}
	}
	if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// upstreamJob is the task of input partition p: it reads the partition
// to its end, partition 1 slowly (about 4 s, while partition 0 takes a
// moment), and writes each record keyed by its key into mid, with its
// watermarks.
func upstreamJob(t *testing.T, conn kafka.Conn, in, mid string, p int32) *stream.Job {
	t.Helper()
	src, err := kafka.NewSource(kafka.SourceOptions{Conn: conn, Topics: []string{in}, Partitions: []int32{p}, Bounded: true}, kafka.String())
	if err != nil {
		t.Fatal(err)
	}
	snk, err := kafka.NewSink(kafka.SinkOptions{Conn: conn, Topic: mid, Watermarks: true, TransactionTimeout: time.Minute, CheckpointInterval: 100 * time.Millisecond},
		func(r kafka.Record[string]) (kafka.Message, error) {
			return kafka.Message{Key: r.Key, Value: []byte(r.Value)}, nil
		})
	if err != nil {
		t.Fatal(err)
	}
	j := stream.New(fmt.Sprintf("wm-up.%d", p))
	recs := stream.SourceWithEventTime(j, "in", src, stream.EventTime[kafka.Record[string]]{
		Timestamp: func(r kafka.Record[string]) time.Time { return stageTime(r.Value) },
	})
	slowed := stream.Map(recs, func(r kafka.Record[string]) kafka.Record[string] {
		if p == 1 {
			time.Sleep(15 * time.Millisecond)
		}
		return r
	})
	stream.SinkTo(slowed, "mid", snk)
	return j
}

// downstreamJob counts each key's records of mid per window into out as
// "k{key}@{window start second}:{count}".
func downstreamJob(t *testing.T, conn kafka.Conn, mid, out string) *stream.Job {
	t.Helper()
	src, err := kafka.NewSource(kafka.SourceOptions{Conn: conn, Topics: []string{mid}, Upstreams: 2}, kafka.String())
	if err != nil {
		t.Fatal(err)
	}
	snk, err := kafka.NewSink(kafka.SinkOptions{Conn: conn, Topic: out, TransactionTimeout: time.Minute, CheckpointInterval: 100 * time.Millisecond},
		func(v string) (kafka.Message, error) { return kafka.Message{Value: []byte(v)}, nil })
	if err != nil {
		t.Fatal(err)
	}
	j := stream.New("wm-down")
	timestamp := func(r kafka.Record[string]) time.Time { return stageTime(r.Value) }
	recs := stream.SourceWithEventTime(j, "mid", src, stream.EventTime[kafka.Record[string]]{Timestamp: timestamp}, stream.Parallelism(3))
	keyed := stream.KeyBy(recs, func(r kafka.Record[string]) string { return string(r.Key) }, state.StringCodec{})
	counts := stream.WindowAggregate(keyed, "windows", stream.Tumbling(stageWindow), timestamp,
		stream.Aggregate[string, kafka.Record[string], int, string]{
			Add:   func(n int, _ kafka.Record[string]) int { return n + 1 },
			Codec: state.IntCodec{},
			Result: func(key string, w stream.Window, n int) string {
				return fmt.Sprintf("%s@%d:%d", key, w.Start.Unix(), n)
			},
		}, stream.Parallelism(2))
	stream.SinkTo(counts, "out", snk)
	return j
}
