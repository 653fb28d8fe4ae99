package stream

import (
	"strings"
	"testing"

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
