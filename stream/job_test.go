package stream_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/exactlyonce/exactly/checkpoint"
	"github.com/exactlyonce/exactly/internal/runtime"
	"github.com/exactlyonce/exactly/internal/testwait"
	"github.com/exactlyonce/exactly/sink"
	"github.com/exactlyonce/exactly/source"
	"github.com/exactlyonce/exactly/state"
	"github.com/exactlyonce/exactly/stream"
	"go.uber.org/goleak"
)

// counting is a bounded source of the integers [0, n), dealt to splits.
type counting struct {
	n, splits int
	delay     time.Duration // per Read, to keep a job running for a while
	batch     int           // the most records a Read returns; 0: 37
}

func (c counting) Splits(context.Context) ([]string, error) { return splitIDs(c.splits), nil }

func (c counting) Open(_ context.Context, split string, pos []byte) (source.Reader[int], error) {
	s, next := openedAt(split, pos)
	return &countingReader{c: c, split: s, next: next}, nil
}

// splitIDs returns the ids "0" ... "n-1" of a test source's splits.
func splitIDs(n int) []string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprint(i)
	}
	return ids
}

// openedAt returns the index of a split named by splitIDs and the record
// index its position (a uvarint, nil at the start) resumes at.
func openedAt(split string, pos []byte) (index, next int) {
	fmt.Sscan(split, &index)
	if pos != nil {
		n, _ := binary.Uvarint(pos)
		next = int(n)
	}
	return index, next
}

type countingReader struct {
	c     counting
	split int
	next  int // index within the split
}

func (r *countingReader) Read(_ context.Context, buf []int) (int, error) {
	if r.c.delay > 0 {
		// The source's pace, not a wait: it keeps the job running across
		// checkpoints (fake time in the synctest bubbles).
		time.Sleep(r.c.delay)
	}
	n, most := 0, r.c.batch
	if most == 0 {
		most = 37
	}
	for n < len(buf) && n < most {
		v := r.split + r.next*r.c.splits
		if v >= r.c.n {
			break
		}
		buf[n] = v
		n++
		r.next++
	}
	if n == 0 {
		return 0, io.EOF
	}
	return n, nil
}

func (r *countingReader) Position() []byte { return binary.AppendUvarint(nil, uint64(r.next)) }
func (r *countingReader) Close() error     { return nil }

// memSink is an in-memory transactional sink: prepared transactions are
// kept by id and made visible by Commit, once.
type memSink[T any] struct {
	mu        sync.Mutex
	prepared  map[string][]T
	committed map[string]bool
	visible   []T
	// written counts the records the writers received and rowsVisible
	// those commits made visible, for tests to wait on.
	written, rowsVisible testwait.Counter
}

func newMemSink[T any]() *memSink[T] {
	return &memSink[T]{prepared: map[string][]T{}, committed: map[string]bool{}}
}

func (m *memSink[T]) NewWriter(_ context.Context, info sink.WriterInfo) (sink.Writer[T], error) {
	return &memWriter[T]{m: m, job: info.Job, subtask: info.Subtask}, nil
}
func (m *memSink[T]) NewCommitter(context.Context, sink.CommitterInfo) (sink.Committer, error) {
	return memCommitter[T]{m}, nil
}

func (m *memSink[T]) Visible() []T {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.visible)
}

type memWriter[T any] struct {
	m       *memSink[T]
	job     string // the transactions of several jobs into one sink differ
	subtask int
	open    []T
}

func (w *memWriter[T]) Write(_ context.Context, b []T) error {
	w.open = append(w.open, b...)
	w.m.written.Add(int64(len(b)))
	return nil
}
func (w *memWriter[T]) Prepare(_ context.Context, id checkpoint.ID) ([]byte, error) {
	if len(w.open) == 0 {
		return nil, nil
	}
	key := fmt.Sprintf("%s/%d-%d", w.job, w.subtask, id)
	w.m.mu.Lock()
	w.m.prepared[key] = w.open
	w.m.mu.Unlock()
	w.open = nil
	return []byte(key), nil
}
func (w *memWriter[T]) Close() error { return nil }

type memCommitter[T any] struct{ m *memSink[T] }

func (c memCommitter[T]) Commit(_ context.Context, p sink.Committable) error {
	c.m.mu.Lock()
	defer c.m.mu.Unlock()
	key := string(p.Data)
	if c.m.committed[key] {
		return nil
	}
	rows, ok := c.m.prepared[key]
	if !ok {
		return fmt.Errorf("transaction %s is gone", key)
	}
	c.m.visible = append(c.m.visible, rows...)
	c.m.committed[key] = true
	delete(c.m.prepared, key)
	c.m.rowsVisible.Add(int64(len(rows)))
	return nil
}
func (c memCommitter[T]) Abort(_ context.Context, p sink.Committable) error {
	c.m.mu.Lock()
	defer c.m.mu.Unlock()
	delete(c.m.prepared, string(p.Data))
	return nil
}
func (c memCommitter[T]) Fence(context.Context, checkpoint.ID) error { return nil }
func (c memCommitter[T]) AbortLingering(context.Context, checkpoint.ID) error {
	c.m.mu.Lock()
	defer c.m.mu.Unlock()
	clear(c.m.prepared)
	return nil
}
func (c memCommitter[T]) Close() error { return nil }

type total struct {
	Key   int
	Value int
	Sum   int
}

// runningSums builds source -> filter -> keyBy -> running sum -> sink.
func runningSums(src counting, out *memSink[total], par int) *stream.Job {
	return runningSumsHook(src, out, par, nil)
}

// sumsSetup returns the setup of a running sum per key in a ValueState;
// check, when set, sees each value first and fails the operator with its error.
func sumsSetup(check func(v int) error) func(*stream.Context[int64]) (stream.ProcessFunc[int64, int, total], error) {
	return func(ctx *stream.Context[int64]) (stream.ProcessFunc[int64, int, total], error) {
		sum, err := state.NewValueState(ctx.State(), "sum", state.IntCodec{})
		return stream.ProcessFunc[int64, int, total]{
			Process: func(ctx *stream.Context[int64], v int, o *stream.Output[total]) error {
				if check != nil {
					if err := check(v); err != nil {
						return err
					}
				}
				s, _ := sum.Value()
				s += v
				sum.Update(s)
				o.Emit(total{Key: int(ctx.Key()), Value: v, Sum: s})
				return nil
			},
		}, err
	}
}

// runningSumsHook is runningSums whose sum operator first calls check, when
// set, with each value; an error from it fails the operator.
func runningSumsHook(src counting, out *memSink[total], par int, check func(v int) error) *stream.Job {
	return runningSumsOf(src, out, par, 10, check)
}

// runningSumsOf is runningSumsHook with values keyed by their remainder
// modulo keys.
func runningSumsOf(src counting, out *memSink[total], par, keys int, check func(v int) error) *stream.Job {
	j := stream.New("sums")
	nums := stream.Source(j, "numbers", src, stream.Parallelism(par))
	evens := stream.Filter(nums, func(int) bool { return true })
	keyed := stream.KeyBy(evens, func(v int) int64 { return int64(v % keys) }, state.Int64Codec{})
	sums := stream.Process(keyed, "sums", sumsSetup(check), stream.Parallelism(par))
	stream.SinkTo(sums, "out", out)
	return j
}

// checkSums verifies that every input value is visible once and that the
// final sum of each key is right.
func checkSums(t *testing.T, rows []total, n int) {
	t.Helper()
	checkSumsOf(t, rows, n, 10)
}

// checkSumsOf is checkSums of values keyed by their remainder modulo keys.
func checkSumsOf(t *testing.T, rows []total, n, keys int) {
	t.Helper()
	seen := make([]int, n)
	final := map[int]int{}
	for _, r := range rows {
		seen[r.Value]++
		final[r.Key] = max(final[r.Key], r.Sum)
	}
	want := map[int]int{}
	for v := range n {
		want[v%keys] += v
		if seen[v] != 1 {
			t.Errorf("value %d visible %d times", v, seen[v])
		}
	}
	for k, w := range want {
		if final[k] != w {
			t.Errorf("key %d: final sum %d, want %d", k, final[k], w)
		}
	}
}

func TestBoundedJobCommitsEverything(t *testing.T) {
	defer goleak.VerifyNone(t)
	out := newMemSink[total]()
	j := runningSums(counting{n: 20000, splits: 4}, out, 2)
	err := j.Run(context.Background(), stream.Options{CheckpointDir: t.TempDir(), CheckpointInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	checkSums(t, out.Visible(), 20000)
}

// failingSums makes the sum operator fail once, when it sees value at.
func failingSums(src counting, out *memSink[total], par int, at int, failed *atomic.Bool) *stream.Job {
	return runningSumsHook(src, out, par, func(v int) error {
		if v == at && failed.CompareAndSwap(false, true) {
			return errors.New("injected failure")
		}
		return nil
	})
}

func TestFailoverIsExactlyOnce(t *testing.T) {
	defer goleak.VerifyNone(t)
	synctest.Test(t, func(t *testing.T) {
		out := newMemSink[total]()
		var failed atomic.Bool
		j := failingSums(counting{n: 5000, splits: 3, delay: time.Millisecond}, out, 2, 3000, &failed)
		opts := stream.Options{
			CheckpointDir:      t.TempDir(),
			CheckpointInterval: 10 * time.Millisecond,
			Restart:            stream.RestartStrategy{InitialBackoff: time.Millisecond},
		}
		r, err := j.Start(context.Background(), opts)
		if err != nil {
			t.Fatal(err)
		}
		if err := r.Wait(); err != nil {
			t.Fatal(err)
		}
		if !failed.Load() || r.Metrics().Restarts.Load() != 1 {
			t.Fatalf("failed=%v restarts=%d: the injected failure did not happen once", failed.Load(), r.Metrics().Restarts.Load())
		}
		checkSums(t, out.Visible(), 5000)
	})
}

// untilCheckpoints waits until job r has completed n checkpoints, counted
// in done by its Probe (testwait.Checkpoints). It fails t if the job ends
// first, or after timeout (a guard against a hang, not a timing
// assertion), when it stops the job with stop first.
func untilCheckpoints(t *testing.T, r *stream.Running, done *testwait.Counter, n int64, timeout time.Duration, stop func()) {
	t.Helper()
	ended := make(chan error, 1)
	go func() { ended <- r.Wait() }()
	guard := time.NewTimer(timeout)
	defer guard.Stop()
	select {
	case <-done.Reached(n):
		return
	case err := <-ended:
		t.Fatalf("the job ended (%v) after %d checkpoints, before checkpoint %d", err, done.Load(), n)
	case <-guard.C:
		stop()
		<-ended
		t.Fatalf("%d checkpoints completed in %v, want %d", done.Load(), timeout, n)
	}
}

// rescales are the parallelisms of the runs of the rescale tests: each
// resumes from the previous one's checkpoints.
var rescales = []int{1, 2, 3, 1}

// TestRescaleAcrossRuns stops a job by cancellation in the middle of its
// input, then resumes it from its checkpoints with other parallelisms.
func TestRescaleAcrossRuns(t *testing.T) {
	defer goleak.VerifyNone(t)
	synctest.Test(t, func(t *testing.T) {
		out := newMemSink[total]()
		dir := t.TempDir()
		src := counting{n: 6000, splits: 4, delay: 2 * time.Millisecond}
		for i, par := range rescales {
			ctx, cancel := context.WithCancel(context.Background())
			var done testwait.Counter
			r, err := runningSums(src, out, par).Start(ctx, stream.Options{CheckpointDir: dir, CheckpointInterval: 10 * time.Millisecond, Probe: testwait.Checkpoints(&done, nil)})
			if err != nil {
				t.Fatal(err)
			}
			if i < len(rescales)-1 {
				untilCheckpoints(t, r, &done, 3, time.Minute, cancel)
				cancel()
				if err := r.Wait(); !errors.Is(err, context.Canceled) {
					t.Fatalf("run %d: Wait = %v, want context.Canceled", i, err)
				}
				continue
			}
			if err := r.Wait(); err != nil {
				t.Fatal(err)
			}
			cancel()
		}
		checkSums(t, out.Visible(), 6000)
	})
}

func TestStopWithSavepointAndRestore(t *testing.T) {
	defer goleak.VerifyNone(t)
	synctest.Test(t, func(t *testing.T) {
		out := newMemSink[total]()
		src := counting{n: 4000, splits: 2, delay: 2 * time.Millisecond}
		r, err := runningSums(src, out, 2).Start(context.Background(), stream.Options{CheckpointDir: t.TempDir(), CheckpointInterval: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		// Stop in the middle of the input: a quarter of it at the sink.
		testwait.For(t, out.written.Reached(1000), time.Minute, "1000 records at the sink", nil)
		path, err := r.StopWithSavepoint(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if err := r.Wait(); err != nil {
			t.Fatalf("Wait after stop with savepoint = %v", err)
		}
		if n := len(out.Visible()); n == 0 || n >= 4000 {
			t.Fatalf("%d rows visible after the savepoint: want some, not all", n)
		}
		err = runningSums(src, out, 3).Run(context.Background(), stream.Options{CheckpointDir: t.TempDir(), RestoreFrom: path, CheckpointInterval: 10 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		checkSums(t, out.Visible(), 4000)
	})
}

func TestProcessingTimeTimersFire(t *testing.T) {
	defer goleak.VerifyNone(t)
	synctest.Test(t, func(t *testing.T) {
		out := newMemSink[total]()
		j := stream.New("timers")
		nums := stream.Source(j, "numbers", counting{n: 300, splits: 1, delay: 5 * time.Millisecond})
		keyed := stream.KeyBy(nums, func(v int) int64 { return int64(v % 3) }, state.Int64Codec{})
		fired := stream.Process(keyed, "timers", func(ctx *stream.Context[int64]) (stream.ProcessFunc[int64, int, total], error) {
			armed, err := state.NewValueState(ctx.State(), "armed", state.BoolCodec{})
			return stream.ProcessFunc[int64, int, total]{
				Process: func(ctx *stream.Context[int64], v int, _ *stream.Output[total]) error {
					if _, ok := armed.Value(); !ok {
						armed.Update(true)
						ctx.RegisterTimer(time.Now().Add(time.Millisecond))
					}
					return nil
				},
				OnTimer: func(ctx *stream.Context[int64], when time.Time, o *stream.Output[total]) error {
					o.Emit(total{Key: int(ctx.Key())})
					return nil
				},
			}, err
		})
		stream.SinkTo(fired, "out", out)
		if err := j.Run(context.Background(), stream.Options{CheckpointDir: t.TempDir(), CheckpointInterval: 10 * time.Millisecond}); err != nil {
			t.Fatal(err)
		}
		keys := map[int]int{}
		for _, r := range out.Visible() {
			keys[r.Key]++
		}
		if len(keys) != 3 || keys[0] != 1 || keys[1] != 1 || keys[2] != 1 {
			t.Fatalf("timers fired per key: %v, want once for each of 0, 1, 2", keys)
		}
	})
}

func TestRestartStrategyGivesUp(t *testing.T) {
	defer goleak.VerifyNone(t)
	synctest.Test(t, func(t *testing.T) {
		j := stream.New("broken")
		nums := stream.Source(j, "numbers", counting{n: 100, splits: 1})
		keyed := stream.KeyBy(nums, func(v int) int64 { return int64(v) }, state.Int64Codec{})
		out := stream.Process(keyed, "fails", func(*stream.Context[int64]) (stream.ProcessFunc[int64, int, total], error) {
			return stream.ProcessFunc[int64, int, total]{
				Process: func(*stream.Context[int64], int, *stream.Output[total]) error { return errors.New("always broken") },
			}, nil
		})
		stream.SinkTo(out, "out", newMemSink[total]())
		r, err := j.Start(context.Background(), stream.Options{
			CheckpointDir: t.TempDir(),
			Restart:       stream.RestartStrategy{MaxAttempts: 3, InitialBackoff: time.Millisecond},
		})
		if err != nil {
			t.Fatal(err)
		}
		err = r.Wait()
		if err == nil || !strings.Contains(err.Error(), "always broken") {
			t.Fatalf("Wait = %v, want the operator's error", err)
		}
		if n := r.Metrics().Restarts.Load(); n != 3 {
			t.Fatalf("%d restarts, want 3", n)
		}
	})
}

func TestInvalidOptionsNameTheField(t *testing.T) {
	j := runningSums(counting{n: 1, splits: 1}, newMemSink[total](), 1)
	for _, tc := range []struct {
		opts stream.Options
		want string
	}{
		{stream.Options{}, "CheckpointDir"},
		{stream.Options{CheckpointDir: t.TempDir(), CheckpointInterval: -time.Second}, "CheckpointInterval = -1s"},
		{stream.Options{CheckpointDir: t.TempDir(), MaxParallelism: -1}, "MaxParallelism = -1"},
	} {
		err := j.Run(context.Background(), tc.opts)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Run(%+v) = %v, want an error naming %q", tc.opts, err, tc.want)
		}
	}
	big := runningSums(counting{n: 1, splits: 1}, newMemSink[total](), 200)
	if err := big.Run(context.Background(), stream.Options{CheckpointDir: t.TempDir()}); err == nil || !strings.Contains(err.Error(), "exceeds max parallelism 128") {
		t.Errorf("parallelism 200 = %v, want an error about max parallelism", err)
	}
}

// flakySink is a memSink whose committers fail the first failures commits.
type flakySink[T any] struct {
	*memSink[T]
	failures *atomic.Int64
}

func (f flakySink[T]) NewCommitter(ctx context.Context, info sink.CommitterInfo) (sink.Committer, error) {
	c, err := f.memSink.NewCommitter(ctx, info)
	return flakyCommitter{c, f.failures}, err
}

type flakyCommitter struct {
	sink.Committer
	failures *atomic.Int64
}

func (c flakyCommitter) Commit(ctx context.Context, p sink.Committable) error {
	if c.failures.Add(-1) >= 0 {
		return errors.New("injected commit failure")
	}
	return c.Committer.Commit(ctx, p)
}

// TestRestartAfterFinalCheckpoint: when committing the final checkpoint of a
// bounded job fails, the job restarts from that checkpoint, commits it and
// ends, instead of waiting forever for a checkpoint the coordinator, stopped
// by the final one, would never trigger.
func TestRestartAfterFinalCheckpoint(t *testing.T) {
	defer goleak.VerifyNone(t)
	synctest.Test(t, func(t *testing.T) {
		out := newMemSink[total]()
		var failures atomic.Int64
		failures.Store(2) // the first commit and its one retry
		j := stream.New("sums")
		nums := stream.Source(j, "numbers", counting{n: 1000, splits: 2})
		keyed := stream.KeyBy(nums, func(v int) int64 { return int64(v % 10) }, state.Int64Codec{})
		sums := stream.Process(keyed, "sums", sumsSetup(nil))
		stream.SinkTo(sums, "out", sink.Sink[total](flakySink[total]{out, &failures}))
		// The deadline only turns the hang this test guards against into a failure.
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		err := j.Run(ctx, stream.Options{
			CheckpointDir:      t.TempDir(),
			CheckpointInterval: time.Hour, // the final checkpoint is the only one
			CommitRetries:      1,
			Restart:            stream.RestartStrategy{InitialBackoff: time.Millisecond},
		})
		if err != nil {
			t.Fatalf("Run = %v, want nil", err)
		}
		checkSums(t, out.Visible(), 1000)
	})
}

// TestStopWithSavepointSurvivesCommitFailure: when committing the savepoint
// of a stop with savepoint fails, the restart commits it and the job still
// stops, rather than running on from the savepoint.
func TestStopWithSavepointSurvivesCommitFailure(t *testing.T) {
	defer goleak.VerifyNone(t)
	synctest.Test(t, func(t *testing.T) {
		out := newMemSink[total]()
		var failures atomic.Int64
		j := stream.New("sums")
		nums := stream.Source(j, "numbers", counting{n: 1 << 30, splits: 1, delay: time.Millisecond})
		stream.SinkTo(stream.Map(nums, func(v int) total { return total{Value: v} }), "out", sink.Sink[total](flakySink[total]{out, &failures}))
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		r, err := j.Start(ctx, stream.Options{
			CheckpointDir:      t.TempDir(),
			CheckpointInterval: time.Hour,
			CommitRetries:      1,
			Restart:            stream.RestartStrategy{InitialBackoff: time.Millisecond},
		})
		if err != nil {
			t.Fatal(err)
		}
		testwait.For(t, out.written.Reached(1), time.Minute, "the first record at the sink", nil)
		failures.Store(2) // the first commit and its one retry
		if _, err := r.StopWithSavepoint(ctx); err != nil {
			t.Fatal(err)
		}
		if err := r.Wait(); err != nil {
			t.Fatalf("Wait = %v, want nil", err)
		}
		rows := out.Visible()
		if len(rows) == 0 {
			t.Fatal("nothing visible after the savepoint")
		}
		for i, r := range rows {
			if r.Value != i {
				t.Fatalf("row %d has value %d: output lost or duplicated", i, r.Value)
			}
		}
	})
}

// TestCancelBusyChainedJob: cancelling a job whose source always has records
// and whose operators are all chained to it (no channel to block on) stops it.
func TestCancelBusyChainedJob(t *testing.T) {
	// Real time, not a synctest bubble: the source is never idle, so
	// virtual time, which moves only when every goroutine is blocked,
	// would never reach the first checkpoint.
	defer goleak.VerifyNone(t)
	out := newMemSink[total]()
	j := stream.New("busy")
	nums := stream.Source(j, "numbers", counting{n: 1 << 30, splits: 1})
	stream.SinkTo(stream.Map(nums, func(v int) total { return total{Value: v} }), "out", out)
	ctx, cancel := context.WithCancel(context.Background())
	var completed testwait.Counter
	r, err := j.Start(ctx, stream.Options{CheckpointDir: t.TempDir(), CheckpointInterval: 10 * time.Millisecond, Probe: testwait.Checkpoints(&completed, nil)})
	if err != nil {
		t.Fatal(err)
	}
	untilCheckpoints(t, r, &completed, 1, time.Minute, cancel)
	cancel()
	done := make(chan error, 1)
	go func() { done <- r.Wait() }()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Wait = %v, want context.Canceled", err)
		}
	case <-time.After(20 * time.Second): // a guard against the hang, not a timing assertion
		t.Fatal("the job did not stop after its context was cancelled")
	}
	rows := out.Visible()
	for i, r := range rows {
		if r.Value != i {
			t.Fatalf("row %d has value %d: output lost or duplicated", i, r.Value)
		}
	}
}

// TestPanicInUserFunctionFailsTheAttempt: a panic in a user function does
// not crash the process: it fails the attempt with an error naming the
// operator, the job restarts, and the output stays exactly-once.
func TestPanicInUserFunctionFailsTheAttempt(t *testing.T) {
	defer goleak.VerifyNone(t)
	out := newMemSink[total]()
	var panicked atomic.Bool
	j := stream.New("panics")
	nums := stream.Source(j, "numbers", counting{n: 3000, splits: 2, delay: time.Millisecond})
	mapped := stream.Map(nums, func(v int) int {
		if v == 1500 && panicked.CompareAndSwap(false, true) {
			panic("injected panic")
		}
		return v
	}, stream.Name("boom"))
	keyed := stream.KeyBy(mapped, func(v int) int64 { return int64(v % 10) }, state.Int64Codec{})
	sums := stream.Process(keyed, "sums", sumsSetup(nil))
	stream.SinkTo(sums, "out", out)
	r, err := j.Start(context.Background(), stream.Options{
		CheckpointDir:      t.TempDir(),
		CheckpointInterval: 10 * time.Millisecond,
		Restart:            stream.RestartStrategy{InitialBackoff: time.Millisecond},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Wait(); err != nil {
		t.Fatal(err)
	}
	if !panicked.Load() || r.Metrics().Restarts.Load() != 1 {
		t.Fatalf("panicked=%v restarts=%d, want one panic and one restart", panicked.Load(), r.Metrics().Restarts.Load())
	}
	checkSums(t, out.Visible(), 3000)

	// Without restarts the job fails with the panic, naming the operator.
	j2 := stream.New("panics")
	src := stream.Source(j2, "numbers", counting{n: 10, splits: 1})
	stream.SinkTo(stream.Map(src, func(v int) total { panic("always") }, stream.Name("boom")), "out", newMemSink[total]())
	err = j2.Run(context.Background(), stream.Options{CheckpointDir: t.TempDir(), Restart: stream.RestartStrategy{MaxAttempts: -1}})
	var pe *runtime.PanicError
	if !errors.As(err, &pe) || !strings.Contains(pe.Where, "boom[0]") || pe.Value != "always" {
		t.Fatalf("Run = %v, want a PanicError naming boom[0]", err)
	}
}

// trackedSource counts the readers its splits open and close.
type trackedSource struct {
	counting
	open *atomic.Int64
}

func (s trackedSource) Open(ctx context.Context, split string, pos []byte) (source.Reader[int], error) {
	r, err := s.counting.Open(ctx, split, pos)
	s.open.Add(1)
	return trackedReader{r, s.open}, err
}

type trackedReader struct {
	source.Reader[int]
	open *atomic.Int64
}

func (r trackedReader) Close() error {
	r.open.Add(-1)
	return r.Reader.Close()
}

// TestFailedBuildClosesBuiltOperators: when an operator cannot be created,
// the operators created before it in the attempt are closed.
func TestFailedBuildClosesBuiltOperators(t *testing.T) {
	defer goleak.VerifyNone(t)
	var open atomic.Int64
	j := stream.New("broken-setup")
	nums := stream.Source(j, "numbers", trackedSource{counting{n: 100, splits: 2}, &open})
	keyed := stream.KeyBy(nums, func(v int) int64 { return int64(v) }, state.Int64Codec{})
	out := stream.Process(keyed, "fails", func(*stream.Context[int64]) (stream.ProcessFunc[int64, int, total], error) {
		return stream.ProcessFunc[int64, int, total]{}, errors.New("setup failed")
	})
	stream.SinkTo(out, "out", newMemSink[total]())
	err := j.Run(context.Background(), stream.Options{CheckpointDir: t.TempDir(), Restart: stream.RestartStrategy{MaxAttempts: -1}})
	if err == nil || !strings.Contains(err.Error(), "setup failed") {
		t.Fatalf("Run = %v, want the setup error", err)
	}
	if n := open.Load(); n != 0 {
		t.Fatalf("%d split readers left open", n)
	}
}

// blocking is an unbounded source whose single split yields nothing and
// whose Read blocks until its context is cancelled, like a long poll.
type blocking struct{}

func (blocking) Splits(context.Context) ([]string, error) { return []string{"0"}, nil }

func (blocking) Open(context.Context, string, []byte) (source.Reader[int], error) {
	return blockingReader{}, nil
}

type blockingReader struct{}

func (blockingReader) Read(ctx context.Context, _ []int) (int, error) {
	<-ctx.Done()
	return 0, ctx.Err()
}

func (blockingReader) Position() []byte { return nil }
func (blockingReader) Close() error     { return nil }

// TestBlockingReadIsInterrupted checks that a source blocked in Read does
// not hold back checkpoints: the runtime cancels the poll to inject the
// barrier, and the cancellation is not a failure. Without the interruption
// no checkpoint could complete.
func TestBlockingReadIsInterrupted(t *testing.T) {
	defer goleak.VerifyNone(t)
	synctest.Test(t, func(t *testing.T) {
		j := stream.New("blocking")
		stream.SinkTo(stream.Source(j, "stuck", blocking{}), "out", newMemSink[int]())
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		var done testwait.Counter
		r, err := j.Start(ctx, stream.Options{CheckpointDir: t.TempDir(), CheckpointInterval: 5 * time.Millisecond, Probe: testwait.Checkpoints(&done, nil)})
		if err != nil {
			t.Fatal(err)
		}
		// 20s of fake time hold some 4,000 intervals: fewer than 5
		// checkpoints means the blocked Read held the barrier back.
		untilCheckpoints(t, r, &done, 5, 20*time.Second, cancel)
		cancel()
		if err := r.Wait(); !errors.Is(err, context.Canceled) {
			t.Fatalf("Wait = %v, want context.Canceled", err)
		}
		if n := r.Metrics().Restarts.Load(); n != 0 {
			t.Errorf("%d restarts: an interrupted Read was taken for a failure", n)
		}
	})
}
