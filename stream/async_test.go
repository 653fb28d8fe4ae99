package stream_test

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"

	"github.com/exactlyonce/exactly/connectors/file"
	"github.com/exactlyonce/exactly/connectors/generator"
	"github.com/exactlyonce/exactly/internal/crashtest"
	"github.com/exactlyonce/exactly/internal/crashtest/crashtesting"
	"github.com/exactlyonce/exactly/state"
	"github.com/exactlyonce/exactly/stream"
)

// slowDouble is a lookup that takes 1 to 7 ms, longer for some values
// than for later ones, and counts the calls in flight in now, the most
// at once in peak.
func slowDouble(now, peak *atomic.Int64) func(context.Context, int) (int, error) {
	return func(ctx context.Context, v int) (int, error) {
		n := now.Add(1)
		defer now.Add(-1)
		for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
		}
		select {
		case <-time.After(time.Duration(1+(v*37)%7) * time.Millisecond):
		case <-ctx.Done():
			return 0, ctx.Err()
		}
		return 2 * v, nil
	}
}

// TestAsyncMapOrdered: with one subtask, the results keep the input's
// order although the calls overlap (up to the capacity of 8) and finish
// out of order.
func TestAsyncMapOrdered(t *testing.T) {
	defer goleak.VerifyNone(t)
	synctest.Test(t, func(t *testing.T) {
		var now, peak atomic.Int64
		j := stream.New("async-ordered")
		in := stream.Source(j, "numbers", counting{n: 500, splits: 1})
		out := stream.AsyncMap(in, "lookup", state.IntCodec{}, slowDouble(&now, &peak), stream.AsyncOptions{Capacity: 8})
		sink := newMemSink[int]()
		stream.SinkTo(out, "out", sink)
		if err := j.Run(context.Background(), stream.Options{CheckpointDir: t.TempDir(), CheckpointInterval: 5 * time.Millisecond}); err != nil {
			t.Fatal(err)
		}
		got := sink.Visible()
		want := make([]int, 500)
		for i := range want {
			want[i] = 2 * i
		}
		if !slices.Equal(got, want) {
			t.Errorf("results %v…, want the doubles in input order", got[:min(len(got), 10)])
		}
		if p := peak.Load(); p < 2 || p > 8 {
			t.Errorf("at most %d calls at once, want between 2 and the capacity of 8", p)
		}
	})
}

// TestAsyncMapUnordered: every result once, whatever the order.
func TestAsyncMapUnordered(t *testing.T) {
	defer goleak.VerifyNone(t)
	synctest.Test(t, func(t *testing.T) {
		var now, peak atomic.Int64
		j := stream.New("async-unordered")
		in := stream.Source(j, "numbers", counting{n: 500, splits: 2})
		out := stream.AsyncMap(in, "lookup", state.IntCodec{}, slowDouble(&now, &peak), stream.AsyncOptions{Capacity: 16, Unordered: true}, stream.Parallelism(2))
		sink := newMemSink[int]()
		stream.SinkTo(out, "out", sink)
		if err := j.Run(context.Background(), stream.Options{CheckpointDir: t.TempDir(), CheckpointInterval: 5 * time.Millisecond}); err != nil {
			t.Fatal(err)
		}
		got := sink.Visible()
		slices.Sort(got)
		for i, v := range got {
			if v != 2*i {
				t.Fatalf("result %d is %d: want each double of 0…499 once (%d results)", i, v, len(got))
			}
		}
		if len(got) != 500 {
			t.Errorf("%d results, want 500", len(got))
		}
	})
}

// TestAsyncMapRetriesThenFails: a call that fails twice succeeds on its
// third attempt; one that always fails (or panics) fails the job with an
// error that says how often it was tried.
func TestAsyncMapRetriesThenFails(t *testing.T) {
	defer goleak.VerifyNone(t)
	synctest.Test(t, func(t *testing.T) {
		run := func(fn func(context.Context, int) (int, error)) ([]int, error) {
			j := stream.New("async-retries")
			in := stream.Source(j, "numbers", counting{n: 20, splits: 1})
			sink := newMemSink[int]()
			stream.SinkTo(stream.AsyncMap(in, "lookup", state.IntCodec{}, fn, stream.AsyncOptions{Backoff: time.Millisecond}), "out", sink)
			err := j.Run(context.Background(), stream.Options{CheckpointDir: t.TempDir(),
				Restart: stream.RestartStrategy{MaxAttempts: 1, InitialBackoff: time.Millisecond}})
			return sink.Visible(), err
		}
		var calls atomic.Int64
		got, err := run(func(_ context.Context, v int) (int, error) {
			if v == 7 && calls.Add(1) <= 2 {
				return 0, errors.New("service unavailable")
			}
			return v, nil
		})
		if err != nil || len(got) != 20 {
			t.Errorf("a call that fails twice: %d results, err %v; want 20, nil", len(got), err)
		}
		_, err = run(func(_ context.Context, v int) (int, error) {
			if v == 7 {
				return 0, errors.New("service unavailable")
			}
			return v, nil
		})
		if err == nil || !strings.Contains(err.Error(), `AsyncMap "lookup": the request failed 3 times, the last time with: service unavailable`) {
			t.Errorf("a call that always fails: %v", err)
		}
		_, err = run(func(_ context.Context, v int) (int, error) {
			if v == 7 {
				panic("lookup table missing")
			}
			return v, nil
		})
		if err == nil || !strings.Contains(err.Error(), "the function panicked: lookup table missing") {
			t.Errorf("a call that panics: %v", err)
		}
	})
}

// TestAsyncMapCrashExactlyOnce runs generator → AsyncMap (a lookup of 1
// to 7 ms, 32 in flight per subtask, two subtasks) → file sink in a child
// process SIGKILLed 10 times: the committed lines equal the failure-free
// output, so the records in flight at each checkpoint were issued again
// after each restore, and none twice.
func TestAsyncMapCrashExactlyOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("crash test: skipped with -short")
	}
	const n = 20_000
	dir := crashDir(t, "EXACTLY_ASYNC_CRASH_DIR")
	if crashtest.IsChild() {
		if err := runAsyncCrashJob(dir, n); err != nil {
			t.Fatal(err)
		}
		return
	}
	crashtesting.RunLive(t, crashtest.Options{Kills: 10, MaxDelay: 1200 * time.Millisecond, Env: []string{"EXACTLY_ASYNC_CRASH_DIR=" + dir}}, 6)
	got := readCommittedLines(t, filepath.Join(dir, "out"))
	want := make([]string, n)
	for i := range want {
		want[i] = strconv.Itoa(2 * i)
	}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("%d lines committed, want %d; first difference: %s", len(got), len(want), firstDifference(got, want))
	}
}

// runAsyncCrashJob runs the crash test's job, resuming from dir.
func runAsyncCrashJob(dir string, n int) error {
	src, err := generator.New(generator.Options{Count: uint64(n), Splits: 2, Rate: 4000}, func(i uint64) int { return int(i) })
	if err != nil {
		return err
	}
	snk, err := file.NewSink(filepath.Join(dir, "out"), func(dst []byte, v int) []byte { return strconv.AppendInt(dst, int64(v), 10) }, file.SinkOptions{})
	if err != nil {
		return err
	}
	var now, peak atomic.Int64
	j := stream.New("async-crash")
	in := stream.Source(j, "numbers", src, stream.Parallelism(2))
	stream.SinkTo(stream.AsyncMap(in, "lookup", state.IntCodec{}, slowDouble(&now, &peak), stream.AsyncOptions{Capacity: 32}), "out", snk)
	return j.Run(context.Background(), crashRunOptions(dir))
}
