package stream

import (
	"math"
	"slices"
	"testing"
	"time"

	"github.com/exactlyonce/exactly/state"
)

// windowJoinRef is the window join's reference: a key's records on time
// wait in the windows they belong to (for sessions: recomputed from the
// waiting records each time), and a window emits every pair of its
// records of the two inputs when the watermark passes its end.
type windowJoinRef struct {
	w    Windows
	wm   int64
	open map[int64][]refSide // sessions: a key's waiting records
	// fixed windows: a key's windows by start, their records
	fixed map[int64]map[int64][]refSide
	// outer makes it the reference of a full outer join: a window's
	// records without a match in the other input are emitted alone, the
	// other side's id -1.
	outer bool
}

// refSide is a record of one input (1 or 2), its time in ns.
type refSide struct {
	input int
	t     int64
	r     modelRec
}

func (m *windowJoinRef) record(input int, r modelRec) ([]joined, bool) {
	rec := refSide{input, r.T * 1e6, r}
	if m.w.session {
		recs := append(slices.Clone(m.open[r.Key]), rec)
		for _, s := range sessionsOf(recs, int64(m.w.gap)) {
			if slices.Contains(s.recs, rec) && s.end-1 <= m.wm {
				return nil, true
			}
		}
		m.open[r.Key] = recs
		return nil, false
	}
	size, slide, live := int64(m.w.size), int64(m.w.slide), false
	for start := rec.t - mod(rec.t, slide); start > rec.t-size; start -= slide {
		if start+size-1 <= m.wm {
			continue
		}
		live = true
		if m.fixed[r.Key] == nil {
			m.fixed[r.Key] = map[int64][]refSide{}
		}
		m.fixed[r.Key][start] = append(m.fixed[r.Key][start], rec)
	}
	return nil, !live
}

func (m *windowJoinRef) watermark(wm int64) []joined {
	m.wm = max(m.wm, wm)
	var out []joined
	for key, recs := range m.open {
		var keep []refSide
		for _, s := range sessionsOf(recs, int64(m.w.gap)) {
			if s.end-1 <= m.wm {
				out = append(out, m.pairs(key, s.start, s.end, s.recs)...)
			} else {
				keep = append(keep, s.recs...)
			}
		}
		m.open[key] = keep
	}
	for key, windows := range m.fixed {
		for start, recs := range windows {
			if end := start + int64(m.w.size); end-1 <= m.wm {
				out = append(out, m.pairs(key, start, end, recs)...)
				delete(windows, start)
			}
		}
	}
	return out
}

// pairs returns what a window emits: its pairs, and for an outer join
// the records of an input the other input has none beside.
func (m *windowJoinRef) pairs(key, start, end int64, recs []refSide) []joined {
	out := refPairs(key, start, end, recs)
	if !m.outer {
		return out
	}
	var has [3]bool
	for _, r := range recs {
		has[r.input] = true
	}
	for _, r := range recs {
		switch {
		case r.input == 1 && !has[2]:
			out = append(out, joined{Key: key, ID1: r.r.ID, ID2: -1, Start: start / 1e6, End: end / 1e6})
		case r.input == 2 && !has[1]:
			out = append(out, joined{Key: key, ID1: -1, ID2: r.r.ID, Start: start / 1e6, End: end / 1e6})
		}
	}
	return out
}

// refSession is a session of the reference and its records.
type refSession struct {
	start, end int64
	recs       []refSide
}

// sessionsOf returns the sessions of recs: the connected unions of their
// windows [t, t+gap).
func sessionsOf(recs []refSide, gap int64) []refSession {
	sorted := slices.SortedFunc(slices.Values(recs), func(a, b refSide) int { return int(a.t - b.t) })
	var out []refSession
	for _, r := range sorted {
		if n := len(out); n > 0 && r.t < out[n-1].end {
			out[n-1].end = max(out[n-1].end, r.t+gap)
			out[n-1].recs = append(out[n-1].recs, r)
			continue
		}
		out = append(out, refSession{start: r.t, end: r.t + gap, recs: []refSide{r}})
	}
	return out
}

// refPairs returns the pairs of a window's records.
func refPairs(key, start, end int64, recs []refSide) []joined {
	var out []joined
	for _, a := range recs {
		for _, b := range recs {
			if a.input == 1 && b.input == 2 {
				out = append(out, joined{Key: key, ID1: a.r.ID, ID2: b.r.ID, Start: start / 1e6, End: end / 1e6})
			}
		}
	}
	return out
}

func windowJoinModel(w Windows) coModel[joined] {
	return coModel[joined]{
		spread: 20 + (w.size + w.gap).Milliseconds(), ooo: 10, compare: compareJoined,
		// Only the first input's late records have a side output: the
		// second's are dropped.
		build: func(a, b KeyedStream[int64, modelRec]) Stream[joined] {
			in := modelInputs
			in.Late1 = NewOutputTag[modelRec]("late1")
			out := WindowJoin(a, b, "join", w, in, func(k int64, w Window, a, b modelRec) joined {
				return joined{Key: k, ID1: a.ID, ID2: b.ID, Start: w.Start.UnixMilli(), End: w.End.UnixMilli()}
			})
			SideOutput(out, in.Late1)
			return out
		},
		lateSide: [3]bool{1: true},
		ref: func() coRef[joined] {
			return &windowJoinRef{w: w, wm: math.MinInt64, open: map[int64][]refSide{}, fixed: map[int64]map[int64][]refSide{}}
		},
		empty: true, emptyAfter: (w.size + w.gap).Milliseconds(),
	}
}

// coGroupModel is the model of a full outer join written with
// WindowCoGroup: the pairs of each window, and each record alone when the
// other input has no record in the window.
func coGroupModel(w Windows) coModel[joined] {
	m := windowJoinModel(w)
	m.build = func(a, b KeyedStream[int64, modelRec]) Stream[joined] {
		in := modelInputs
		in.Late1 = NewOutputTag[modelRec]("late1")
		out := WindowCoGroup(a, b, "cogroup", w, in, func(k int64, w Window, as, bs []modelRec, out *Output[joined]) {
			emit := func(id1, id2 int) {
				out.Emit(joined{Key: k, ID1: id1, ID2: id2, Start: w.Start.UnixMilli(), End: w.End.UnixMilli()})
			}
			for _, a := range as {
				for _, b := range bs {
					emit(a.ID, b.ID)
				}
				if len(bs) == 0 {
					emit(a.ID, -1)
				}
			}
			if len(as) == 0 {
				for _, b := range bs {
					emit(-1, b.ID)
				}
			}
		})
		SideOutput(out, in.Late1)
		return out
	}
	m.ref = func() coRef[joined] {
		return &windowJoinRef{w: w, wm: math.MinInt64, open: map[int64][]refSide{}, fixed: map[int64]map[int64][]refSide{}, outer: true}
	}
	return m
}

// TestWindowCoGroupModel checks a full outer join written with
// WindowCoGroup: the pairs per window, the records without a match, the
// late records, and that no state is left, against the reference.
func TestWindowCoGroupModel(t *testing.T) {
	runCoModels(t, modelJoinWindows, coGroupModel, state.HeapBackend, 30, true)
}

var modelJoinWindows = []Windows{
	Tumbling(10 * time.Millisecond),
	Sliding(20*time.Millisecond, 5*time.Millisecond),
	Session(4 * time.Millisecond),
	Session(10 * time.Millisecond),
}

// TestWindowJoinModel checks the pairs per window, the late records, and
// that no state is left once every window fired, against the reference.
func TestWindowJoinModel(t *testing.T) {
	runCoModels(t, modelJoinWindows, windowJoinModel, state.HeapBackend, 30, true)
}

// TestWindowJoinModelPebble is TestWindowJoinModel with the state on disk.
func TestWindowJoinModelPebble(t *testing.T) {
	runCoModels(t, modelJoinWindows[1:3], windowJoinModel, state.PebbleBackend, 3, false)
}
