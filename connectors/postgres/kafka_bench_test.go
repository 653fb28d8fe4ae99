package postgres

import (
	"context"
	"flag"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/exactlyonce/exactly/connectors/kafka"
	"github.com/exactlyonce/exactly/internal/kafkatest"
	"github.com/exactlyonce/exactly/internal/testenv"
	"github.com/exactlyonce/exactly/stream"
)

// benchKafkaBacklog sizes BenchmarkKafkaIntervals' input.
var benchKafkaBacklog = flag.Int("bench.kafka-backlog", 1_000_000, "BenchmarkKafkaIntervals: records of the input topic")

// BenchmarkKafkaIntervals measures Kafka → PostgreSQL (a bounded Kafka
// source of 4 partitions, parallelism 2, into a table through the sink in
// each commit mode) at checkpoint intervals of 1 s and 100 ms (issue 33):
// events/s from the job's start until it has committed every row.
//
//	go test -run '^$' -bench KafkaIntervals -benchtime 1x ./connectors/postgres/ -args -bench.kafka-backlog=1000000
func BenchmarkKafkaIntervals(b *testing.B) {
	brokers := testenv.Kafka(b)
	for _, mode := range modes {
		for _, interval := range []time.Duration{time.Second, 100 * time.Millisecond} {
			b.Run(fmt.Sprintf("%v/%v", mode, interval), func(b *testing.B) {
				for range b.N {
					b.ReportMetric(benchKafkaToPostgres(b, brokers, mode, interval, *benchKafkaBacklog), "events/s")
				}
			})
		}
	}
}

// BenchmarkKafkaVisibility measures the visibility latency of Kafka →
// PostgreSQL in each commit mode at checkpoint intervals of 1 s and 100 ms
// (issue 33): records produced at 10,000/s for 8 s, each carrying its
// produce time, and a reader that marks the rows that became visible every
// 5 ms (UPDATE … SET seen … RETURNING, which sees committed rows only),
// taking now minus the produce time of each; p50 and p99.
//
//	go test -run '^$' -bench KafkaVisibility -benchtime 1x ./connectors/postgres/
func BenchmarkKafkaVisibility(b *testing.B) {
	brokers := testenv.Kafka(b)
	for _, mode := range modes {
		for _, interval := range []time.Duration{time.Second, 100 * time.Millisecond} {
			b.Run(fmt.Sprintf("%v/%v", mode, interval), func(b *testing.B) {
				for range b.N {
					p50, p99 := benchKafkaVisibility(b, brokers, mode, interval)
					b.ReportMetric(float64(p50.Milliseconds()), "p50-ms")
					b.ReportMetric(float64(p99.Milliseconds()), "p99-ms")
				}
			})
		}
	}
}

// benchKafkaVisibility runs one visibility measurement.
func benchKafkaVisibility(b *testing.B, brokers string, mode CommitMode, interval time.Duration) (p50, p99 time.Duration) {
	const rate, span = 10_000, 8 * time.Second
	adm := kafkatest.Admin(b, brokers)
	in := kafkatest.UniqueName("pglat-in")
	kafkatest.CreateTopic(b, adm, in, 4)
	b.Cleanup(func() { _, _ = adm.DeleteTopics(context.Background(), in) })
	conn := db(b)
	table := "bench_lat_" + mode.String()
	opts := freshTable(b, conn, table, mode)
	opts.CreateTable = false
	if _, err := conn.Exec(context.Background(), "CREATE TABLE "+table+" (id bigint, name text, seen boolean NOT NULL DEFAULT false)"); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _, _ = conn.Exec(context.Background(), "DROP TABLE IF EXISTS "+table) })
	snk := newTestSink(b, opts)
	src, err := kafka.NewSource(kafka.SourceOptions{Conn: kafka.Conn{Brokers: []string{brokers}}, Topics: []string{in}}, kafka.Bytes())
	if err != nil {
		b.Fatal(err)
	}
	j := stream.New("test")
	rows := stream.Map(stream.Source(j, "in", src, stream.Parallelism(2)), func(r kafka.Record[[]byte]) rec {
		ns, _ := strconv.ParseInt(string(r.Value), 10, 64)
		return rec{ID: ns, Name: "n"} // id: the produce time, in ns
	})
	stream.SinkTo(rows, testSinks[0], snk, stream.Parallelism(2))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- j.Run(ctx, stream.Options{CheckpointDir: filepath.Join(b.TempDir(), "ckpt"), CheckpointInterval: interval})
	}()
	time.Sleep(2 * time.Second) // let the job start
	total := int(rate * span.Seconds())
	go kafkatest.ProduceAtRate(ctx, brokers, in, rate, total, func(int) *kgo.Record {
		return &kgo.Record{Value: []byte(strconv.FormatInt(time.Now().UnixNano(), 10))}
	})
	var lat []time.Duration
	deadline := time.Now().Add(span + time.Minute)
	for len(lat) < total && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
		rs, err := conn.Query(ctx, "UPDATE "+table+" SET seen = true WHERE NOT seen RETURNING id")
		if err != nil {
			b.Fatal(err)
		}
		now := time.Now()
		for rs.Next() {
			var ns int64
			if err := rs.Scan(&ns); err != nil {
				b.Fatal(err)
			}
			lat = append(lat, now.Sub(time.Unix(0, ns)))
		}
		if err := rs.Err(); err != nil {
			b.Fatal(err)
		}
	}
	cancel()
	<-done
	if len(lat) < total {
		b.Fatalf("%d of %d rows became visible", len(lat), total)
	}
	slices.Sort(lat)
	return lat[len(lat)/2], lat[len(lat)*99/100]
}

// benchKafkaToPostgres writes backlog records to a new topic, runs the
// job over them, checks that the table holds them all, and returns the
// events per second of the run.
func benchKafkaToPostgres(b *testing.B, brokers string, mode CommitMode, interval time.Duration, backlog int) float64 {
	adm := kafkatest.Admin(b, brokers)
	in := kafkatest.UniqueName("pgbench-in")
	kafkatest.CreateTopic(b, adm, in, 4)
	b.Cleanup(func() { _, _ = adm.DeleteTopics(context.Background(), in) })
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers), kgo.DefaultProduceTopic(in))
	if err != nil {
		b.Fatal(err)
	}
	for i := 0; i < backlog; i += 10_000 {
		recs := make([]*kgo.Record, min(10_000, backlog-i))
		for k := range recs {
			recs[k] = &kgo.Record{Value: []byte(strconv.Itoa(i + k))}
		}
		if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
			b.Fatal(err)
		}
	}
	cl.Close()
	conn := db(b)
	table := "bench_kafka_" + mode.String()
	opts := freshTable(b, conn, table, mode)
	snk := newTestSink(b, opts)
	src, err := kafka.NewSource(kafka.SourceOptions{Conn: kafka.Conn{Brokers: []string{brokers}}, Topics: []string{in}, Bounded: true}, kafka.Bytes())
	if err != nil {
		b.Fatal(err)
	}
	j := stream.New("test")
	rows := stream.Map(stream.Source(j, "in", src, stream.Parallelism(2)), func(r kafka.Record[[]byte]) rec {
		id, _ := strconv.ParseInt(string(r.Value), 10, 64)
		return rec{ID: id, Name: "n"}
	})
	stream.SinkTo(rows, testSinks[0], snk, stream.Parallelism(2))
	start := time.Now()
	if err := j.Run(context.Background(), stream.Options{CheckpointDir: filepath.Join(b.TempDir(), "ckpt"), CheckpointInterval: interval}); err != nil {
		b.Fatal(err)
	}
	took := time.Since(start)
	if n := ints(b, conn, "SELECT count(*) FROM "+table)[0]; n != int64(backlog) {
		b.Fatalf("the table holds %d rows, want %d", n, backlog)
	}
	return float64(backlog) / took.Seconds()
}
