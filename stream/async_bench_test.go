package stream_test

import (
	"context"
	"testing"
	"time"

	"github.com/exactlyonce/exactly/state"
	"github.com/exactlyonce/exactly/stream"
)

// BenchmarkAsyncMap runs b.N records through AsyncMap, one subtask, into
// an in-memory sink: a lookup that takes 1 ms (a sleep, as a remote call
// waits), at several capacities, ordered and unordered; and a lookup that
// returns at once, which measures the operator's own cost per record.
func BenchmarkAsyncMap(b *testing.B) {
	sleep := func(ctx context.Context, v int) (int, error) {
		select {
		case <-time.After(time.Millisecond):
		case <-ctx.Done():
		}
		return v, nil
	}
	now := func(_ context.Context, v int) (int, error) { return v, nil }
	for _, c := range []struct {
		name string
		fn   func(context.Context, int) (int, error)
		o    stream.AsyncOptions
	}{
		{"1ms/capacity=1", sleep, stream.AsyncOptions{Capacity: 1}},
		{"1ms/capacity=10", sleep, stream.AsyncOptions{Capacity: 10}},
		{"1ms/capacity=100", sleep, stream.AsyncOptions{Capacity: 100}},
		{"1ms/capacity=100/unordered", sleep, stream.AsyncOptions{Capacity: 100, Unordered: true}},
		{"0ms/capacity=100", now, stream.AsyncOptions{Capacity: 100}},
	} {
		b.Run(c.name, func(b *testing.B) {
			j := stream.New("async-bench")
			in := stream.Source(j, "numbers", counting{n: b.N, splits: 1})
			stream.SinkTo(stream.AsyncMap(in, "lookup", state.IntCodec{}, c.fn, c.o), "out", newMemSink[int]())
			b.ResetTimer()
			if err := j.Run(context.Background(), stream.Options{CheckpointDir: b.TempDir(), CheckpointInterval: time.Second}); err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
		})
	}
}
