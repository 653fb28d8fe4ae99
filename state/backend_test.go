package state

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/exactlyonce/exactly/checkpoint"
	"github.com/exactlyonce/exactly/internal/format"
)

// fixture is a backend with one state of every kind, as an operator would declare it.
type fixture struct {
	b      *KeyedBackend[string]
	count  *ValueState[string, int64]
	seen   *MapState[string, string, int]
	events *ListState[string, string]
}

func newFixture(t testing.TB, kind BackendKind, maxP int, owned KeyGroupRange) *fixture {
	t.Helper()
	return fixtureOf(t, newBackend(t, kind, StringCodec{}, maxP, owned))
}

// fixtureOf registers the fixture's states in b.
func fixtureOf(t testing.TB, b *KeyedBackend[string]) *fixture {
	t.Helper()
	count, err := NewValueState[string, int64](b.Scope(), "count", Int64Codec{})
	if err != nil {
		t.Fatal(err)
	}
	seen, err := NewMapState[string, string, int](b.Scope(), "seen", StringCodec{}, IntCodec{})
	if err != nil {
		t.Fatal(err)
	}
	events, err := NewListState[string, string](b.Scope(), "events", StringCodec{})
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{b: b, count: count, seen: seen, events: events}
}

// subtaskFixture returns the fixture of subtask i of p.
func subtaskFixture(t testing.TB, kind BackendKind, i, p, maxP int) *fixture {
	return newFixture(t, kind, maxP, RangeForSubtask(i, p, maxP))
}

// must panics on registration errors in table-driven setups.
func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

var epoch = time.Unix(1_700_000_000, 0)

// keyState is everything the fixture holds for one key, for comparisons.
type keyState struct {
	Count    int64
	HasCount bool
	Seen     map[string]int
	Events   []string
	Timers   []int64
}

func (f *fixture) dump(k string) keyState {
	f.b.SetCurrentKey(k)
	var s keyState
	s.Count, s.HasCount = f.count.Value()
	s.Seen = maps.Collect(f.seen.All())
	s.Events = f.events.Get()
	s.Timers = currentKeyTimers(f.b.timers, k)
	slices.Sort(s.Timers)
	return s
}

func (s keyState) empty() bool {
	return !s.HasCount && len(s.Seen) == 0 && len(s.Events) == 0 && len(s.Timers) == 0
}

func (s keyState) String() string {
	type fields keyState // without the method: embedding keyState kept it, and String called itself
	return fmt.Sprintf("%+v", fields(s))
}

func (s keyState) equal(o keyState) bool {
	return s.Count == o.Count && s.HasCount == o.HasCount && maps.Equal(s.Seen, o.Seen) &&
		slices.Equal(s.Events, o.Events) && slices.Equal(s.Timers, o.Timers)
}

// fill gives key i a distinctive state of every kind (some kinds skipped for some keys).
func (f *fixture) fill(i int) {
	f.b.SetCurrentKey(fmt.Sprint("key-", i))
	if i%5 != 0 {
		f.count.Update(int64(i))
	}
	for j := range i % 4 {
		f.seen.Put(fmt.Sprint("u", j), i*10+j)
	}
	for j := range i % 3 {
		f.events.Add(fmt.Sprint("e", i, "-", j))
	}
	if i%2 == 0 {
		f.b.RegisterTimer(epoch.Add(time.Duration(i) * time.Second))
		f.b.RegisterTimer(epoch.Add(time.Duration(i+1000) * time.Second))
	}
}

func snapshotNow(t testing.TB, b *KeyedBackend[string]) map[int][]byte {
	t.Helper()
	blobs, err := b.Snapshot()()
	if err != nil {
		t.Fatal(err)
	}
	return blobs
}

func TestValueState(t *testing.T) { forBackends(t, testValueState) }

func testValueState(t *testing.T, kind BackendKind) {
	f := newFixture(t, kind, 8, KeyGroupRange{0, 8})
	f.b.SetCurrentKey("a")
	if _, ok := f.count.Value(); ok {
		t.Fatal("new key has a value")
	}
	f.count.Update(1)
	f.b.SetCurrentKey("b")
	f.count.Update(2)
	if v, ok := f.count.Value(); !ok || v != 2 {
		t.Fatalf("b = %d, %v", v, ok)
	}
	f.b.SetCurrentKey("a")
	if v, ok := f.count.Value(); !ok || v != 1 {
		t.Fatalf("a = %d, %v", v, ok)
	}
	if f.b.CurrentKey() != "a" {
		t.Fatalf("CurrentKey() = %q", f.b.CurrentKey())
	}
	f.count.Clear()
	if _, ok := f.count.Value(); ok {
		t.Fatal("cleared key has a value")
	}
	if n := storedKeys(f.count.store); n != 1 {
		t.Fatalf("Clear left the key behind: %d keys stored, want 1", n)
	}
}

func TestMapState(t *testing.T) { forBackends(t, testMapState) }

func testMapState(t *testing.T, kind BackendKind) {
	f := newFixture(t, kind, 8, KeyGroupRange{0, 8})
	f.b.SetCurrentKey("a")
	f.seen.Put("x", 1)
	f.seen.Put("y", 2)
	f.seen.Put("x", 3)
	f.b.SetCurrentKey("b")
	if f.seen.Len() != 0 || f.seen.Contains("x") {
		t.Fatal("b sees a's map")
	}
	f.seen.Put("z", 9)
	f.b.SetCurrentKey("a")
	if v, ok := f.seen.Get("x"); !ok || v != 3 {
		t.Fatalf("Get(x) = %d, %v", v, ok)
	}
	if _, ok := f.seen.Get("z"); ok {
		t.Fatal("a sees b's entry")
	}
	if got := maps.Collect(f.seen.All()); !maps.Equal(got, map[string]int{"x": 3, "y": 2}) {
		t.Fatalf("All() = %v", got)
	}
	f.seen.Remove("x")
	f.seen.Remove("nope")
	if f.seen.Len() != 1 || f.seen.Contains("x") {
		t.Fatal("Remove failed")
	}
	f.seen.Remove("y")
	if n := storedKeys(f.seen.store); n != 1 {
		t.Fatalf("removing the last entry left the key behind: %d keys stored, want 1", n)
	}
	f.b.SetCurrentKey("b")
	f.seen.Clear()
	if n := storedKeys(f.seen.store); n != 0 {
		t.Fatalf("Clear left %d keys", n)
	}

	// Compute: absent, then present; the other key is untouched.
	add := func(old int, ok bool) int {
		if !ok {
			return 100
		}
		return old + 1
	}
	f.b.SetCurrentKey("c")
	if v := f.seen.Compute("w", add); v != 100 {
		t.Fatalf("Compute on an absent entry = %d, want 100", v)
	}
	if v := f.seen.Compute("w", add); v != 101 {
		t.Fatalf("Compute on a present entry = %d, want 101", v)
	}
	f.b.SetCurrentKey("d")
	if f.seen.Contains("w") {
		t.Fatal("d sees c's entry")
	}
	f.b.SetCurrentKey("c")
	if v, ok := f.seen.Get("w"); !ok || v != 101 || f.seen.Len() != 1 {
		t.Fatalf("after Compute: Get(w) = %d, %v; Len %d", v, ok, f.seen.Len())
	}
}

func TestListState(t *testing.T) { forBackends(t, testListState) }

func testListState(t *testing.T, kind BackendKind) {
	f := newFixture(t, kind, 8, KeyGroupRange{0, 8})
	f.b.SetCurrentKey("a")
	if f.events.Get() != nil || f.events.Len() != 0 {
		t.Fatal("new key has a list")
	}
	f.events.Add("1")
	f.events.Add("2")
	f.b.SetCurrentKey("b")
	f.events.Add("x")
	f.b.SetCurrentKey("a")
	got := f.events.Get()
	if !slices.Equal(got, []string{"1", "2"}) {
		t.Fatalf("Get() = %v", got)
	}
	got[0] = "mutated"
	if f.events.Get()[0] != "1" {
		t.Fatal("Get returned the stored slice")
	}
	in := []string{"p", "q"}
	f.events.Update(in)
	in[0] = "mutated"
	if got := slices.Collect(f.events.All()); !slices.Equal(got, []string{"p", "q"}) {
		t.Fatalf("after Update: %v", got)
	}
	f.events.Update(nil)
	if n := storedKeys(f.events.store); n != 1 {
		t.Fatalf("Update(nil) left the key behind: %d keys stored, want 1", n)
	}
	f.b.SetCurrentKey("b")
	f.events.Clear()
	if n := storedKeys(f.events.store); n != 0 {
		t.Fatalf("Clear left %d keys", n)
	}
}

func TestRegisterErrors(t *testing.T) { forBackends(t, testRegisterErrors) }

func testRegisterErrors(t *testing.T, kind BackendKind) {
	f := newFixture(t, kind, 8, KeyGroupRange{0, 8})
	if _, err := NewValueState[string, int](f.b.Scope(), "count", IntCodec{}); err == nil || !strings.Contains(err.Error(), `"count" is already registered`) {
		t.Errorf("duplicate name: %v", err)
	}
	if _, err := NewListState[string, int](f.b.Scope(), "seen", IntCodec{}); err == nil {
		t.Error("duplicate name of another kind accepted")
	}
	if _, err := NewMapState[string, int, int](f.b.Scope(), "", IntCodec{}, IntCodec{}); err == nil || !strings.Contains(err.Error(), "empty") {
		t.Errorf("empty name: %v", err)
	}
	if _, err := NewValueState[string, int](f.b.Scope(), "\x00event-time timers", IntCodec{}); err == nil || !strings.Contains(err.Error(), "reserved") {
		t.Errorf("reserved name: %v", err)
	}
}

func TestKeyGroupOfMatchesHash(t *testing.T) {
	b := NewKeyedBackend[string](StringCodec{}, 128, KeyGroupRange{0, 128})
	for _, k := range []string{"", "a", "user-42"} {
		if got, want := b.KeyGroupOf(k), KeyGroupOf(HashKey([]byte(k)), 128); got != want {
			t.Errorf("KeyGroupOf(%q) = %d, want %d", k, got, want)
		}
	}
	if b.KeyGroupRange() != (KeyGroupRange{0, 128}) {
		t.Errorf("KeyGroupRange() = %v", b.KeyGroupRange())
	}
}

func TestNewKeyedBackendPanicsOnBadRange(t *testing.T) {
	for _, r := range []KeyGroupRange{{-1, 4}, {5, 4}, {0, 9}} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("range %v accepted", r)
				}
			}()
			NewKeyedBackend[string](StringCodec{}, 8, r)
		}()
	}
}

func TestTimers(t *testing.T) { forBackends(t, testTimers) }

func testTimers(t *testing.T, kind BackendKind) {
	b := newBackend(t, kind, StringCodec{}, 8, KeyGroupRange{0, 8})
	at := func(s int) time.Time { return epoch.Add(time.Duration(s) * time.Second) }
	if _, ok := b.NextTimer(); ok {
		t.Fatal("empty backend has a timer")
	}
	reg := func(k string, secs ...int) {
		b.SetCurrentKey(k)
		for _, s := range secs {
			b.RegisterTimer(at(s))
		}
	}
	reg("a", 5, 3, 5, 9) // 5 twice: fires once
	reg("b", 3, 1, 7)
	reg("c", 3)
	b.SetCurrentKey("b")
	b.DeleteTimer(at(7))
	b.DeleteTimer(at(100)) // not registered: no effect
	if next, ok := b.NextTimer(); !ok || !next.Equal(at(1)) {
		t.Fatalf("NextTimer() = %v, %v", next, ok)
	}
	if got := b.PopDueTimers(at(0), nil); len(got) != 0 {
		t.Fatalf("nothing is due at 0, got %v", got)
	}
	got := b.PopDueTimers(at(5), nil)
	want := []struct {
		k string
		s int
	}{{"b", 1}, {"a", 3}, {"b", 3}, {"c", 3}, {"a", 5}}
	if len(got) != len(want) {
		t.Fatalf("PopDueTimers(5) = %v", got)
	}
	for i, w := range want {
		if got[i].Key != w.k || !got[i].When.Equal(at(w.s)) {
			t.Errorf("timer %d = %v@%v, want %v@%v", i, got[i].Key, got[i].When, w.k, at(w.s))
		}
	}
	// A popped timer can be registered again.
	reg("a", 3)
	got = b.PopDueTimers(at(100), got[:0])
	if len(got) != 2 || got[0].Key != "a" || !got[0].When.Equal(at(3)) || !got[1].When.Equal(at(9)) {
		t.Fatalf("PopDueTimers(100) = %v", got)
	}
	if _, ok := b.NextTimer(); ok || len(pendingTimers(b.timers)) != 0 {
		t.Fatal("timers left after popping all")
	}
	if q, ok := b.timers.(*timerQueue[string]); ok && len(q.buckets) != 0 {
		t.Fatalf("%d buckets left after popping all", len(q.buckets))
	}
}

// TestTimerQueueRandomized checks the timers against a model under random
// registrations, deletions, pops and NextTimer calls: timers fire once, in
// time order, and in registration order at equal times. With few keys over
// many times the buckets stay small; with many keys over few times they
// grow indexes, are compacted under deletions and recycled with them.
func TestTimerQueueRandomized(t *testing.T) {
	for _, c := range []struct {
		name        string
		keys, times int
		popOneIn    int // a step pops with probability 1/popOneIn
	}{
		{"small buckets", 20, 100, 10},
		{"large buckets", 500, 3, 400},
	} {
		t.Run(c.name, func(t *testing.T) {
			forBackends(t, func(t *testing.T, kind BackendKind) { checkTimerQueue(t, kind, c.keys, c.times, c.popOneIn) })
		})
	}
}

func checkTimerQueue(t *testing.T, kind BackendKind, keys, times, popOneIn int) {
	b := newBackend(t, kind, IntCodec{}, 8, KeyGroupRange{0, 8})
	type id struct {
		key  int
		when int64
	}
	model := map[id]int{} // pending timer -> registration order
	order := 0
	x := uint64(1)
	rnd := func(n int) int { x ^= x << 13; x ^= x >> 7; x ^= x << 17; return int(x % uint64(n)) }
	// pop pops the model's timers due at or before now, in order.
	pop := func(now int64) []Timer[int] {
		var due []id
		for i := range model {
			if i.when <= now {
				due = append(due, i)
			}
		}
		slices.SortFunc(due, func(a, b id) int { return cmp.Or(cmp.Compare(a.when, b.when), cmp.Compare(model[a], model[b])) })
		out := make([]Timer[int], len(due))
		for n, i := range due {
			out[n] = Timer[int]{Key: i.key, When: time.Unix(0, i.when)}
			delete(model, i)
		}
		return out
	}
	same := func(a, b Timer[int]) bool { return a.Key == b.Key && a.When.Equal(b.When) }
	now := epoch.UnixNano()
	for step := range 20000 {
		k := rnd(keys)
		b.SetCurrentKey(k)
		// Times from now on: a timer is rarely due when registered.
		when := time.Unix(0, now).Add(time.Duration(rnd(times)) * time.Second)
		i := id{k, when.UnixNano()}
		switch r := rnd(10 * popOneIn); {
		case r < 3*popOneIn:
			b.DeleteTimer(when)
			delete(model, i)
		case r < 10*popOneIn-1:
			b.RegisterTimer(when)
			if _, ok := model[i]; !ok {
				order++
				model[i] = order
			}
		default:
			now += int64(rnd(3)) * int64(time.Second)
			got, want := b.PopDueTimers(time.Unix(0, now), nil), pop(now)
			if !slices.EqualFunc(got, want, same) {
				t.Fatalf("step %d: popped %v, want %v", step, got, want)
			}
		}
		next, ok := b.NextTimer()
		var wantNext time.Time
		for i := range model {
			if w := time.Unix(0, i.when); wantNext.IsZero() || w.Before(wantNext) {
				wantNext = w
			}
		}
		if ok != (len(model) > 0) || (ok && !next.Equal(wantNext)) {
			t.Fatalf("step %d: NextTimer = %v, %v; want %v, %v", step, next, ok, wantNext, len(model) > 0)
		}
	}
	end := time.Unix(0, now).Add(time.Hour)
	if got, want := b.PopDueTimers(end, nil), pop(end.UnixNano()); !slices.EqualFunc(got, want, same) {
		t.Fatalf("final pop: %v, want %v", got, want)
	}
}

func TestSnapshotIsolation(t *testing.T) { forBackends(t, testSnapshotIsolation) }

func testSnapshotIsolation(t *testing.T, kind BackendKind) {
	f := newFixture(t, kind, 16, KeyGroupRange{0, 16})
	const n = 200
	for i := range n {
		f.fill(i)
	}
	want := map[string]keyState{}
	for i := range n {
		k := fmt.Sprint("key-", i)
		want[k] = f.dump(k)
	}
	encode := f.b.Snapshot()

	// Mutate everything, concurrently with encoding.
	done := make(chan map[int][]byte)
	go func() {
		blobs, err := encode()
		if err != nil {
			t.Error(err)
		}
		done <- blobs
	}()
	for i := range n {
		f.b.SetCurrentKey(fmt.Sprint("key-", i))
		switch i % 4 {
		case 0:
			f.count.Update(-1)
			f.seen.Put("u0", -1)
			f.seen.Put("new", -1)
			f.events.Add("new")
		case 1:
			f.count.Clear()
			f.seen.Clear()
			f.events.Update([]string{"replaced"})
		case 2:
			f.seen.Remove("u0")
			f.events.Clear()
			f.events.Add("after-clear")
		case 3:
			f.events.Add("appended")
			f.b.RegisterTimer(epoch)
		}
	}
	f.b.PopDueTimers(epoch.Add(500*time.Second), nil)
	blobs := <-done

	for _, to := range backendKinds {
		r := newFixture(t, to, 16, KeyGroupRange{0, 16})
		for kg, blob := range blobs {
			if err := r.b.Restore(kg, blob); err != nil {
				t.Fatal(err)
			}
		}
		for k, w := range want {
			if got := r.dump(k); !got.equal(w) {
				t.Errorf("%s restored into %v: %v, want state at Snapshot %v", k, to, got, w)
			}
		}
	}
}

// restoreInto restores every blob into the subtask of p, of backends of kind, that owns it.
func restoreInto(t *testing.T, kind BackendKind, blobs map[int][]byte, p, maxP int) []*fixture {
	t.Helper()
	fs := make([]*fixture, p)
	for i := range fs {
		fs[i] = subtaskFixture(t, kind, i, p, maxP)
	}
	for kg, blob := range blobs {
		if err := fs[SubtaskForKeyGroup(kg, p, maxP)].b.Restore(kg, blob); err != nil {
			t.Fatal(err)
		}
	}
	return fs
}

func TestRescaleRoundTrip(t *testing.T) { forBackends(t, testRescaleRoundTrip) }

func testRescaleRoundTrip(t *testing.T, kind BackendKind) {
	const maxP, n = 32, 1000
	src := subtaskFixture(t, kind, 0, 1, maxP)
	for i := range n {
		src.fill(i)
	}
	want := map[string]keyState{}
	for i := range n {
		k := fmt.Sprint("key-", i)
		want[k] = src.dump(k)
	}
	blobs := snapshotNow(t, src.b)
	for kg := range blobs {
		if kg < 0 || kg >= maxP {
			t.Fatalf("blob for key group %d", kg)
		}
	}

	check := func(fs []*fixture, p int) {
		t.Helper()
		for k, w := range want {
			owner := SubtaskForKeyGroup(src.b.KeyGroupOf(k), p, maxP)
			for i, f := range fs {
				got := f.dump(k)
				switch {
				case i == owner && !got.equal(w):
					t.Errorf("p=%d: owner %d has %s = %v, want %v", p, i, k, got, w)
				case i != owner && !got.empty():
					t.Errorf("p=%d: subtask %d is not the owner of %s but has %v", p, i, k, got)
				}
			}
		}
	}
	for _, to := range backendKinds {
		for _, p := range []int{2, 3} {
			check(restoreInto(t, to, blobs, p, maxP), p)
		}
	}

	// Scale 3 -> 1: snapshot every subtask of 3 and restore all into one,
	// of the other kind.
	three := restoreInto(t, kind, blobs, 3, maxP)
	merged := map[int][]byte{}
	for i, f := range three {
		for kg, blob := range snapshotNow(t, f.b) {
			if !RangeForSubtask(i, 3, maxP).Contains(kg) {
				t.Fatalf("subtask %d snapshotted key group %d", i, kg)
			}
			merged[kg] = blob
		}
	}
	check(restoreInto(t, otherKind(kind), merged, 1, maxP), 1)
	if len(merged) != len(blobs) {
		t.Errorf("3 -> 1 has %d key groups, 1 had %d", len(merged), len(blobs))
	}
}

func TestTimersRescale(t *testing.T) { forBackends(t, testTimersRescale) }

func testTimersRescale(t *testing.T, kind BackendKind) {
	const maxP = 16
	src := subtaskFixture(t, kind, 0, 1, maxP)
	for i := range 100 {
		src.b.SetCurrentKey(fmt.Sprint("k", i))
		src.b.RegisterTimer(epoch.Add(time.Duration(i%10) * time.Second))
	}
	fs := restoreInto(t, kind, snapshotNow(t, src.b), 3, maxP)
	var all []Timer[string]
	for i, f := range fs {
		ts := f.b.PopDueTimers(epoch.Add(time.Minute), nil)
		for j, tm := range ts {
			if SubtaskForKeyGroup(f.b.KeyGroupOf(tm.Key), 3, maxP) != i {
				t.Errorf("subtask %d got timer of %s", i, tm.Key)
			}
			if j > 0 && tm.When.Before(ts[j-1].When) {
				t.Errorf("subtask %d: timers out of order", i)
			}
		}
		all = append(all, ts...)
	}
	if len(all) != 100 {
		t.Fatalf("restored %d timers, want 100", len(all))
	}
}

// TestEventTimersRescale checks that event-time timers are kept apart from
// processing-time timers through a snapshot restored with another parallelism.
func TestEventTimersRescale(t *testing.T) { forBackends(t, testEventTimersRescale) }

func testEventTimersRescale(t *testing.T, kind BackendKind) {
	const maxP = 16
	src := subtaskFixture(t, kind, 0, 1, maxP)
	for i := range 50 {
		src.b.SetCurrentKey(fmt.Sprint("k", i))
		src.b.RegisterEventTimer(epoch.Add(time.Duration(i%5) * time.Second))
		src.b.RegisterTimer(epoch.Add(time.Hour))
	}
	src.b.SetCurrentKey("k0")
	src.b.DeleteEventTimer(epoch)
	fs := restoreInto(t, kind, snapshotNow(t, src.b), 2, maxP)
	events, processing := 0, 0
	for _, f := range fs {
		early := f.b.PopEventTimers(epoch.Add(2*time.Second).UnixNano(), nil)
		for _, tm := range early {
			if tm.When.After(epoch.Add(2 * time.Second)) {
				t.Errorf("event timer %v popped at watermark +2s", tm)
			}
		}
		events += len(early) + len(f.b.PopEventTimers(epoch.Add(time.Minute).UnixNano(), nil))
		processing += len(f.b.PopDueTimers(epoch.Add(2*time.Hour), nil))
	}
	if events != 49 || processing != 50 {
		t.Fatalf("restored %d event-time and %d processing-time timers, want 49 and 50", events, processing)
	}
}

func TestSnapshotOmitsEmptyKeyGroups(t *testing.T) { forBackends(t, testSnapshotOmitsEmptyKeyGroups) }

func testSnapshotOmitsEmptyKeyGroups(t *testing.T, kind BackendKind) {
	f := newFixture(t, kind, 128, KeyGroupRange{0, 128})
	if blobs := snapshotNow(t, f.b); len(blobs) != 0 {
		t.Fatalf("empty backend produced %d blobs", len(blobs))
	}
	f.b.SetCurrentKey("only")
	f.count.Update(1)
	blobs := snapshotNow(t, f.b)
	if len(blobs) != 1 || blobs[f.b.KeyGroupOf("only")] == nil {
		t.Fatalf("one key produced blobs for %v", slices.Collect(maps.Keys(blobs)))
	}
}

func TestSnapshotKeyOutsideRange(t *testing.T) { forBackends(t, testSnapshotKeyOutsideRange) }

func testSnapshotKeyOutsideRange(t *testing.T, kind BackendKind) {
	f := newFixture(t, kind, 128, KeyGroupRange{0, 1})
	k := "x"
	for f.b.KeyGroupOf(k) == 0 {
		k += "x"
	}
	f.b.SetCurrentKey(k)
	f.count.Update(1)
	if _, err := f.b.Snapshot()(); err == nil || !strings.Contains(err.Error(), "outside the owned range") {
		t.Fatalf("Snapshot with a foreign key: %v", err)
	}
}

// TestSnapshotEncodeError: a value its codec cannot encode fails the heap
// backend's snapshot, which encodes values, and the Pebble backend's
// Update, which does.
func TestSnapshotEncodeError(t *testing.T) { forBackends(t, testSnapshotEncodeError) }

func testSnapshotEncodeError(t *testing.T, kind BackendKind) {
	b := newBackend(t, kind, StringCodec{}, 8, KeyGroupRange{0, 8})
	s, err := NewValueState[string, float64](b.Scope(), "json", JSONCodec[float64]{})
	if err != nil {
		t.Fatal(err)
	}
	b.SetCurrentKey("k")
	if kind == PebbleBackend {
		defer func() {
			if err, _ := recover().(error); err == nil || !strings.Contains(err.Error(), "encoding a value") {
				t.Fatalf("Update of NaN with JSONCodec on Pebble: recovered %v", err)
			}
		}()
	}
	s.Update(math.NaN())
	if _, err := b.Snapshot()(); err == nil || !strings.Contains(err.Error(), `state "json"`) {
		t.Fatalf("Snapshot of NaN with JSONCodec: %v", err)
	}
}

// validBlob returns a blob holding every kind of section, and its key group.
func validBlob(t testing.TB) (int, []byte) {
	f := newFixture(t, HeapBackend, 4, KeyGroupRange{0, 4})
	for i := range 40 {
		f.fill(i)
	}
	blobs := snapshotNow(t, f.b)
	kg := f.b.KeyGroupOf("key-2")
	return kg, blobs[kg]
}

func TestRestoreTruncatedBlobs(t *testing.T) { forBackends(t, testRestoreTruncatedBlobs) }

func testRestoreTruncatedBlobs(t *testing.T, kind BackendKind) {
	kg, blob := validBlob(t)
	f := newFixture(t, kind, 4, KeyGroupRange{0, 4})
	for n := range len(blob) {
		err := f.b.Restore(kg, blob[:n])
		if err == nil {
			// A cut between sections is a valid, shorter blob; anything else must fail.
			f = newFixture(t, kind, 4, KeyGroupRange{0, 4})
			continue
		}
		if !errors.Is(err, ErrCorrupt) || !errors.Is(err, checkpoint.ErrCorrupt) {
			t.Fatalf("truncated at %d: %v does not wrap ErrCorrupt, the engine's corruption mark", n, err)
		}
		if storedKeys(f.count.store)+storedKeys(f.seen.store)+storedKeys(f.events.store)+len(pendingTimers(f.b.timers)) != 0 {
			t.Fatalf("failed restore at %d changed the backend", n)
		}
	}
}

func TestRestoreErrors(t *testing.T) { forBackends(t, testRestoreErrors) }

func testRestoreErrors(t *testing.T, kind BackendKind) {
	kg, blob := validBlob(t)
	otherKG := (kg + 1) % 4
	tests := []struct {
		name  string
		setup func(t *testing.T) *KeyedBackend[string]
		kg    int
		blob  []byte
		want  string
	}{
		{"not owned", func(t *testing.T) *KeyedBackend[string] {
			return newFixture(t, kind, 4, KeyGroupRange{kg, kg}).b
		}, kg, blob, "outside the owned range"},
		{"unregistered", func(t *testing.T) *KeyedBackend[string] {
			b := newBackend(t, kind, StringCodec{}, 4, KeyGroupRange{0, 4})
			must(NewMapState[string, string, int](b.Scope(), "seen", StringCodec{}, IntCodec{}))
			return b
		}, kg, blob, `"count" (value), which is not registered: the operator's state declarations must match the checkpoint's`},
		{"kind mismatch", func(t *testing.T) *KeyedBackend[string] {
			b := newBackend(t, kind, StringCodec{}, 4, KeyGroupRange{0, 4})
			must(NewListState[string, int64](b.Scope(), "count", Int64Codec{}))
			must(NewMapState[string, string, int](b.Scope(), "seen", StringCodec{}, IntCodec{}))
			must(NewListState[string, string](b.Scope(), "events", StringCodec{}))
			return b
		}, kg, blob, `state "count" is a value state in the checkpoint but registered as a list state`},
		{"wrong key group", func(t *testing.T) *KeyedBackend[string] {
			return newFixture(t, kind, 4, KeyGroupRange{0, 4}).b
		}, otherKG, blob, "in the blob of key group"},
		{"version", func(t *testing.T) *KeyedBackend[string] {
			return newFixture(t, kind, 4, KeyGroupRange{0, 4}).b
		}, kg, append([]byte{9}, blob[1:]...), "format version 9"},
		{"empty", func(t *testing.T) *KeyedBackend[string] {
			return newFixture(t, kind, 4, KeyGroupRange{0, 4}).b
		}, kg, nil, "empty blob"},
		{"trailing garbage", func(t *testing.T) *KeyedBackend[string] {
			return newFixture(t, kind, 4, KeyGroupRange{0, 4}).b
		}, kg, append(slices.Clone(blob), 0xff), "corrupt"},
		{"duplicate section", func(t *testing.T) *KeyedBackend[string] {
			return newFixture(t, kind, 4, KeyGroupRange{0, 4}).b
		}, kg, append(slices.Clone(blob), blob[1:]...), "appears twice"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.setup(t).Restore(tt.kg, tt.blob)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Restore: %v, want %q", err, tt.want)
			}
		})
	}
}

// validTTLBlob returns a blob of the fixture's states declared with a TTL,
// and its key group.
func validTTLBlob(t testing.TB) (int, []byte) {
	b := newBackend(t, HeapBackend, StringCodec{}, 4, KeyGroupRange{0, 4})
	opt := WithTTL(TTL{After: time.Hour})
	f := &fixture{b: b,
		count:  must(NewValueState[string, int64](b.Scope(), "count", Int64Codec{}, opt)),
		seen:   must(NewMapState[string, string, int](b.Scope(), "seen", StringCodec{}, IntCodec{}, opt)),
		events: must(NewListState[string, string](b.Scope(), "events", StringCodec{}, opt))}
	b.SetWatermark(epoch.UnixNano())
	for i := range 40 {
		f.fill(i)
	}
	blobs := snapshotNow(t, f.b)
	kg := f.b.KeyGroupOf("key-2")
	return kg, blobs[kg]
}

func FuzzRestore(f *testing.F) {
	kg, blob := validBlob(f)
	f.Add(kg, blob)
	f.Add(kg, blob[:len(blob)/2])
	ttlKG, ttlBlob := validTTLBlob(f)
	f.Add(ttlKG, ttlBlob)
	f.Add(ttlKG, ttlBlob[:len(ttlBlob)*2/3])
	f.Add(0, []byte{format.StateBlobVersion, 0, byte(kindTimers), 0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Fuzz(func(t *testing.T, kg int, blob []byte) {
		// Both backends accept and reject the same blobs.
		heap := newFixture(t, HeapBackend, 4, KeyGroupRange{0, 4})
		disk := newFixture(t, PebbleBackend, 4, KeyGroupRange{0, 4})
		heapErr, diskErr := heap.b.Restore(kg, blob), disk.b.Restore(kg, blob)
		if (heapErr == nil) != (diskErr == nil) {
			t.Fatalf("heap restore: %v; Pebble restore: %v", heapErr, diskErr)
		}
		if heapErr != nil {
			return
		}
		// Whatever restores must snapshot and restore again, into either backend.
		for _, fx := range []*fixture{heap, disk} {
			for _, kind := range backendKinds {
				again := newFixture(t, kind, 4, KeyGroupRange{0, 4})
				for kg, b := range snapshotNow(t, fx.b) {
					if err := again.b.Restore(kg, b); err != nil {
						t.Fatalf("re-restore into %v: %v", kind, err)
					}
				}
			}
		}
	})
}

func BenchmarkValueStateUpdate(b *testing.B) { benchBackends(b, benchValueStateUpdate) }

func benchValueStateUpdate(b *testing.B, kind BackendKind) {
	const keys = 10_000
	backend := newBackend(b, kind, Int64Codec{}, DefaultMaxParallelism, KeyGroupRange{0, DefaultMaxParallelism})
	s, err := NewValueState[int64, int64](backend.Scope(), "count", Int64Codec{})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	i := int64(0)
	for b.Loop() {
		backend.SetCurrentKey(i)
		v, _ := s.Value()
		s.Update(v + 1)
		if i++; i == keys {
			i = 0
		}
	}
}

func BenchmarkSnapshot(b *testing.B) { benchBackends(b, benchSnapshot) }

func benchSnapshot(b *testing.B, kind BackendKind) {
	const keys = 100_000
	backend := newBackend(b, kind, Int64Codec{}, DefaultMaxParallelism, KeyGroupRange{0, DefaultMaxParallelism})
	s, err := NewValueState[int64, int64](backend.Scope(), "count", Int64Codec{})
	if err != nil {
		b.Fatal(err)
	}
	for i := range int64(keys) {
		backend.SetCurrentKey(i)
		s.Update(i)
	}
	if kind == HeapBackend { // a Pebble capture must be encoded to be released
		b.Run("capture", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				backend.Snapshot()
			}
		})
	}
	b.Run("capture+encode", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := backend.Snapshot()(); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// TestTimerDeletionCompacts deletes most timers, which compacts the heap,
// and checks that the rest still fire in order, once.
func TestTimerDeletionCompacts(t *testing.T) {
	b := NewKeyedBackend[int](IntCodec{}, 8, KeyGroupRange{0, 8})
	for k := range 200 {
		b.SetCurrentKey(k)
		b.RegisterEventTimer(epoch.Add(time.Duration(200-k) * time.Second))
	}
	for k := range 200 {
		if k%4 != 0 {
			b.SetCurrentKey(k)
			b.DeleteEventTimer(epoch.Add(time.Duration(200-k) * time.Second))
		}
	}
	if n := len(b.eventTimers.(*timerQueue[int]).whens); n >= 200 {
		t.Errorf("heap holds %d due times after deleting 150 of 200 timers due at distinct times: not compacted", n)
	}
	b.SetCurrentKey(4) // a pending timer registered again fires once
	b.RegisterEventTimer(epoch.Add(196 * time.Second))
	got := b.PopEventTimers(epoch.Add(time.Hour).UnixNano(), nil)
	if len(got) != 50 {
		t.Fatalf("popped %d timers, want 50", len(got))
	}
	for i, tm := range got {
		if want := 196 - 4*i; tm.Key != want {
			t.Fatalf("timer %d has key %d, want %d", i, tm.Key, want)
		}
	}
}

// BenchmarkEventTimers registers one timer per key and window of a sliding
// window (6,000 keys, 5 windows open each) and pops them window by window.
func BenchmarkEventTimers(b *testing.B) {
	const keys, windows = 6000, 5
	benchBackends(b, func(b *testing.B, kind BackendKind) {
		kb := newBackend(b, kind, Int64Codec{}, 128, KeyGroupRange{0, 128})
		var due []Timer[int64]
		for i := range b.N {
			w := int64(i % 1000)
			for k := range int64(keys) {
				kb.SetCurrentKey(k)
				for j := range int64(windows) {
					kb.RegisterEventTimer(time.Unix(0, w+j))
				}
			}
			due = kb.PopEventTimers(w+windows, due[:0])
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*keys*windows), "ns/registration")
	})
}

// BenchmarkTimersDistinctTimes is the timers' unfavourable case: every key
// moves its own timer to a time no other timer has (a session gap), as
// processing-time timeouts do, and due timers are popped as time passes.
// With a gap of twice the time between two visits of a key, most timers are
// moved before they fire; with half, most fire.
func BenchmarkTimersDistinctTimes(b *testing.B) {
	const keys, visit = 10000, 10000 * 10 // ns between two visits of a key
	for _, c := range []struct {
		name string
		gap  int64
	}{{"moved", 2 * visit}, {"fired", visit / 2}} {
		b.Run(c.name, func(b *testing.B) {
			benchBackends(b, func(b *testing.B, kind BackendKind) {
				kb := newBackend(b, kind, Int64Codec{}, 128, KeyGroupRange{0, 128})
				last := make([]int64, keys) // each key's pending timer, UnixNano
				var due []Timer[int64]
				now := int64(0)
				for i := range b.N {
					k := int64(i % keys)
					kb.SetCurrentKey(k)
					if last[k] != 0 {
						kb.DeleteTimer(time.Unix(0, last[k]))
					}
					now += visit / keys
					last[k] = now + c.gap
					kb.RegisterTimer(time.Unix(0, last[k]))
					if i%100 == 0 {
						due = kb.PopDueTimers(time.Unix(0, now), due[:0])
					}
				}
			})
		})
	}
}
