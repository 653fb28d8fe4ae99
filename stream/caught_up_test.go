package stream_test

import (
	"context"
	"testing"
	"time"

	"github.com/exactlyonce/exactly/internal/testwait"
	"github.com/exactlyonce/exactly/stream"
)

// TestCheckpointOnCaughtUp runs a job whose checkpoint interval never
// comes (an hour) with Options.CheckpointOnCaughtUp: once its source has
// read its records and finds nothing more to read, a checkpoint is
// triggered and the sink's output committed.
func TestCheckpointOnCaughtUp(t *testing.T) {
	src := listSource{lists: [][]int{{1, 2, 3, 4, 5}}, unbounded: true}
	out := newMemSink[int]()
	j := stream.New("caught-up")
	stream.SinkTo(stream.Source(j, "in", src), "out", out)
	var completed testwait.Counter
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r, err := j.Start(ctx, stream.Options{CheckpointDir: t.TempDir(), CheckpointInterval: time.Hour, CheckpointOnCaughtUp: 10 * time.Millisecond,
		Probe: testwait.Checkpoints(&completed, nil)})
	if err != nil {
		t.Fatal(err)
	}
	// The guard is far below the interval: only a caught-up checkpoint
	// can commit within it.
	testwait.For(t, out.rowsVisible.Reached(5), time.Minute, "the 5 records committed by a checkpoint triggered on catching up", nil)
	if n := completed.Load(); n < 1 {
		t.Errorf("%d checkpoints completed, want at least 1", n)
	}
	r.Stop()
	if err := r.Wait(); err != nil {
		t.Fatal(err)
	}
}
