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
	// Events produced in rounds of 50 every 5 ms, event i in round i/50,
	// each round's events to one partition in turn (a sticky partitioner).
	var log productionLog
	for r := range 4_000 {
		for i := uint64(50 * r); i < uint64(50*(r+1)); i++ {
			log.placed(i, int32(r%partitions))
		}
		log.sent(uint64(50*(r+1)), at(5*r))
	}
	if got, ok := log.producedAt(49); !ok || !got.Equal(at(0)) {
		t.Errorf("producedAt(49) = %v, %v; want the first round's", got, ok)
	}
	if got, ok := log.producedAt(50); !ok || !got.Equal(at(5)) {
		t.Errorf("producedAt(50) = %v, %v; want the second round's", got, ok)
	}
	if _, ok := log.producedAt(200_000); ok {
		t.Error("producedAt of an event never produced reported one")
	}
	// A window ending 2 s after event 0 is closed by the events 3 s after
	// it (the watermarks' bound of 1 s) from event 30,000 on, in round 600
	// (partition 0, at 3,000 ms): the partitions' first such events are in
	// rounds 600 to 603, the last one at 3,015 ms.
	if got, ok := log.closedAt(readyEvent(nexmark.BaseTime + 2_000)); !ok || !got.Equal(at(3_015)) {
		t.Errorf("closedAt = %v, %v; want the round at 3015 ms", got, ok)
	}
	end := int64(nexmark.BaseTime + 2_000)
	outs := []windowOutput{
		{end: end, at: at(3_040)},
		{end: end, at: at(3_090)},         // the window's last output: 75 ms
		{end: end + 2_000, at: at(5_070)}, // closed at 5,015 ms: 55 ms
		{end: end + 4_000, at: at(7_100)}, // closed after the span
	}
	got := windowLatencies(outs, &log, at(2_000), at(6_000))
	want := []time.Duration{55 * time.Millisecond, 75 * time.Millisecond}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("windowLatencies = %v, want %v", got, want)
	}
	// A partition that got no event past the end: not closed.
	var short productionLog
	for i := range uint64(100) {
		short.placed(i, 0)
	}
	short.sent(100, at(0))
	if _, ok := short.closedAt(10); ok {
		t.Error("closedAt reported a window closed that three partitions never closed")
	}
}
