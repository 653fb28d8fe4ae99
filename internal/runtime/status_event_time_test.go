package runtime

import (
	"testing"
	"time"

	"github.com/exactlyonce/exactly/control"
)

// TestOperatorEventTime: an operator is where the slowest of its subtasks
// that are not idle is in event time; a subtask without a watermark holds
// it back; all idle is idle, all ended is ended.
func TestOperatorEventTime(t *testing.T) {
	t1, t2 := time.Date(2026, 1, 1, 0, 0, 1, 0, time.UTC), time.Date(2026, 1, 1, 0, 0, 2, 0, time.UTC)
	at := func(t time.Time) control.EventTime { return control.EventTime{Watermark: &t} }
	idle := control.EventTime{Idle: true}
	ended := control.EventTime{InputEnded: true}
	for _, c := range []struct {
		name string
		subs []control.EventTime
		want control.EventTime
	}{
		{"the least watermark", []control.EventTime{at(t2), at(t1)}, at(t1)},
		{"idle subtasks hold nothing back", []control.EventTime{at(t2), idle, ended}, at(t2)},
		{"a subtask without a watermark holds it back", []control.EventTime{at(t2), {}}, control.EventTime{}},
		{"all idle", []control.EventTime{idle, ended}, idle},
		{"all ended", []control.EventTime{ended, ended}, ended},
		{"no event time", []control.EventTime{{}, {}}, control.EventTime{}},
	} {
		var subs []control.Subtask
		for _, e := range c.subs {
			subs = append(subs, control.Subtask{EventTime: e})
		}
		got := lowEventTime(subs)
		if got.Idle != c.want.Idle || got.InputEnded != c.want.InputEnded || (got.Watermark == nil) != (c.want.Watermark == nil) ||
			got.Watermark != nil && !got.Watermark.Equal(*c.want.Watermark) {
			t.Errorf("%s: %+v, want %+v", c.name, got, c.want)
		}
	}
	if e := statusEventTime(EventTime{Watermark: MinWatermark}, true); e.Watermark != nil || e.Idle || e.InputEnded {
		t.Errorf("before the first watermark: %+v, want none", e)
	}
	if e := statusEventTime(EventTime{Watermark: MaxWatermark}, true); !e.InputEnded {
		t.Errorf("after the end of the input: %+v, want input ended", e)
	}
	if e := statusEventTime(EventTime{Watermark: t1.UnixNano()}, true); e.Watermark == nil || !e.Watermark.Equal(t1) {
		t.Errorf("a watermark: %+v, want %v", e, t1)
	}
}
