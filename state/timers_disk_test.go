package state

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"maps"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/exactlyonce/exactly/checkpoint"
	"github.com/exactlyonce/exactly/state/internal/kv"
)

// pendingTimers returns the pending timers of s in order of due time, then
// of registration within a key group.
func pendingTimers[K comparable](s timerStore[K]) []timerEntry[K] {
	q, ok := s.(*timerQueue[K])
	if ok {
		return q.pending()
	}
	t := s.(*diskTimers[K])
	type numbered struct {
		timerEntry[K]
		seq uint64
	}
	var all []numbered
	for kg := t.d.b.owned.Start; kg < t.d.b.owned.End; kg++ {
		lower := kv.AppendStatePrefix(nil, uint16(kg), t.byKey+1)
		t.d.scan(lower, func(key, value []byte) bool {
			when, seq, err := kv.SplitTimeKey(key)
			if err != nil {
				t.d.fail("reading timers", err)
			}
			k, err := t.d.b.keyCodec.Decode(value)
			if err != nil {
				t.d.fail("decoding a timer's key", err)
			}
			all = append(all, numbered{timerEntry[K]{key: k, when: when, live: true}, seq})
			return true
		})
	}
	slices.SortFunc(all, func(a, b numbered) int { return cmp.Or(cmp.Compare(a.when, b.when), cmp.Compare(a.seq, b.seq)) })
	out := make([]timerEntry[K], len(all))
	for i, n := range all {
		out[i] = n.timerEntry
	}
	return out
}

// currentKeyTimers returns the due times of the pending timers of key k,
// the backend's current key: on the Pebble backend from the key's entries
// in the index by key, so that a test's per-key comparison does not read
// every timer.
func currentKeyTimers[K comparable](s timerStore[K], k K) []int64 {
	var whens []int64
	t, ok := s.(*diskTimers[K])
	if !ok {
		for _, e := range pendingTimers(s) {
			if e.key == k {
				whens = append(whens, e.when)
			}
		}
		return whens
	}
	prefix := t.d.dbKey(t.byKey, nil)
	t.d.scan(prefix, func(key, _ []byte) bool {
		suffix := key[len(prefix):]
		if len(suffix) != 8 {
			t.d.fail("reading timers", fmt.Errorf("a timer's due time is %d bytes, not 8", len(suffix)))
		}
		whens = append(whens, int64(binary.BigEndian.Uint64(suffix)^1<<63))
		return true
	})
	return whens
}

// heapGrowth returns how much the Go heap in use grows, after garbage
// collection, while fill runs, and what fill returns kept alive.
func heapGrowth(fill func() any) (int64, any) {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	kept := fill()
	runtime.GC()
	runtime.ReadMemStats(&after)
	return int64(after.HeapAlloc) - int64(before.HeapAlloc), kept
}

// TestDiskTimersOutsideTheHeap registers many timers on both backends and
// checks that the Pebble backend's are not in the Go heap: its heap grows
// by less than half the heap backend's. (Pebble's own memory, memtables
// and block cache, counts: runs saw the Pebble backend grow by 0.07 to
// 10 MB, depending on when memtables rotate, against the heap backend's
// 35 MB.) Then
// every timer fires, once, in order. Under -race (Pebble's writes take
// over 100 times as long) and -short it registers a tenth as many and
// checks only the firing: the heap's growth is measured without them.
func TestDiskTimersOutsideTheHeap(t *testing.T) {
	n := 200_000
	measure := !raceEnabled && !testing.Short()
	if !measure {
		n /= 10
	}
	growth := map[BackendKind]int64{}
	for _, kind := range backendKinds {
		b := newBackend(t, kind, Int64Codec{}, 128, KeyGroupRange{0, 128})
		grown, _ := heapGrowth(func() any {
			for i := range int64(n) {
				b.SetCurrentKey(i)
				b.RegisterTimer(time.Unix(0, i%5000))
				b.RegisterEventTimer(time.Unix(0, i))
			}
			return b
		})
		growth[kind] = grown
		got := b.PopEventTimers(int64(n), b.PopDueTimers(time.Unix(0, int64(n)), nil))
		if len(got) != 2*n {
			t.Fatalf("%v: popped %d timers, want %d", kind, len(got), 2*n)
		}
		for i, tm := range got[n:] {
			if tm.Key != int64(i) || tm.When.UnixNano() != int64(i) {
				t.Fatalf("%v: event-time timer %d is %d at %d", kind, i, tm.Key, tm.When.UnixNano())
			}
		}
	}
	t.Logf("%d timers of each kind: the Go heap grew by %d bytes on the heap backend, %d on Pebble", n, growth[HeapBackend], growth[PebbleBackend])
	if !measure {
		t.Log("under -race or -short: the heap's growth is not compared")
		return
	}
	if growth[PebbleBackend] >= growth[HeapBackend]/2 {
		t.Errorf("the Pebble backend's heap grew by %d bytes, want < %d (half the heap backend's)", growth[PebbleBackend], growth[HeapBackend]/2)
	}
}

// TestDiskTimersIncrementalRestore restores an incremental checkpoint of
// timers due at the same time, registered across key groups: adopted by
// one Pebble subtask they fire in registration order, and a timer
// registered after the restore fires after them (the registration counter
// is in the checkpoint); restored by two subtasks, or into the heap
// backend, each subtask has exactly the timers of its key groups, in
// registration order within each key group.
func TestDiskTimersIncrementalRestore(t *testing.T) {
	const maxP, n = 16, 300
	src := subtaskFixture(t, PebbleBackend, 0, 1, maxP)
	var registered []string // in order
	for i := range n {
		k := fmt.Sprint("key-", (i*7919)%n)
		src.b.SetCurrentKey(k)
		src.b.RegisterEventTimer(epoch)
		src.b.RegisterTimer(epoch.Add(time.Duration(i%3) * time.Second))
		registered = append(registered, k)
	}
	src.b.SetCurrentKey(registered[0])
	src.b.DeleteEventTimer(epoch)
	registered = registered[1:]
	files := newMemShared()
	snap := incrementalNow(t, src, 1, files)
	keysOf := func(ts []Timer[string]) []string {
		var ks []string
		for _, tm := range ts {
			ks = append(ks, tm.Key)
		}
		return ks
	}

	adopted := restoreSnapshots(t, PebbleBackend, []checkpoint.SubtaskSnapshot{snap}, files, 1, maxP)[0]
	adopted.b.SetCurrentKey(registered[0] + "-later")
	adopted.b.RegisterEventTimer(epoch)
	got := keysOf(adopted.b.PopEventTimers(epoch.UnixNano(), nil))
	if want := append(slices.Clone(registered), registered[0]+"-later"); !slices.Equal(got, want) {
		t.Fatalf("adopted: event-time timers fired in order %v, want %v", got, want)
	}
	if got := adopted.b.PopDueTimers(epoch.Add(time.Minute), nil); len(got) != n {
		t.Fatalf("adopted: %d processing-time timers, want %d", len(got), n)
	}

	for _, c := range []struct {
		kind BackendKind
		p    int
	}{{PebbleBackend, 2}, {HeapBackend, 1}, {HeapBackend, 3}} {
		fs := restoreSnapshots(t, c.kind, []checkpoint.SubtaskSnapshot{snap}, files, c.p, maxP)
		for i, f := range fs {
			got := keysOf(f.b.PopEventTimers(epoch.UnixNano(), nil))
			byGroup := func(ks []string) map[int][]string {
				m := map[int][]string{}
				for _, k := range ks {
					if kg := f.b.KeyGroupOf(k); f.b.KeyGroupRange().Contains(kg) {
						m[kg] = append(m[kg], k)
					}
				}
				return m
			}
			mine := byGroup(registered)
			if gotByGroup := byGroup(got); len(got) != len(slices.Concat(slices.Collect(maps.Values(mine))...)) ||
				!maps.EqualFunc(gotByGroup, mine, slices.Equal) {
				t.Fatalf("%v, subtask %d of %d: event-time timers %v, want by key group %v", c.kind, i, c.p, got, mine)
			}
		}
	}
}

// TestRestoreIncrementalWithTimerBlobs restores an incremental checkpoint
// in the format written before the Pebble backend kept its timers in its
// database: a database without timers, which does not list them among its
// states, and the timers as key-group blobs. Both backends restore it; the
// Pebble backend copies the timers into its database, so that its next
// checkpoint holds them there, with no blob.
func TestRestoreIncrementalWithTimerBlobs(t *testing.T) {
	const maxP, n = 16, 200
	src := subtaskFixture(t, PebbleBackend, 0, 1, maxP)
	timers := subtaskFixture(t, HeapBackend, 0, 1, maxP)
	want := map[string]keyState{}
	for i := range n {
		k := fmt.Sprint("key-", i)
		src.b.SetCurrentKey(k)
		src.count.Update(int64(i))
		timers.b.SetCurrentKey(k)
		timers.b.RegisterTimer(epoch.Add(time.Duration(i%7) * time.Second))
		timers.b.RegisterTimer(epoch.Add(time.Hour))
		timers.b.RegisterEventTimer(epoch.Add(time.Duration(i) * time.Second))
		want[k] = keyState{Count: int64(i), HasCount: true, Seen: map[string]int{}, Timers: timers.dump(k).Timers}
	}
	files := newMemShared()
	old := incrementalNow(t, src, 1, files)
	db := &old.DBs[0]
	db.States = slices.DeleteFunc(slices.Clone(db.States), func(st checkpoint.DBState) bool { return stateKind(st.Kind).base() >= kindTimers })
	old.KeyGroups = snapshotNow(t, timers.b)
	check := func(f *fixture, what string) {
		t.Helper()
		for k, w := range want {
			if got := f.dump(k); !got.equal(w) {
				t.Fatalf("%s: %s = %v, want %v", what, k, got, w)
			}
		}
		events := f.b.PopEventTimers(epoch.Add(time.Minute).UnixNano(), nil)
		if len(events) != 61 || events[0].Key != "key-0" || events[60].Key != "key-60" {
			t.Fatalf("%s: event-time timers due in the first minute: %v", what, events)
		}
	}
	for _, kind := range backendKinds {
		check(restoreSnapshots(t, kind, []checkpoint.SubtaskSnapshot{old}, files, 1, maxP)[0], kind.String())
	}
	converted := restoreSnapshots(t, PebbleBackend, []checkpoint.SubtaskSnapshot{old}, files, 1, maxP)[0]
	next := incrementalNow(t, converted, 2, files)
	if len(next.KeyGroups) != 0 {
		t.Fatalf("the checkpoint after the restore has %d key-group blobs, want none", len(next.KeyGroups))
	}
	check(restoreSnapshots(t, PebbleBackend, []checkpoint.SubtaskSnapshot{next}, files, 1, maxP)[0], "converted")
}
