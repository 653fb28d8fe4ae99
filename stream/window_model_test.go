package stream

import (
	"cmp"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/exactlyonce/exactly/state"
)

// The model test runs WindowAggregate through the harness on seeded random
// input: out-of-order records, some of them later than the allowed
// lateness, watermarks after every record, and restarts from snapshots
// with random parallelisms. A reference written from the definitions, with
// no timers and no state backend, says what must come out: the results
// with their firing counts, and the late records. A failure prints its
// seed and configuration.

// modelRec is a record of the model test: a key, an event time in ms and
// an id summed by the windows.
type modelRec struct {
	Key  int64
	T    int64
	ID   int
	Late bool // the reference expects it on the late side output
}

// modelAcc is a window's count and sum of ids.
type modelAcc struct{ Count, Sum int }

// modelOut is a window's result.
type modelOut struct {
	Key        int64
	Start, End int64 // UnixNano
	Firing     int
	Count, Sum int
}

func (o modelOut) String() string {
	return fmt.Sprintf("key %d [%d, %d) firing %d: %d records, ids %d", o.Key, o.Start/1e6, o.End/1e6, o.Firing, o.Count, o.Sum)
}

// modelConfig is one configuration of the model test.
type modelConfig struct {
	windows  Windows
	lateness time.Duration
	ooo      time.Duration // the watermark trails the newest event time by this much
}

func (c modelConfig) String() string {
	kind := fmt.Sprintf("sliding %v/%v", c.windows.size, c.windows.slide)
	if c.windows.session {
		kind = fmt.Sprintf("session gap %v", c.windows.gap)
	}
	return fmt.Sprintf("%s, lateness %v, out-of-orderness %v", kind, c.lateness, c.ooo)
}

func TestWindowModelSessions(t *testing.T) {
	configs := []modelConfig{
		{windows: Session(10 * time.Millisecond), lateness: 0, ooo: 15 * time.Millisecond},
		{windows: Session(10 * time.Millisecond), lateness: 20 * time.Millisecond, ooo: 10 * time.Millisecond},
		{windows: Session(5 * time.Millisecond), lateness: 8 * time.Millisecond, ooo: 30 * time.Millisecond},
		{windows: Session(30 * time.Millisecond), lateness: 5 * time.Millisecond, ooo: 5 * time.Millisecond},
	}
	runModel(t, configs, state.HeapBackend, 60)
}

func TestWindowModelFixed(t *testing.T) {
	configs := []modelConfig{
		{windows: Tumbling(10 * time.Millisecond), lateness: 0, ooo: 15 * time.Millisecond},
		{windows: Tumbling(10 * time.Millisecond), lateness: 15 * time.Millisecond, ooo: 10 * time.Millisecond},
		{windows: Sliding(20*time.Millisecond, 5*time.Millisecond), lateness: 10 * time.Millisecond, ooo: 20 * time.Millisecond},
		{windows: Sliding(10*time.Millisecond, 5*time.Millisecond), lateness: 5 * time.Millisecond, ooo: 5 * time.Millisecond},
	}
	runModel(t, configs, state.HeapBackend, 40)
}

// TestWindowModelPebble is the model test with the state on disk.
func TestWindowModelPebble(t *testing.T) {
	if testing.Short() {
		t.Skip("opens many Pebble databases; skipped with -short")
	}
	configs := []modelConfig{
		{windows: Session(10 * time.Millisecond), lateness: 20 * time.Millisecond, ooo: 10 * time.Millisecond},
		{windows: Sliding(20*time.Millisecond, 5*time.Millisecond), lateness: 10 * time.Millisecond, ooo: 20 * time.Millisecond},
	}
	runModel(t, configs, state.PebbleBackend, 4)
}

// runModel runs every configuration with seeds seeds, and checks that the
// input exercised what the test is for: late records, and with lateness
// late firings.
func runModel(t *testing.T, configs []modelConfig, backend state.BackendKind, seeds int) {
	for _, c := range configs {
		var st modelStats
		for seed := range uint64(seeds) {
			t.Run(fmt.Sprintf("%v/seed=%d", c, seed), func(t *testing.T) { st.add(runModelOnce(t, c, backend, seed)) })
		}
		t.Logf("%v: %+v", c, st)
		if st.late == 0 || (c.lateness > 0 && st.updates == 0) || st.restarts == 0 {
			t.Errorf("%v: the input did not exercise the windows: %+v", c, st)
		}
	}
}

// modelStats counts what a model run exercised.
type modelStats struct{ results, updates, late, restarts int }

func (s *modelStats) add(o modelStats) {
	s.results, s.updates, s.late, s.restarts = s.results+o.results, s.updates+o.updates, s.late+o.late, s.restarts+o.restarts
}

func runModelOnce(t *testing.T, c modelConfig, backend state.BackendKind, seed uint64) (st modelStats) {
	rng := rand.New(rand.NewPCG(seed, 0x5e55))
	lateTag := NewOutputTag[modelRec]("late")
	h := newHarness[int64, modelRec, modelOut, modelRec](t, func(r modelRec) int64 { return r.Key }, state.Int64Codec{}, backend, 1+rng.IntN(3),
		func(ks KeyedStream[int64, modelRec]) Stream[modelOut] {
			out := WindowAggregate(ks, "windows", c.windows, func(r modelRec) time.Time { return time.UnixMilli(r.T) },
				Aggregate[int64, modelRec, modelAcc, modelOut]{
					Add:   func(a modelAcc, r modelRec) modelAcc { return modelAcc{a.Count + 1, a.Sum + r.ID} },
					Merge: func(a, b modelAcc) modelAcc { return modelAcc{a.Count + b.Count, a.Sum + b.Sum} },
					Result: func(k int64, w Window, a modelAcc) modelOut {
						return modelOut{Key: k, Start: w.Start.UnixNano(), End: w.End.UnixNano(), Firing: w.Firing, Count: a.Count, Sum: a.Sum}
					},
					Codec: state.JSONCodec[modelAcc]{},
				}, AllowedLateness(c.lateness), LateRecords(lateTag))
			SideOutput(out, lateTag)
			return out
		})
	ref := newModelRef(c)
	var want []modelOut
	var wantLate []modelRec
	ooo := c.ooo.Milliseconds()
	clock, newest, wm := int64(1000), int64(math.MinInt64), int64(math.MinInt64)
	// Records lag the clock by up to the out-of-orderness, the lateness
	// and a window more: some are late records.
	spread := int(ooo + c.lateness.Milliseconds() + (c.windows.size + c.windows.gap).Milliseconds() + 10)
	n := 100 + rng.IntN(200)
	for id := range n {
		clock += int64(rng.IntN(4))
		r := modelRec{Key: int64(rng.IntN(3)), T: clock - int64(rng.IntN(spread)), ID: id}
		if late := ref.record(r); late {
			r.Late = true
			wantLate = append(wantLate, r)
		}
		r.Late = false
		h.record(r)
		newest = max(newest, r.T)
		if next := (newest - ooo) * 1e6; next > wm {
			wm = next
			want = append(want, ref.watermark(wm)...)
			h.watermark(wm)
		}
		if rng.IntN(30) == 0 {
			h.restart(1 + rng.IntN(3))
			st.restarts++
		}
	}
	want = append(want, ref.watermark(math.MaxInt64)...)
	h.watermark(math.MaxInt64)
	got := h.main.got
	sortOuts(got)
	sortOuts(want)
	if !slices.Equal(got, want) {
		t.Errorf("seed %d, %v: results differ\n got: %v\nwant: %v", seed, c, got, want)
	}
	gotLate := h.side.got
	for i := range gotLate {
		gotLate[i].Late = true
	}
	cmpRec := func(a, b modelRec) int { return cmp.Compare(a.ID, b.ID) }
	slices.SortFunc(gotLate, cmpRec)
	slices.SortFunc(wantLate, cmpRec)
	if !slices.Equal(gotLate, wantLate) {
		t.Errorf("seed %d, %v: late records differ\n got: %v\nwant: %v", seed, c, gotLate, wantLate)
	}
	if h.late.Load() != int64(len(wantLate)) {
		t.Errorf("seed %d, %v: LateRecords = %d, want %d", seed, c, h.late.Load(), len(wantLate))
	}
	st.results, st.late = len(want), len(wantLate)
	for _, o := range want {
		if o.Firing > 0 {
			st.updates++
		}
	}
	return st
}

func sortOuts(outs []modelOut) {
	slices.SortFunc(outs, func(a, b modelOut) int {
		return cmp.Or(cmp.Compare(a.Key, b.Key), cmp.Compare(a.Start, b.Start), cmp.Compare(a.End, b.End), cmp.Compare(a.Firing, b.Firing))
	})
}

// modelRef is the reference implementation of a kind of windows.
type modelRef interface {
	// record accepts r, or reports that it is late: every window it would
	// be in is expired.
	record(r modelRec) (late bool)
	// watermark advances the watermark to wm and returns the results it
	// fires.
	watermark(wm int64) []modelOut
}

func newModelRef(c modelConfig) modelRef {
	if c.windows.session {
		return &sessionRef{c: c, wm: math.MinInt64, recs: map[int64][]refRec{}, results: map[int64][]refResult{}}
	}
	return &fixedRef{c: c, wm: math.MinInt64, panes: map[int64]map[int64]*refPane{}}
}

// expiredAt reports whether a window ending at end is past the lateness
// at watermark wm.
func (c modelConfig) expiredAt(end, wm int64) bool { return end-1+int64(c.lateness) <= wm }

// fixedRef keeps, per key and window start, the window's count and sum,
// its firings and whether records came since the last.
type fixedRef struct {
	c     modelConfig
	wm    int64
	panes map[int64]map[int64]*refPane
}

type refPane struct {
	acc     modelAcc
	firings int
	dirty   bool
}

func (m *fixedRef) record(r modelRec) bool {
	size, slide, t := int64(m.c.windows.size), int64(m.c.windows.slide), r.T*1e6
	live := false
	for start := t - mod(t, slide); start > t-size; start -= slide {
		if m.c.expiredAt(start+size, m.wm) {
			continue
		}
		live = true
		if m.panes[r.Key] == nil {
			m.panes[r.Key] = map[int64]*refPane{}
		}
		p := m.panes[r.Key][start]
		if p == nil {
			p = &refPane{}
			m.panes[r.Key][start] = p
		}
		p.acc = modelAcc{p.acc.Count + 1, p.acc.Sum + r.ID}
		p.dirty = true
	}
	return !live
}

func (m *fixedRef) watermark(wm int64) []modelOut {
	m.wm = wm
	size := int64(m.c.windows.size)
	var outs []modelOut
	for key, panes := range m.panes {
		for start, p := range panes {
			if p.dirty && start+size-1 <= wm {
				outs = append(outs, modelOut{Key: key, Start: start, End: start + size, Firing: p.firings, Count: p.acc.Count, Sum: p.acc.Sum})
				p.firings++
				p.dirty = false
			}
			if m.c.expiredAt(start+size, wm) {
				delete(panes, start)
			}
		}
	}
	return outs
}

// sessionRef keeps, per key, the records accepted and not yet expired,
// each marked once a result included it, and the latest result of every
// session that has one. It computes the sessions from the records each
// time, from the definition.
type sessionRef struct {
	c       modelConfig
	wm      int64
	recs    map[int64][]refRec
	results map[int64][]refResult
}

type refRec struct {
	t, id int64
	fired bool
}

type refResult struct {
	start, end int64
	firing     int
}

// sessions returns the sessions of recs: sorted by time, a record less
// than gap after the previous one continues its session.
func (m *sessionRef) sessions(recs []refRec) (bounds [][2]int64, members [][]int) {
	gap := int64(m.c.windows.gap)
	order := make([]int, len(recs))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return cmp.Compare(recs[a].t, recs[b].t) })
	for _, i := range order {
		if n := len(members); n > 0 && recs[i].t < bounds[n-1][1] {
			members[n-1] = append(members[n-1], i)
			bounds[n-1][1] = recs[i].t + gap
			continue
		}
		bounds = append(bounds, [2]int64{recs[i].t, recs[i].t + gap})
		members = append(members, []int{i})
	}
	return bounds, members
}

func (m *sessionRef) record(r modelRec) bool {
	recs := append(slices.Clone(m.recs[r.Key]), refRec{t: r.T * 1e6, id: int64(r.ID)})
	bounds, members := m.sessions(recs)
	for i, idx := range members {
		if slices.Contains(idx, len(recs)-1) && m.c.expiredAt(bounds[i][1], m.wm) {
			return true
		}
	}
	m.recs[r.Key] = recs
	return false
}

func (m *sessionRef) watermark(wm int64) []modelOut {
	m.wm = wm
	var outs []modelOut
	for key, recs := range m.recs {
		bounds, members := m.sessions(recs)
		var keep []refRec
		for i, idx := range members {
			start, end := bounds[i][0], bounds[i][1]
			dirty := false
			for _, r := range idx {
				dirty = dirty || !recs[r].fired
			}
			if dirty && end-1 <= wm {
				o := modelOut{Key: key, Start: start, End: end}
				var results []refResult
				for _, res := range m.results[key] {
					if res.start >= start && res.end <= end {
						o.Firing = max(o.Firing, res.firing+1)
					} else {
						results = append(results, res)
					}
				}
				m.results[key] = append(results, refResult{start, end, o.Firing})
				for _, r := range idx {
					o.Count++
					o.Sum += int(recs[r].id)
					recs[r].fired = true
				}
				outs = append(outs, o)
			}
			if !m.c.expiredAt(end, wm) {
				for _, r := range idx {
					keep = append(keep, recs[r])
				}
				continue
			}
			m.results[key] = slices.DeleteFunc(m.results[key], func(res refResult) bool { return res.start >= start && res.end <= end })
		}
		m.recs[key] = keep
	}
	return outs
}
