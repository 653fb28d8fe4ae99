package state

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// TestValueCacheWriteBack: with a write-back cache far smaller than the
// keys, a value state on the Pebble backend reads back every value and
// clear it was given, across the cache's write-backs, and its snapshot
// restores into the heap backend to the same values.
func TestValueCacheWriteBack(t *testing.T) {
	for _, capacity := range []int{1, 3, 64} {
		t.Run(fmt.Sprint(capacity), func(t *testing.T) {
			f := newFixture(t, PebbleBackend, 8, KeyGroupRange{0, 8})
			f.count.store.(*diskValues[string, int64]).capacity = capacity
			rng := rand.New(rand.NewPCG(1, uint64(capacity)))
			model := map[string]int64{}
			for i := range 2000 {
				k := fmt.Sprintf("k%d", rng.IntN(40))
				f.b.SetCurrentKey(k)
				switch rng.IntN(4) {
				case 0:
					f.count.Clear()
					delete(model, k)
				case 1, 2:
					f.count.Update(int64(i))
					model[k] = int64(i)
				}
				v, ok := f.count.Value()
				if want, wantOK := model[k]; v != want || ok != wantOK {
					t.Fatalf("step %d key %s: Value = %d, %v; want %d, %v", i, k, v, ok, want, wantOK)
				}
				if i%500 == 499 {
					checkRestoredValues(t, f, model)
				}
			}
		})
	}
}

// checkRestoredValues snapshots f and restores it into a heap backend,
// whose count state must hold model.
func checkRestoredValues(t *testing.T, f *fixture, model map[string]int64) {
	t.Helper()
	blobs, err := f.b.Snapshot()()
	if err != nil {
		t.Fatal(err)
	}
	g := newFixture(t, HeapBackend, 8, KeyGroupRange{0, 8})
	for kg, blob := range blobs {
		if err := g.b.Restore(kg, blob); err != nil {
			t.Fatal(err)
		}
	}
	if n := storedKeys(g.count.store); n != len(model) {
		t.Fatalf("restored %d keys, want %d", n, len(model))
	}
	for k, want := range model {
		g.b.SetCurrentKey(k)
		if v, ok := g.count.Value(); !ok || v != want {
			t.Fatalf("restored %s = %d, %v; want %d", k, v, ok, want)
		}
	}
}

// TestRestoreKeepsCachedValues: restoring a key group keeps the values of
// keys the blob does not hold, on the Pebble backend's cache as on the
// heap.
func TestRestoreKeepsCachedValues(t *testing.T) {
	forBackends(t, func(t *testing.T, kind BackendKind) {
		src := newFixture(t, kind, 8, KeyGroupRange{0, 8})
		src.b.SetCurrentKey("b")
		src.count.Update(7)
		blobs, err := src.b.Snapshot()()
		if err != nil {
			t.Fatal(err)
		}
		f := newFixture(t, kind, 8, KeyGroupRange{0, 8})
		f.b.SetCurrentKey("a")
		f.count.Update(42)
		for kg, blob := range blobs {
			if err := f.b.Restore(kg, blob); err != nil {
				t.Fatal(err)
			}
		}
		for k, want := range map[string]int64{"a": 42, "b": 7} {
			f.b.SetCurrentKey(k)
			if v, ok := f.count.Value(); !ok || v != want {
				t.Fatalf("key %s after the restore = %d, %v; want %d", k, v, ok, want)
			}
		}
	})
}
