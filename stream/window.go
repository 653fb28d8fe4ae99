package stream

import (
	"fmt"
	"time"

	"github.com/exactlyonce/exactly/state"
)

// Windows describes event-time windows aligned to the Unix epoch: windows
// of length size start at every multiple of slide. Make them with
// [Tumbling] or [Sliding].
type Windows struct {
	size, slide time.Duration
}

// Tumbling returns back-to-back windows of the given size: each record
// belongs to exactly one.
func Tumbling(size time.Duration) Windows { return Windows{size: size, slide: size} }

// Sliding returns windows of the given size starting every slide: each
// record belongs to about size/slide of them.
func Sliding(size, slide time.Duration) Windows { return Windows{size: size, slide: slide} }

// Window is one event-time window, [Start, End).
type Window struct {
	Start, End time.Time
}

// Aggregate folds the records of one key and window into an accumulator of
// type A and turns it into the window's output when the window closes.
type Aggregate[K comparable, T, A, OUT any] struct {
	// Add returns acc with v added. The first record of a window gets A's
	// zero value. acc is kept in checkpointed state, so Add must not modify
	// memory acc refers to (the elements of a slice, a map): return a new
	// value instead. Required.
	Add func(acc A, v T) A
	// Result returns the output of a closed window. Required.
	Result func(key K, w Window, acc A) OUT
	// Codec encodes accumulators in checkpoints. Required.
	Codec state.Codec[A]
}

// WindowAggregate aggregates the records of each key per event-time window
// and emits one output per key and window when the watermark passes the
// window's end (see [SourceWithEventTime]). timestamp returns a record's
// event time. A record arriving after every window it belongs to closed is
// dropped and counted in [Metrics].LateRecords. name must be unique
// and stable: the open windows are checkpointed under it.
func WindowAggregate[K comparable, T, A, OUT any](ks KeyedStream[K, T], name string, w Windows, timestamp func(T) time.Time,
	agg Aggregate[K, T, A, OUT], opts ...KeyedOption) Stream[OUT] {
	j := ks.s.job
	switch {
	case w.size <= 0 || w.slide <= 0:
		j.fail("WindowAggregate %q: window size %v and slide %v must be positive: use Tumbling(size) or Sliding(size, slide) with positive durations", name, w.size, w.slide)
	case timestamp == nil:
		j.fail("WindowAggregate %q: the timestamp function is nil", name)
	case agg.Add == nil || agg.Result == nil || agg.Codec == nil:
		j.fail("WindowAggregate %q: Aggregate.Add, Result and Codec are required", name)
	}
	return Process(ks, name, func(ctx *Context[K]) (ProcessFunc[K, T, OUT], error) {
		accs, err := state.NewMapState(ctx.State(), "windows", state.Int64Codec{}, agg.Codec)
		if err != nil {
			return ProcessFunc[K, T, OUT]{}, err
		}
		size, slide := int64(w.size), int64(w.slide)
		return ProcessFunc[K, T, OUT]{
			Process: func(ctx *Context[K], v T, _ *Output[OUT]) error {
				t := timestamp(v).UnixNano()
				windows, closed := 0, 0
				for start := t - mod(t, slide); start > t-size; start -= slide {
					windows++
					end := start + size
					if end-1 <= ctx.watermark {
						closed++
						continue
					}
					accs.Compute(start, func(acc A, open bool) A {
						if !open {
							ctx.RegisterEventTimer(time.Unix(0, end-1))
						}
						return agg.Add(acc, v)
					})
				}
				if windows > 0 && closed == windows {
					ctx.oc.LateRecords.Add(1)
				}
				return nil
			},
			OnEventTimer: func(ctx *Context[K], when time.Time, out *Output[OUT]) error {
				start := when.UnixNano() + 1 - size
				acc, ok := accs.Get(start)
				if !ok {
					return fmt.Errorf("window [%v, %v) of key %v closed without an accumulator: internal error", time.Unix(0, start), time.Unix(0, start+size), ctx.Key())
				}
				accs.Remove(start)
				out.Emit(agg.Result(ctx.Key(), Window{Start: time.Unix(0, start), End: time.Unix(0, start+size)}, acc))
				return nil
			},
		}, nil
	}, opts...)
}

// mod returns t modulo m in [0, m), also for negative t.
func mod(t, m int64) int64 { return (t%m + m) % m }
