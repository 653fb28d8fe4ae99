package stream

import (
	"errors"
	"fmt"
	"testing"

	"github.com/exactlyonce/exactly/state"
)

// sumWindows is a windowing of int records whose accumulator sums them.
func sumWindows(lateness int64) *windowing[int, int, int, int] {
	return &windowing[int, int, int, int]{
		agg: Aggregate[int, int, int, int]{
			Add:   func(a, v int) int { return a + v },
			Merge: func(a, b int) int { return a*1000 + b }, // shows the order of the merge
			Codec: state.IntCodec{},
		},
		lateness: lateness,
	}
}

func fmtSessions(ss []session[int]) string {
	s := ""
	for _, x := range ss {
		s += fmt.Sprintf("[%d,%d)=%d#%d", x.start, x.end, x.acc, x.firings)
		if x.pending {
			s += "*"
		}
		s += " "
	}
	return s
}

func TestAddToSessions(t *testing.T) {
	fired := func(start, end int64, acc, firings int) session[int] {
		return session[int]{start: start, end: end, pane: pane[int]{acc: acc, firings: firings}}
	}
	open := func(start, end int64, acc int) session[int] {
		return session[int]{start: start, end: end, pane: pane[int]{acc: acc, pending: true}}
	}
	for _, c := range []struct {
		name       string
		sessions   []session[int]
		start, end int64 // the record's window; its value is 1
		wm         int64
		lateness   int64
		want       string
		late       bool
	}{
		{name: "first session", start: 10, end: 20, wm: 0, want: "[10,20)=1#0* "},
		{name: "before every session", sessions: []session[int]{open(30, 40, 5)}, start: 10, end: 20, want: "[10,20)=1#0* [30,40)=5#0* "},
		{name: "after every session", sessions: []session[int]{open(30, 40, 5)}, start: 50, end: 60, want: "[30,40)=5#0* [50,60)=1#0* "},
		{name: "touching is not overlapping", sessions: []session[int]{open(30, 40, 5)}, start: 40, end: 50, want: "[30,40)=5#0* [40,50)=1#0* "},
		{name: "inside a session", sessions: []session[int]{open(30, 40, 5)}, start: 32, end: 38, want: "[30,40)=6#0* "},
		{name: "extends a session's end", sessions: []session[int]{open(30, 40, 5)}, start: 39, end: 49, want: "[30,49)=6#0* "},
		{name: "extends a session's start", sessions: []session[int]{open(30, 40, 5)}, start: 25, end: 35, want: "[25,40)=6#0* "},
		{name: "bridges two sessions", sessions: []session[int]{open(10, 20, 2), open(30, 40, 3), open(60, 70, 4)}, start: 15, end: 35,
			want: "[10,40)=2004#0* [60,70)=4#0* "},
		{name: "bridges three sessions", sessions: []session[int]{open(10, 20, 2), open(25, 28, 3), open(30, 40, 4)}, start: 19, end: 31,
			want: "[10,40)=2003005#0* "},
		{name: "merges fired sessions: the most firings count", sessions: []session[int]{fired(10, 20, 2, 1), fired(30, 40, 3, 2)}, start: 15, end: 35,
			wm: 50, lateness: 100, want: "[10,40)=2004#2* "},
		{name: "a late record reopens a fired session", sessions: []session[int]{fired(10, 20, 2, 1)}, start: 12, end: 22,
			wm: 30, lateness: 10, want: "[10,22)=3#1* "},
		{name: "too late: alone", start: 10, end: 20, wm: 19, late: true},
		{name: "too late: past the lateness", start: 10, end: 20, wm: 29, lateness: 10, late: true},
		{name: "within the lateness", start: 10, end: 20, wm: 28, lateness: 10, want: "[10,20)=1#0* "},
		{name: "late alone, saved by the session it joins", sessions: []session[int]{open(15, 40, 5)}, start: 10, end: 20, wm: 25,
			want: "[10,40)=6#0* "},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, ok := sumWindows(c.lateness).addToSessions(c.sessions, c.start, c.end, 1, c.wm)
			if ok == c.late {
				t.Fatalf("accepted = %v, want %v", ok, !c.late)
			}
			if !ok {
				return
			}
			if s := fmtSessions(got); s != c.want {
				t.Errorf("sessions %s, want %s", s, c.want)
			}
		})
	}
}

func TestSessionTimers(t *testing.T) {
	ss := []session[int]{
		{start: 0, end: 10, pane: pane[int]{pending: true}},
		{start: 20, end: 30, pane: pane[int]{firings: 1}},
	}
	if got := fmt.Sprint(sumWindows(5).sessionTimers(ss)); got != "[9 34]" {
		t.Errorf("timers %s, want [9 34]: the end of the pending one, the expiry of the fired one", got)
	}
}

func TestWindowCodecs(t *testing.T) {
	ss := []session[int]{
		{start: -50, end: 10, pane: pane[int]{acc: -7, firings: 3, pending: true}},
		{start: 20, end: 30, pane: pane[int]{acc: 1 << 40, firings: 0}},
	}
	c := sessionsCodec[int]{pane: paneCodec[int]{acc: state.IntCodec{}}}
	enc := c.Append(nil, ss)
	got, err := c.Decode(enc)
	if err != nil || fmtSessions(got) != fmtSessions(ss) {
		t.Fatalf("Decode(Append(%s)) = %s, %v", fmtSessions(ss), fmtSessions(got), err)
	}
	if empty, err := c.Decode(c.Append(nil, nil)); err != nil || len(empty) != 0 {
		t.Errorf("no sessions: %v, %v", empty, err)
	}
	for i := range len(enc) {
		if _, err := c.Decode(enc[:i]); !errors.Is(err, state.ErrMalformed) {
			t.Errorf("Decode of the first %d of %d bytes = %v, want ErrMalformed", i, len(enc), err)
		}
	}
	if _, err := c.Decode(append(enc, 0)); !errors.Is(err, state.ErrMalformed) {
		t.Errorf("Decode with a trailing byte = %v, want ErrMalformed", err)
	}

	// A compact pane is the accumulator alone, as before lateness: always
	// pending, never fired.
	compact := paneCodec[int]{acc: state.IntCodec{}, compact: true}
	if enc := compact.Append(nil, pane[int]{acc: 5, pending: true}); string(enc) != string(state.IntCodec{}.Append(nil, 5)) {
		t.Errorf("compact pane encoding %x, want the accumulator's", enc)
	}
	if p, err := compact.Decode(state.IntCodec{}.Append(nil, 5)); err != nil || p != (pane[int]{acc: 5, pending: true}) {
		t.Errorf("compact Decode = %+v, %v", p, err)
	}
}
