package stream

import (
	"cmp"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/exactlyonce/exactly/state"
)

// joined is a pair of the join model tests: the ids of a record of each
// input, under their key, and the window of a window join.
type joined struct {
	Key        int64
	ID1, ID2   int
	Start, End int64 // ms; window joins only
}

func (p joined) String() string {
	if p.End != 0 {
		return fmt.Sprintf("%d:%d+%d@[%d,%d)", p.Key, p.ID1, p.ID2, p.Start, p.End)
	}
	return fmt.Sprintf("%d:%d+%d", p.Key, p.ID1, p.ID2)
}

func compareJoined(a, b joined) int {
	return cmp.Or(cmp.Compare(a.Key, b.Key), cmp.Compare(a.ID1, b.ID1), cmp.Compare(a.ID2, b.ID2), cmp.Compare(a.Start, b.Start))
}

// modelInputs are the records of the join model tests, kept in state.
var modelInputs = JoinInputs[modelRec, modelRec]{
	Time1: func(r modelRec) time.Time { return time.UnixMilli(r.T) }, Time2: func(r modelRec) time.Time { return time.UnixMilli(r.T) },
	Codec1: state.JSONCodec[modelRec]{}, Codec2: state.JSONCodec[modelRec]{},
}

// intervalRef is the interval join's reference: every record on time is
// kept forever and matched with every later one of the other input.
type intervalRef struct {
	iv   Interval
	wm   int64
	recs [3][]modelRec // by input
}

func (m *intervalRef) record(input int, r modelRec) ([]joined, bool) {
	if r.T*1e6 <= m.wm {
		return nil, true
	}
	var out []joined
	for _, o := range m.recs[3-input] {
		if o.Key != r.Key {
			continue
		}
		a, b := r, o
		if input == 2 {
			a, b = o, r
		}
		if m.iv.contains((a.T - b.T) * 1e6) {
			out = append(out, joined{Key: r.Key, ID1: a.ID, ID2: b.ID})
		}
	}
	m.recs[input] = append(m.recs[input], r)
	return out, false
}

func (m *intervalRef) watermark(wm int64) []joined { m.wm = max(m.wm, wm); return nil }

func intervalModel(iv Interval) coModel[joined] {
	return coModel[joined]{
		spread: 25, ooo: 10, compare: compareJoined,
		build: func(a, b KeyedStream[int64, modelRec]) Stream[joined] {
			in := modelInputs
			in.Late1, in.Late2 = NewOutputTag[modelRec]("late1"), NewOutputTag[modelRec]("late2")
			out := IntervalJoin(a, b, "join", iv, in, func(k int64, a, b modelRec) joined { return joined{Key: k, ID1: a.ID, ID2: b.ID} })
			SideOutput(out, in.Late1)
			SideOutput(out, in.Late2)
			return out
		},
		lateSide: [3]bool{1: true, 2: true},
		ref:      func() coRef[joined] { return &intervalRef{iv: iv, wm: math.MinInt64} },
		empty:    true, emptyAfter: max(abs(iv.Lower), abs(iv.Upper)).Milliseconds() + 1,
	}
}

func abs(d time.Duration) time.Duration { return max(d, -d) }

var modelIntervals = []Interval{
	{Lower: -5 * time.Millisecond, Upper: 3 * time.Millisecond},
	{Lower: 0, Upper: 10 * time.Millisecond, ExcludeLower: true},
	{Lower: -8 * time.Millisecond, Upper: -2 * time.Millisecond, ExcludeUpper: true},
	{Lower: 2 * time.Millisecond, Upper: 2 * time.Millisecond},
	{Lower: -20 * time.Millisecond, Upper: 20 * time.Millisecond, ExcludeLower: true, ExcludeUpper: true},
}

// TestIntervalJoinModel checks the pairs, the late records, and that no
// state is left once the watermark passed every record's time by the
// interval, against the reference, for inclusive and exclusive bounds.
func TestIntervalJoinModel(t *testing.T) {
	runCoModels(t, modelIntervals, intervalModel, state.HeapBackend, 30, true)
}

// TestIntervalJoinModelPebble is TestIntervalJoinModel with the state on
// disk.
func TestIntervalJoinModelPebble(t *testing.T) {
	runCoModels(t, modelIntervals[:2], intervalModel, state.PebbleBackend, 3, false)
}
