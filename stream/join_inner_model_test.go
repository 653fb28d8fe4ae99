package stream

import (
	"math"
	"testing"
	"time"

	"github.com/exactlyonce/exactly/state"
)

// innerRef is the inner join's reference: every record is kept, with the
// time (the watermark) it was stored or last renewed, and matches every
// later record of the other input with its key, until it expires.
type innerRef struct {
	ttl  *state.TTL
	wm   int64
	kept [3][]innerKept // by input
}

type innerKept struct {
	r     modelRec
	stamp int64 // math.MinInt64: stored before the first watermark
}

// live reports whether k has not expired at the watermark.
func (m *innerRef) live(k innerKept) bool {
	return m.ttl == nil || k.stamp == math.MinInt64 || k.stamp+int64(m.ttl.After) > m.wm
}

func (m *innerRef) record(input int, r modelRec) ([]joined, bool) {
	var out []joined
	for i, o := range m.kept[3-input] {
		if o.r.Key != r.Key || !m.live(o) {
			continue
		}
		if m.ttl != nil && m.ttl.Update == state.TTLOnReadAndWrite {
			m.kept[3-input][i].stamp = m.wm
		}
		if input == 1 {
			out = append(out, joined{Key: r.Key, ID1: r.ID, ID2: o.r.ID})
		} else {
			out = append(out, joined{Key: r.Key, ID1: o.r.ID, ID2: r.ID})
		}
	}
	m.kept[input] = append(m.kept[input], innerKept{r, m.wm})
	return out, false
}

func (m *innerRef) watermark(wm int64) []joined {
	if m.wm == math.MinInt64 {
		// The clock's first time stamps what was stored before it.
		for i := range m.kept {
			for k := range m.kept[i] {
				m.kept[i][k].stamp = wm
			}
		}
	}
	m.wm = max(m.wm, wm)
	return nil
}

func innerModel(ttl *state.TTL) coModel[joined] {
	m := coModel[joined]{
		spread: 25, ooo: 10, compare: compareJoined,
		build: func(a, b KeyedStream[int64, modelRec]) Stream[joined] {
			var opts []JoinOption
			if ttl != nil {
				opts = append(opts, StateTTL(*ttl))
			}
			return InnerJoin(a, b, "join", modelInputs, func(k int64, a, b modelRec) joined { return joined{Key: k, ID1: a.ID, ID2: b.ID} }, opts...)
		},
		ref: func() coRef[joined] { return &innerRef{ttl: ttl, wm: math.MinInt64} },
	}
	if ttl != nil {
		m.empty, m.emptyAfter = true, ttl.After.Milliseconds()
	}
	return m
}

// TestInnerJoinModel checks the inner join's pairs, without and with a
// state TTL (renewed on write, or on read and write), and that the TTL
// leaves no state once the watermark passed every record by it.
func TestInnerJoinModel(t *testing.T) {
	ttls := []*state.TTL{nil, {After: 15 * time.Millisecond}, {After: 5 * time.Millisecond, Update: state.TTLOnReadAndWrite}}
	runCoModels(t, ttls, innerModel, state.HeapBackend, 30, false)
}

// TestInnerJoinModelPebble is TestInnerJoinModel with the state on disk.
func TestInnerJoinModelPebble(t *testing.T) {
	runCoModels(t, []*state.TTL{nil, {After: 15 * time.Millisecond}}, innerModel, state.PebbleBackend, 3, false)
}
