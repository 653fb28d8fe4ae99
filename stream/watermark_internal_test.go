package stream

import (
	"context"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/exactlyonce/exactly/internal/format"
	"github.com/exactlyonce/exactly/internal/runtime"
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
