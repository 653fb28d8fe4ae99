package state

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/exactlyonce/exactly/checkpoint"
	"github.com/exactlyonce/exactly/internal/format"
	"github.com/exactlyonce/exactly/state/internal/kv"
)

// ttlFixture is a backend with a value, a map and a list state, declared
// with the same TTL (or without one, for a nil ttl).
type ttlFixture struct {
	b      *KeyedBackend[string]
	domain TTLTime
	v      *ValueState[string, int64]
	m      *MapState[string, string, int]
	l      *ListState[string, string]
}

const ttlAfter = 10 * time.Second

func newTTLFixture(t testing.TB, kind BackendKind, maxP int, owned KeyGroupRange, ttl *TTL) *ttlFixture {
	t.Helper()
	b := newBackend(t, kind, StringCodec{}, maxP, owned)
	var opts []Option
	f := &ttlFixture{b: b}
	if ttl != nil {
		opts = append(opts, WithTTL(*ttl))
		f.domain = ttl.Time
	}
	f.v = must(NewValueState[string, int64](b.Scope(), "v", Int64Codec{}, opts...))
	f.m = must(NewMapState[string, string, int](b.Scope(), "m", StringCodec{}, IntCodec{}, opts...))
	f.l = must(NewListState[string, string](b.Scope(), "l", StringCodec{}, opts...))
	return f
}

// sec returns the time s seconds after epoch, in UnixNano.
func sec(s int) int64 { return epoch.Add(time.Duration(s) * time.Second).UnixNano() }

// setTime advances the fixture's TTL clock to s seconds after epoch.
func (f *ttlFixture) setTime(s int) { setClock(f.b, f.domain, sec(s)) }

func setClock[K comparable](b *KeyedBackend[K], d TTLTime, t int64) {
	if d == TTLEventTime {
		b.SetWatermark(t)
	} else {
		b.SetProcessingTime(time.Unix(0, t))
	}
}

// ttlKey is what the fixture shows for one key.
type ttlKey struct {
	V    int64
	HasV bool
	M    map[string]int
	L    []string
}

func (s ttlKey) String() string {
	type fields ttlKey // without the String method
	return fmt.Sprintf("%+v", fields(s))
}

func (s ttlKey) equal(o ttlKey) bool {
	return s.V == o.V && s.HasV == o.HasV && maps.Equal(s.M, o.M) && slices.Equal(s.L, o.L)
}

func (s ttlKey) empty() bool { return !s.HasV && len(s.M) == 0 && len(s.L) == 0 }

// read reads everything k holds (renewing it, with TTLOnReadAndWrite).
func (f *ttlFixture) read(k string) ttlKey {
	f.b.SetCurrentKey(k)
	var s ttlKey
	s.V, s.HasV = f.v.Value()
	s.M = maps.Collect(f.m.All())
	s.L = f.l.Get()
	return s
}

func (f *ttlFixture) check(t *testing.T, k string, want ttlKey) {
	t.Helper()
	if want.M == nil {
		want.M = map[string]int{}
	}
	if got := f.read(k); !got.equal(want) {
		t.Fatalf("%s = %v, want %v", k, got, want)
	}
}

// stored returns how many keys each state holds in the backend, expired
// entries included.
func (f *ttlFixture) stored() [3]int {
	return [3]int{storedKeys(f.v.store), storedKeys(f.m.store), storedKeys(f.l.store)}
}

var ttlDomains = []TTLTime{TTLEventTime, TTLProcessingTime}

// forTTL runs test for each backend and each TTL clock.
func forTTL(t *testing.T, test func(t *testing.T, kind BackendKind, d TTLTime)) {
	forBackends(t, func(t *testing.T, kind BackendKind) {
		for _, d := range ttlDomains {
			t.Run(strings.ReplaceAll(d.String(), " ", "-"), func(t *testing.T) { test(t, kind, d) })
		}
	})
}

// TestTTLExpiresEntries: each value, map entry and list element expires
// After its last write by its own clock, never by the other; a read does
// not renew it; expired entries read are deleted.
func TestTTLExpiresEntries(t *testing.T) { forTTL(t, testTTLExpiresEntries) }

func testTTLExpiresEntries(t *testing.T, kind BackendKind, d TTLTime) {
	f := newTTLFixture(t, kind, 8, KeyGroupRange{0, 8}, &TTL{After: ttlAfter, Time: d})
	f.setTime(0)
	f.b.SetCurrentKey("a")
	f.v.Update(1)
	f.m.Put("x", 1)
	f.l.Add("e1")
	f.setTime(5)
	f.m.Put("y", 2)
	f.l.Add("e2")
	f.b.SetCurrentKey("b")
	f.v.Update(2)
	f.m.Put("z", 3)
	f.m.Put("z", 4) // a write renews
	// The other clock does not count.
	setClock(f.b, 1-d, sec(1000))
	f.setTime(9)
	f.check(t, "a", ttlKey{V: 1, HasV: true, M: map[string]int{"x": 1, "y": 2}, L: []string{"e1", "e2"}})
	f.setTime(10) // a's value, x and e1 expire: reading them at 9 renewed nothing
	f.check(t, "a", ttlKey{M: map[string]int{"y": 2}, L: []string{"e2"}})
	f.b.SetCurrentKey("a")
	if f.m.Contains("x") || f.m.Len() != 1 || f.l.Len() != 1 {
		t.Fatalf("a: Contains(x) %v, map Len %d, list Len %d; want false, 1, 1", f.m.Contains("x"), f.m.Len(), f.l.Len())
	}
	got := f.m.Compute("x", func(old int, ok bool) int {
		if ok || old != 0 {
			t.Errorf("Compute of an expired entry got %d, %v", old, ok)
		}
		return 7
	})
	if got != 7 {
		t.Fatalf("Compute = %d", got)
	}
	f.check(t, "b", ttlKey{V: 2, HasV: true, M: map[string]int{"z": 4}})
	f.setTime(15)
	f.check(t, "a", ttlKey{M: map[string]int{"x": 7}})
	f.check(t, "b", ttlKey{})
	f.setTime(20)
	f.check(t, "a", ttlKey{})
	if n := f.stored(); n != [3]int{} {
		t.Fatalf("expired entries read are still stored: %v keys", n)
	}
	// A clock never goes back: an expired entry stays expired.
	f.b.SetCurrentKey("c")
	f.v.Update(3)
	f.setTime(0)
	f.setTime(29)
	f.check(t, "c", ttlKey{V: 3, HasV: true})
	f.setTime(30)
	f.check(t, "c", ttlKey{})
}

// TestTTLOnReadAndWrite: with TTLOnReadAndWrite reads renew entries too,
// except Len.
func TestTTLOnReadAndWrite(t *testing.T) { forTTL(t, testTTLOnReadAndWrite) }

func testTTLOnReadAndWrite(t *testing.T, kind BackendKind, d TTLTime) {
	f := newTTLFixture(t, kind, 8, KeyGroupRange{0, 8}, &TTL{After: ttlAfter, Update: TTLOnReadAndWrite, Time: d})
	f.setTime(0)
	f.b.SetCurrentKey("a")
	f.v.Update(1)
	f.m.Put("x", 1)
	f.m.Put("y", 2)
	f.m.Put("z", 3)
	f.l.Add("e1")
	f.setTime(8)
	f.v.Value()
	f.m.Get("x")
	f.m.Contains("y")
	f.l.Get() // renews every element
	f.setTime(9)
	if f.m.Len() != 3 { // does not renew z
		t.Fatalf("Len = %d, want 3", f.m.Len())
	}
	f.setTime(17)
	f.check(t, "a", ttlKey{V: 1, HasV: true, M: map[string]int{"x": 1, "y": 2}, L: []string{"e1"}})
	f.setTime(26) // renewed at 17 by check
	f.check(t, "a", ttlKey{V: 1, HasV: true, M: map[string]int{"x": 1, "y": 2}, L: []string{"e1"}})
	f.setTime(36)
	f.check(t, "a", ttlKey{})
	f.b.SetCurrentKey("b")
	f.l.Add("e1")
	f.setTime(40)
	f.l.Add("e2")
	f.setTime(45)
	for range f.l.All() { // renews both at 45
	}
	f.setTime(54)
	f.check(t, "b", ttlKey{L: []string{"e1", "e2"}})
}

// TestTTLUpdateList: ListState.Update stamps every element, and an empty
// update clears.
func TestTTLUpdateList(t *testing.T) {
	forBackends(t, func(t *testing.T, kind BackendKind) {
		f := newTTLFixture(t, kind, 8, KeyGroupRange{0, 8}, &TTL{After: ttlAfter})
		f.setTime(0)
		f.b.SetCurrentKey("a")
		f.l.Add("old")
		f.setTime(5)
		f.l.Update([]string{"p", "q"})
		f.setTime(14)
		f.check(t, "a", ttlKey{L: []string{"p", "q"}})
		f.setTime(15)
		f.check(t, "a", ttlKey{})
	})
}

// TestTTLBeforeTheClock: entries written before their clock has a time
// are stamped with its first time, also when they were snapshotted and
// restored in between.
func TestTTLBeforeTheClock(t *testing.T) { forTTL(t, testTTLBeforeTheClock) }

func testTTLBeforeTheClock(t *testing.T, kind BackendKind, d TTLTime) {
	ttl := &TTL{After: ttlAfter, Time: d}
	f := newTTLFixture(t, kind, 8, KeyGroupRange{0, 8}, ttl)
	write := func(f *ttlFixture) {
		f.b.SetCurrentKey("a")
		f.v.Update(1)
		f.m.Put("x", 1)
		f.l.Add("e")
	}
	write(f)
	want := ttlKey{V: 1, HasV: true, M: map[string]int{"x": 1}, L: []string{"e"}}
	blobs := snapshotNow(t, f.b)
	f.setTime(100)
	f.setTime(109)
	f.check(t, "a", want)
	f.setTime(110)
	f.check(t, "a", ttlKey{})

	for _, to := range backendKinds {
		// Restored while the clock has no time: stamped at its first.
		g := newTTLFixture(t, to, 8, KeyGroupRange{0, 8}, ttl)
		restoreBlobs(t, g.b, blobs)
		g.setTime(50)
		g.setTime(59)
		g.check(t, "a", want)
		g.setTime(60)
		g.check(t, "a", ttlKey{})
		// Restored when the clock has a time: stamped then.
		h := newTTLFixture(t, to, 8, KeyGroupRange{0, 8}, ttl)
		h.setTime(30)
		restoreBlobs(t, h.b, blobs)
		h.setTime(39)
		h.check(t, "a", want)
		h.setTime(40)
		h.check(t, "a", ttlKey{})
	}
}

func restoreBlobs[K comparable](t *testing.T, b *KeyedBackend[K], blobs map[int][]byte) {
	t.Helper()
	for kg, blob := range blobs {
		if err := b.Restore(kg, blob); err != nil {
			t.Fatal(err)
		}
	}
}

// ttlSnapshot is a way of taking a checkpoint: full blobs, or an
// incremental snapshot of the Pebble backend's database.
type ttlSnapshot struct {
	name string
	take func(t *testing.T, b *KeyedBackend[string], id checkpoint.ID) checkpoint.SubtaskSnapshot
}

func ttlSnapshots(files checkpoint.SharedFiles) []ttlSnapshot {
	return []ttlSnapshot{
		{"full", func(t *testing.T, b *KeyedBackend[string], _ checkpoint.ID) checkpoint.SubtaskSnapshot {
			return checkpoint.SubtaskSnapshot{KeyGroups: snapshotNow(t, b)}
		}},
		{"checkpoint", func(t *testing.T, b *KeyedBackend[string], id checkpoint.ID) checkpoint.SubtaskSnapshot {
			encode, err := b.SnapshotFor(id, checkpoint.KindCheckpoint, files)
			if err != nil {
				t.Fatal(err)
			}
			snap, err := encode()
			if err != nil {
				t.Fatal(err)
			}
			return snap
		}},
	}
}

// restoreSnap restores what b owns of snaps.
func restoreSnap(t *testing.T, b *KeyedBackend[string], files checkpoint.SharedFiles, snaps ...checkpoint.SubtaskSnapshot) {
	t.Helper()
	for _, snap := range snaps {
		if err := b.RestoreDBs(snap.DBs, files); err != nil {
			t.Fatal(err)
		}
		for kg, blob := range snap.KeyGroups {
			if b.KeyGroupRange().Contains(kg) {
				if err := b.Restore(kg, blob); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
}

// TestTTLRestore: a checkpoint keeps each entry's expiry, so that it
// expires after a restore when it would have without one, into either
// backend; and an entry already expired when the checkpoint was taken,
// though not cleaned up yet, does not come back after a restore whose
// clock is behind (a processing-time restore on a machine whose clock is
// late, an event-time restore that merges subtasks with lower
// watermarks).
func TestTTLRestore(t *testing.T) { forTTL(t, testTTLRestore) }

func testTTLRestore(t *testing.T, kind BackendKind, d TTLTime) {
	ttl := &TTL{After: ttlAfter, Time: d}
	files := newMemShared()
	for _, snapshot := range ttlSnapshots(files) {
		t.Run(snapshot.name, func(t *testing.T) {
			src := newTTLFixture(t, kind, 16, KeyGroupRange{0, 16}, ttl)
			src.setTime(0)
			for i := range 40 {
				if i == 20 {
					src.setTime(5)
				}
				src.b.SetCurrentKey(fmt.Sprint("k", i))
				src.v.Update(int64(i))
				src.m.Put("x", i)
				src.l.Add("e")
			}
			src.setTime(12) // k0..k19 expired, not read: still stored
			snap := snapshot.take(t, src.b, 1)
			if kind == PebbleBackend && snapshot.name == "checkpoint" {
				// The restore, not the snapshot, leaves out those expired
				// (the value state's write-back did delete its own).
				if got := checkpointEntries(t, snap, files, src.m.store.(*diskMaps[string, string, int]).t.id); got != 40 {
					t.Fatalf("the checkpoint's database holds %d map entries, want all 40 (nothing was cleaned up yet)", got)
				}
			}
			for _, to := range backendKinds {
				dst := newTTLFixture(t, to, 16, KeyGroupRange{0, 16}, ttl)
				dst.setTime(3) // behind the checkpoint's clock
				restoreSnap(t, dst.b, files, snap)
				alive := func(i int) ttlKey {
					return ttlKey{V: int64(i), HasV: true, M: map[string]int{"x": i}, L: []string{"e"}}
				}
				for i := range 40 {
					want := ttlKey{}
					if i >= 20 {
						want = alive(i)
					}
					dst.check(t, fmt.Sprint("k", i), want)
				}
				dst.setTime(14)
				dst.check(t, "k20", alive(20))
				dst.setTime(15)
				for i := range 40 {
					dst.check(t, fmt.Sprint("k", i), ttlKey{})
				}
			}
		})
	}
}

// checkpointEntries returns the number of database entries of state id
// in the database of an incremental snapshot.
func checkpointEntries(t *testing.T, snap checkpoint.SubtaskSnapshot, files checkpoint.SharedFiles, id uint32) int {
	t.Helper()
	if len(snap.DBs) != 1 {
		t.Fatalf("snapshot has %d databases, want 1", len(snap.DBs))
	}
	db := snap.DBs[0]
	dir := t.TempDir()
	if err := download(dir, db.Files, files, nil, 0); err != nil {
		t.Fatal(err)
	}
	src, err := kv.OpenFiles(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	n := 0
	for kg := db.KeyGroupStart; kg < db.KeyGroupEnd; kg++ {
		c := diskCapture[string]{t: diskTable[string]{id: id}}
		if err := c.t.scanKeyGroup(src.Reader(), kg, func(int, []byte, []byte, []byte) error { n++; return nil }); err != nil {
			t.Fatal(err)
		}
	}
	return n
}

// TestTTLRescale restores a checkpoint of one subtask into three and back
// into one, both backends and both kinds of snapshots: every key's entries
// keep their expiries.
func TestTTLRescale(t *testing.T) { forTTL(t, testTTLRescale) }

func testTTLRescale(t *testing.T, kind BackendKind, d TTLTime) {
	const maxP, n = 32, 300
	ttl := &TTL{After: ttlAfter, Time: d}
	files := newMemShared()
	id := checkpoint.ID(0)
	for _, snapshot := range ttlSnapshots(files) {
		t.Run(snapshot.name, func(t *testing.T) {
			src := newTTLFixture(t, kind, maxP, RangeForSubtask(0, 1, maxP), ttl)
			for s := range 10 {
				src.setTime(s) // k<i> is written at i%10 s, so expires at i%10+10 s
				for i := s; i < n; i += 10 {
					src.b.SetCurrentKey(fmt.Sprint("k", i))
					src.v.Update(int64(i))
					src.m.Put("x", i)
					src.l.Add(fmt.Sprint("e", i))
				}
			}
			src.setTime(12)
			want := func(i, now int) ttlKey {
				if i%10+10 <= now {
					return ttlKey{}
				}
				return ttlKey{V: int64(i), HasV: true, M: map[string]int{"x": i}, L: []string{fmt.Sprint("e", i)}}
			}
			check := func(fs []*ttlFixture, now int, what string) {
				t.Helper()
				p := len(fs)
				for _, f := range fs {
					f.setTime(now)
				}
				for i := range n {
					k := fmt.Sprint("k", i)
					owner := SubtaskForKeyGroup(src.b.KeyGroupOf(k), p, maxP)
					for j, f := range fs {
						got := f.read(k)
						w := ttlKey{}
						if j == owner {
							w = want(i, now)
						}
						if w.M == nil {
							w.M = map[string]int{}
						}
						if !got.equal(w) {
							t.Fatalf("%s: subtask %d of %d at %ds: %s = %v, want %v", what, j, p, now, k, got, w)
						}
					}
				}
			}
			restore := func(to BackendKind, p int, snaps []checkpoint.SubtaskSnapshot) []*ttlFixture {
				fs := make([]*ttlFixture, p)
				for i := range fs {
					fs[i] = newTTLFixture(t, to, maxP, RangeForSubtask(i, p, maxP), ttl)
					fs[i].setTime(12)
					restoreSnap(t, fs[i].b, files, snaps...)
				}
				return fs
			}
			id++
			one := []checkpoint.SubtaskSnapshot{snapshot.take(t, src.b, id)}
			for _, to := range backendKinds {
				three := restore(to, 3, one)
				check(three, 12, "1 -> 3 "+to.String())
				check(three, 16, "1 -> 3 "+to.String())
				var snaps []checkpoint.SubtaskSnapshot
				for _, f := range three {
					id++
					snaps = append(snaps, snapshot.take(t, f.b, id))
				}
				back := restore(otherKind(to), 1, snaps)
				check(back, 16, "3 -> 1 "+otherKind(to).String())
				check(back, 19, "3 -> 1 "+otherKind(to).String())
			}
		})
	}
}

// TestTTLCleanup: expired entries nobody reads are removed by the
// incremental cleanup that SetCurrentKey runs, the heap backend's from
// what its last snapshot found expired; the entries of states without a
// TTL and those not expired stay; and the checkpoints taken afterwards do
// not carry the expired entries (on the Pebble backend not even in an
// incremental checkpoint's database).
func TestTTLCleanup(t *testing.T) { forBackends(t, testTTLCleanup) }

func testTTLCleanup(t *testing.T, kind BackendKind) {
	const n = 1000
	f := newTTLFixture(t, kind, 16, KeyGroupRange{0, 16}, &TTL{After: ttlAfter})
	plain := must(NewValueState[string, int64](f.b.Scope(), "plain", Int64Codec{}))
	write := func(i int) {
		f.b.SetCurrentKey(fmt.Sprint("k", i))
		f.v.Update(int64(i))
		f.m.Put("x", i)
		f.m.Put("y", i)
		f.l.Add("e")
		plain.Update(int64(i))
	}
	f.setTime(0)
	for i := range n {
		if i < n/2 {
			write(i)
		} else { // a list element that expires before the rest of the key's state
			f.b.SetCurrentKey(fmt.Sprint("k", i))
			f.l.Add("early")
		}
	}
	f.setTime(15)
	for i := n / 2; i < n; i++ {
		write(i)
	}
	f.setTime(23) // k0..k499 and the early elements expired, the rest not
	files := newMemShared()
	if kind == HeapBackend {
		// The heap backend learns what expired from a snapshot (the
		// Pebble backend's sweep already ran while the keys were written).
		if got := f.stored(); got != [3]int{n, n, n} {
			t.Fatalf("before the cleanup: %v keys stored, want %d each", got, n)
		}
		snapshotNow(t, f.b)
	}
	for range 4 * n * 4 * sweepEvery / sweepBudget { // twice round the database
		f.b.SetCurrentKey("k0")
	}
	if got := f.stored(); got != [3]int{n / 2, n / 2, n / 2} {
		t.Fatalf("after the cleanup: %v keys stored, want %d each", got, n/2)
	}
	if got := storedKeys(plain.store); got != n {
		t.Fatalf("the state without a TTL holds %d keys after the cleanup, want %d", got, n)
	}
	want := func(i int) ttlKey {
		if i < n/2 {
			return ttlKey{}
		}
		return ttlKey{V: int64(i), HasV: true, M: map[string]int{"x": i, "y": i}, L: []string{"e"}}
	}
	for _, snapshot := range ttlSnapshots(files) {
		snap := snapshot.take(t, f.b, 1)
		if kind == PebbleBackend && snapshot.name == "checkpoint" {
			// Values expired in the write-back cache are deleted by the
			// write-back, map entries and list elements by the sweep.
			for _, c := range []struct {
				what string
				id   uint32
				want int
			}{
				{"values", f.v.store.(*diskValues[string, int64]).t.id, n / 2},
				{"map entries", f.m.store.(*diskMaps[string, string, int]).t.id, n},
				{"lists", f.l.store.(*diskLists[string, string]).t.id, n / 2},
			} {
				if got := checkpointEntries(t, snap, files, c.id); got != c.want {
					t.Errorf("the incremental checkpoint's database holds %d %s, want %d", got, c.what, c.want)
				}
			}
		}
		// A backend without TTLs shows what the checkpoint carries.
		for _, to := range backendKinds {
			g := newTTLFixture(t, to, 16, KeyGroupRange{0, 16}, nil)
			must(NewValueState[string, int64](g.b.Scope(), "plain", Int64Codec{}))
			restoreSnap(t, g.b, files, snap)
			if got := g.stored(); got != [3]int{n / 2, n / 2, n / 2} {
				t.Errorf("%s into %v: the checkpoint carries %v keys, want %d each", snapshot.name, to, got, n/2)
			}
			for i := range n {
				g.check(t, fmt.Sprint("k", i), want(i))
			}
		}
	}
	for i := range n {
		f.check(t, fmt.Sprint("k", i), want(i))
	}
}

// TestTTLAddedAndRemoved: a state may gain or lose its TTL between runs.
// Entries restored without expiries get their first one when restored; a
// state restored without a TTL keeps every entry the checkpoint carries,
// which are those not expired when it was taken.
func TestTTLAddedAndRemoved(t *testing.T) { forTTL(t, testTTLAddedAndRemoved) }

func testTTLAddedAndRemoved(t *testing.T, kind BackendKind, d TTLTime) {
	ttl := &TTL{After: ttlAfter, Time: d}
	files := newMemShared()
	for _, snapshot := range ttlSnapshots(files) {
		t.Run(snapshot.name, func(t *testing.T) {
			plain := newTTLFixture(t, kind, 8, KeyGroupRange{0, 8}, nil)
			plain.b.SetCurrentKey("a")
			plain.v.Update(1)
			plain.m.Put("x", 1)
			plain.l.Add("e")
			want := ttlKey{V: 1, HasV: true, M: map[string]int{"x": 1}, L: []string{"e"}}
			snap := snapshot.take(t, plain.b, 1)
			for _, to := range backendKinds {
				f := newTTLFixture(t, to, 8, KeyGroupRange{0, 8}, ttl)
				f.setTime(100)
				restoreSnap(t, f.b, files, snap)
				f.setTime(109)
				f.check(t, "a", want)
				f.setTime(110)
				f.check(t, "a", ttlKey{})
			}

			withTTL := newTTLFixture(t, kind, 8, KeyGroupRange{0, 8}, ttl)
			withTTL.setTime(0)
			withTTL.b.SetCurrentKey("gone")
			withTTL.v.Update(2)
			withTTL.setTime(5)
			withTTL.b.SetCurrentKey("a")
			withTTL.v.Update(1)
			withTTL.m.Put("x", 1)
			withTTL.l.Add("e")
			withTTL.setTime(12)
			snap = snapshot.take(t, withTTL.b, 2)
			for _, to := range backendKinds {
				f := newTTLFixture(t, to, 8, KeyGroupRange{0, 8}, nil)
				restoreSnap(t, f.b, files, snap)
				f.check(t, "a", want)
				f.check(t, "gone", ttlKey{})
			}
		})
	}
}

func TestTTLOptionErrors(t *testing.T) {
	b := NewKeyedBackend[string](StringCodec{}, 8, KeyGroupRange{0, 8})
	for _, c := range []struct {
		ttl  TTL
		want string
	}{
		{TTL{}, `state "s": TTL.After = 0s: use a positive duration`},
		{TTL{After: -time.Second}, "TTL.After = -1s"},
		{TTL{After: time.Second, Update: 7}, "TTL.Update = TTLUpdate(7): use TTLOnCreateAndWrite or TTLOnReadAndWrite"},
		{TTL{After: time.Second, Time: 9}, "TTL.Time = TTLTime(9): use TTLEventTime or TTLProcessingTime"},
	} {
		_, err := NewValueState[string, int](b.Scope(), "s", IntCodec{}, WithTTL(c.ttl))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.ttl, err, c.want)
		}
	}
	if _, err := NewListState[string, int](b.Scope(), "s", IntCodec{}, nil, WithTTL(TTL{After: time.Second})); err != nil {
		t.Errorf("a valid TTL (and a nil option): %v", err)
	}
}

// TestTTLRestoreErrors: a section with expiries must be of a kind that
// has them, and a state of one kind does not restore into another with or
// without a TTL.
func TestTTLRestoreErrors(t *testing.T) {
	forBackends(t, func(t *testing.T, kind BackendKind) {
		f := newTTLFixture(t, kind, 4, KeyGroupRange{0, 4}, &TTL{After: ttlAfter})
		key := []byte("k")
		kg := f.b.KeyGroupOf("k")
		entry := format.AppendBytes(format.AppendInt64(format.AppendBytes(nil, key), 1), []byte("when-bytes"))
		for _, c := range []struct {
			name string
			blob []byte
			want string
		}{
			{"timers with a TTL", format.AppendSection(nil, "", byte(kindTimers|kindTTL), 1, entry), "unknown kind with a TTL"},
			{"unknown kind with a TTL", format.AppendSection(nil, "v", 0x89, 1, entry), "unknown kind with a TTL"},
			{"a list as a value", format.AppendSection(nil, "v", byte(kindList|kindTTL), 1, entry), `state "v" is a list state in the checkpoint but registered as a value state`},
			{"truncated expiry", format.AppendSection(nil, "v", byte(kindValue|kindTTL), 1, format.AppendBytes(nil, key)), "truncated expiry"},
		} {
			t.Run(c.name, func(t *testing.T) {
				err := f.b.Restore(kg, c.blob)
				if err == nil || !strings.Contains(err.Error(), c.want) {
					t.Fatalf("Restore: %v, want %q", err, c.want)
				}
				if c.name != "a list as a value" && !errors.Is(err, ErrCorrupt) {
					t.Fatalf("Restore: %v does not wrap ErrCorrupt", err)
				}
			})
		}
	})
}
