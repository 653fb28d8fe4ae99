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
	now := time.Unix(1000, 0) // one instant: a hold never ends here (TestWatermarkMergerHolds)
	wm := func(i int, w int64) func() mergeResult { return func() mergeResult { return m.watermark(i, w, now) } }
	idle := func(i int) func() mergeResult { return func() mergeResult { return m.markIdle(i, MinWatermark, now) } }
	finish := func(i int) func() mergeResult { return func() mergeResult { return m.finish(i, now) } }
	steps := []step{
		{"one input advances, the others hold the minimum back", wm(0, 10), mergeResult{}},
		{"second input", wm(1, 20), mergeResult{}},
		{"third input releases the least", wm(2, 15), mergeResult{advance: true, wm: 10}},
		{"an input going back is ignored", wm(0, 5), mergeResult{}},
		{"the least input advances", wm(0, 30), mergeResult{advance: true, wm: 15}},
		{"an idle input no longer holds it back", idle(2), mergeResult{advance: true, wm: 20}},
		{"idle again changes nothing", idle(2), mergeResult{}},
		{"every input idle: idle at the greatest watermark", func() mergeResult { m.markIdle(0, MinWatermark, now); return m.markIdle(1, 22, now) },
			mergeResult{advance: true, wm: 30, idle: true}},
		{"active again behind the output: re-announce it", wm(2, 16), mergeResult{advance: true, wm: 30}},
		{"no progress while behind", wm(2, 25), mergeResult{}},
		{"the others wake up", func() mergeResult { m.watermark(1, 31, now); m.watermark(0, 40, now); return m.watermark(2, 35, now) }, mergeResult{advance: true, wm: 31}},
		{"a finished input is left out", finish(1), mergeResult{advance: true, wm: 35}},
		{"the end of every input forwards nothing", func() mergeResult { m.finish(0, now); return m.finish(1, now) }, mergeResult{}},
	}
	for _, s := range steps {
		if got := s.do(); got != s.want {
			t.Fatalf("%s: got %+v, want %+v", s.name, got, s.want)
		}
	}
}

// TestWatermarkMergerHolds walks a two-input merger through a hold: both
// inputs idle, one resumes and runs ahead, and the other holds the
// output at its watermark until it resumes too, or for ResumeGrace.
func TestWatermarkMergerHolds(t *testing.T) {
	m := newWatermarkMerger(2)
	start := time.Unix(1000, 0)
	at := func(ms int) time.Time { return start.Add(time.Duration(ms) * time.Millisecond) }
	for _, s := range []struct {
		name string
		do   func() mergeResult
		want mergeResult
		hold bool // a hold runs after the step
	}{
		{"both inputs at 10", func() mergeResult { m.watermark(0, 10, at(0)); return m.watermark(1, 10, at(0)) }, mergeResult{advance: true, wm: 10}, false},
		{"both idle: the task is idle", func() mergeResult { m.markIdle(0, MinWatermark, at(10)); return m.markIdle(1, MinWatermark, at(10)) }, mergeResult{idle: true}, false},
		{"0 resumes: 1 holds the output", func() mergeResult { return m.watermark(0, 20, at(100)) }, mergeResult{advance: true, wm: 10}, true},
		{"0 runs ahead: 1 still holds", func() mergeResult { return m.watermark(0, 40, at(500)) }, mergeResult{}, true},
		{"1 resumes within the grace: nothing of it was late", func() mergeResult { return m.watermark(1, 15, at(900)) }, mergeResult{advance: true, wm: 15}, true},
		{"the hold ends at its deadline", func() mergeResult { return m.expire(at(100).Add(ResumeGrace)) }, mergeResult{}, false},
		{"1 idle again, 0 goes on", func() mergeResult { m.markIdle(1, MinWatermark, at(3000)); return m.watermark(0, 50, at(3000)) }, mergeResult{advance: true, wm: 50}, false},
		{"0 idle too", func() mergeResult { return m.markIdle(0, MinWatermark, at(3100)) }, mergeResult{idle: true}, false},
		{"0 resumes: 1 holds again", func() mergeResult { return m.watermark(0, 60, at(3200)) }, mergeResult{advance: true, wm: 50}, true},
		{"1 silent through the grace: the hold ends", func() mergeResult { return m.expire(at(3200).Add(ResumeGrace)) }, mergeResult{advance: true, wm: 60}, false},
		{"0 idle, then active: 1, spent, holds no more", func() mergeResult { m.markIdle(0, MinWatermark, at(6000)); return m.watermark(0, 70, at(6100)) }, mergeResult{advance: true, wm: 70}, false},
		{"1 active and idle again", func() mergeResult { m.watermark(1, 70, at(6200)); return m.markIdle(1, MinWatermark, at(6300)) }, mergeResult{}, false},
		{"0 idle and active: 1 holds once more", func() mergeResult { m.markIdle(0, MinWatermark, at(6400)); return m.watermark(0, 80, at(6500)) }, mergeResult{advance: true, wm: 70}, true},
	} {
		got := s.do()
		if got != s.want {
			t.Fatalf("%s: got %+v, want %+v", s.name, got, s.want)
		}
		if _, hold := m.deadline(); hold != s.hold {
			t.Fatalf("%s: hold %v, want %v", s.name, hold, s.hold)
		}
	}
}

// TestWatermarkMergerMax checks that MaxWatermark passes through, as a
// finished bounded source sends it.
func TestWatermarkMergerMax(t *testing.T) {
	m := newWatermarkMerger(2)
	now := time.Unix(1000, 0)
	m.watermark(0, MaxWatermark, now)
	if got := m.watermark(1, MaxWatermark, now); got != (mergeResult{advance: true, wm: MaxWatermark}) {
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
