package runtime_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/exactlyonce/exactly/sink"
	"github.com/exactlyonce/exactly/stream"
)

// TestEveryOperatorCountsTheRecordsItReceives: each operator's records in,
// chained or at the head of a task, are the records it received. A chained
// map showed "records in 0, records out 796": only sources and keyed
// operators counted their own.
func TestEveryOperatorCountsTheRecordsItReceives(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n = 1000
		out := newTxSink()
		j := stream.New("counted")
		nums := stream.Source(j, "numbers", ints{n})
		doubled := stream.Map(nums, func(v int) int { return 2 * v }, stream.Name("double"))
		small := stream.Filter(doubled, func(v int) bool { return v < n }, stream.Name("small"))
		stream.SinkTo(small, "out", sink.Sink[int](out))
		r, err := j.Start(context.Background(), stream.Options{CheckpointDir: t.TempDir(), CheckpointInterval: 10 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		if err := r.Wait(); err != nil {
			t.Fatal(err)
		}
		m := r.Metrics()
		for op, want := range map[string]int64{"numbers": n, "double": n, "small": n, "out": n / 2} {
			if got := m.Records(op); got != want {
				t.Errorf("operator %s: records in %d, want %d", op, got, want)
			}
		}
		if got := m.RecordsOutByOperator()["double"]; got != n {
			t.Errorf("operator double: records out %d, want %d", got, n)
		}
	})
}
