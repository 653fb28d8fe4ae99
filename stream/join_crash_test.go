package stream_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/exactlyonce/exactly/state"
	"github.com/exactlyonce/exactly/stream"
)

// The joins' crash tests (see twoInputCrashTest): every pair committed
// once, as in a failure-free run.

// crashInputs are the crash tests' records as join inputs.
var crashInputs = stream.JoinInputs[int, int]{Time1: crashTime1, Time2: crashTime2, Codec1: state.IntCodec{}, Codec2: state.IntCodec{}}

func pairLine(k int64, a, b int) string { return fmt.Sprintf("%d,%d,%d", k, a, b) }

// intervalPairs joins records within [-3 ms, 2 ms) of each other.
func intervalPairs(a, b stream.KeyedStream[int64, int]) stream.Stream[string] {
	return stream.IntervalJoin(a, b, "join", stream.Interval{Lower: -3 * time.Millisecond, Upper: 2 * time.Millisecond, ExcludeUpper: true},
		crashInputs, pairLine, stream.Parallelism(2))
}

func TestIntervalJoinCrashExactlyOnce(t *testing.T) {
	twoInputCrashTest(t, state.HeapBackend, 3000, keyedBoth(mod8, intervalPairs))
}

func TestIntervalJoinCrashExactlyOncePebble(t *testing.T) {
	twoInputCrashTest(t, state.PebbleBackend, 3000, keyedBoth(mod8, intervalPairs))
}

// windowPairs joins records in sliding windows of 20 ms every 10 ms.
func windowPairs(a, b stream.KeyedStream[int64, int]) stream.Stream[string] {
	return stream.WindowJoin(a, b, "join", stream.Sliding(20*time.Millisecond, 10*time.Millisecond), crashInputs,
		func(k int64, w stream.Window, a, b int) string {
			return fmt.Sprintf("%d,%d,%d,%d", k, w.Start.UnixMilli(), a, b)
		},
		stream.Parallelism(2))
}

func TestWindowJoinCrashExactlyOnce(t *testing.T) {
	twoInputCrashTest(t, state.HeapBackend, 10000, keyedBoth(mod8, windowPairs))
}

func TestWindowJoinCrashExactlyOncePebble(t *testing.T) {
	twoInputCrashTest(t, state.PebbleBackend, 10000, keyedBoth(mod8, windowPairs))
}

// innerPairs joins the records with equal values mod 3000, every record
// kept under an event-time TTL of an hour, which none reaches before the
// end: the kept records carry expiry stamps through every restore, but
// what expires is not tested here (it depends on how the inputs
// interleave; the model test covers it).
func innerPairs(a, b stream.KeyedStream[int64, int]) stream.Stream[string] {
	return stream.InnerJoin(a, b, "join", crashInputs, pairLine, stream.StateTTL(state.TTL{After: time.Hour}), stream.Parallelism(2))
}

func mod3000(i int) int64 { return int64(i % 3000) }

func TestInnerJoinCrashExactlyOnce(t *testing.T) {
	twoInputCrashTest(t, state.HeapBackend, 18000, keyedBoth(mod3000, innerPairs))
}

func TestInnerJoinCrashExactlyOncePebble(t *testing.T) {
	twoInputCrashTest(t, state.PebbleBackend, 18000, keyedBoth(mod3000, innerPairs))
}

// leftOuterPairs is a left outer join written with WindowCoGroup, in
// tumbling windows of 10 ms: each first-input record with its matches, or
// alone.
func leftOuterPairs(a, b stream.KeyedStream[int64, int]) stream.Stream[string] {
	return stream.WindowCoGroup(a, b, "cogroup", stream.Tumbling(30*time.Millisecond), crashInputs,
		func(k int64, w stream.Window, as, bs []int, out *stream.Output[string]) {
			for _, a := range as {
				for _, b := range bs {
					out.Emit(fmt.Sprintf("%d,%d,%d,%d", k, w.Start.UnixMilli(), a, b))
				}
				if len(bs) == 0 {
					out.Emit(fmt.Sprintf("%d,%d,%d,-", k, w.Start.UnixMilli(), a))
				}
			}
		},
		stream.Parallelism(2))
}

func TestWindowCoGroupCrashExactlyOnce(t *testing.T) {
	twoInputCrashTest(t, state.HeapBackend, 10000, keyedBoth(mod8, leftOuterPairs))
}
