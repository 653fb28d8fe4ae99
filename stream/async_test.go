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

// TestAsyncMapFailures: with AsyncOptions.Failures, a request that failed
// every attempt (or panicked) sends its record, the error and the attempts
// to the side output in place of a result, and the job goes on; a tag of
// another type is refused at the start.
func TestAsyncMapFailures(t *testing.T) {
	defer goleak.VerifyNone(t)
	synctest.Test(t, func(t *testing.T) {
		j := stream.New("async-failures")
		in := stream.Source(j, "numbers", counting{n: 20, splits: 1})
		failures := stream.NewOutputTag[stream.AsyncFailure[int]]("failed")
		out := stream.AsyncMap(in, "lookup", state.IntCodec{}, func(_ context.Context, v int) (int, error) {
			switch v {
			case 7:
				return 0, errors.New("service unavailable")
			case 11:
				panic("lookup table missing")
			}
			return v, nil
		}, stream.AsyncOptions{Attempts: 2, Backoff: time.Millisecond, Failures: failures})
		results, failed := newMemSink[int](), newMemSink[stream.AsyncFailure[int]]()
		stream.SinkTo(out, "out", results)
		stream.SinkTo(stream.SideOutput(out, failures), "failed", failed)
		if err := j.Run(context.Background(), stream.Options{CheckpointDir: t.TempDir(), CheckpointInterval: 5 * time.Millisecond}); err != nil {
			t.Fatal(err)
		}
		if got := results.Visible(); len(got) != 18 || slices.Contains(got, 7) || slices.Contains(got, 11) {
			t.Errorf("results %v: want every number but 7 and 11", got)
		}
		got := failed.Visible()
		slices.SortFunc(got, func(a, b stream.AsyncFailure[int]) int { return a.Input - b.Input })
		if len(got) != 2 || got[0].Input != 7 || got[0].Attempts != 2 || !strings.Contains(got[0].Err, "the request failed 2 times, the last time with: service unavailable") ||
			got[1].Input != 11 || !strings.Contains(got[1].Err, "the function panicked: lookup table missing") {
			t.Errorf("failures %+v: want 7 (service unavailable, 2 attempts) and 11 (panicked)", got)
		}
	})
	j := stream.New("async-failures-misuse")
	in := stream.Source(j, "numbers", counting{n: 1, splits: 1})
	out := stream.AsyncMap(in, "lookup", state.IntCodec{}, func(_ context.Context, v int) (int, error) { return v, nil },
		stream.AsyncOptions{Failures: stream.NewOutputTag[int]("failed")})
	stream.SinkTo(out, "out", newMemSink[int]())
	_, err := j.Start(context.Background(), stream.Options{CheckpointDir: t.TempDir()})
	if err == nil || !strings.Contains(err.Error(), `AsyncMap "lookup": AsyncOptions.Failures is a stream.OutputTag[int], but the input's records are int: make the tag with NewOutputTag[AsyncFailure[int]]`) {
		t.Errorf("a Failures tag of another type: %v", err)
	}
}

// TestAsyncMapCrashExactlyOnce runs generator → AsyncMap (a lookup of 1
// to 7 ms, 32 in flight per subtask, two subtasks) → file sink in a child
// process SIGKILLed 10 times: the committed lines equal the failure-free
// output, so the records in flight at each checkpoint were issued again
// after each restore, and none twice. Every 50th lookup fails: its record
// goes to the Failures side output, a second file sink, once.
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
	crashtesting.RunLive(t, crashtest.Options{Kills: crashtesting.Sized(10, 30), MaxDelay: 1200 * time.Millisecond, Env: []string{"EXACTLY_ASYNC_CRASH_DIR=" + dir}}, 6)
	var want, wantFailed []string
	for i := range n {
		if asyncCrashFails(i) {
			wantFailed = append(wantFailed, strconv.Itoa(i))
		} else {
			want = append(want, strconv.Itoa(2*i))
		}
	}
	slices.Sort(want)
	slices.Sort(wantFailed)
	for _, c := range []struct {
		sink string
		want []string
	}{{"out", want}, {"failed", wantFailed}} {
		if got := readCommittedLines(t, filepath.Join(dir, c.sink)); !slices.Equal(got, c.want) {
			t.Errorf("%s: %d lines committed, want %d; first difference: %s", c.sink, len(got), len(c.want), firstDifference(got, c.want))
		}
	}
}

// asyncCrashFails tells the crash test's records whose lookup fails.
func asyncCrashFails(v int) bool { return v%50 == 49 }

// runAsyncCrashJob runs the crash test's job, resuming from dir.
func runAsyncCrashJob(dir string, n int) error {
	src, err := generator.New(generator.Options{Count: uint64(n), Splits: 2, Rate: 4000}, func(i uint64) int { return int(i) })
	if err != nil {
		return err
	}
	lines := func(name string) (*file.Sink[int], error) {
		return file.NewSink(filepath.Join(dir, name), func(dst []byte, v int) []byte { return strconv.AppendInt(dst, int64(v), 10) }, file.SinkOptions{})
	}
	snk, err := lines("out")
	if err != nil {
		return err
	}
	failedSink, err := lines("failed")
	if err != nil {
		return err
	}
	var now, peak atomic.Int64
	lookup := slowDouble(&now, &peak)
	j := stream.New("async-crash")
	in := stream.Source(j, "numbers", src, stream.Parallelism(2))
	failures := stream.NewOutputTag[stream.AsyncFailure[int]]("failed")
	out := stream.AsyncMap(in, "lookup", state.IntCodec{}, func(ctx context.Context, v int) (int, error) {
		if asyncCrashFails(v) {
			return 0, errors.New("no such record")
		}
		return lookup(ctx, v)
	}, stream.AsyncOptions{Capacity: 32, Attempts: 1, Failures: failures})
	stream.SinkTo(out, "out", snk)
	failed := stream.Map(stream.SideOutput(out, failures), func(f stream.AsyncFailure[int]) int { return f.Input })
	stream.SinkTo(failed, "failed", failedSink)
	return j.Run(context.Background(), crashRunOptions(dir))
}
