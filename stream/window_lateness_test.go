package stream_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/exactlyonce/exactly/state"
	"github.com/exactlyonce/exactly/stream"
	"go.uber.org/goleak"
)

// firedWindow is a result of the lateness tests: a window, its firing and
// its count.
type firedWindow struct {
	Start, End   int64 // ms
	Firing       int
	Count, Total int
}

func (w firedWindow) String() string {
	return fmt.Sprintf("[%d,%d)#%d:%d/%d", w.Start, w.End, w.Firing, w.Count, w.Total)
}

// lateJob builds a one-split source of event times in ms, watermarks
// trailing by 20 ms, -> keyBy(constant) -> windows of count and sum with
// the options -> out, and the late records' side output -> late.
func lateJob(events []int, w stream.Windows, lateness time.Duration, out *memSink[firedWindow], late *memSink[int]) *stream.Job {
	j := stream.New("lateness")
	nums := stream.SourceWithEventTime(j, "events", listSource{lists: [][]int{events}}, stream.EventTime[int]{Timestamp: millis, MaxOutOfOrderness: 20 * time.Millisecond})
	keyed := stream.KeyBy(nums, func(int) int64 { return 0 }, state.Int64Codec{})
	tooLate := stream.NewOutputTag[int]("too-late")
	windows := stream.WindowAggregate(keyed, "windows", w, millis, stream.Aggregate[int64, int, sumAcc, firedWindow]{
		Add:   func(a sumAcc, v int) sumAcc { return sumAcc{a.Count + 1, a.Sum + v} },
		Merge: func(a, b sumAcc) sumAcc { return sumAcc{a.Count + b.Count, a.Sum + b.Sum} },
		Result: func(_ int64, w stream.Window, a sumAcc) firedWindow {
			return firedWindow{Start: w.Start.UnixMilli(), End: w.End.UnixMilli(), Firing: w.Firing, Count: a.Count, Total: a.Sum}
		},
		Codec: sumAccCodec{},
	}, stream.AllowedLateness(lateness), stream.LateRecords(tooLate), stream.Parallelism(1))
	stream.SinkTo(windows, "out", out)
	stream.SinkTo(stream.SideOutput(windows, tooLate), "late", late)
	return j
}

// TestAllowedLateness runs windows over records out of order, watermarks
// after each record: a record behind the watermark but within the
// lateness updates its window, which fires again; one behind by more goes
// to the side output.
func TestAllowedLateness(t *testing.T) {
	for _, c := range []struct {
		name     string
		windows  stream.Windows
		lateness time.Duration
		events   []int
		want     string
		late     []int
	}{
		{
			// 250 moves the watermark to 229: [0,100) fired with 10 and 20;
			// 50 updates it (99+200 > 229), 240 is on time.
			name: "tumbling, late within the lateness", windows: stream.Tumbling(100 * time.Millisecond), lateness: 200 * time.Millisecond,
			events: []int{10, 20, 250, 50, 240, 260},
			want:   "[[0,100)#0:2/30 [0,100)#1:3/80 [200,300)#0:3/750]",
		},
		{
			// 99+100 <= 229: 50 is too late.
			name: "tumbling, later than the lateness", windows: stream.Tumbling(100 * time.Millisecond), lateness: 100 * time.Millisecond,
			events: []int{10, 20, 250, 50, 240, 260},
			want:   "[[0,100)#0:2/30 [200,300)#0:3/750]", late: []int{50},
		},
		{
			name: "tumbling, no lateness", windows: stream.Tumbling(100 * time.Millisecond),
			events: []int{10, 20, 250, 50, 240, 260},
			want:   "[[0,100)#0:2/30 [200,300)#0:3/750]", late: []int{50},
		},
		{
			// Two late records in [0,100) between two watermarks: one
			// update with both; 5 after 400 (watermark 379) is too late:
			// 99+250 <= 379.
			name: "tumbling, two late records, one update", windows: stream.Tumbling(100 * time.Millisecond), lateness: 250 * time.Millisecond,
			events: []int{10, 250, 50, 60, 400, 5},
			want:   "[[0,100)#0:1/10 [0,100)#1:3/120 [200,300)#0:1/250 [400,500)#0:1/400]", late: []int{5},
		},
		{
			// Sessions of gap 30: [10,50) and [110,140) fire at watermark
			// 229; 35 arrives late and extends the first to [10,65), which
			// fires again at 239; then 60 extends it to [10,90) and 85
			// bridges it with [110,140): [10,140) fires as the third
			// result of the first session and replaces both.
			name: "session, late records extend and merge fired sessions", windows: stream.Session(30 * time.Millisecond), lateness: 300 * time.Millisecond,
			events: []int{10, 20, 110, 250, 35, 260, 60, 85, 270, 500},
			want:   "[[10,140)#2:6/320 [10,50)#0:2/30 [10,65)#1:3/65 [110,140)#0:1/110 [250,300)#0:3/780 [500,530)#0:1/500]",
		},
		{
			// 35 would reopen [10,50), which expired at 49+100 <= 229.
			name: "session, later than the lateness", windows: stream.Session(30 * time.Millisecond), lateness: 100 * time.Millisecond,
			events: []int{10, 20, 250, 35, 260},
			want:   "[[10,50)#0:2/30 [250,290)#0:2/510]", late: []int{35},
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			defer goleak.VerifyNone(t)
			out, late := newMemSink[firedWindow](), newMemSink[int]()
			j := lateJob(c.events, c.windows, c.lateness, out, late)
			// Sending the watermark after every record makes the run deterministic.
			r, err := j.Start(context.Background(), stream.Options{CheckpointDir: t.TempDir(), WatermarkInterval: time.Nanosecond})
			if err != nil {
				t.Fatal(err)
			}
			if err := r.Wait(); err != nil {
				t.Fatal(err)
			}
			got := out.Visible()
			slices.SortFunc(got, func(a, b firedWindow) int { return strings.Compare(a.String(), b.String()) })
			if fmt.Sprint(got) != c.want {
				t.Errorf("results %v\nwant    %s", got, c.want)
			}
			if gotLate := late.Visible(); !slices.Equal(gotLate, c.late) {
				t.Errorf("late records %v, want %v", gotLate, c.late)
			}
			if n := r.Metrics().LateRecords("windows"); n != int64(len(c.late)) {
				t.Errorf("LateRecords = %d, want %d", n, len(c.late))
			}
		})
	}
}

// TestWindowAggregateErrors: misconfigured windows are reported when the
// job starts, naming the operator and the fix.
func TestWindowAggregateErrors(t *testing.T) {
	agg := stream.Aggregate[int, int, int, int]{
		Add:    func(a, v int) int { return a + v },
		Result: func(_ int, _ stream.Window, a int) int { return a },
		Codec:  state.IntCodec{},
	}
	for _, c := range []struct {
		name  string
		build func(ks stream.KeyedStream[int, int]) stream.Stream[int]
		want  string
	}{
		{"session without merge", func(ks stream.KeyedStream[int, int]) stream.Stream[int] {
			return stream.WindowAggregate(ks, "w", stream.Session(time.Second), millis, agg)
		}, `WindowAggregate "w": Aggregate.Merge is nil`},
		{"session without a gap", func(ks stream.KeyedStream[int, int]) stream.Stream[int] {
			a := agg
			a.Merge = func(a, b int) int { return a + b }
			return stream.WindowAggregate(ks, "w", stream.Session(0), millis, a)
		}, `WindowAggregate "w": Session gap 0s must be positive`},
		{"negative lateness", func(ks stream.KeyedStream[int, int]) stream.Stream[int] {
			return stream.WindowAggregate(ks, "w", stream.Tumbling(time.Second), millis, agg, stream.AllowedLateness(-time.Second))
		}, `AllowedLateness(-1s) is negative`},
		{"late records of another type", func(ks stream.KeyedStream[int, int]) stream.Stream[int] {
			return stream.WindowAggregate(ks, "w", stream.Tumbling(time.Second), millis, agg, stream.LateRecords(stream.NewOutputTag[string]("late")))
		}, `LateRecords tag is a stream.OutputTag[string], but the window's input records are int: make the tag with NewOutputTag[int]`},
	} {
		t.Run(c.name, func(t *testing.T) {
			j := stream.New("bad")
			ks := stream.KeyBy(stream.Source(j, "nums", counting{n: 1, splits: 1}), func(v int) int { return v }, state.IntCodec{})
			stream.SinkTo(c.build(ks), "out", newMemSink[int]())
			err := j.Run(context.Background(), stream.Options{CheckpointDir: t.TempDir()})
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Run = %v, want an error containing %q", err, c.want)
			}
		})
	}
}
