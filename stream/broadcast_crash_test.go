package stream_test

import (
	"fmt"
	"time"

	"testing"

	"github.com/exactlyonce/exactly/state"
	"github.com/exactlyonce/exactly/stream"
)

// TestBroadcastProcessCrashExactlyOnce: input 1 keyed by mod8, input 2
// broadcast as rules (rule i has value 7i); per key and 100 ms of event
// time the count and sum of input 1 and the rule of the newest input 2
// record that the watermark guarantees has arrived, read from broadcast
// state, emitted by an event-time timer; every 1000th rule is announced by
// each subtask. A rule lost in a restore shows as "missing".
func TestBroadcastProcessCrashExactlyOnce(t *testing.T) {
	twoInputCrashTest(t, state.HeapBackend, 700, bucketsWithRules)
}

// TestBroadcastProcessCrashExactlyOncePebble is
// TestBroadcastProcessCrashExactlyOnce with the keyed state in the Pebble
// backend.
func TestBroadcastProcessCrashExactlyOncePebble(t *testing.T) {
	twoInputCrashTest(t, state.PebbleBackend, 700, bucketsWithRules)
}

// ruleBefore returns the newest input 2 record at least 12 ms of event
// time before end, or -1 if there is none: the watermark that fires the
// timer at end−1 guarantees it arrived.
func ruleBefore(end int64) int {
	i := int((end - 12) * 2 / 3)
	for i >= 0 && crashTime2(i).UnixMilli() > end-12 {
		i--
	}
	return i
}

func bucketsWithRules(a, b stream.Stream[int]) stream.Stream[string] {
	const bucket = 100 * time.Millisecond
	type out = stream.BroadcastProcessFunc[int64, int, int, string]
	return stream.BroadcastProcess(stream.KeyBy(a, mod8, state.Int64Codec{}), b, "rules", func(ctx *stream.Context[int64]) (out, error) {
		rules, err := stream.NewBroadcastState(ctx, "rules", state.IntCodec{}, state.IntCodec{})
		if err != nil {
			return out{}, err
		}
		sums, err := state.NewMapState(ctx.State(), "sums", state.Int64Codec{}, state.JSONCodec[bucketSums]{})
		if err != nil {
			return out{}, err
		}
		return out{
			Process: func(ctx *stream.Context[int64], v int, _ *stream.Output[string]) error {
				end := crashTime1(v).Truncate(bucket).Add(bucket).UnixMilli()
				sums.Compute(end, func(s bucketSums, _ bool) bucketSums { s.CountA++; s.SumA += v; return s })
				ctx.RegisterEventTimer(time.UnixMilli(end - 1))
				return nil
			},
			ProcessBroadcast: func(ctx *stream.BroadcastContext, v int, o *stream.Output[string]) error {
				if v%1000 == 0 {
					o.Emit(fmt.Sprintf("rule %d at subtask %d", v, ctx.Subtask()))
				}
				return rules.Put(v, 7*v)
			},
			OnEventTimer: func(ctx *stream.Context[int64], when time.Time, o *stream.Output[string]) error {
				end := when.UnixMilli() + 1
				s, ok := sums.Get(end)
				if !ok {
					return nil
				}
				sums.Remove(end)
				rule := "none"
				if i := ruleBefore(end); i >= 0 {
					rule = fmt.Sprintf("rule %d missing", i)
					if r, ok := rules.Get(i); ok {
						rule = fmt.Sprintf("rule %d=%d", i, r)
					}
				}
				o.Emit(fmt.Sprintf("%d,%d,%d,%d,%s", ctx.Key(), end, s.CountA, s.SumA, rule))
				return nil
			},
		}, nil
	}, stream.Parallelism(2))
}
