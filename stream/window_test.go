package stream_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/exactlyonce/exactly/internal/testwait"
	"github.com/exactlyonce/exactly/sink"
	"github.com/exactlyonce/exactly/source"
	"github.com/exactlyonce/exactly/state"
	"github.com/exactlyonce/exactly/stream"
	"go.uber.org/goleak"
)

// windowOut is the output of the test windows: a key's count and sum of
// values in one window.
type windowOut struct {
	Key        int64
	Start      time.Time
	Count, Sum int
}

// sumAcc accumulates a window's count and sum.
type sumAcc struct{ Count, Sum int }

// sumAccCodec encodes a sumAcc as two varints.
type sumAccCodec struct{}

func (sumAccCodec) Append(dst []byte, a sumAcc) []byte {
	return binary.AppendVarint(binary.AppendVarint(dst, int64(a.Count)), int64(a.Sum))
}

func (sumAccCodec) Decode(b []byte) (sumAcc, error) {
	c, n := binary.Varint(b)
	s, m := binary.Varint(b[max(n, 0):])
	if n <= 0 || m <= 0 || n+m != len(b) {
		return sumAcc{}, errors.New("malformed sumAcc")
	}
	return sumAcc{int(c), int(s)}, nil
}

// millis is the test records' event time: the value, in milliseconds.
func millis(v int) time.Time { return time.UnixMilli(int64(v)) }

// windowSums builds source (event time = value in ms) -> check (when set)
// -> keyBy(v % 10) -> windows of count and sum -> sink.
func windowSums(src source.Source[int], w stream.Windows, out sink.Sink[windowOut], check func(int) error) *stream.Job {
	j := stream.New("windows")
	nums := stream.SourceWithEventTime(j, "numbers", src, stream.EventTime[int]{Timestamp: millis}, stream.Parallelism(2))
	if check != nil {
		nums = stream.Filter(nums, func(v int) bool {
			if err := check(v); err != nil {
				panic(err) // fails the task; the job restarts
			}
			return true
		})
	}
	keyed := stream.KeyBy(nums, func(v int) int64 { return int64(v % 10) }, state.Int64Codec{})
	sums := stream.WindowAggregate(keyed, "windows", w, millis, stream.Aggregate[int64, int, sumAcc, windowOut]{
		Add: func(a sumAcc, v int) sumAcc { return sumAcc{a.Count + 1, a.Sum + v} },
		Result: func(k int64, w stream.Window, a sumAcc) windowOut {
			return windowOut{Key: k, Start: w.Start, Count: a.Count, Sum: a.Sum}
		},
		Codec: sumAccCodec{},
	}, stream.Parallelism(2))
	stream.SinkTo(sums, "out", out)
	return j
}

// checkWindows compares the visible window outputs with those computed
// directly from the values [0, n), windows of size and slide in ms.
func checkWindows(t *testing.T, got []windowOut, n, size, slide int) {
	t.Helper()
	type id struct {
		key   int64
		start int64
	}
	want := map[id]sumAcc{}
	for v := range n {
		for start := v - v%slide; start > v-size; start -= slide {
			k := id{int64(v % 10), int64(start)}
			a := want[k]
			want[k] = sumAcc{a.Count + 1, a.Sum + v}
		}
	}
	seen := map[id]bool{}
	for _, o := range got {
		k := id{o.Key, o.Start.UnixMilli()}
		if seen[k] {
			t.Errorf("window %v emitted twice", k)
		}
		seen[k] = true
		if w := want[k]; w != (sumAcc{o.Count, o.Sum}) {
			t.Errorf("window %v: count %d sum %d, want %d %d", k, o.Count, o.Sum, w.Count, w.Sum)
		}
	}
	if len(seen) != len(want) {
		t.Errorf("%d windows emitted, want %d", len(seen), len(want))
	}
}

func TestTumblingWindows(t *testing.T) {
	defer goleak.VerifyNone(t)
	out := newMemSink[windowOut]()
	j := windowSums(counting{n: 20000, splits: 4}, stream.Tumbling(100*time.Millisecond), out, nil)
	if err := j.Run(context.Background(), stream.Options{CheckpointDir: t.TempDir(), CheckpointInterval: 20 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	checkWindows(t, out.Visible(), 20000, 100, 100)
}

func TestSlidingWindows(t *testing.T) {
	defer goleak.VerifyNone(t)
	out := newMemSink[windowOut]()
	j := windowSums(counting{n: 5000, splits: 3}, stream.Sliding(100*time.Millisecond, 30*time.Millisecond), out, nil)
	if err := j.Run(context.Background(), stream.Options{CheckpointDir: t.TempDir(), CheckpointInterval: 20 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	checkWindows(t, out.Visible(), 5000, 100, 30)
}

// TestWindowsFailoverExactlyOnce fails the job in the middle of its input,
// after windows closed and checkpoints completed: the restored job must
// emit every window once, with the right contents.
func TestWindowsFailoverExactlyOnce(t *testing.T) {
	defer goleak.VerifyNone(t)
	out := newMemSink[windowOut]()
	var failed atomic.Bool
	src := counting{n: 6000, splits: 3, delay: time.Millisecond}
	j := windowSums(src, stream.Sliding(100*time.Millisecond, 50*time.Millisecond), out, func(v int) error {
		if v == 4000 && failed.CompareAndSwap(false, true) {
			return errors.New("injected failure")
		}
		return nil
	})
	r, err := j.Start(context.Background(), stream.Options{
		CheckpointDir:      t.TempDir(),
		CheckpointInterval: 10 * time.Millisecond,
		WatermarkInterval:  time.Millisecond,
		Restart:            stream.RestartStrategy{InitialBackoff: time.Millisecond},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Wait(); err != nil {
		t.Fatal(err)
	}
	if !failed.Load() || r.Metrics().Restarts.Load() != 1 {
		t.Fatalf("failed=%v restarts=%d: the injected failure did not happen once", failed.Load(), r.Metrics().Restarts.Load())
	}
	checkWindows(t, out.Visible(), 6000, 100, 50)
}

// listSource is a source of fixed event times (ms), one split per list,
// one record per Read. A split ends after its list unless the source is
// unbounded; a nil list never yields. read, when set, counts the records
// its readers returned.
type listSource struct {
	lists     [][]int
	unbounded bool
	read      *testwait.Counter
}

func (l listSource) Splits(context.Context) ([]string, error) { return splitIDs(len(l.lists)), nil }

func (l listSource) Open(_ context.Context, split string, pos []byte) (source.Reader[int], error) {
	i, next := openedAt(split, pos)
	return &listReader{list: l.lists[i], unbounded: l.unbounded, next: next, read: l.read}, nil
}

type listReader struct {
	list      []int
	unbounded bool
	next      int
	read      *testwait.Counter
}

func (r *listReader) Read(_ context.Context, buf []int) (int, error) {
	switch {
	case r.list == nil || (r.unbounded && r.next == len(r.list)):
		return 0, nil
	case r.next == len(r.list):
		return 0, io.EOF
	}
	buf[0] = r.list[r.next]
	r.next++
	if r.read != nil {
		r.read.Add(1)
	}
	return 1, nil
}

func (r *listReader) Position() []byte { return binary.AppendUvarint(nil, uint64(r.next)) }
func (r *listReader) Close() error     { return nil }

// countWindows builds src -> keyBy(constant) -> tumbling 100 ms window
// counts -> sink.
func countWindows(src listSource, et stream.EventTime[int], out *memSink[windowOut]) *stream.Job {
	j := stream.New("late")
	nums := stream.SourceWithEventTime(j, "events", src, et)
	keyed := stream.KeyBy(nums, func(int) int64 { return 0 }, state.Int64Codec{})
	counts := stream.WindowAggregate(keyed, "windows", stream.Tumbling(100*time.Millisecond), millis, stream.Aggregate[int64, int, sumAcc, windowOut]{
		Add: func(a sumAcc, v int) sumAcc { return sumAcc{a.Count + 1, a.Sum + v} },
		Result: func(k int64, w stream.Window, a sumAcc) windowOut {
			return windowOut{Key: k, Start: w.Start, Count: a.Count}
		},
		Codec: sumAccCodec{},
	})
	stream.SinkTo(counts, "out", out)
	return j
}

// TestLateRecordsAreDropped sends a record after the watermark passed its
// window: it is dropped and counted, and the window is emitted once.
func TestLateRecordsAreDropped(t *testing.T) {
	defer goleak.VerifyNone(t)
	out := newMemSink[windowOut]()
	// 250 ms with an out-of-orderness of 20 ms moves the watermark past the
	// window [0, 100), so 50 is late; 240 is out of order but on time.
	src := listSource{lists: [][]int{{10, 20, 250, 50, 240, 260}}}
	j := countWindows(src, stream.EventTime[int]{Timestamp: millis, MaxOutOfOrderness: 20 * time.Millisecond}, out)
	// Sending the watermark after every record makes the run deterministic.
	r, err := j.Start(context.Background(), stream.Options{CheckpointDir: t.TempDir(), WatermarkInterval: time.Nanosecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Wait(); err != nil {
		t.Fatal(err)
	}
	counts := map[int64]int{}
	for _, o := range out.Visible() {
		counts[o.Start.UnixMilli()] += o.Count
	}
	if want := map[int64]int{0: 2, 200: 3}; fmt.Sprint(counts) != fmt.Sprint(want) {
		t.Errorf("window counts %v, want %v", counts, want)
	}
	if late := r.Metrics().LateRecords("windows"); late != 1 {
		t.Errorf("LateRecords = %d, want 1", late)
	}
}

// TestIdleSplitReleasesWatermark runs an unbounded job with a split that
// never yields: with an idle timeout, windows of the other split close while
// the job runs; without it nothing could close before the end of input.
func TestIdleSplitReleasesWatermark(t *testing.T) {
	defer goleak.VerifyNone(t)
	synctest.Test(t, func(t *testing.T) {
		out := newMemSink[windowOut]()
		src := listSource{lists: [][]int{{10, 20, 150, 400}, nil}}
		j := countWindows(src, stream.EventTime[int]{Timestamp: millis, IdleTimeout: 10 * time.Millisecond}, out)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		r, err := j.Start(ctx, stream.Options{CheckpointDir: t.TempDir(), CheckpointInterval: 10 * time.Millisecond, WatermarkInterval: time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		testwait.For(t, out.rowsVisible.Reached(2), 20*time.Second, "two windows visible (the idle split must not hold the watermark back)",
			func() string { return fmt.Sprintf("windows visible: %v", out.Visible()) })
		cancel()
		if err := r.Wait(); !errors.Is(err, context.Canceled) {
			t.Fatalf("Wait = %v, want context.Canceled", err)
		}
		got := out.Visible()
		if got[0].Start.UnixMilli() != 0 || got[0].Count != 2 || got[1].Start.UnixMilli() != 100 || got[1].Count != 1 {
			t.Errorf("windows %v, want [0,100) with 2 and [100,200) with 1", got)
		}
	})
}

// TestRestoredSourceResumesEventTime checkpoints a source that read all its
// records before it sent their watermark, then restores it: with nothing
// more to read, the restored source must still release the windows those
// records closed, from the event time checkpointed with its positions.
func TestRestoredSourceResumesEventTime(t *testing.T) {
	defer goleak.VerifyNone(t)
	synctest.Test(t, func(t *testing.T) {
		out := newMemSink[windowOut]()
		var read testwait.Counter
		src := listSource{lists: [][]int{{10, 20, 150, 400}}, unbounded: true, read: &read}
		j := countWindows(src, stream.EventTime[int]{Timestamp: millis}, out)
		dir := t.TempDir()
		// run runs the job until until, given the run's count of completed
		// checkpoints, returns a closed channel.
		run := func(wmInterval time.Duration, what string, until func(done *testwait.Counter) <-chan struct{}) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var done testwait.Counter
			r, err := j.Start(ctx, stream.Options{CheckpointDir: dir, CheckpointInterval: 5 * time.Millisecond, WatermarkInterval: wmInterval,
				Probe: testwait.Checkpoints(&done, nil)})
			if err != nil {
				t.Fatal(err)
			}
			testwait.For(t, until(&done), 20*time.Second, what, func() string { return fmt.Sprintf("windows visible: %v", out.Visible()) })
			cancel()
			if err := r.Wait(); !errors.Is(err, context.Canceled) {
				t.Fatalf("Wait = %v, want context.Canceled", err)
			}
		}
		// First run: one watermark, at the first record; then read everything
		// and complete a checkpoint that holds it. When the last record is
		// read, checkpoint k may be in flight with its barrier ahead of the
		// records; checkpoint k+1 is triggered after k completes, so its
		// barrier follows them.
		run(time.Hour, "a checkpoint after the four records were read", func(done *testwait.Counter) <-chan struct{} {
			testwait.For(t, read.Reached(4), 20*time.Second, "the four records read", nil)
			return done.Reached(done.Load() + 2)
		})
		if got := out.Visible(); len(got) != 0 {
			t.Fatalf("windows visible after the first run: %v; the test needs them open", got)
		}
		run(time.Millisecond, "two windows visible", func(*testwait.Counter) <-chan struct{} { return out.rowsVisible.Reached(2) })
		got := out.Visible()
		if got[0].Start.UnixMilli() != 0 || got[0].Count != 2 || got[1].Start.UnixMilli() != 100 || got[1].Count != 1 {
			t.Errorf("windows %v, want [0,100) with 2 and [100,200) with 1", got)
		}
	})
}

// BenchmarkSlidingWindows runs a q5-like job: b.N records, one per
// millisecond of event time, over 5,000 keys, in sliding windows of 10 s
// every 2 s (five windows per record, about two records per key and
// window), with parallelism 1 so that the operator's cost is not shared,
// on each backend.
func BenchmarkSlidingWindows(b *testing.B) {
	for _, kind := range []state.BackendKind{state.HeapBackend, state.PebbleBackend} {
		b.Run(kind.String(), func(b *testing.B) { benchSlidingWindows(b, kind) })
	}
}

func benchSlidingWindows(b *testing.B, kind state.BackendKind) {
	const keys = 5000
	out := newMemSink[int]()
	j := stream.New("windows")
	j.SetStateBackend(state.BackendConfig{Kind: kind, Dir: b.TempDir()})
	nums := stream.SourceWithEventTime(j, "numbers", counting{n: b.N, splits: 1}, stream.EventTime[int]{Timestamp: millis})
	keyed := stream.KeyBy(nums, func(v int) int64 { return int64(v % keys) }, state.Int64Codec{})
	counts := stream.WindowAggregate(keyed, "windows", stream.Sliding(10*time.Second, 2*time.Second), millis,
		stream.Aggregate[int64, int, int64, int]{
			Add:    func(n int64, _ int) int64 { return n + 1 },
			Result: func(_ int64, _ stream.Window, n int64) int { return int(n) },
			Codec:  state.Int64Codec{},
		})
	stream.SinkTo(counts, "out", out)
	b.ResetTimer()
	if err := j.Run(context.Background(), stream.Options{CheckpointDir: b.TempDir(), CheckpointInterval: time.Second}); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), "ns/record")
}
