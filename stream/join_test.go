package stream_test

import (
	"context"
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
