package stream_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"

	"github.com/exactlyonce/exactly/internal/testwait"
	"github.com/exactlyonce/exactly/state"
	"github.com/exactlyonce/exactly/stream"
)

// rulesOf is the setup of the broadcast tests' operator: ProcessBroadcast
// keeps every rule (an int, keyed by itself) and emits what subtask saw
// it; Process emits each event with the number of rules its subtask holds
// in Sum, after calling seen with its subtask.
func rulesOf(seen func(subtask int)) func(ctx *stream.Context[int64]) (stream.BroadcastProcessFunc[int64, int, int, total], error) {
	return func(ctx *stream.Context[int64]) (stream.BroadcastProcessFunc[int64, int, int, total], error) {
		rules, err := stream.NewBroadcastState(ctx, "rules", state.IntCodec{}, state.IntCodec{})
		return stream.BroadcastProcessFunc[int64, int, int, total]{
			Process: func(ctx *stream.Context[int64], v int, out *stream.Output[total]) error {
				if seen != nil {
					seen(ctx.Subtask())
				}
				out.Emit(total{Key: int(ctx.Key()), Value: v, Sum: rules.Len()})
				return nil
			},
			ProcessBroadcast: func(ctx *stream.BroadcastContext, r int, out *stream.Output[total]) error {
				out.Emit(total{Key: -1 - ctx.Subtask(), Value: r})
				return rules.Put(r, r)
			},
		}, err
	}
}

// broadcastJob reads events and rules into BroadcastProcess with rulesOf.
func broadcastJob(events, rules counting, par int, sink *memSink[total], seen func(int)) *stream.Job {
	j := stream.New("broadcast")
	ev := stream.KeyBy(stream.Source(j, "events", events), func(v int) int64 { return int64(v % 10) }, state.Int64Codec{})
	rs := stream.Source(j, "rules", rules)
	stream.SinkTo(stream.BroadcastProcess(ev, rs, "apply", rulesOf(seen), stream.Parallelism(par)), "out", sink)
	return j
}

// TestBroadcastProcessReachesEverySubtask: every rule reaches every one
// of three subtasks once, and every event its key's subtask once.
func TestBroadcastProcessReachesEverySubtask(t *testing.T) {
	defer goleak.VerifyNone(t)
	synctest.Test(t, func(t *testing.T) {
		sink := newMemSink[total]()
		j := broadcastJob(counting{n: 2000, splits: 2, delay: time.Millisecond}, counting{n: 20, splits: 1}, 3, sink, nil)
		if err := j.Run(context.Background(), stream.Options{CheckpointDir: t.TempDir(), CheckpointInterval: 10 * time.Millisecond}); err != nil {
			t.Fatal(err)
		}
		got := map[[2]int]int{} // subtask, rule → times
		for _, r := range sink.Visible() {
			if r.Key < 0 {
				got[[2]int{-1 - r.Key, r.Value}]++
			}
		}
		for sub := range 3 {
			for rule := range 20 {
				if n := got[[2]int{sub, rule}]; n != 1 {
					t.Errorf("subtask %d got rule %d %d times, want once", sub, rule, n)
				}
			}
		}
		if len(got) != 60 {
			t.Errorf("%d (subtask, rule) pairs, want 60", len(got))
		}
		checkEventsOnce(t, sink.Visible(), 2000)
	})
}

// checkEventsOnce checks that every event of [0, n) is in rows once, rows
// of a negative key being ProcessBroadcast's.
func checkEventsOnce(t *testing.T, rows []total, n int) {
	t.Helper()
	seen := make([]int, n)
	for _, r := range rows {
		if r.Key >= 0 {
			seen[r.Value]++
		}
	}
	for v, k := range seen {
		if k != 1 {
			t.Fatalf("event %d visible %d times, want once", v, k)
		}
	}
}

// TestBroadcastStateRescalesAcrossRuns stops a job in the middle of its
// events, long after its 50 rules were read, and resumes it from its
// checkpoints at parallelisms 1, 2, 3, 1: the rules are not read again,
// so every subtask of every later run must hold all 50 from the
// checkpoint's one copy, also those that did not exist when it was taken.
func TestBroadcastStateRescalesAcrossRuns(t *testing.T) {
	defer goleak.VerifyNone(t)
	synctest.Test(t, func(t *testing.T) {
		sink := newMemSink[total]()
		dir := t.TempDir()
		events, rules := counting{n: 6000, splits: 4, delay: 2 * time.Millisecond}, counting{n: 50, splits: 1}
		var mu sync.Mutex
		checked := map[[2]int]int{} // run, subtask → events
		for run, par := range rescales {
			before := len(sink.Visible())
			seen := func(sub int) {
				mu.Lock()
				checked[[2]int{run, sub}]++
				mu.Unlock()
			}
			ctx, cancel := context.WithCancel(context.Background())
			var done testwait.Counter
			r, err := broadcastJob(events, rules, par, sink, seen).Start(ctx, stream.Options{CheckpointDir: dir, CheckpointInterval: 10 * time.Millisecond, Probe: testwait.Checkpoints(&done, nil)})
			if err != nil {
				t.Fatal(err)
			}
			if run < len(rescales)-1 {
				untilCheckpoints(t, r, &done, 3, time.Minute, cancel)
				cancel()
				if err := r.Wait(); !errors.Is(err, context.Canceled) {
					t.Fatalf("run %d: Wait = %v, want context.Canceled", run, err)
				}
			} else {
				if err := r.Wait(); err != nil {
					t.Fatal(err)
				}
				cancel()
			}
			if run == 0 {
				continue
			}
			for _, row := range sink.Visible()[before:] {
				if row.Key >= 0 && row.Sum != 50 {
					t.Fatalf("run %d at parallelism %d: event %d saw %d rules, want the 50 of the checkpoint", run, par, row.Value, row.Sum)
				}
			}
			for sub := range par {
				if checked[[2]int{run, sub}] == 0 {
					t.Errorf("run %d: subtask %d of %d processed no event", run, sub, par)
				}
			}
		}
		checkEventsOnce(t, sink.Visible(), 6000)
	})
}

// TestBroadcastStateRules: broadcast state changes only in
// ProcessBroadcast, is declared only in a BroadcastProcess operator's
// setup, and each misuse says so.
func TestBroadcastStateRules(t *testing.T) {
	defer goleak.VerifyNone(t)
	synctest.Test(t, func(t *testing.T) {
		var putErr, outsideErr error
		j := stream.New("broadcast-rules")
		ev := stream.KeyBy(stream.Source(j, "events", counting{n: 10, splits: 1}), func(v int) int64 { return int64(v) }, state.Int64Codec{})
		rs := stream.Source(j, "rules", counting{n: 1, splits: 1})
		out := stream.BroadcastProcess(ev, rs, "apply", func(ctx *stream.Context[int64]) (stream.BroadcastProcessFunc[int64, int, int, int], error) {
			rules, err := stream.NewBroadcastState(ctx, "rules", state.IntCodec{}, state.IntCodec{})
			if err != nil {
				return stream.BroadcastProcessFunc[int64, int, int, int]{}, err
			}
			if _, err := stream.NewBroadcastState(ctx, "rules", state.IntCodec{}, state.IntCodec{}); err == nil || !strings.Contains(err.Error(), "declared twice") {
				t.Errorf("declaring a broadcast state twice: %v, want the declared-twice error", err)
			}
			return stream.BroadcastProcessFunc[int64, int, int, int]{
				Process: func(_ *stream.Context[int64], v int, _ *stream.Output[int]) error {
					if err := rules.Put(v, v); err != nil && putErr == nil {
						putErr = err
					}
					return nil
				},
				ProcessBroadcast: func(*stream.BroadcastContext, int, *stream.Output[int]) error { return nil },
			}, nil
		})
		plain := stream.Process(stream.KeyBy(out, func(v int) int64 { return int64(v) }, state.Int64Codec{}), "plain",
			func(ctx *stream.Context[int64]) (stream.ProcessFunc[int64, int, int], error) {
				_, outsideErr = stream.NewBroadcastState(ctx, "rules", state.IntCodec{}, state.IntCodec{})
				return stream.ProcessFunc[int64, int, int]{Process: func(*stream.Context[int64], int, *stream.Output[int]) error { return nil }}, nil
			})
		stream.SinkTo(plain, "out", newMemSink[int]())
		if err := j.Run(context.Background(), stream.Options{CheckpointDir: t.TempDir()}); err != nil {
			t.Fatal(err)
		}
		if putErr == nil || !strings.Contains(putErr.Error(), `broadcast state "rules": Put outside ProcessBroadcast`) {
			t.Errorf("Put in Process: %v, want the outside-ProcessBroadcast error", putErr)
		}
		if outsideErr == nil || !strings.Contains(outsideErr.Error(), "not a BroadcastProcess operator's") {
			t.Errorf("NewBroadcastState in Process's setup: %v, want the not-a-BroadcastProcess error", outsideErr)
		}
	})
}
