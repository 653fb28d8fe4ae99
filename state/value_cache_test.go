package state

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"strings"
	"testing"
)

// TestValueCacheWriteBack: with a write-back cache far smaller than the
// keys (a budget of 1 byte empties it at every miss, 300 bytes hold a few
// entries, 8 KiB most of the keys), a value state on the Pebble backend
// reads back every value and clear it was given, across the cache's
// write-backs, and its snapshot restores into the heap backend to the
// same values.
func TestValueCacheWriteBack(t *testing.T) {
	for _, limit := range []int64{1, 300, 8 << 10} {
		t.Run(fmt.Sprint(limit), func(t *testing.T) {
			f := newFixture(t, PebbleBackend, 8, KeyGroupRange{0, 8})
			f.b.disk.values.limit = limit
			rng := rand.New(rand.NewPCG(1, uint64(limit)))
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

// TestValueCacheBoundedInBytes: the value caches of a subtask stay within
// their share of the memory budget whatever the size of the values, and
// small values fill it: with 64 KiB values a budget of 1 MiB holds at most
// 16 of them at a time (plus the one a miss adds), with 8-byte values it
// holds thousands, and the cost the caches count is the sum of their
// entries'. Two value states share the budget.
func TestValueCacheBoundedInBytes(t *testing.T) {
	const limit = 1 << 20
	for _, c := range []struct{ size, keys int }{{8, 5000}, {64 << 10, 100}} {
		size := c.size
		t.Run(fmt.Sprint(size), func(t *testing.T) {
			b := newBackend(t, PebbleBackend, StringCodec{}, 8, KeyGroupRange{0, 8})
			b.disk.values.limit = limit
			x := must(NewValueState[string, string](b.Scope(), "x", StringCodec{}))
			y := must(NewValueState[string, string](b.Scope(), "y", StringCodec{}))
			caches := []*diskValues[string, string]{x.store.(*diskValues[string, string]), y.store.(*diskValues[string, string])}
			value := strings.Repeat("v", size)
			most := 0
			for i := range 4 * c.keys {
				b.SetCurrentKey(fmt.Sprint("k", i/2%c.keys))
				if i%2 == 0 {
					x.Update(value)
				} else if v, _ := y.Value(); v == "" {
					y.Update(value)
				}
				used, entries := b.disk.values.used, 0
				for _, c := range caches {
					entries += len(c.cache)
				}
				if i%97 == 0 {
					checkCacheCosts(t, caches, used)
				}
				// One entry beyond the limit at most: the one a miss added.
				if used > limit+2*int64(size)+256 {
					t.Fatalf("step %d: the caches hold %d bytes, above the budget of %d", i, used, limit)
				}
				most = max(most, entries)
			}
			perEntry := 2*size + 128 // the value, its encoding, the key and the entry
			if want := limit / perEntry; most < want {
				t.Errorf("the caches held at most %d entries of %d bytes, want at least %d", most, size, want)
			}
			if size > 1<<10 && most > limit/size+1 {
				t.Errorf("the caches held %d entries of %d bytes, more than a budget of %d allows", most, size, limit)
			}
		})
	}
}

// checkCacheCosts checks that each cache counts the cost of its entries,
// and that the budget counts used, their sum.
func checkCacheCosts(t *testing.T, caches []*diskValues[string, string], used int64) {
	t.Helper()
	var total int64
	for _, c := range caches {
		var sum int64
		for _, e := range c.cache {
			sum += e.cost
		}
		if sum != c.bytes {
			t.Fatalf("a cache counts %d bytes, its entries cost %d", c.bytes, sum)
		}
		total += sum
	}
	if total != used {
		t.Fatalf("the budget counts %d bytes, the caches hold %d", used, total)
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

// TestWriteBackHoldsNoCopyOfTheCache: with a shared Memory, writing back a
// cache of 32 MiB of values leaves no copy of them in the Go heap. In one
// batch it did: Pebble keeps a batch larger than half a memtable whole, as
// a memtable of its own, until it is flushed.
func TestWriteBackHoldsNoCopyOfTheCache(t *testing.T) {
	m := must(NewMemory(1 << 30))
	b, err := OpenKeyedBackend(BackendConfig{Kind: PebbleBackend, Dir: t.TempDir(), Memory: m}, "op", 0, StringCodec{}, 8, KeyGroupRange{0, 8})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	v := must(NewValueState[string, string](b.Scope(), "v", StringCodec{}))
	value := strings.Repeat("v", 4<<10)
	for i := range 8 << 10 { // 32 MiB
		b.SetCurrentKey(fmt.Sprint("k", i))
		v.Update(value)
	}
	heap := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	before := heap()
	b.dropValueCaches()
	after := heap()
	if after > before && after-before > 8<<20 {
		t.Errorf("the write-back of 32 MiB of values left %d MiB more in the Go heap", (after-before)>>20)
	}
}

// TestValueCacheHalvesWhenFull: a miss that finds the caches at their
// budget drops about half of what they hold, not all of it; the entries
// dropped that had changed are written back (every key reads back its
// value), those kept stay changed until the next write-back, and the
// costs stay counted.
func TestValueCacheHalvesWhenFull(t *testing.T) {
	const limit = 64 << 10
	b := newBackend(t, PebbleBackend, StringCodec{}, 8, KeyGroupRange{0, 8})
	b.disk.values.limit = limit
	v := must(NewValueState[string, string](b.Scope(), "v", StringCodec{}))
	cache := v.store.(*diskValues[string, string])
	value := strings.Repeat("v", 1<<10)
	i := 0
	for ; !b.disk.values.full(); i++ {
		b.SetCurrentKey(fmt.Sprint("k", i))
		v.Update(value)
	}
	full, fullEntries := cache.bytes, len(cache.cache)
	b.SetCurrentKey(fmt.Sprint("k", i)) // a miss
	v.Update(value)
	i++
	if cache.bytes > full/2+2<<10 || cache.bytes < full/2-2<<10 {
		t.Errorf("a miss at the budget left %d bytes in the cache, want about half of %d", cache.bytes, full)
	}
	if n := len(cache.cache); n <= 1 || n >= fullEntries {
		t.Errorf("a miss at the budget left %d of %d entries", n, fullEntries)
	}
	dirty := 0
	for _, e := range cache.cache {
		if e.dirty {
			dirty++
		}
	}
	if dirty != cache.dirty || dirty != len(cache.cache) {
		t.Errorf("%d entries kept are changed, the cache counts %d, it holds %d: want every one kept changed", dirty, cache.dirty, len(cache.cache))
	}
	checkCacheCosts(t, []*diskValues[string, string]{cache}, b.disk.values.used)
	b.disk.values.limit = 1 << 30 // no eviction while reading back
	for k := range i {
		b.SetCurrentKey(fmt.Sprint("k", k))
		if got, ok := v.Value(); !ok || got != value {
			t.Fatalf("key k%d after the eviction: %d bytes, %v; want %d bytes", k, len(got), ok, len(value))
		}
	}
}
