package kafka_test

import (
	"context"
	"encoding/binary"
	"flag"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/exactlyonce/exactly/connectors/kafka"
	"github.com/exactlyonce/exactly/internal/kafkatest"
	"github.com/exactlyonce/exactly/internal/testenv"
	"github.com/exactlyonce/exactly/state"
	"github.com/exactlyonce/exactly/stream"
)

const (
	benchBacklog = 1_500_000        // records of the throughput phase
	benchRate    = 10_000           // records/s of the latency phase
	benchSpan    = 10 * time.Second // length of the latency phase
	benchKeys    = 100_000          // keys of the records, for the keyed count
)

// benchShape is the job a benchmark runs between its two topics.
type benchShape int

const (
	mapShape   benchShape = iota // map (identity)
	countShape                   // keyed count: each record's value followed by its key's count so far
)

func (s benchShape) String() string { return [...]string{"map", "count"}[s] }

// benchJob builds in → shape → out with guarantee g.
func benchJob(b *testing.B, brokers, in, out string, g kafka.Guarantee, bounded bool, shape benchShape) *stream.Job {
	src, err := kafka.NewSource(kafka.SourceOptions{Conn: kafka.Conn{Brokers: []string{brokers}}, Topics: []string{in}, Bounded: bounded}, kafka.Bytes())
	if err != nil {
		b.Fatal(err)
	}
	snk, err := kafka.NewSink(kafka.SinkOptions{Conn: kafka.Conn{Brokers: []string{brokers}}, Topic: out, Guarantee: g,
		TransactionalIDPrefix: kafkatest.UniqueName("bench-txn"), TransactionTimeout: time.Minute, ReproduceAborted: *benchReproduce && g == kafka.ExactlyOnce},
		func(v []byte) (kafka.Message, error) { return kafka.Message{Value: v}, nil })
	if err != nil {
		b.Fatal(err)
	}
	j := stream.New("kbench")
	recs := stream.Source(j, "in", src, stream.Parallelism(2))
	var vals stream.Stream[[]byte]
	switch shape {
	case countShape:
		keyed := stream.KeyBy(recs, func(r kafka.Record[[]byte]) string { return string(r.Key) }, state.StringCodec{})
		vals = stream.Process(keyed, "count", countPerKey, stream.Parallelism(2))
	default:
		vals = stream.Map(recs, func(r kafka.Record[[]byte]) []byte { return r.Value })
	}
	stream.SinkTo(vals, "out", snk)
	return j
}

// countPerKey counts the records of each key and emits each record's
// value followed by the count, as a varint: the value's first bytes stay
// the production time the latency phase reads.
func countPerKey(ctx *stream.Context[string]) (stream.ProcessFunc[string, kafka.Record[[]byte], []byte], error) {
	n, err := state.NewValueState(ctx.State(), "n", state.Int64Codec{})
	if err != nil {
		return stream.ProcessFunc[string, kafka.Record[[]byte], []byte]{}, err
	}
	return stream.ProcessFunc[string, kafka.Record[[]byte], []byte]{
		Process: func(ctx *stream.Context[string], r kafka.Record[[]byte], out *stream.Output[[]byte]) error {
			c, _ := n.Value()
			c++
			n.Update(c)
			out.Emit(binary.AppendVarint(append(make([]byte, 0, len(r.Value)+binary.MaxVarintLen64), r.Value...), c))
			return nil
		},
	}, nil
}

// benchKey is the key of the i-th record a benchmark produces.
func benchKey(i int) []byte { return binary.BigEndian.AppendUint32(nil, uint32(i%benchKeys)) }

// BenchmarkKafkaToKafka measures Kafka → map → Kafka with exactly-once
// (1s checkpoints) and at-least-once: throughput over a backlog of
// benchBacklog records, then visibility latency (production to being
// read by a read_committed consumer) at benchRate records/s.
//
//	go test -run '^$' -bench KafkaToKafka -benchtime 1x ./connectors/kafka/
func BenchmarkKafkaToKafka(b *testing.B) {
	brokers := testenv.Kafka(b)
	for _, g := range []kafka.Guarantee{kafka.ExactlyOnce, kafka.AtLeastOnce} {
		b.Run(g.String(), func(b *testing.B) {
			for range b.N {
				b.ReportMetric(benchThroughput(b, brokers, g, mapShape, time.Second, benchBacklog), "events/s")
				p50, p99 := benchLatency(b, brokers, g, mapShape, time.Second, 1, 0)
				b.ReportMetric(float64(p50.Milliseconds()), "p50-ms")
				b.ReportMetric(float64(p99.Milliseconds()), "p99-ms")
			}
		})
	}
}

// benchThroughput runs the job of shape over a backlog of backlog records,
// checkpointing every interval, and returns records/s.
func benchThroughput(b *testing.B, brokers string, g kafka.Guarantee, shape benchShape, interval time.Duration, backlog int) float64 {
	adm := kafkatest.Admin(b, brokers)
	in, out := kafkatest.UniqueName("bench-in"), kafkatest.UniqueName("bench-out")
	kafkatest.CreateTopic(b, adm, in, 4)
	kafkatest.CreateTopic(b, adm, out, 4)
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers), kgo.DefaultProduceTopic(in))
	if err != nil {
		b.Fatal(err)
	}
	value := make([]byte, 100)
	for i := 0; i < backlog; i += 10_000 {
		recs := make([]*kgo.Record, min(10_000, backlog-i))
		for k := range recs {
			recs[k] = &kgo.Record{Key: benchKey(i + k), Value: value}
		}
		if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
			b.Fatal(err)
		}
	}
	cl.Close()
	b.Cleanup(func() { _, _ = adm.DeleteTopics(context.Background(), in, out) })
	j := benchJob(b, brokers, in, out, g, true, shape)
	start := time.Now()
	if err := j.Run(context.Background(), stream.Options{CheckpointDir: filepath.Join(b.TempDir(), "ckpt"), CheckpointInterval: interval,
		DebloatTarget: *benchDebloat}); err != nil {
		b.Fatal(err)
	}
	took := time.Since(start)
	ends, err := adm.ListEndOffsets(context.Background(), out)
	if err != nil {
		b.Fatal(err)
	}
	written := int64(0) // records plus, with transactions, their markers
	ends.Each(func(o kadm.ListedOffset) { written += o.Offset })
	if written < int64(backlog) {
		b.Fatalf("the job wrote %d records, want %d", written, backlog)
	}
	return float64(backlog) / took.Seconds()
}

// BenchmarkStagesVisibility measures the visibility latency of a job
// split into stages at Kafka topics, exactly-once with 1 s checkpoints:
// one, two and three map jobs in a chain, each committing at its own
// checkpoints, so that each stage adds up to one checkpoint interval.
//
//	go test -run '^$' -bench StagesVisibility -benchtime 1x ./connectors/kafka/
func BenchmarkStagesVisibility(b *testing.B) {
	brokers := testenv.Kafka(b)
	for _, caughtUp := range []time.Duration{0, 100 * time.Millisecond} {
		for _, stages := range []int{1, 2, 3} {
			b.Run(fmt.Sprintf("caught-up=%v/%d", caughtUp, stages), func(b *testing.B) {
				for range b.N {
					p50, p99 := benchLatency(b, brokers, kafka.ExactlyOnce, mapShape, time.Second, stages, caughtUp)
					b.ReportMetric(float64(p50.Milliseconds()), "p50-ms")
					b.ReportMetric(float64(p99.Milliseconds()), "p99-ms")
				}
			})
		}
	}
}

// benchLatency feeds a chain of stages jobs of shape (in → job → topic →
// job … → out, each job with its own checkpoints, every interval, and
// transactions) at benchRate for benchSpan and returns the p50 and p99 of
// the time from production to visibility at the end of the chain. Every
// job but the first checkpoints with stream.Options.CheckpointOnCaughtUp
// = caughtUp (as cluster.RunJob's stages after the first do).
func benchLatency(b *testing.B, brokers string, g kafka.Guarantee, shape benchShape, interval time.Duration, stages int, caughtUp time.Duration) (p50, p99 time.Duration) {
	adm := kafkatest.Admin(b, brokers)
	topics := []string{kafkatest.UniqueName("lat-in")}
	for range stages {
		topics = append(topics, kafkatest.UniqueName("lat-out"))
	}
	for _, t := range topics {
		kafkatest.CreateTopic(b, adm, t, 4)
	}
	b.Cleanup(func() { _, _ = adm.DeleteTopics(context.Background(), topics...) })
	in, out := topics[0], topics[stages]
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, stages)
	for i := range stages {
		j := benchJob(b, brokers, topics[i], topics[i+1], g, false, shape)
		opts := stream.Options{CheckpointDir: filepath.Join(b.TempDir(), "ckpt"), CheckpointInterval: interval}
		if i > 0 {
			opts.CheckpointOnCaughtUp = caughtUp
		}
		go func() { done <- j.Run(ctx, opts) }()
	}
	time.Sleep(2 * time.Second) // let the jobs start
	reader, err := kgo.NewClient(kgo.SeedBrokers(brokers), kgo.ConsumeTopics(out),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(10*time.Millisecond))
	if err != nil {
		b.Fatal(err)
	}
	defer reader.Close()
	total := int(benchRate * benchSpan.Seconds())
	go kafkatest.ProduceAtRate(ctx, brokers, in, benchRate, total, func(i int) *kgo.Record {
		return &kgo.Record{Key: benchKey(i), Value: binary.BigEndian.AppendUint64(nil, uint64(time.Now().UnixNano()))}
	})
	var lat []time.Duration
	deadline := time.Now().Add(benchSpan + time.Minute)
	for len(lat) < total && time.Now().Before(deadline) {
		pctx, pcancel := context.WithTimeout(ctx, time.Second)
		fs := reader.PollFetches(pctx)
		pcancel()
		now := time.Now()
		fs.EachRecord(func(r *kgo.Record) {
			lat = append(lat, now.Sub(time.Unix(0, int64(binary.BigEndian.Uint64(r.Value)))))
		})
	}
	cancel()
	for range stages {
		<-done
	}
	if len(lat) < total {
		b.Fatalf("saw %d of %d records", len(lat), total)
	}
	slices.Sort(lat)
	return lat[len(lat)/2], lat[len(lat)*99/100]
}

// benchIntervalBacklog sizes BenchmarkIntervals' backlog: long enough that
// a 1 s interval makes several checkpoints.
var benchIntervalBacklog = flag.Int("bench.backlog", 6_000_000, "BenchmarkIntervals: records of the throughput phase")

// benchReproduce sets SinkOptions.ReproduceAborted on the exactly-once
// sinks of the benchmarks, to measure what it costs.
var benchReproduce = flag.Bool("bench.reproduce", false, "exactly-once sinks with SinkOptions.ReproduceAborted")

// benchDebloat turns on buffer debloating in the throughput runs, to
// measure what it costs a job that is not held back.
var benchDebloat = flag.Duration("bench.debloat", 0, "throughput runs with stream.Options.DebloatTarget")

// BenchmarkIntervals measures exactly-once Kafka → map → Kafka and Kafka →
// keyed count → Kafka at checkpoint intervals of 1 s, 100 ms and 25 ms
// (issue 33), and at-least-once for reference: first the visibility
// latency of every job at benchRate ("latency/…"), then the throughput of
// every job over a backlog of -bench.backlog records ("throughput/…"). The
// latency runs come first, all of them: after a backlog of millions of
// records the broker is busy for a while (deleting the topics among
// others), and a latency run after one saw p99 outliers of 665–897 ms.
//
//	go test -run '^$' -bench Intervals -benchtime 1x ./connectors/kafka/ -args -bench.backlog=6000000
func BenchmarkIntervals(b *testing.B) {
	brokers := testenv.Kafka(b)
	type config struct {
		shape    benchShape
		g        kafka.Guarantee
		interval time.Duration
	}
	var configs []config
	for _, shape := range []benchShape{mapShape, countShape} {
		for _, interval := range []time.Duration{time.Second, 100 * time.Millisecond, 25 * time.Millisecond} {
			configs = append(configs, config{shape, kafka.ExactlyOnce, interval})
		}
		// At least once, checkpoints commit only offsets: the interval does not make visibility.
		configs = append(configs, config{shape, kafka.AtLeastOnce, time.Second})
	}
	for _, c := range configs {
		b.Run(fmt.Sprintf("latency/%v/%v/%v", c.shape, c.g, c.interval), func(b *testing.B) {
			for range b.N {
				p50, p99 := benchLatency(b, brokers, c.g, c.shape, c.interval, 1, 0)
				b.ReportMetric(float64(p50.Milliseconds()), "p50-ms")
				b.ReportMetric(float64(p99.Milliseconds()), "p99-ms")
			}
		})
	}
	for _, c := range configs {
		b.Run(fmt.Sprintf("throughput/%v/%v/%v", c.shape, c.g, c.interval), func(b *testing.B) {
			for range b.N {
				b.ReportMetric(benchThroughput(b, brokers, c.g, c.shape, c.interval, *benchIntervalBacklog), "events/s")
			}
		})
	}
}
