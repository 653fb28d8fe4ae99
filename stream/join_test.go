package stream_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/exactlyonce/exactly/state"
	"github.com/exactlyonce/exactly/stream"
)

// TestJoinMisuse checks that every bad argument of a join fails the job
// when it starts, before anything runs, with an error naming the operator,
// the argument and the fix.
func TestJoinMisuse(t *testing.T) {
	pair := func(k int64, a, b int64) int64 { return a + b }
	ok := stream.JoinInputs[int64, int64]{Time1: msTime, Time2: msTime, Codec1: state.Int64Codec{}, Codec2: state.Int64Codec{}}
	noTime, noCodec := ok, ok
	noTime.Time2 = nil
	noCodec.Codec1 = nil
	interval := func(iv stream.Interval, in stream.JoinInputs[int64, int64], join func(int64, int64, int64) int64) func(a, b stream.KeyedStream[int64, int64]) stream.Stream[int64] {
		return func(a, b stream.KeyedStream[int64, int64]) stream.Stream[int64] {
			return stream.IntervalJoin(a, b, "join", iv, in, join)
		}
	}
	window := func(w stream.Windows, in stream.JoinInputs[int64, int64]) func(a, b stream.KeyedStream[int64, int64]) stream.Stream[int64] {
		return func(a, b stream.KeyedStream[int64, int64]) stream.Stream[int64] {
			return stream.WindowJoin(a, b, "join", w, in, func(_ int64, _ stream.Window, a, b int64) int64 { return a + b })
		}
	}
	cogroup := func(fn func(int64, stream.Window, []int64, []int64, *stream.Output[int64]), opts ...stream.WindowOption) func(a, b stream.KeyedStream[int64, int64]) stream.Stream[int64] {
		return func(a, b stream.KeyedStream[int64, int64]) stream.Stream[int64] {
			return stream.WindowCoGroup(a, b, "cogroup", stream.Tumbling(time.Second), ok, fn, opts...)
		}
	}
	emitNothing := func(int64, stream.Window, []int64, []int64, *stream.Output[int64]) {}
	inner := func(in stream.JoinInputs[int64, int64], join func(int64, int64, int64) int64, opts ...stream.JoinOption) func(a, b stream.KeyedStream[int64, int64]) stream.Stream[int64] {
		return func(a, b stream.KeyedStream[int64, int64]) stream.Stream[int64] {
			return stream.InnerJoin(a, b, "join", in, join, opts...)
		}
	}
	for _, c := range []struct {
		name  string
		build func(a, b stream.KeyedStream[int64, int64]) stream.Stream[int64]
		want  string
	}{
		{"lower above upper", interval(stream.Interval{Lower: time.Second, Upper: -time.Second}, ok, pair),
			`IntervalJoin "join": Interval.Lower 1s is above Upper -1s: the interval would be empty; give Lower <= Upper`},
		{"empty point", interval(stream.Interval{Lower: time.Second, Upper: time.Second, ExcludeUpper: true}, ok, pair),
			`IntervalJoin "join": Interval.Lower = Upper = 1s with an excluded bound matches nothing`},
		{"interval without time", interval(stream.Interval{}, noTime, pair), `IntervalJoin "join": JoinInputs.Time1 or Time2 is nil`},
		{"interval without codec", interval(stream.Interval{}, noCodec, pair), `IntervalJoin "join": JoinInputs.Codec1 or Codec2 is nil`},
		{"interval without join", interval(stream.Interval{}, ok, nil), `IntervalJoin "join": the join function is nil`},
		{"zero window", window(stream.Windows{}, ok), `WindowJoin "join": window size 0s and slide 0s must be positive`},
		{"zero session", window(stream.Session(0), ok), `WindowJoin "join": Session gap 0s must be positive`},
		{"window without time", window(stream.Tumbling(time.Second), noTime), `WindowJoin "join": JoinInputs.Time1 or Time2 is nil`},
		{"cogroup without function", cogroup(nil), `WindowCoGroup "cogroup": the join function is nil`},
		{"cogroup with LateRecords", cogroup(emitNothing, stream.LateRecords(stream.NewOutputTag[int64]("late"))),
			`WindowCoGroup "cogroup": the LateRecords option does not apply to two inputs: set JoinInputs.Late1 and Late2`},
		{"cogroup with negative lateness", cogroup(emitNothing, stream.AllowedLateness(-time.Second)), `WindowCoGroup "cogroup": AllowedLateness(-1s) is negative`},
		{"inner without codec", inner(noCodec, pair), `InnerJoin "join": JoinInputs.Codec1 or Codec2 is nil`},
		{"inner without join", inner(ok, nil), `InnerJoin "join": the join function is nil`},
		{"zero TTL", inner(ok, pair, stream.StateTTL(state.TTL{})), `InnerJoin "join": StateTTL After = 0s: use a positive duration`},
	} {
		t.Run(c.name, func(t *testing.T) {
			j := stream.New("join-misuse")
			id := func(v int64) int64 { return v }
			a := stream.KeyBy(stream.Source(j, "a", gated{}), id, state.Int64Codec{})
			b := stream.KeyBy(stream.Source(j, "b", gated{}), id, state.Int64Codec{})
			stream.SinkTo(c.build(a, b), "out", newMemSink[int64]())
			_, err := j.Start(context.Background(), stream.Options{CheckpointDir: t.TempDir()})
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %v, want one containing %q", err, c.want)
			}
		})
	}
}

// TestIntervalJoinBounds joins records of the first input at every ms of
// [0, 20] with one of the second at 10 ms, in [-2 ms, 3 ms] with each
// bound included or excluded.
func TestIntervalJoinBounds(t *testing.T) {
	for _, c := range []struct {
		iv     stream.Interval
		lo, hi int64 // the first input's matching times, inclusive
	}{
		{stream.Interval{Lower: -2 * time.Millisecond, Upper: 3 * time.Millisecond}, 8, 13},
		{stream.Interval{Lower: -2 * time.Millisecond, Upper: 3 * time.Millisecond, ExcludeLower: true}, 9, 13},
		{stream.Interval{Lower: -2 * time.Millisecond, Upper: 3 * time.Millisecond, ExcludeUpper: true}, 8, 12},
		{stream.Interval{Lower: 0, Upper: 0}, 10, 10},
	} {
		j := stream.New("bounds")
		et := stream.EventTime[int64]{Timestamp: msTime}
		var ts []int64
		for v := range int64(21) {
			ts = append(ts, v)
		}
		zero := func(int64) int64 { return 0 }
		a := stream.KeyBy(stream.SourceWithEventTime(j, "a", gated{ts: ts}, et), zero, state.Int64Codec{})
		b := stream.KeyBy(stream.SourceWithEventTime(j, "b", gated{ts: []int64{10}}, et), zero, state.Int64Codec{})
		in := stream.JoinInputs[int64, int64]{Time1: msTime, Time2: msTime, Codec1: state.Int64Codec{}, Codec2: state.Int64Codec{}}
		out := newMemSink[int64]()
		stream.SinkTo(stream.IntervalJoin(a, b, "join", c.iv, in, func(_ int64, a, _ int64) int64 { return a }), "out", out)
		if err := j.Run(context.Background(), stream.Options{CheckpointDir: t.TempDir()}); err != nil {
			t.Fatal(err)
		}
		got := out.Visible()
		slices.Sort(got)
		var want []int64
		for v := c.lo; v <= c.hi; v++ {
			want = append(want, v)
		}
		if !slices.Equal(got, want) {
			t.Errorf("%+v: matched %v, want %v", c.iv, got, want)
		}
	}
}

// TestWindowCoGroupLateFiring: with AllowedLateness, a record arriving
// after its window fired calls the cogroup function again with every
// record of the window and Window.Firing 1. The late record (3 ms) is let
// through only once the window [0, 10 ms) fired at the watermark of the
// record at 50 ms; the second input is empty, so only the first's
// watermark counts.
func TestWindowCoGroupLateFiring(t *testing.T) {
	j := stream.New("cogroup-late")
	et := stream.EventTime[int64]{Timestamp: msTime}
	zero := func(int64) int64 { return 0 }
	out := newMemSink[string]()
	fired := out.written.Reached(1)
	a := stream.KeyBy(stream.SourceWithEventTime(j, "a", gated{ts: []int64{0, 5, 50, 3}, gates: map[int]<-chan struct{}{3: fired}}, et), zero, state.Int64Codec{})
	b := stream.KeyBy(stream.SourceWithEventTime(j, "b", gated{}, et), zero, state.Int64Codec{})
	in := stream.JoinInputs[int64, int64]{Time1: msTime, Time2: msTime, Codec1: state.Int64Codec{}, Codec2: state.Int64Codec{}}
	groups := stream.WindowCoGroup(a, b, "cogroup", stream.Tumbling(10*time.Millisecond), in,
		func(_ int64, w stream.Window, as, bs []int64, out *stream.Output[string]) {
			out.Emit(fmt.Sprintf("window %d firing %d: %v %v", w.Start.UnixMilli(), w.Firing, as, bs))
		}, stream.AllowedLateness(100*time.Millisecond))
	stream.SinkTo(groups, "out", out)
	if err := j.Run(context.Background(), stream.Options{CheckpointDir: t.TempDir()}); err != nil {
		t.Fatal(err)
	}
	got := out.Visible()
	slices.Sort(got)
	want := []string{"window 0 firing 0: [0 5] []", "window 0 firing 1: [0 5 3] []", "window 50 firing 0: [50] []"}
	if !slices.Equal(got, want) {
		t.Errorf("cogroup results %q, want %q", got, want)
	}
}
