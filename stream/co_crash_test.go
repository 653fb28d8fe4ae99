package stream_test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/exactlyonce/exactly/connectors/file"
	"github.com/exactlyonce/exactly/internal/crashtest"
	"github.com/exactlyonce/exactly/internal/crashtest/crashtesting"
	"github.com/exactlyonce/exactly/state"
	"github.com/exactlyonce/exactly/stream"
)

// The crash tests of the two-input operators run a job of two inputs in a
// child process, SIGKILLed again and again at the points of the
// checkpoint protocol and at random, and compare the lines its file sink
// committed with those of a failure-free run: nothing missing, nothing
// twice. Each input is one split read in event-time order, so no record
// is late and the output does not depend on how the two interleave.

// Input sizes of the two-input crash tests: input 1 reads [0, crashN1)
// at i ms, input 2 [0, crashN2) at 3i/2 ms, both over 9 s of event time.
const crashN1, crashN2 = 9000, 6000

func crashTime1(i int) time.Time { return time.UnixMilli(int64(i)) }
func crashTime2(i int) time.Time { return time.UnixMilli(int64(i) * 3 / 2) }

// mod8 is the key of most crash tests' records.
func mod8(i int) int64 { return int64(i % 8) }

// twoInputCrashTest runs the operator that build adds to a job of the two
// inputs, with its state in backend, under kills, and checks its committed
// output against a failure-free run's. The failure-free run must produce
// at least minLines lines. It runs in the test's process, under -race, on
// the heap backend whatever backend the crash run uses: the output must
// not depend on the backend, and Pebble under -race took 30–110 s for it.
func twoInputCrashTest(t *testing.T, backend state.BackendKind, minLines int, build func(a, b stream.Stream[int]) stream.Stream[string]) {
	if testing.Short() {
		t.Skip("crash test: skipped with -short")
	}
	dir := crashDir(t, "EXACTLY_TWO_INPUT_CRASH_DIR")
	if crashtest.IsChild() {
		if err := runTwoInputCrashJob(dir, backend, true, build); err != nil {
			t.Fatal(err)
		}
		return
	}
	ref := t.TempDir()
	if err := runTwoInputCrashJob(ref, state.HeapBackend, false, build); err != nil {
		t.Fatalf("failure-free run: %v", err)
	}
	want := readCommittedLines(t, filepath.Join(ref, "out"))
	t.Logf("failure-free run: %d lines", len(want))
	if len(want) < minLines {
		t.Fatalf("the failure-free run committed %d lines, want at least %d", len(want), minLines)
	}
	crashtesting.RunLive(t, crashtest.Options{Kills: crashtesting.Sized(10, 30), MaxDelay: 1200 * time.Millisecond, Env: []string{"EXACTLY_TWO_INPUT_CRASH_DIR=" + dir}}, 6)
	if got := readCommittedLines(t, filepath.Join(dir, "out")); !slices.Equal(got, want) {
		t.Errorf("%d lines committed, the failure-free run committed %d; first difference: %s", len(got), len(want), firstDifference(got, want))
	}
}

// runTwoInputCrashJob runs the two inputs, paced or not, through the
// operator build adds into a file sink in dir/out, resuming from the
// checkpoints in dir.
func runTwoInputCrashJob(dir string, backend state.BackendKind, paced bool, build func(a, b stream.Stream[int]) stream.Stream[string]) error {
	out, err := file.NewSink(filepath.Join(dir, "out"), func(dst []byte, line string) []byte { return append(dst, line...) }, file.SinkOptions{})
	if err != nil {
		return err
	}
	j := stream.New("two-inputs")
	a := stream.SourceWithEventTime(j, "in1", pacedSource{n: crashN1, paced: paced}, stream.EventTime[int]{Timestamp: crashTime1})
	b := stream.SourceWithEventTime(j, "in2", pacedSource{n: crashN2, paced: paced}, stream.EventTime[int]{Timestamp: crashTime2})
	stream.SinkTo(build(a, b), "out", out)
	if backend == state.PebbleBackend {
		j.SetStateBackend(state.BackendConfig{Kind: backend, Dir: filepath.Join(dir, "pebble")})
	}
	return j.Run(context.Background(), crashRunOptions(dir))
}

// crashRunOptions are the options of a deterministic crash job resuming
// from the checkpoints in dir: a checkpoint every 50 ms, the watermark sent
// after every read, the crash harness's probe.
func crashRunOptions(dir string) stream.Options {
	return stream.Options{
		CheckpointDir:      filepath.Join(dir, "checkpoints"),
		CheckpointInterval: 50 * time.Millisecond,
		WatermarkInterval:  time.Nanosecond,
		Probe:              crashtest.Probe(),
	}
}

// keyedBoth returns the build of a two-input crash test whose operator,
// built by build, reads both inputs keyed by key.
func keyedBoth(key func(int) int64, build func(a, b stream.KeyedStream[int64, int]) stream.Stream[string]) func(a, b stream.Stream[int]) stream.Stream[string] {
	return func(a, b stream.Stream[int]) stream.Stream[string] {
		return build(stream.KeyBy(a, key, state.Int64Codec{}), stream.KeyBy(b, key, state.Int64Codec{}))
	}
}

// TestCoProcessCrashExactlyOnce: per key and 100 ms of event time, the
// count and sum of each input's values, shared keyed state emitted by an
// event-time timer.
func TestCoProcessCrashExactlyOnce(t *testing.T) {
	twoInputCrashTest(t, state.HeapBackend, 700, keyedBoth(mod8, coBucketSums))
}

// TestCoProcessCrashExactlyOncePebble is TestCoProcessCrashExactlyOnce
// with the state in the Pebble backend.
func TestCoProcessCrashExactlyOncePebble(t *testing.T) {
	twoInputCrashTest(t, state.PebbleBackend, 700, keyedBoth(mod8, coBucketSums))
}

// bucketSums are the counts and sums of a key's 100 ms bucket.
type bucketSums struct{ CountA, SumA, CountB, SumB int }

func coBucketSums(a, b stream.KeyedStream[int64, int]) stream.Stream[string] {
	const bucket = 100 * time.Millisecond
	return stream.CoProcess(a, b, "buckets", func(ctx *stream.Context[int64]) (stream.CoProcessFunc[int64, int, int, string], error) {
		sums, err := state.NewMapState(ctx.State(), "sums", state.Int64Codec{}, state.JSONCodec[bucketSums]{})
		if err != nil {
			return stream.CoProcessFunc[int64, int, int, string]{}, err
		}
		add := func(ctx *stream.Context[int64], at time.Time, update func(*bucketSums)) {
			end := at.Truncate(bucket).Add(bucket).UnixMilli()
			sums.Compute(end, func(s bucketSums, _ bool) bucketSums { update(&s); return s })
			ctx.RegisterEventTimer(time.UnixMilli(end - 1))
		}
		return stream.CoProcessFunc[int64, int, int, string]{
			Process1: func(ctx *stream.Context[int64], v int, _ *stream.Output[string]) error {
				add(ctx, crashTime1(v), func(s *bucketSums) { s.CountA++; s.SumA += v })
				return nil
			},
			Process2: func(ctx *stream.Context[int64], v int, _ *stream.Output[string]) error {
				add(ctx, crashTime2(v), func(s *bucketSums) { s.CountB++; s.SumB += v })
				return nil
			},
			OnEventTimer: func(ctx *stream.Context[int64], when time.Time, out *stream.Output[string]) error {
				end := when.UnixMilli() + 1
				if s, ok := sums.Get(end); ok {
					out.Emit(fmt.Sprintf("%d,%d,%d,%d,%d,%d", ctx.Key(), end, s.CountA, s.SumA, s.CountB, s.SumB))
					sums.Remove(end)
				}
				return nil
			},
		}, nil
	}, stream.Parallelism(2))
}
