package stream

import (
	"encoding/binary"
	"strings"
	"testing"

	"github.com/exactlyonce/exactly/runtime"
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
