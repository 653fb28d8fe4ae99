package stream

import (
	"math"
	"time"

	"github.com/exactlyonce/exactly/state"
)

// Interval bounds the event times of the pairs an [IntervalJoin] matches:
// a record a of the first input and b of the second match when
// a's time - b's time lies between Lower and Upper. Both bounds are
// inclusive unless excluded: Interval{Lower: -time.Minute} matches a
// within the minute before b, both ends included.
type Interval struct {
	// Lower and Upper bound a's time - b's time. Lower <= Upper.
	Lower, Upper time.Duration
	// ExcludeLower and ExcludeUpper make a bound exclusive.
	ExcludeLower, ExcludeUpper bool
}

// contains reports whether d, a's time - b's time, lies in iv.
func (iv Interval) contains(d int64) bool {
	lo, hi := int64(iv.Lower), int64(iv.Upper)
	return (d > lo || d == lo && !iv.ExcludeLower) && (d < hi || d == hi && !iv.ExcludeUpper)
}

// IntervalJoin joins two keyed streams on event time: for each key, it
// emits join(key, a, b) once for every record a of the first input and b
// of the second whose times satisfy a's time - b's time ∈ [Lower, Upper]
// of within, as soon as the later of the two arrives. A record waits in
// checkpointed state until the watermark (the least of both inputs') shows
// that no record it could match can still come: a record of the first
// input at t until the watermark reaches t - Lower, one of the second at
// t until it reaches t + Upper. A record at or behind the watermark when
// it arrives is late: its matches may be gone, so it is counted in
// [Metrics].LateRecords, and dropped or sent to the side output of
// [JoinInputs].Late1 or Late2. name must be unique and stable: the
// waiting records are checkpointed under it.
func IntervalJoin[K comparable, A, B, OUT any](a KeyedStream[K, A], b KeyedStream[K, B], name string, within Interval,
	in JoinInputs[A, B], join func(key K, a A, b B) OUT, opts ...KeyedOption) Stream[OUT] {
	j := a.s.job
	switch {
	case within.Lower > within.Upper:
		j.fail("IntervalJoin %q: Interval.Lower %v is above Upper %v: the interval would be empty; give Lower <= Upper", name, within.Lower, within.Upper)
	case within.Lower == within.Upper && (within.ExcludeLower || within.ExcludeUpper):
		j.fail("IntervalJoin %q: Interval.Lower = Upper = %v with an excluded bound matches nothing: include both bounds or widen the interval", name, within.Lower)
	}
	checkJoin(j, "IntervalJoin", name, in, true, join == nil)
	return connect(a, b, "IntervalJoin", name, func(ctx *Context[K]) (ProcessFunc[K, either[A, B], OUT], error) {
		return newIntervalJoin(ctx, within, in, join)
	}, opts)
}

// newIntervalJoin returns the process function of an interval join: each
// input's waiting records are a map state from event time to the records
// at that time, and an event-time timer per time removes them.
func newIntervalJoin[K comparable, A, B, OUT any](ctx *Context[K], iv Interval, in JoinInputs[A, B], join func(K, A, B) OUT) (ProcessFunc[K, either[A, B], OUT], error) {
	waiting1, err := state.NewMapState(ctx.State(), "waiting1", state.Int64Codec{}, listCodec[A]{in.Codec1})
	if err != nil {
		return ProcessFunc[K, either[A, B], OUT]{}, err
	}
	waiting2, err := state.NewMapState(ctx.State(), "waiting2", state.Int64Codec{}, listCodec[B]{in.Codec2})
	if err != nil {
		return ProcessFunc[K, either[A, B], OUT]{}, err
	}
	lower, upper := int64(iv.Lower), int64(iv.Upper)
	return ProcessFunc[K, either[A, B], OUT]{
		Process: func(ctx *Context[K], v either[A, B], out *Output[OUT]) error {
			var t int64
			if v.second {
				t = in.Time2(v.b).UnixNano()
			} else {
				t = in.Time1(v.a).UnixNano()
			}
			if t <= ctx.watermark {
				ctx.oc.LateRecords.Add(1)
				emitLate(in, v, out)
				return nil
			}
			if v.second {
				arrive(ctx, t, v.b, waiting2, waiting1, addSigned(t, upper), func(t1 int64, a A) {
					if iv.contains(t1 - t) {
						out.Emit(join(ctx.Key(), a, v.b))
					}
				})
				return nil
			}
			arrive(ctx, t, v.a, waiting1, waiting2, addSigned(t, -lower), func(t2 int64, b B) {
				if iv.contains(t - t2) {
					out.Emit(join(ctx.Key(), v.a, b))
				}
			})
			return nil
		},
		// The timer at when is due for the first input's records at
		// when + Lower and the second's at when - Upper; a timer is set
		// per waiting time, so together they remove every one.
		OnEventTimer: func(_ *Context[K], when time.Time, _ *Output[OUT]) error {
			w := when.UnixNano()
			waiting1.Remove(addSigned(w, lower))
			waiting2.Remove(addSigned(w, -upper))
			return nil
		},
	}, nil
}

// arrive handles the record v at t, not late, of one input of an
// interval join: match is called with every record waiting in the other
// input's map, and v waits in its own until the watermark reaches
// cleanup.
func arrive[K comparable, V, W any](ctx *Context[K], t int64, v V, own *state.MapState[K, int64, []V], other *state.MapState[K, int64, []W],
	cleanup int64, match func(at int64, w W)) {
	for at, ws := range other.All() {
		for _, w := range ws {
			match(at, w)
		}
	}
	own.Compute(t, func(vs []V, _ bool) []V { return append(vs[:len(vs):len(vs)], v) })
	ctx.RegisterEventTimer(time.Unix(0, cleanup))
}

// addSigned returns a+b, saturating at the bounds of int64.
func addSigned(a, b int64) int64 {
	switch {
	case b > 0 && a > math.MaxInt64-b:
		return math.MaxInt64
	case b < 0 && a < math.MinInt64-b:
		return math.MinInt64
	}
	return a + b
}
