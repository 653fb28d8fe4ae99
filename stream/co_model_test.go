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

// The two-input model tests drive a two-input keyed operator through the
// harness with seeded random records of both inputs (out of order, some
// behind the watermark), a watermark after every record and restarts from
// snapshots at random parallelisms, and compare its output with a
// reference written from the operator's definition. A failure prints the
// seed.

// coRef is the reference of a two-input operator.
type coRef[OUT any] interface {
	// record takes r of input 1 or 2 and returns what the operator emits
	// for it, or reports that it is late (dropped and counted).
	record(input int, r modelRec) (out []OUT, late bool)
	// watermark advances the watermark to wm and returns what fires.
	watermark(wm int64) []OUT
}

// coModel is one configuration of a two-input model run.
type coModel[OUT any] struct {
	spread, ooo int64 // ms: how far records lag the clock, the watermark the newest record
	build       func(KeyedStream[int64, modelRec], KeyedStream[int64, modelRec]) Stream[OUT]
	ref         func() coRef[OUT]
	compare     func(a, b OUT) int
	// empty: the operator keeps no state once the watermark passed every
	// record's time by more than emptyAfter ms.
	empty      bool
	emptyAfter int64
	// lateSide[i]: the late records of input i go to the side output the
	// harness collects (build takes it); the others are dropped.
	lateSide [3]bool
}

// coStats counts what the runs of a configuration exercised.
type coStats struct{ outputs, late, restarts int }

// runCoModel runs m with seeds seeds on backend and returns what they
// exercised.
func runCoModel[OUT comparable](t *testing.T, m coModel[OUT], backend state.BackendKind, seeds int) coStats {
	var st coStats
	for seed := range uint64(seeds) {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			o, l, r := runCoModelOnce(t, m, backend, seed)
			st.outputs, st.late, st.restarts = st.outputs+o, st.late+l, st.restarts+r
		})
	}
	t.Logf("%+v", st)
	if st.outputs == 0 || st.restarts == 0 {
		t.Errorf("the input exercised nothing: %+v", st)
	}
	return st
}

// runCoModels runs the model of each configuration on backend as a
// subtest; wantLate: the runs must have met late records.
func runCoModels[C any, OUT comparable](t *testing.T, configs []C, model func(C) coModel[OUT], backend state.BackendKind, seeds int, wantLate bool) {
	if backend == state.PebbleBackend && testing.Short() {
		t.Skip("opens many Pebble databases; skipped with -short")
	}
	for _, c := range configs {
		t.Run(fmt.Sprintf("%+v", c), func(t *testing.T) {
			if st := runCoModel(t, model(c), backend, seeds); wantLate && st.late == 0 {
				t.Errorf("no late record: %+v", st)
			}
		})
	}
}

func runCoModelOnce[OUT comparable](t *testing.T, m coModel[OUT], backend state.BackendKind, seed uint64) (outputs, lates, restarts int) {
	rng := rand.New(rand.NewPCG(seed, 0xc0))
	key := func(r modelRec) int64 { return r.Key }
	h := newCoHarness[int64, modelRec, modelRec, OUT, modelRec](t, key, key, state.Int64Codec{}, backend, 1+rng.IntN(3), m.build)
	ref := m.ref()
	var want []OUT
	var wantSide []modelRec
	late := 0
	clock, newest, wm := int64(1000), int64(math.MinInt64), int64(math.MinInt64)
	n := 100 + rng.IntN(200)
	for id := range n {
		clock += int64(rng.IntN(4))
		r := modelRec{Key: int64(rng.IntN(3)), T: clock - rng.Int64N(m.spread), ID: id}
		input := 1 + rng.IntN(2)
		out, isLate := ref.record(input, r)
		want = append(want, out...)
		if isLate {
			late++
			if m.lateSide[input] {
				wantSide = append(wantSide, r)
			}
		}
		if input == 1 {
			h.record(first[modelRec, modelRec](r))
		} else {
			h.record(second[modelRec, modelRec](r))
		}
		newest = max(newest, r.T)
		if next := (newest - m.ooo) * 1e6; next > wm {
			wm = next
			want = append(want, ref.watermark(wm)...)
			h.watermark(wm)
		}
		if rng.IntN(30) == 0 {
			h.restart(1 + rng.IntN(3))
			restarts++
		}
	}
	if m.empty {
		end := (newest + m.emptyAfter) * 1e6
		want = append(want, ref.watermark(end)...)
		h.watermark(end)
		if !h.stateEmpty() {
			t.Errorf("seed %d: state left after the watermark passed every record by %d ms", seed, m.emptyAfter)
		}
	}
	want = append(want, ref.watermark(math.MaxInt64)...)
	h.watermark(math.MaxInt64)
	got := h.main.got
	slices.SortFunc(got, m.compare)
	slices.SortFunc(want, m.compare)
	if !slices.Equal(got, want) {
		t.Errorf("seed %d: outputs differ\n got: %v\nwant: %v", seed, got, want)
	}
	if h.late.Load() != int64(late) {
		t.Errorf("seed %d: LateRecords = %d, want %d", seed, h.late.Load(), late)
	}
	byID := func(a, b modelRec) int { return cmp.Compare(a.ID, b.ID) }
	gotSide := h.side.got
	slices.SortFunc(gotSide, byID)
	slices.SortFunc(wantSide, byID)
	if !slices.Equal(gotSide, wantSide) {
		t.Errorf("seed %d: late records on the side output differ\n got: %v\nwant: %v", seed, gotSide, wantSide)
	}
	return len(want), late, restarts
}

// coBuckets is the CoProcess of the model test: per key and 10 ms bucket
// of event time, the count and sum of ids of each input, emitted by an
// event-time timer at the bucket's end; a record whose bucket closed is
// counted as late.
type coBuckets struct {
	Key, Start   int64 // Start in ms
	CountA, SumA int
	CountB, SumB int
}

const coBucket = int64(10 * time.Millisecond)

func coBucketsOf(a, b KeyedStream[int64, modelRec]) Stream[coBuckets] {
	return CoProcess(a, b, "buckets", func(ctx *Context[int64]) (CoProcessFunc[int64, modelRec, modelRec, coBuckets], error) {
		buckets, err := state.NewMapState(ctx.State(), "buckets", state.Int64Codec{}, state.JSONCodec[coBuckets]{})
		if err != nil {
			return CoProcessFunc[int64, modelRec, modelRec, coBuckets]{}, err
		}
		add := func(ctx *Context[int64], r modelRec, second bool) {
			t := r.T * 1e6
			start := t - mod(t, coBucket)
			if start+coBucket-1 <= ctx.Watermark().UnixNano() {
				ctx.oc.LateRecords.Add(1)
				return
			}
			buckets.Compute(start, func(b coBuckets, _ bool) coBuckets {
				b.Key, b.Start = ctx.Key(), start/1e6
				if second {
					b.CountB, b.SumB = b.CountB+1, b.SumB+r.ID
				} else {
					b.CountA, b.SumA = b.CountA+1, b.SumA+r.ID
				}
				return b
			})
			ctx.RegisterEventTimer(time.Unix(0, start+coBucket-1))
		}
		return CoProcessFunc[int64, modelRec, modelRec, coBuckets]{
			Process1: func(ctx *Context[int64], r modelRec, _ *Output[coBuckets]) error { add(ctx, r, false); return nil },
			Process2: func(ctx *Context[int64], r modelRec, _ *Output[coBuckets]) error { add(ctx, r, true); return nil },
			OnEventTimer: func(ctx *Context[int64], when time.Time, out *Output[coBuckets]) error {
				start := when.UnixNano() + 1 - coBucket
				if b, ok := buckets.Get(start); ok {
					out.Emit(b)
					buckets.Remove(start)
				}
				return nil
			},
		}, nil
	})
}

// bucketsRef is coBuckets' reference.
type bucketsRef struct {
	wm      int64
	buckets map[[2]int64]coBuckets // by key and start (ns)
}

func (m *bucketsRef) record(input int, r modelRec) ([]coBuckets, bool) {
	t := r.T * 1e6
	start := t - mod(t, coBucket)
	if start+coBucket-1 <= m.wm {
		return nil, true
	}
	k := [2]int64{r.Key, start}
	b := m.buckets[k]
	b.Key, b.Start = r.Key, start/1e6
	if input == 2 {
		b.CountB, b.SumB = b.CountB+1, b.SumB+r.ID
	} else {
		b.CountA, b.SumA = b.CountA+1, b.SumA+r.ID
	}
	m.buckets[k] = b
	return nil, false
}

func (m *bucketsRef) watermark(wm int64) []coBuckets {
	m.wm = max(m.wm, wm)
	var out []coBuckets
	for k, b := range m.buckets {
		if k[1]+coBucket-1 <= m.wm {
			out = append(out, b)
			delete(m.buckets, k)
		}
	}
	return out
}

func compareBuckets(a, b coBuckets) int {
	return cmp.Or(cmp.Compare(a.Key, b.Key), cmp.Compare(a.Start, b.Start))
}

func coBucketsModel() coModel[coBuckets] {
	return coModel[coBuckets]{
		spread: 30, ooo: 10, build: coBucketsOf, compare: compareBuckets,
		ref:   func() coRef[coBuckets] { return &bucketsRef{wm: math.MinInt64, buckets: map[[2]int64]coBuckets{}} },
		empty: true, emptyAfter: 10,
	}
}

// TestCoProcessModel checks CoProcess's shared state, event-time timers,
// snapshots and restores at other parallelisms against the reference.
func TestCoProcessModel(t *testing.T) {
	if st := runCoModel(t, coBucketsModel(), state.HeapBackend, 40); st.late == 0 {
		t.Errorf("no late record: %+v", st)
	}
}

// TestCoProcessModelPebble is TestCoProcessModel with the state on disk.
func TestCoProcessModelPebble(t *testing.T) {
	if testing.Short() {
		t.Skip("opens many Pebble databases; skipped with -short")
	}
	runCoModel(t, coBucketsModel(), state.PebbleBackend, 4)
}
