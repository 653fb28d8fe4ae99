package main

import (
	"testing"
	"time"

	"github.com/exactlyonce/exactly/bench/nexmark"
)

func TestReadyEvent(t *testing.T) {
	for _, end := range []int64{nexmark.BaseTime - 5_000, nexmark.BaseTime, nexmark.BaseTime + 10_000, nexmark.BaseTime + 12_345} {
		i := readyEvent(end)
		due := end + nexmark.MaxOutOfOrderness
		if nexmark.DateTime(i) < due {
			t.Errorf("readyEvent(%d) = %d, whose time %d is before %d", end, i, nexmark.DateTime(i), due)
		}
		if i > 0 && nexmark.DateTime(i-1) >= due {
			t.Errorf("readyEvent(%d) = %d, but event %d's time %d is at or after %d already", end, i, i-1, nexmark.DateTime(i-1), due)
		}
	}
}

func TestWindowLatencies(t *testing.T) {
	t0 := time.Unix(1_000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	// Events produced in rounds of 50 every 5 ms: event i by round i/50.
	var marks []producedMark
	for r := range 4_000 {
		marks = append(marks, producedMark{next: uint64(50 * (r + 1)), at: at(5 * r)})
	}
	if got, ok := producedAt(marks, 49); !ok || !got.Equal(at(0)) {
		t.Errorf("producedAt(49) = %v, %v; want the first round's", got, ok)
	}
	if got, ok := producedAt(marks, 50); !ok || !got.Equal(at(5)) {
		t.Errorf("producedAt(50) = %v, %v; want the second round's", got, ok)
	}
	if _, ok := producedAt(marks, 200_000); ok {
		t.Error("producedAt of an event never produced reported one")
	}
	// A window ending 2 s after event 0 closes with the event 3 s after
	// it (the watermarks' bound of 1 s), event 30,000, produced in round
	// 600, at 3,000 ms.
	end := int64(nexmark.BaseTime + 2_000)
	outs := []windowOutput{
		{end: end, at: at(3_040)},
		{end: end, at: at(3_090)}, // the window's last output
		{end: end + 2_000, at: at(5_070)},
		{end: end + 4_000, at: at(7_100)}, // closes after the span
	}
	got := windowLatencies(outs, marks, at(2_000), at(6_000))
	want := []time.Duration{70 * time.Millisecond, 90 * time.Millisecond}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("windowLatencies = %v, want %v", got, want)
	}
}
