package runtime

import (
	"slices"
	"testing"
	"time"
)

func TestDurationHistogram(t *testing.T) {
	var h DurationHistogram
	for _, d := range []time.Duration{time.Millisecond, 10 * time.Millisecond, 11 * time.Millisecond, 3 * time.Second, time.Hour} {
		h.Observe(d)
	}
	cumulative, count, sum := h.Snapshot()
	// Bounds: 10ms 25ms 50ms 100ms 250ms 500ms 1s 2.5s 5s 10s 30s 60s; a
	// duration equal to a bound falls in its bucket, the hour above all.
	want := []uint64{2, 3, 3, 3, 3, 3, 3, 3, 4, 4, 4, 4}
	if !slices.Equal(cumulative, want) || count != 5 {
		t.Errorf("cumulative %v, count %d; want %v, 5", cumulative, count, want)
	}
	if wantSum := time.Hour + 3*time.Second + 22*time.Millisecond; sum != wantSum {
		t.Errorf("sum %v, want %v", sum, wantSum)
	}
}
