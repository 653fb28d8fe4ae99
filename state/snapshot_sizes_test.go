package state

import (
	"fmt"
	"slices"
	"testing"
)

// keyGroupsOf returns the key groups of the keys key-i, i in keys.
func keyGroupsOf(b *KeyedBackend[string], keys []int) map[int]bool {
	kgs := map[int]bool{}
	for _, i := range keys {
		kgs[b.KeyGroupOf(fmt.Sprint("key-", i))] = true
	}
	return kgs
}

// TestSnapshotReusesSizes: a heap backend's snapshots allocate their
// buffers from the last one's sizes (snapshotSizes); what they encode is
// what a backend that never snapshotted encodes, whether the state grew,
// shrank or left key groups empty since.
func TestSnapshotReusesSizes(t *testing.T) {
	const maxP = 32
	f := newFixture(t, HeapBackend, maxP, KeyGroupRange{0, maxP})
	fill := func(f *fixture, keys []int) {
		for _, i := range keys {
			k := fmt.Sprint("key-", i)
			f.b.SetCurrentKey(k)
			f.count.Update(int64(i))
			f.seen.Put(k, i)
			f.events.Add(k)
		}
	}
	// check restores a snapshot of f and reads every key ever written:
	// those of keys hold what fill wrote, the others nothing. A Go map's
	// order makes the bytes of two snapshots of one state differ.
	check := func(what string, keys []int) {
		t.Helper()
		blobs := snapshotNow(t, f.b)
		r := restoreInto(t, HeapBackend, blobs, 1, maxP)[0]
		live := map[int]bool{}
		for _, i := range keys {
			live[i] = true
		}
		for i := range 2500 {
			k := fmt.Sprint("key-", i)
			r.b.SetCurrentKey(k)
			c, ok := r.count.Value()
			v, seen := r.seen.Get(k)
			ev := r.events.Get()
			switch {
			case live[i] && (!ok || c != int64(i) || !seen || v != i || !slices.Equal(ev, []string{k})):
				t.Fatalf("%s: restored %s = %d %v, seen %d %v, events %q; want %d, %d, [%s]", what, k, c, ok, v, seen, ev, i, i, k)
			case !live[i] && (ok || seen || len(ev) > 0):
				t.Fatalf("%s: restored %s holds state: %d %v, seen %d %v, events %q; want none", what, k, c, ok, v, seen, ev)
			}
		}
		if groups := len(blobs); groups != len(keyGroupsOf(f.b, keys)) {
			t.Fatalf("%s: %d blobs, want one per key group with state (%d)", what, groups, len(keyGroupsOf(f.b, keys)))
		}
	}
	var keys []int
	for i := range 500 {
		keys = append(keys, i)
	}
	fill(f, keys)
	check("first snapshot", keys)
	check("same state again", keys)
	for i := range 2000 {
		keys = append(keys, 500+i)
	}
	fill(f, keys[500:])
	check("state grown fourfold", keys)
	for _, i := range keys[1:] {
		f.b.SetCurrentKey(fmt.Sprint("key-", i))
		f.count.Clear()
		f.seen.Clear()
		f.events.Clear()
	}
	check("state down to one key", keys[:1])
}
