package stream_test

import (
	"context"
	"testing"
	"time"

	"github.com/exactlyonce/exactly/state"
	"github.com/exactlyonce/exactly/stream"
)

// BenchmarkJoins runs each join over two inputs of b.N records each (the
// value as event time in ms, 5,000 keys: a key's records 5 s apart), with
// one to three matches per record, into an in-memory sink, parallelism 1.
func BenchmarkJoins(b *testing.B) {
	const keys = 5000
	inputs := stream.JoinInputs[int, int]{Time1: millis, Time2: millis, Codec1: state.IntCodec{}, Codec2: state.IntCodec{}}
	pair := func(_ int64, a, b int) int { return a - b }
	for _, c := range []struct {
		name string
		join func(a, b stream.KeyedStream[int64, int]) stream.Stream[int]
	}{
		{"interval", func(a, b stream.KeyedStream[int64, int]) stream.Stream[int] {
			return stream.IntervalJoin(a, b, "join", stream.Interval{Lower: -5 * time.Second, Upper: 5 * time.Second}, inputs, pair)
		}},
		{"window", func(a, b stream.KeyedStream[int64, int]) stream.Stream[int] {
			return stream.WindowJoin(a, b, "join", stream.Tumbling(10*time.Second), inputs, func(_ int64, _ stream.Window, a, b int) int { return a - b })
		}},
		{"inner-ttl", func(a, b stream.KeyedStream[int64, int]) stream.Stream[int] {
			return stream.InnerJoin(a, b, "join", inputs, pair, stream.StateTTL(state.TTL{After: 10 * time.Second}))
		}},
	} {
		b.Run(c.name, func(b *testing.B) {
			j := stream.New("joins")
			key := func(v int) int64 { return int64(v % keys) }
			et := stream.EventTime[int]{Timestamp: millis}
			in1 := stream.KeyBy(stream.SourceWithEventTime(j, "in1", counting{n: b.N, splits: 1}, et), key, state.Int64Codec{})
			in2 := stream.KeyBy(stream.SourceWithEventTime(j, "in2", counting{n: b.N, splits: 1}, et), key, state.Int64Codec{})
			stream.SinkTo(c.join(in1, in2), "out", newMemSink[int]())
			b.ResetTimer()
			if err := j.Run(context.Background(), stream.Options{CheckpointDir: b.TempDir(), CheckpointInterval: time.Second}); err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(2*b.N), "ns/record")
		})
	}
}
