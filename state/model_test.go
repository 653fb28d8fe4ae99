package state

import (
	"cmp"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/exactlyonce/exactly/checkpoint"
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
	// The states with a TTL: entries with their expiries, expired ones
	// included until they are read.
	last   *stampedModel[int64]         // event time, renewed on write
	recent map[string]stampedModel[int] // processing time, renewed on read and write
}

// stampedModel is an entry of a state with a TTL in the model.
type stampedModel[V any] struct {
	v   V
	exp int64
}

// model is the reference the backend is checked against: plain Go values.
type model map[string]*keyModel

func (m model) at(k string) *keyModel {
	km, ok := m[k]
	if !ok {
		km = &keyModel{seen: map[string]int{}, timers: map[int64]bool{}, eventTimers: map[int64]bool{}, recent: map[string]stampedModel[int]{}}
		m[k] = km
	}
	return km
}

func (m model) clone() model {
	c := model{}
	for k, km := range m {
		n := &keyModel{seen: maps.Clone(km.seen), events: slices.Clone(km.events),
			timers: maps.Clone(km.timers), eventTimers: maps.Clone(km.eventTimers), recent: maps.Clone(km.recent)}
		if km.count != nil {
			v := *km.count
			n.count = &v
		}
		if km.last != nil {
			v := *km.last
			n.last = &v
		}
		c[k] = n
	}
	return c
}

// modelRun is one randomized run: a fixture, the model, and the random source.
type modelRun struct {
	t     *testing.T
	seed  uint64
	step  int
	rnd   *rand.Rand
	f     *modelFixture
	m     model
	clock [2]int64 // the model's TTL clocks, by TTLTime; noTime until set
	key   string
	// snapshots counts the snapshots taken, which number the checkpoints.
	snapshots int
}

// modelFixture is the fixture with two states with a TTL.
type modelFixture struct {
	*fixture
	last   *ValueState[string, int64]
	recent *MapState[string, string, int]
}

// modelTTL is the TTL of the model's states.
const modelTTL = 20 * time.Second

// modelMaxP is the max parallelism of the model's backends, which own
// every key group but in checkSplit.
const modelMaxP = 16

func newModelFixture(t testing.TB, kind BackendKind, owned KeyGroupRange) *modelFixture {
	f := newFixture(t, kind, modelMaxP, owned)
	return &modelFixture{fixture: f,
		last: must(NewValueState[string, int64](f.b.Scope(), "last", Int64Codec{},
			WithTTL(TTL{After: modelTTL}))),
		recent: must(NewMapState[string, string, int](f.b.Scope(), "recent", StringCodec{}, IntCodec{},
			WithTTL(TTL{After: modelTTL, Update: TTLOnReadAndWrite, Time: TTLProcessingTime}))),
	}
}

const modelKeys, modelUserKeys = 40, 8

func TestBackendAgainstModel(t *testing.T) {
	forBackends(t, func(t *testing.T, kind BackendKind) {
		for _, seed := range modelSeeds {
			t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
				r := &modelRun{t: t, seed: seed, rnd: rand.New(rand.NewPCG(seed, 0)), m: model{},
					f: newModelFixture(t, kind, KeyGroupRange{0, modelMaxP}), clock: [2]int64{noTime, noTime}}
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
	switch op := r.rnd.IntN(140); {
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
	case op < 100:
		r.checkKey(r.key)
	default:
		r.ttlOp((op - 100) / 2)
	}
}

// ttlOp applies the operation op, in [0, 20), on the states with a TTL, or
// advances a clock, or runs a step of the cleanup.
func (r *modelRun) ttlOp(op int) {
	f, km := r.f, r.m.at(r.key)
	const ev, pt = TTLEventTime, TTLProcessingTime
	switch {
	case op < 4:
		v := r.rnd.Int64N(1000)
		f.last.Update(v)
		km.last = &stampedModel[int64]{v, r.stamp(ev)}
	case op < 5:
		f.last.Clear()
		km.last = nil
	case op < 8:
		r.checkLast(km)
	case op < 10:
		uk, v := r.userKey(), r.rnd.IntN(1000)
		f.recent.Put(uk, v)
		km.recent[uk] = stampedModel[int]{v, r.stamp(pt)}
	case op < 12:
		uk := r.userKey()
		v, ok := f.recent.Get(uk)
		mv, mok := r.readRecent(km, uk)
		if v != mv || ok != mok || f.recent.Contains(uk) != mok {
			r.fatalf("recent.Get(%s) = %d, %v; model %d, %v", uk, v, ok, mv, mok)
		}
		r.readRecent(km, uk) // Contains renewed it too
	case op < 13:
		uk := r.userKey()
		got := f.recent.Compute(uk, func(old int, ok bool) int { return old + 1 })
		old, _ := r.liveRecent(km, uk)
		km.recent[uk] = stampedModel[int]{old + 1, r.stamp(pt)}
		if got != old+1 {
			r.fatalf("recent.Compute(%s) = %d, model %d", uk, got, old+1)
		}
	case op < 14:
		uk := r.userKey()
		f.recent.Remove(uk)
		delete(km.recent, uk)
	case op < 15:
		n := 0
		for _, e := range km.recent {
			if !expiredAt(e.exp, r.clock[pt]) {
				n++
			}
		}
		if got := f.recent.Len(); got != n {
			r.fatalf("recent.Len() = %d, model %d", got, n)
		}
	case op < 17:
		r.advance(ev)
	case op < 19:
		r.advance(pt)
	default:
		f.b.cleanUp(1 + r.rnd.IntN(2*sweepBudget))
	}
}

// stamp returns the model's expiry of an entry written now by clock d.
func (r *modelRun) stamp(d TTLTime) int64 {
	if r.clock[d] == noTime {
		return unstamped
	}
	return r.clock[d] + int64(modelTTL)
}

// advance moves the model's and the backend's clock d forward by up to 12
// s (to the epoch the first time), stamping entries written before it had
// a time.
func (r *modelRun) advance(d TTLTime) {
	first := r.clock[d] == noTime
	if first {
		r.clock[d] = epoch.UnixNano()
	} else {
		r.clock[d] += r.rnd.Int64N(int64(12 * time.Second))
	}
	setClock(r.f.b, d, r.clock[d])
	if !first {
		return
	}
	for _, km := range r.m {
		if d == TTLEventTime && km.last != nil && km.last.exp == unstamped {
			km.last.exp = r.stamp(d)
		}
		for uk, e := range km.recent {
			if d == TTLProcessingTime && e.exp == unstamped {
				km.recent[uk] = stampedModel[int]{e.v, r.stamp(d)}
			}
		}
	}
}

// liveRecent returns the model's value of uk in km's recent map if it has
// not expired, deleting it if it has.
func (r *modelRun) liveRecent(km *keyModel, uk string) (int, bool) {
	e, ok := km.recent[uk]
	if ok && expiredAt(e.exp, r.clock[TTLProcessingTime]) {
		delete(km.recent, uk)
		return 0, false
	}
	return e.v, ok
}

// readRecent is liveRecent that renews the entry, as a read does.
func (r *modelRun) readRecent(km *keyModel, uk string) (int, bool) {
	v, ok := r.liveRecent(km, uk)
	if ok {
		km.recent[uk] = stampedModel[int]{v, r.stamp(TTLProcessingTime)}
	}
	return v, ok
}

// checkLast compares the current key's last value with the model.
func (r *modelRun) checkLast(km *keyModel) {
	if km.last != nil && expiredAt(km.last.exp, r.clock[TTLEventTime]) {
		km.last = nil
	}
	v, ok := r.f.last.Value()
	if ok != (km.last != nil) || (ok && v != km.last.v) {
		r.fatalf("last.Value() = %d, %v; model %v", v, ok, km.last)
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
	r.checkFired(what, popped, want)
}

// checkFired checks that popped holds the timers want, in time order.
func (r *modelRun) checkFired(what string, popped, want []Timer[string]) {
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

// snapshotAndRestore snapshots (on Pebble, one time in two, an
// incremental checkpoint), goes on changing the backend for a few
// operations before encoding, restores the encoding into a fresh backend
// of a random kind and goes on with it and the model as of the snapshot.
// One time in four, it restores the encoding into two subtasks owning half
// the key groups each too, and checks their keys' state and timers
// (checkSplit).
func (r *modelRun) snapshotAndRestore() {
	var files *memShared
	encode := r.f.b.SnapshotFor
	if r.f.b.disk != nil && r.rnd.IntN(2) == 0 {
		files = newMemShared()
	}
	r.snapshots++
	finish, err := encode(checkpoint.ID(r.snapshots), checkpoint.KindCheckpoint, nilIfNone(files))
	if err != nil {
		r.fatalf("snapshot: %v", err)
	}
	atSnapshot, clockAtSnapshot := r.m.clone(), r.clock
	for range r.rnd.IntN(20) {
		r.randomOp()
	}
	snap, err := finish()
	if err != nil {
		r.fatalf("encoding the snapshot: %v", err)
	}
	r.m, r.clock = atSnapshot, clockAtSnapshot
	if r.rnd.IntN(4) == 0 { // four databases opened: one snapshot in four
		r.checkSplit(snap, files)
	}
	r.f = r.restored(backendKinds[r.rnd.IntN(len(backendKinds))], KeyGroupRange{0, modelMaxP}, snap, files)
	r.checkAll()
	r.setKey()
}

// nilIfNone returns files as a checkpoint.SharedFiles, nil for a nil
// *memShared (a full snapshot).
func nilIfNone(files *memShared) checkpoint.SharedFiles {
	if files == nil {
		return nil
	}
	return files
}

// restored returns a fresh fixture of kind owning the key groups owned,
// with snap restored into it.
func (r *modelRun) restored(kind BackendKind, owned KeyGroupRange, snap checkpoint.SubtaskSnapshot, files *memShared) *modelFixture {
	fresh := newModelFixture(r.t, kind, owned)
	// As the engine does, the clocks are set before the restore: here to
	// the snapshot's (the engine's restored watermark and a processing
	// time that may be behind it).
	for d, now := range r.clock {
		if now != noTime {
			setClock(fresh.b, TTLTime(d), now)
		}
	}
	if err := fresh.b.RestoreDBs(snap.DBs, nilIfNone(files)); err != nil {
		r.fatalf("restoring the databases into %v: %v", kind, err)
	}
	for kg, blob := range snap.KeyGroups {
		if !owned.Contains(kg) {
			continue
		}
		if err := fresh.b.Restore(kg, blob); err != nil {
			r.fatalf("restoring key group %d into %v: %v", kg, kind, err)
		}
	}
	return fresh
}

// checkSplit restores snap into two subtasks of a random kind, owning half
// the key groups each, and checks that each holds exactly the state and
// timers of the model's keys in its key groups, and fires their timers in
// time order.
func (r *modelRun) checkSplit(snap checkpoint.SubtaskSnapshot, files *memShared) {
	kind := backendKinds[r.rnd.IntN(len(backendKinds))]
	for i := range 2 {
		owned := RangeForSubtask(i, 2, modelMaxP)
		f := r.restored(kind, owned, snap, files)
		var timers, eventTimers []Timer[string]
		for k, km := range r.m {
			want := keyState{Seen: km.seen, Events: km.events, Timers: slices.Sorted(maps.Keys(km.timers))}
			if km.count != nil {
				want.Count, want.HasCount = *km.count, true
			}
			if !owned.Contains(f.b.KeyGroupOf(k)) {
				want, km = keyState{}, &keyModel{}
			}
			got := f.dump(k)
			if len(got.Seen) == 0 && len(want.Seen) == 0 {
				got.Seen, want.Seen = nil, nil
			}
			if !got.equal(want) {
				r.fatalf("split into 2 %v subtasks: subtask %d holds %v for %s, model %v", kind, i, got, k, want)
			}
			for w := range km.timers {
				timers = append(timers, Timer[string]{Key: k, When: time.Unix(0, w)})
			}
			for w := range km.eventTimers {
				eventTimers = append(eventTimers, Timer[string]{Key: k, When: time.Unix(0, w)})
			}
		}
		r.checkFired("processing-time", f.fixture.b.PopDueTimers(time.Unix(0, math.MaxInt64), nil), timers)
		r.checkFired("event-time", f.fixture.b.PopEventTimers(math.MaxInt64, nil), eventTimers)
	}
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
	for _, e := range pendingTimers(r.f.b.eventTimers) {
		if e.key == k {
			events = append(events, e.when)
		}
	}
	slices.Sort(events)
	if wantEvents := slices.Sorted(maps.Keys(km.eventTimers)); !slices.Equal(events, wantEvents) {
		r.fatalf("%s has event-time timers %v, model %v", k, events, wantEvents)
	}
	r.f.b.SetCurrentKey(k)
	r.checkLast(km)
	// All renews every entry, which would hide a read that did not: it
	// checks only one time in four, Len (which does not renew) the others.
	if r.rnd.IntN(4) > 0 {
		n := 0
		for _, e := range km.recent {
			if !expiredAt(e.exp, r.clock[TTLProcessingTime]) {
				n++
			}
		}
		if got := r.f.recent.Len(); got != n {
			r.fatalf("%s: recent.Len() = %d, model %d", k, got, n)
		}
		r.f.b.SetCurrentKey(r.key)
		return
	}
	recent := map[string]int{}
	for uk := range km.recent {
		if v, ok := r.readRecent(km, uk); ok {
			recent[uk] = v
		}
	}
	if got := maps.Collect(r.f.recent.All()); !maps.Equal(got, recent) {
		r.fatalf("%s has recent %v, model %v", k, got, recent)
	}
	r.f.b.SetCurrentKey(r.key)
}
