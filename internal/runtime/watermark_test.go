package runtime

import (
	"testing"
	"time"
)

// TestWatermarkMerger walks a three-input merger through advances, idleness,
// reactivation and the end of inputs.
func TestWatermarkMerger(t *testing.T) {
	m := newWatermarkMerger(3)
	type step struct {
		name string
		do   func() mergeResult
		want mergeResult
	}
	wm := func(i int, w int64) func() mergeResult { return func() mergeResult { return m.watermark(i, w) } }
	idle := func(i int) func() mergeResult { return func() mergeResult { return m.markIdle(i, MinWatermark) } }
	finish := func(i int) func() mergeResult { return func() mergeResult { return m.finish(i) } }
	steps := []step{
		{"one input advances, the others hold the minimum back", wm(0, 10), mergeResult{}},
		{"second input", wm(1, 20), mergeResult{}},
		{"third input releases the least", wm(2, 15), mergeResult{advance: true, wm: 10}},
		{"an input going back is ignored", wm(0, 5), mergeResult{}},
		{"the least input advances", wm(0, 30), mergeResult{advance: true, wm: 15}},
		{"an idle input no longer holds it back", idle(2), mergeResult{advance: true, wm: 20}},
		{"idle again changes nothing", idle(2), mergeResult{}},
		{"every input idle: idle at the greatest watermark", func() mergeResult { m.markIdle(0, MinWatermark); return m.markIdle(1, 22) },
			mergeResult{advance: true, wm: 30, idle: true}},
		{"active again behind the output: re-announce it", wm(2, 16), mergeResult{advance: true, wm: 30}},
		{"no progress while behind", wm(2, 25), mergeResult{}},
		{"the others wake up", func() mergeResult { m.watermark(1, 31); m.watermark(0, 40); return m.watermark(2, 35) }, mergeResult{advance: true, wm: 31}},
		{"a finished input is left out", finish(1), mergeResult{advance: true, wm: 35}},
		{"the end of every input forwards nothing", func() mergeResult { m.finish(0); return m.finish(1) }, mergeResult{}},
	}
	for _, s := range steps {
		if got := s.do(); got != s.want {
			t.Fatalf("%s: got %+v, want %+v", s.name, got, s.want)
		}
	}
}

// TestWatermarkMergerMax checks that MaxWatermark passes through, as a
// finished bounded source sends it.
func TestWatermarkMergerMax(t *testing.T) {
	m := newWatermarkMerger(2)
	m.watermark(0, MaxWatermark)
	if got := m.watermark(1, MaxWatermark); got != (mergeResult{advance: true, wm: MaxWatermark}) {
		t.Fatalf("got %+v", got)
	}
}

// TestWatermarkPacer walks the pacer through live pacing (wall-clock
// time) and a backlog (event time running ahead).
func TestWatermarkPacer(t *testing.T) {
	const ms = int64(time.Millisecond)
	p := newWatermarkPacer(200 * time.Millisecond)
	start := time.Unix(1000, 0)
	at := func(d int64) time.Time { return start.Add(time.Duration(d) * time.Millisecond) }
	for _, s := range []struct {
		name string
		now  time.Time
		wm   int64
		want bool
	}{
		{"the first watermark is sent", at(0), 5_000 * ms, true},
		{"live: 50 ms later, 50 ms of event time", at(50), 5_050 * ms, false},
		{"live: an interval of wall-clock time", at(200), 5_200 * ms, true},
		{"live: an unchanged watermark still waits", at(300), 5_200 * ms, false},
		{"backlog: an interval of event time at once", at(310), 5_400 * ms, true},
		{"backlog: just short of it", at(320), 5_599 * ms, false},
		{"backlog: far ahead", at(321), 60_000 * ms, true},
		{"a watermark behind waits for wall-clock time", at(400), 1_000 * ms, false},
		{"and then goes", at(521), 1_000 * ms, true},
		{"the end of event time", at(522), MaxWatermark, true},
	} {
		if got := p.due(s.now, s.wm); got != s.want {
			t.Fatalf("%s: due = %v, want %v", s.name, got, s.want)
		}
	}
	first := newWatermarkPacer(time.Second)
	if !first.due(start, MinWatermark) || first.due(at(1), MaxWatermark-1) {
		// From MinWatermark, no difference counts as event time ahead.
		t.Fatal("the pacer compared event time with MinWatermark")
	}
}
