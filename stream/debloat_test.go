package stream_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/exactlyonce/exactly/sink"
	"github.com/exactlyonce/exactly/stream"
)

// TestDebloatShrinksBatches: behind a subtask that takes 1 ms per record
// (in a bubble's fake time), with Options.DebloatTarget = 200 ms the
// batches its producers send shrink to what its queues may hold, 200
// records over 16 queued batches, so the least size, 16; without, they
// stay as the source reads them, up to 512. Every record arrives once
// either way.
func TestDebloatShrinksBatches(t *testing.T) {
	const records = 30_000
	for _, target := range []time.Duration{0, 200 * time.Millisecond} {
		synctest.Test(t, func(t *testing.T) {
			out := &sizesSink{memSink: newMemSink[int]()}
			j := stream.New("debloat")
			in := stream.Source(j, "numbers", counting{n: records, splits: 2, batch: 512}, stream.Parallelism(2))
			slow := stream.Map(in, func(v int) int { time.Sleep(time.Millisecond); return v }, stream.Name("slow"), stream.Parallelism(1))
			stream.SinkTo(slow, "out", out, stream.Parallelism(1))
			if err := j.Run(context.Background(), stream.Options{CheckpointDir: t.TempDir(), CheckpointInterval: 100 * time.Millisecond,
				DebloatTarget: target}); err != nil {
				t.Fatal(err)
			}
			if got := len(out.Visible()); got != records {
				t.Fatalf("debloat %v: %d records committed, want %d", target, got, records)
			}
			out.mu.Lock()
			last := slices.Clone(out.sizes[len(out.sizes)/2:]) // after the first measures
			out.mu.Unlock()
			largest := slices.Max(last)
			switch {
			case target > 0 && largest > 16:
				t.Errorf("debloat %v: the second half of the batches have up to %d records, want at most 16: %v", target, largest, last)
			case target == 0 && largest <= 16:
				t.Errorf("without debloating the second half of the batches have at most %d records: %v", largest, last)
			}
			t.Logf("debloat %v: %d batches, the second half of at most %d records", target, len(out.sizes), largest)
		})
	}
}

// sizesSink is a memSink that notes the size of every batch written.
type sizesSink struct {
	*memSink[int]
	mu    sync.Mutex
	sizes []int
}

func (s *sizesSink) NewWriter(ctx context.Context, info sink.WriterInfo) (sink.Writer[int], error) {
	w, err := s.memSink.NewWriter(ctx, info)
	return sizesWriter{Writer: w, s: s}, err
}

type sizesWriter struct {
	sink.Writer[int]
	s *sizesSink
}

func (w sizesWriter) Write(ctx context.Context, b []int) error {
	w.s.mu.Lock()
	w.s.sizes = append(w.s.sizes, len(b))
	w.s.mu.Unlock()
	return w.Writer.Write(ctx, b)
}
