package state

import (
	"cmp"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// modelSeeds are the seeds of TestBackendAgainstModel; a failure names its
// seed, which reruns it alone with -run 'TestBackendAgainstModel/<kind>/seed=<seed>'.
var modelSeeds = []uint64{1, 2, 3, 42, 20261201}

// keyModel is what a key holds in the reference model.
type keyModel struct {
	count       *int64
	seen        map[string]int
	events      []string
	timers      map[int64]bool // processing time, UnixNano
	eventTimers map[int64]bool
}

// model is the reference the backend is checked against: plain Go values.
type model map[string]*keyModel

func (m model) at(k string) *keyModel {
	km, ok := m[k]
	if !ok {
		km = &keyModel{seen: map[string]int{}, timers: map[int64]bool{}, eventTimers: map[int64]bool{}}
		m[k] = km
	}
	return km
}

func (m model) clone() model {
	c := model{}
	for k, km := range m {
		n := &keyModel{seen: maps.Clone(km.seen), events: slices.Clone(km.events),
			timers: maps.Clone(km.timers), eventTimers: maps.Clone(km.eventTimers)}
		if km.count != nil {
			v := *km.count
			n.count = &v
		}
		c[k] = n
	}
	return c
}

// modelRun is one randomized run: a fixture, the model, and the random source.
type modelRun struct {
	t    *testing.T
	seed uint64
	step int
	rnd  *rand.Rand
	f    *fixture
	m    model
	key  string
}

const modelKeys, modelUserKeys = 40, 8

func TestBackendAgainstModel(t *testing.T) {
	forBackends(t, func(t *testing.T, kind BackendKind) {
		for _, seed := range modelSeeds {
			t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
				r := &modelRun{t: t, seed: seed, rnd: rand.New(rand.NewPCG(seed, 0)), m: model{},
					f: newFixture(t, kind, 16, KeyGroupRange{0, 16})}
				r.setKey()
				for r.step = range 4000 {
					r.randomOp()
				}
				r.checkAll()
			})
		}
	})
}

func (r *modelRun) fatalf(format string, args ...any) {
	r.t.Helper()
	r.t.Fatalf("seed %d, step %d, key %q: %s", r.seed, r.step, r.key, fmt.Sprintf(format, args...))
}

func (r *modelRun) setKey() {
	r.key = fmt.Sprint("k", r.rnd.IntN(modelKeys))
	r.f.b.SetCurrentKey(r.key)
}

func (r *modelRun) userKey() string { return fmt.Sprint("u", r.rnd.IntN(modelUserKeys)) }

func (r *modelRun) when() time.Time { return epoch.Add(time.Duration(r.rnd.IntN(50)) * time.Second) }

// randomOp applies one random operation to the backend and the model and
// checks what it reads.
func (r *modelRun) randomOp() {
	f, km := r.f, r.m.at(r.key)
	switch op := r.rnd.IntN(100); {
	case op < 10:
		r.setKey()
	case op < 16:
		v := r.rnd.Int64N(1000)
		f.count.Update(v)
		km.count = &v
	case op < 18:
		f.count.Clear()
		km.count = nil
	case op < 24:
		v, ok := f.count.Value()
		if ok != (km.count != nil) || (ok && v != *km.count) {
			r.fatalf("Value() = %d, %v; model %v", v, ok, km.count)
		}
	case op < 32:
		uk, v := r.userKey(), r.rnd.IntN(1000)
		f.seen.Put(uk, v)
		km.seen[uk] = v
	case op < 35:
		uk := r.userKey()
		got := f.seen.Compute(uk, func(old int, ok bool) int { return old + 1 })
		km.seen[uk]++
		if got != km.seen[uk] {
			r.fatalf("Compute(%s) = %d, model %d", uk, got, km.seen[uk])
		}
	case op < 39:
		uk := r.userKey()
		f.seen.Remove(uk)
		delete(km.seen, uk)
	case op < 40:
		f.seen.Clear()
		clear(km.seen)
	case op < 45:
		uk := r.userKey()
		v, ok := f.seen.Get(uk)
		mv, mok := km.seen[uk]
		if v != mv || ok != mok || f.seen.Contains(uk) != mok {
			r.fatalf("Get(%s) = %d, %v; model %d, %v", uk, v, ok, mv, mok)
		}
		if f.seen.Len() != len(km.seen) {
			r.fatalf("Len() = %d, model %d", f.seen.Len(), len(km.seen))
		}
	case op < 48:
		r.iterateRemoving()
	case op < 55:
		e := fmt.Sprint("e", r.step)
		f.events.Add(e)
		km.events = append(km.events, e)
	case op < 57:
		vs := make([]string, r.rnd.IntN(3))
		for i := range vs {
			vs[i] = fmt.Sprint("r", r.step, "-", i)
		}
		f.events.Update(vs)
		km.events = slices.Clone(vs)
		if len(vs) == 0 {
			km.events = nil
		}
	case op < 58:
		f.events.Clear()
		km.events = nil
	case op < 63:
		if got := f.events.Get(); !slices.Equal(got, km.events) || f.events.Len() != len(km.events) ||
			!slices.Equal(slices.Collect(f.events.All()), km.events) {
			r.fatalf("list %v (Len %d), model %v", got, f.events.Len(), km.events)
		}
	case op < 70:
		w := r.when()
		f.b.RegisterTimer(w)
		km.timers[w.UnixNano()] = true
	case op < 73:
		w := r.when()
		f.b.DeleteTimer(w)
		delete(km.timers, w.UnixNano())
	case op < 80:
		w := r.when()
		f.b.RegisterEventTimer(w)
		km.eventTimers[w.UnixNano()] = true
	case op < 83:
		w := r.when()
		f.b.DeleteEventTimer(w)
		delete(km.eventTimers, w.UnixNano())
	case op < 86:
		now := r.when()
		r.checkPopped("processing-time", f.b.PopDueTimers(now, nil), now.UnixNano(), func(km *keyModel) map[int64]bool { return km.timers })
	case op < 89:
		wm := r.when().UnixNano()
		r.checkPopped("event-time", f.b.PopEventTimers(wm, nil), wm, func(km *keyModel) map[int64]bool { return km.eventTimers })
	case op < 91:
		r.snapshotAndRestore()
	default:
		r.checkKey(r.key)
	}
}

// iterateRemoving ranges over the current key's map and, at the first
// entry, removes every other entry: as with a Go map, the removed entries
// must not be produced, and every other entry must be produced once.
func (r *modelRun) iterateRemoving() {
	km := r.m.at(r.key)
	removed := map[string]bool{}
	got := map[string]int{}
	for uk, v := range r.f.seen.All() {
		if _, dup := got[uk]; dup {
			r.fatalf("All() produced %s twice", uk)
		}
		got[uk] = v
		if len(got) > 1 {
			continue
		}
		for other := range km.seen {
			if other != uk && r.rnd.IntN(2) == 0 {
				r.f.seen.Remove(other)
				removed[other] = true
			}
		}
	}
	want := map[string]int{}
	for uk, v := range km.seen {
		if !removed[uk] {
			want[uk] = v
		}
	}
	if !maps.Equal(got, want) {
		r.fatalf("All() removing %v during iteration = %v, want %v", removed, got, want)
	}
	for uk := range removed {
		delete(km.seen, uk)
	}
}

// checkPopped checks that popped holds exactly the model's timers due at or
// before due, in time order, and removes them from the model.
func (r *modelRun) checkPopped(what string, popped []Timer[string], due int64, timers func(*keyModel) map[int64]bool) {
	var want []Timer[string]
	for k, km := range r.m {
		for w := range timers(km) {
			if w <= due {
				want = append(want, Timer[string]{Key: k, When: time.Unix(0, w)})
				delete(timers(km), w)
			}
		}
	}
	for i := 1; i < len(popped); i++ {
		if popped[i].When.Before(popped[i-1].When) {
			r.fatalf("%s timers popped out of order: %v", what, popped)
		}
	}
	byTimeAndKey := func(a, b Timer[string]) int {
		return cmp.Or(a.When.Compare(b.When), cmp.Compare(a.Key, b.Key))
	}
	got := slices.SortedFunc(slices.Values(popped), byTimeAndKey)
	slices.SortFunc(want, byTimeAndKey)
	if !slices.EqualFunc(got, want, func(a, b Timer[string]) bool { return a.Key == b.Key && a.When.Equal(b.When) }) {
		r.fatalf("popped %s timers %v, model %v", what, got, want)
	}
}

// snapshotAndRestore snapshots, goes on changing the backend for a few
// operations before encoding, restores the encoding into a fresh backend of
// a random kind and goes on with it and the model as of the snapshot.
func (r *modelRun) snapshotAndRestore() {
	encode := r.f.b.Snapshot()
	atSnapshot := r.m.clone()
	for range r.rnd.IntN(20) {
		r.randomOp()
	}
	blobs, err := encode()
	if err != nil {
		r.fatalf("encoding the snapshot: %v", err)
	}
	kind := backendKinds[r.rnd.IntN(len(backendKinds))]
	fresh := newFixture(r.t, kind, 16, KeyGroupRange{0, 16})
	for kg, blob := range blobs {
		if err := fresh.b.Restore(kg, blob); err != nil {
			r.fatalf("restoring key group %d into %v: %v", kg, kind, err)
		}
	}
	r.f, r.m = fresh, atSnapshot
	r.checkAll()
	r.setKey()
}

func (r *modelRun) checkAll() {
	for i := range modelKeys {
		r.checkKey(fmt.Sprint("k", i))
	}
	r.f.b.SetCurrentKey(r.key)
}

// checkKey compares everything k holds with the model.
func (r *modelRun) checkKey(k string) {
	got := r.f.dump(k)
	km := r.m.at(k)
	want := keyState{Seen: km.seen, Events: km.events, Timers: slices.Sorted(maps.Keys(km.timers))}
	if km.count != nil {
		want.Count, want.HasCount = *km.count, true
	}
	if got.Seen == nil {
		got.Seen = map[string]int{}
	}
	if !got.equal(want) {
		r.fatalf("%s holds %v, model %v", k, got, want)
	}
	var events []int64
	for _, e := range r.f.b.eventTimers.pending() {
		if e.key == k {
			events = append(events, e.when)
		}
	}
	slices.Sort(events)
	if wantEvents := slices.Sorted(maps.Keys(km.eventTimers)); !slices.Equal(events, wantEvents) {
		r.fatalf("%s has event-time timers %v, model %v", k, events, wantEvents)
	}
	r.f.b.SetCurrentKey(r.key)
}
