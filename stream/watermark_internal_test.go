package stream

import (
	"context"
	"math"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/exactlyonce/exactly/checkpoint"
	"github.com/exactlyonce/exactly/internal/format"
	"github.com/exactlyonce/exactly/internal/runtime"
	"github.com/exactlyonce/exactly/source"
)

// TestRestoredWatermark checks that a keyed operator restores the least
// watermark of the former subtasks it takes key groups from, and rejects
// an entry that is not a watermark.
func TestRestoredWatermark(t *testing.T) {
	entry := format.EncodeWatermark
	for _, c := range []struct {
		entries [][]byte
		want    int64
	}{
		{nil, runtime.MinWatermark},
		{[][]byte{entry(50)}, 50},
		{[][]byte{entry(70), entry(-5), entry(60)}, -5},
	} {
		got, err := restoredWatermark(c.entries)
		if err != nil || got != c.want {
			t.Errorf("restoredWatermark(%d entries) = %d, %v; want %d", len(c.entries), got, err, c.want)
		}
	}
	if _, err := restoredWatermark([][]byte{{2, 0}}); err == nil || !strings.Contains(err.Error(), "not a watermark") {
		t.Errorf("malformed entry: %v", err)
	}
}

// TestNoEventTimeIsMinWatermark checks that a restored split position
// without an event time (version 1) means no watermark yet.
func TestNoEventTimeIsMinWatermark(t *testing.T) {
	if format.NoEventTime != runtime.MinWatermark {
		t.Fatalf("format.NoEventTime = %d, runtime.MinWatermark = %d", format.NoEventTime, runtime.MinWatermark)
	}
}

// TestWatermarkReaderIsTheSplitsWatermark: with event time, a split whose
// reader tells its watermark has that watermark, not one derived from its
// records (whose event times here are far ahead of it).
func TestWatermarkReaderIsTheSplitsWatermark(t *testing.T) {
	const told = 1_000
	op := &sourceOp[int]{et: &EventTime[int]{Timestamp: func(v int) time.Time { return time.Unix(0, math.MaxInt64/2) }}}
	r := toldReader{wm: told}
	op.readers = []*splitReader[int]{{split: "0", r: r, wr: r, newest: math.MaxInt64 / 2}}
	if wm, idle := op.Watermark(); wm != told || idle {
		t.Fatalf("Watermark() = %d, %v; want the reader's %d, active", wm, idle, told)
	}
	snap, err := op.Snapshot(context.Background(), 1)
	if err != nil {
		t.Fatal(err)
	}
	if s, _ := snap(); len(s.Entries) != 1 || op.readers[0].newest != told {
		t.Fatalf("the checkpointed watermark of the split is %d, want %d", op.readers[0].newest, told)
	}
}

// toldReader tells a fixed watermark (source.WatermarkReader) and reads
// nothing.
type toldReader struct{ wm int64 }

func (toldReader) Read(context.Context, []int) (int, error) { return 0, nil }
func (toldReader) Position() []byte                         { return nil }
func (toldReader) Close() error                             { return nil }
func (r toldReader) Watermark() (int64, bool)               { return r.wm, false }
func (toldReader) ResumeWatermark(int64)                    {}

// TestIdleSplitsHoldWhenOneResumes walks a source subtask's splits
// through a hold: all idle, one resumes and runs ahead, and the other
// holds the watermark at its own until it resumes too, or for
// runtime.ResumeGrace; a split idle through a whole hold is not held
// again until it was active.
func TestIdleSplitsHoldWhenOneResumes(t *testing.T) {
	start := time.Unix(1000, 0)
	now := start
	op := &sourceOp[int]{et: &EventTime[int]{}, now: func() time.Time { return now }}
	a, b := &settableReader{wm: 10}, &settableReader{wm: 10}
	op.readers = []*splitReader[int]{{split: "a", r: a, wr: a}, {split: "b", r: b, wr: b}}
	for _, s := range []struct {
		name     string
		at       time.Duration
		a, b     settableReader
		want     int64
		wantIdle bool
	}{
		{"both at 10", 0, settableReader{wm: 10}, settableReader{wm: 10}, 10, false},
		{"both idle", 10 * time.Millisecond, settableReader{wm: 10, idle: true}, settableReader{wm: 10, idle: true}, 10, true},
		{"a resumes: b holds", 100 * time.Millisecond, settableReader{wm: 20}, settableReader{wm: 10, idle: true}, 10, false},
		{"a runs ahead: b still holds", time.Second, settableReader{wm: 40}, settableReader{wm: 10, idle: true}, 10, false},
		{"b resumes in the hold", 1500 * time.Millisecond, settableReader{wm: 40}, settableReader{wm: 15}, 15, false},
		{"b idle again after the hold", 3 * time.Second, settableReader{wm: 50}, settableReader{wm: 15, idle: true}, 50, false},
		{"a idle too", 3100 * time.Millisecond, settableReader{wm: 50, idle: true}, settableReader{wm: 15, idle: true}, 50, true},
		{"a resumes: b holds again", 3200 * time.Millisecond, settableReader{wm: 60}, settableReader{wm: 15, idle: true}, 15, false},
		{"the hold ends", 3200*time.Millisecond + runtime.ResumeGrace, settableReader{wm: 60}, settableReader{wm: 15, idle: true}, 60, false},
		{"a idle", 6 * time.Second, settableReader{wm: 70, idle: true}, settableReader{wm: 15, idle: true}, 70, true},
		{"a resumes: b, idle through its hold, holds no more", 6100 * time.Millisecond, settableReader{wm: 80}, settableReader{wm: 15, idle: true}, 80, false},
	} {
		now = start.Add(s.at)
		*a, *b = s.a, s.b
		if wm, idle := op.Watermark(); wm != s.want || idle != s.wantIdle {
			t.Fatalf("%s: Watermark() = %d, %v; want %d, %v", s.name, wm, idle, s.want, s.wantIdle)
		}
	}
}

// settableReader tells the watermark and idleness a test sets.
type settableReader struct {
	wm   int64
	idle bool
}

func (*settableReader) Read(context.Context, []int) (int, error) { return 0, nil }
func (*settableReader) Position() []byte                         { return nil }
func (*settableReader) Close() error                             { return nil }
func (r *settableReader) Watermark() (int64, bool)               { return r.wm, r.idle }
func (*settableReader) ResumeWatermark(int64)                    {}

// TestRestoredIdleSplitStaysIdle: a split checkpointed idle is restored
// idle, so that the restored source does not say it is active for a whole
// IdleTimeout with nothing read (downstream, that is a writer turning
// active, which spends the holds of the other idle writers); a split
// checkpointed active is restored active. The idleness is checkpointed
// as the clock finds it.
func TestRestoredIdleSplitStaysIdle(t *testing.T) {
	et := &EventTime[int]{Timestamp: func(v int) time.Time { return time.Unix(int64(v), 0) }, IdleTimeout: time.Hour}
	restored := &checkpoint.SubtaskSnapshot{Entries: [][]byte{
		format.EncodeSplitPosition(format.SplitPosition{Split: "idle", Newest: 10, Idle: true}),
		format.EncodeSplitPosition(format.SplitPosition{Split: "active", Newest: 20}),
	}}
	oc := runtime.OperatorContext{Parallelism: 1, BatchSize: 4, Records: new(atomic.Int64), Restored: restored}
	op, err := newSourceOp(context.Background(), oc, emptySource{"idle", "active"}, et, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer op.closeReaders()
	if wm, idle := op.Watermark(); wm != 20-1 || idle {
		t.Fatalf("Watermark() = %d, %v; want the active split's 19, active", wm, idle)
	}
	if !op.readers[0].idle || op.readers[1].idle {
		t.Fatalf("restored idleness: %q %v, %q %v; want idle, active", op.readers[0].split, op.readers[0].idle, op.readers[1].split, op.readers[1].idle)
	}
	later := time.Now().Add(2 * time.Hour)
	op.now = func() time.Time { return later }
	snap, err := op.Snapshot(context.Background(), 1)
	if err != nil {
		t.Fatal(err)
	}
	s, _ := snap()
	for _, e := range s.Entries {
		if p, err := format.DecodeSplitPosition(e); err != nil || !p.Idle {
			t.Errorf("checkpointed after IdleTimeout with nothing read: %+v, %v; want idle", p, err)
		}
	}
}

// emptySource has the splits it lists, with no record in any.
type emptySource []string

func (s emptySource) Splits(context.Context) ([]string, error) { return s, nil }
func (emptySource) Open(context.Context, string, []byte) (source.Reader[int], error) {
	return toldReaderless{}, nil
}

// toldReaderless reads nothing and tells no watermark.
type toldReaderless struct{}

func (toldReaderless) Read(context.Context, []int) (int, error) { return 0, nil }
func (toldReaderless) Position() []byte                         { return nil }
func (toldReaderless) Close() error                             { return nil }
