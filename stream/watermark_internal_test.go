package stream

import (
	"encoding/binary"
	"strings"
	"testing"

	"github.com/exactlyonce/exactly/internal/runtime"
)

// TestRestoredWatermark checks that a keyed operator restores the least
// watermark of the former subtasks it takes key groups from, and rejects
// an entry that is not a watermark.
func TestRestoredWatermark(t *testing.T) {
	entry := func(wm int64) []byte {
		return binary.BigEndian.AppendUint64([]byte{watermarkEntryVersion}, uint64(wm))
	}
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

// TestSplitPositionKeepsEventTime round-trips a split position with its
// newest event time and still decodes version 1 positions, which had none.
func TestSplitPositionKeepsEventTime(t *testing.T) {
	p := splitPosition{split: "topic/3", pos: []byte{7, 8}, done: true, newest: -42}
	got, err := decodeSplitPosition(encodeSplitPosition(p))
	if err != nil || got.split != p.split || string(got.pos) != string(p.pos) || !got.done || got.newest != -42 {
		t.Fatalf("round trip: %+v, %v", got, err)
	}
	v1 := []byte{1, 0, 1, 'a', 9}
	got, err = decodeSplitPosition(v1)
	if err != nil || got.split != "a" || string(got.pos) != "\x09" || got.newest != runtime.MinWatermark {
		t.Fatalf("version 1: %+v, %v", got, err)
	}
	for _, bad := range [][]byte{{3, 0}, {2, 0, 1, 'a', 1, 2}} {
		if _, err := decodeSplitPosition(bad); err == nil {
			t.Errorf("decoded malformed %v", bad)
		}
	}
}
