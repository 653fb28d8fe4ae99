package state

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/exactlyonce/exactly/checkpoint"
	"github.com/exactlyonce/exactly/internal/format"
)

// withHeapChains makes heap chains of states of any size for the test.
func withHeapChains(t *testing.T) {
	t.Helper()
	old := chainInlineBelow
	chainInlineBelow = 0
	t.Cleanup(func() { chainInlineBelow = old })
}

// chainFixture is a heap backend whose states can be written as changes:
// a value and a map state without a TTL.
type chainFixture struct {
	b     *KeyedBackend[string]
	count *ValueState[string, int64]
	seen  *MapState[string, string, int]
}

func newChainFixture(t testing.TB, kind BackendKind, owned KeyGroupRange) *chainFixture {
	b := newBackend(t, kind, StringCodec{}, chainMaxP, owned)
	return &chainFixture{b: b,
		count: must(NewValueState[string, int64](b.Scope(), "count", Int64Codec{})),
		seen:  must(NewMapState[string, string, int](b.Scope(), "seen", StringCodec{}, IntCodec{}))}
}

// newChangedChainFixture returns a heap chain fixture of every key group
// after 600 random changes from seed, its model, and the random source.
func newChangedChainFixture(t *testing.T, seed uint64) (*chainFixture, chainModel, *rand.Rand) {
	f := newChainFixture(t, HeapBackend, KeyGroupRange{0, chainMaxP})
	m := chainModel{}
	rnd := rand.New(rand.NewPCG(seed, seed))
	for range 600 {
		chainOp(rnd, f, m)
	}
	return f, m, rnd
}

const chainMaxP, chainKeys = 16, 200

// chainModel is what each key holds: its count, if any, and its map.
type chainModel map[string]chainEntry

type chainEntry struct {
	count    int64
	hasCount bool
	seen     map[string]int
}

func (m chainModel) clone() chainModel {
	c := make(chainModel, len(m))
	for k, e := range m {
		e.seen = maps.Clone(e.seen)
		c[k] = e
	}
	return c
}

// check compares every key the fixture's key groups hold with m.
func (f *chainFixture) check(t *testing.T, what string, m chainModel) {
	t.Helper()
	for i := range chainKeys {
		k := fmt.Sprint("k", i)
		want := m[k]
		if !f.b.owned.Contains(f.b.KeyGroupOf(k)) {
			want = chainEntry{}
		}
		f.b.SetCurrentKey(k)
		count, ok := f.count.Value()
		seen := maps.Collect(f.seen.All())
		if count != want.count || ok != want.hasCount || !maps.Equal(seen, want.seen) {
			t.Fatalf("%s: %s holds count %d (%v) and %v, the model %d (%v) and %v", what, k, count, ok, seen, want.count, want.hasCount, want.seen)
		}
	}
}

// TestHeapChainAgainstModel changes a heap backend at random and takes
// checkpoints as heap chains, some of which never complete (their files
// are deleted, as a failed checkpoint's are) and some of which complete
// after the next one was taken. Every completed checkpoint is restored
// into a fresh backend of either kind, whole or split in two, and must
// hold the model's state as of its capture; the chains must write less
// than full snapshots would.
func TestHeapChainAgainstModel(t *testing.T) {
	withHeapChains(t)
	for _, seed := range []uint64{1, 2, 3, 7, 20261205} {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			rnd := rand.New(rand.NewPCG(seed, 0))
			files := newMemShared()
			f := newChainFixture(t, HeapBackend, KeyGroupRange{0, chainMaxP})
			m := chainModel{}
			type taken struct {
				id     checkpoint.ID
				model  chainModel
				finish func() (checkpoint.SubtaskSnapshot, error)
			}
			var open []taken
			longest, restores := 0, 0
			for id := checkpoint.ID(1); id <= 200; id++ {
				ops := rnd.IntN(40)
				if rnd.IntN(15) == 0 { // a burst: most keys change
					ops = 600
				}
				for range ops {
					chainOp(rnd, f, m)
				}
				finish, err := f.b.SnapshotFor(id, checkpoint.KindCheckpoint, files)
				if err != nil {
					t.Fatal(err)
				}
				open = append(open, taken{id: id, model: m.clone(), finish: finish})
				if rnd.IntN(3) == 0 && len(open) < 3 {
					continue // the next checkpoint is taken before this one ends
				}
				for _, c := range open {
					snap, err := c.finish()
					if err != nil {
						t.Fatal(err)
					}
					if rnd.IntN(6) == 0 { // the checkpoint fails: its files go
						files.deleteOf(c.id)
						continue
					}
					if err := f.b.CheckpointComplete(c.id); err != nil {
						t.Fatal(err)
					}
					switch {
					case len(snap.DBs) == 1 && len(snap.KeyGroups) == 0:
						longest = max(longest, len(snap.DBs[0].Files))
					case len(snap.DBs) == 0: // full and inline
					default:
						t.Fatalf("checkpoint %d: %d databases and %d key groups, want one heap chain or key groups inline", c.id, len(snap.DBs), len(snap.KeyGroups))
					}
					if rnd.IntN(4) == 0 {
						restores++
						restoreChainInto(t, fmt.Sprintf("checkpoint %d", c.id), snap, files, c.model, rnd)
					}
				}
				open = open[:0]
			}
			if longest < 3 {
				t.Errorf("the longest chain had %d files: the checkpoints were not incremental", longest)
			}
			t.Logf("%d restores checked, longest chain %d files, %d bytes written", restores, longest, files.bytesWritten())
		})
	}
}

// restoreChainInto restores snap whole into a backend of a random kind,
// and split into two subtasks one time in three, and checks them against
// want.
func restoreChainInto(t *testing.T, what string, snap checkpoint.SubtaskSnapshot, files *memShared, want chainModel, rnd *rand.Rand) {
	t.Helper()
	kind := backendKinds[rnd.IntN(len(backendKinds))]
	ranges := []KeyGroupRange{{0, chainMaxP}}
	if rnd.IntN(3) == 0 {
		ranges = []KeyGroupRange{RangeForSubtask(0, 2, chainMaxP), RangeForSubtask(1, 2, chainMaxP)}
	}
	for _, owned := range ranges {
		g := newChainFixture(t, kind, owned)
		if err := g.b.RestoreDBs(snap.DBs, files); err != nil {
			t.Fatalf("%s: restoring into %v %v: %v", what, kind, owned, err)
		}
		for kg, blob := range snap.KeyGroups {
			if !owned.Contains(kg) {
				continue
			}
			if err := g.b.Restore(kg, blob); err != nil {
				t.Fatalf("%s: restoring key group %d into %v %v: %v", what, kg, kind, owned, err)
			}
		}
		g.check(t, fmt.Sprintf("%s restored into %v %v", what, kind, owned), want)
	}
}

// chainOp makes one random change to f and m.
func chainOp(rnd *rand.Rand, f *chainFixture, m chainModel) {
	k := fmt.Sprint("k", rnd.IntN(chainKeys))
	f.b.SetCurrentKey(k)
	e := m[k]
	switch op := rnd.IntN(10); {
	case op < 4:
		v := rnd.Int64N(1000)
		f.count.Update(v)
		e.count, e.hasCount = v, true
	case op < 5:
		f.count.Clear()
		e.count, e.hasCount = 0, false
	case op < 8:
		uk, v := fmt.Sprint("u", rnd.IntN(4)), rnd.IntN(100)
		f.seen.Put(uk, v)
		e.seen = maps.Clone(e.seen)
		if e.seen == nil {
			e.seen = map[string]int{}
		}
		e.seen[uk] = v
	case op < 9:
		uk := fmt.Sprint("u", rnd.IntN(4))
		f.seen.Remove(uk)
		e.seen = maps.Clone(e.seen)
		delete(e.seen, uk)
	default:
		f.seen.Clear()
		e.seen = nil
	}
	if len(e.seen) == 0 {
		e.seen = nil
	}
	m[k] = e
}

// deleteOf deletes the files written for checkpoint id.
func (m *memShared) deleteOf(id checkpoint.ID) {
	m.mu.Lock()
	defer m.mu.Unlock()
	prefix := format.SharedName(id, "")
	for name := range m.files {
		if strings.HasPrefix(name, prefix) {
			delete(m.files, name)
		}
	}
}

// TestHeapChainFallsBackToFullSnapshots checks the cases a chain restarts
// with a full snapshot or is not taken at all.
func TestHeapChainFallsBackToFullSnapshots(t *testing.T) {
	withHeapChains(t)
	files := newMemShared()
	f := newChainFixture(t, HeapBackend, KeyGroupRange{0, chainMaxP})
	m := chainModel{}
	rnd := rand.New(rand.NewPCG(9, 9))
	take := func(id checkpoint.ID) checkpoint.SubtaskSnapshot {
		t.Helper()
		snap := incrementalNow(t, &fixture{b: f.b}, id, files)
		if err := f.b.CheckpointComplete(id); err != nil {
			t.Fatal(err)
		}
		return snap
	}
	for range 600 {
		chainOp(rnd, f, m)
	}
	// The first checkpoint knows no changes yet: a full snapshot starts a
	// chain.
	if snap := take(1); len(snap.DBs) != 1 || len(snap.DBs[0].Files) != 1 {
		t.Fatalf("the first checkpoint: %v; want a chain of a full snapshot", snap.DBs)
	}
	// The second found few changes: it extends the chain.
	chainOp(rnd, f, m)
	if n := len(take(2).DBs[0].Files); n != 2 {
		t.Fatalf("the second checkpoint has %d files, want 2", n)
	}
	f.b.SetCurrentKey("k1")
	f.count.Update(5)
	m["k1"] = chainEntry{count: 5, hasCount: true, seen: m["k1"].seen}
	if n := len(take(3).DBs[0].Files); n != 3 {
		t.Fatalf("a checkpoint after one change has %d files, want 3", n)
	}
	if n := len(take(4).DBs[0].Files); n != 3 {
		t.Fatalf("a checkpoint without changes has %d files, want the 3 before it", n)
	}
	// Most keys changed: full, in a file of its own that starts no chain,
	// and the next, with few changes, starts a chain again.
	for i := range chainKeys {
		k := fmt.Sprint("k", i)
		f.b.SetCurrentKey(k)
		f.count.Update(int64(i))
		m[k] = chainEntry{count: int64(i), hasCount: true, seen: m[k].seen}
	}
	// It stops recording changes for one checkpoint, full, and starts
	// again at it.
	const quiet = 1
	for id := checkpoint.ID(5); id <= 5+quiet; id++ {
		chainOp(rnd, f, m)
		snap := take(id)
		if len(snap.DBs) != 1 || len(snap.DBs[0].Files) != 1 || len(snap.KeyGroups) != 0 {
			t.Fatalf("checkpoint %d, after every key changed: %d databases, %d key groups; want a full snapshot in one file", id, len(snap.DBs), len(snap.KeyGroups))
		}
		restoreChainInto(t, fmt.Sprint("checkpoint ", id, ", after every key changed"), snap, files, m, rnd)
		if recording := f.b.tables["count"].(*heapValues[string, int64]).written != nil; recording != (id == 5+quiet) {
			t.Fatalf("checkpoint %d, after every key changed: recording changes %v", id, recording)
		}
	}
	chainOp(rnd, f, m)
	if n := len(take(6 + quiet).DBs[0].Files); n != 1 {
		t.Fatalf("then few changes: %d files, want a full snapshot", n)
	}
	// A timer makes the next snapshots full, timers included.
	f.b.SetCurrentKey("k1")
	f.b.RegisterTimer(epoch.Add(time.Minute))
	snap := take(7 + quiet)
	if n := len(snap.DBs[0].Files); n != 1 {
		t.Fatalf("with a timer: %d files, want a full snapshot", n)
	}
	g := newChainFixture(t, HeapBackend, KeyGroupRange{0, chainMaxP})
	if err := g.b.RestoreDBs(snap.DBs, files); err != nil {
		t.Fatal(err)
	}
	g.check(t, "with a timer", m)
	if timers := g.b.PopDueTimers(epoch.Add(time.Hour), nil); len(timers) != 1 || timers[0].Key != "k1" {
		t.Fatalf("restored timers %v, want k1's", timers)
	}
	f.b.SetCurrentKey("k1")
	f.b.DeleteTimer(epoch.Add(time.Minute))
	if n := len(take(8 + quiet).DBs[0].Files); n != 1 {
		t.Fatalf("after the timer went: %d files, want a full snapshot", n)
	}
	f.b.SetCurrentKey("k2")
	f.count.Update(7)
	if n := len(take(9 + quiet).DBs[0].Files); n != 2 {
		t.Fatalf("then a change: %d files, want 2", n)
	}
	// Savepoints stay full and inline.
	encode, err := f.b.SnapshotFor(10+quiet, checkpoint.KindSavepoint, files)
	if err != nil {
		t.Fatal(err)
	}
	if sp, err := encode(); err != nil || len(sp.DBs) != 0 || len(sp.KeyGroups) == 0 {
		t.Fatalf("a savepoint: %d databases, %d key groups, %v; want inline key groups", len(sp.DBs), len(sp.KeyGroups), err)
	}
	// A full snapshot under chainInlineBelow stays inline and starts no
	// chain: the next checkpoint is full too.
	chainInlineBelow = 1 << 20
	small := newChainFixture(t, HeapBackend, KeyGroupRange{0, chainMaxP})
	for id := checkpoint.ID(1); id <= 3; id++ {
		if id == 3 {
			chainInlineBelow = 0
		}
		small.b.SetCurrentKey(fmt.Sprint("k", id))
		small.count.Update(int64(id))
		snap := incrementalNow(t, &fixture{b: small.b}, id, files)
		if err := small.b.CheckpointComplete(id); err != nil {
			t.Fatal(err)
		}
		switch {
		case id < 3 && (len(snap.DBs) != 0 || len(snap.KeyGroups) == 0):
			t.Fatalf("checkpoint %d of a small state: %d databases, %d key groups; want inline key groups", id, len(snap.DBs), len(snap.KeyGroups))
		case id == 3 && (len(snap.DBs) != 1 || len(snap.DBs[0].Files) != 1):
			t.Fatalf("after inline snapshots: %v, want a chain of a full snapshot", snap.DBs)
		}
	}
	// A list state cannot be written as changes: full inline snapshots.
	l := newChainFixture(t, HeapBackend, KeyGroupRange{0, chainMaxP})
	must(NewListState[string, string](l.b.Scope(), "events", StringCodec{}))
	if snap := incrementalNow(t, &fixture{b: l.b}, 1, files); len(snap.DBs) != 0 {
		t.Fatalf("with a list state: %d databases, want a full inline snapshot", len(snap.DBs))
	}
}

// TestHeapChainRestoredExtends checks that a backend restored from a whole
// chain extends it, and one restored from another storage or from a part
// starts a new one.
func TestHeapChainRestoredExtends(t *testing.T) {
	withHeapChains(t)
	files := newMemShared()
	f, m, rnd := newChangedChainFixture(t, 5)
	var snap checkpoint.SubtaskSnapshot
	for id := checkpoint.ID(1); id <= 2; id++ { // the first starts a chain, the second extends it
		chainOp(rnd, f, m)
		snap = incrementalNow(t, &fixture{b: f.b}, id, files)
		if err := f.b.CheckpointComplete(id); err != nil {
			t.Fatal(err)
		}
	}
	if len(snap.DBs) != 1 {
		t.Fatalf("the second checkpoint has no chain: %d key groups inline", len(snap.KeyGroups))
	}
	for _, tc := range []struct {
		name      string
		owned     KeyGroupRange
		foreign   bool
		wantFiles int
	}{
		{"whole", KeyGroupRange{0, chainMaxP}, false, 3},
		// A new chain: its first checkpoint is a full snapshot.
		{"from another storage", KeyGroupRange{0, chainMaxP}, true, 1},
		{"a part", RangeForSubtask(0, 2, chainMaxP), false, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			files.foreign = tc.foreign
			defer func() { files.foreign = false }()
			g := newChainFixture(t, HeapBackend, tc.owned)
			if err := g.b.RestoreDBs(snap.DBs, files); err != nil {
				t.Fatal(err)
			}
			g.b.SetCurrentKey("k3")
			g.count.Update(33)
			next := incrementalNow(t, &fixture{b: g.b}, 3, files)
			n := 0
			if len(next.DBs) > 0 {
				n = len(next.DBs[0].Files)
			}
			if n != tc.wantFiles {
				t.Fatalf("the next checkpoint has %d files, want %d", n, tc.wantFiles)
			}
		})
	}
}

// TestHeapChainFileCorrupt checks that a damaged chain file is an error
// wrapping ErrCorrupt, never a panic or a partial state.
func TestHeapChainFileCorrupt(t *testing.T) {
	blob := must(encodeSectionsOf(t))
	file, size := chainFile(map[int][]byte{3: blob})
	data := must(io.ReadAll(file))
	if int64(len(data)) != size {
		t.Fatalf("the file reads %d bytes, its size is %d", len(data), size)
	}
	if got, err := decodeChainFile(data); err != nil || len(got) != 1 {
		t.Fatalf("decoding a good file: %v, %v", got, err)
	}
	for n := range len(data) {
		if _, err := decodeChainFile(data[:n]); err == nil {
			t.Fatalf("a file cut to %d of %d bytes decoded", n, len(data))
		} else if !strings.Contains(err.Error(), "corrupt") {
			t.Fatalf("cut to %d bytes: %v does not say corrupt", n, err)
		}
	}
	// A blob cut anywhere merges into an error or, cut at a section's
	// end, a shorter blob: never a panic.
	for n := 1; n < len(blob); n++ {
		_, _ = mergeChainBlobs([][]byte{blob[:n]})
	}
}

// encodeSectionsOf returns the blob of a key group holding a value and a
// map entry.
func encodeSectionsOf(t *testing.T) ([]byte, error) {
	f := newChainFixture(t, HeapBackend, KeyGroupRange{0, chainMaxP})
	f.b.SetCurrentKey("k1")
	f.count.Update(1)
	f.seen.Put("u", 2)
	blobs, err := f.b.Snapshot()()
	if err != nil {
		return nil, err
	}
	return blobs[f.b.KeyGroupOf("k1")], nil
}

// TestHeapChainDroppedWhenBusy checks that a backend that stops recording
// changes never extends the chain from before: with every checkpoint
// since failed, the first one after it records again is full.
func TestHeapChainDroppedWhenBusy(t *testing.T) {
	withHeapChains(t)
	files := newMemShared()
	f, m, rnd := newChangedChainFixture(t, 3)
	id := checkpoint.ID(0)
	take := func() checkpoint.SubtaskSnapshot {
		t.Helper()
		id++
		return incrementalNow(t, &fixture{b: f.b}, id, files)
	}
	for range 2 { // the second starts a chain
		chainOp(rnd, f, m)
		take()
		if err := f.b.CheckpointComplete(id); err != nil {
			t.Fatal(err)
		}
	}
	// Every key changes, then the checkpoints fail until the backend
	// records changes again, and one more.
	for i := range chainKeys {
		f.b.SetCurrentKey(fmt.Sprint("k", i))
		f.count.Update(-1)
		e := m[fmt.Sprint("k", i)]
		e.count, e.hasCount = -1, true
		m[fmt.Sprint("k", i)] = e
	}
	for range quietCheckpoints + 1 {
		take()
	}
	chainOp(rnd, f, m)
	snap := take()
	if len(snap.DBs) != 1 || len(snap.DBs[0].Files) != 1 {
		t.Fatalf("the first checkpoint after the busy ones: %v, want a new chain of a full snapshot", snap.DBs)
	}
	restoreChainInto(t, "after the busy checkpoints", snap, files, m, rnd)
}

// TestHeapChainGrowingState checks that a state growing by new keys, a
// few old ones rewritten, is not busy however fast it grows: from the
// second capture on its checkpoints extend a chain, whose change sets
// hold the keys added, and the chain restores to the state.
func TestHeapChainGrowingState(t *testing.T) {
	withHeapChains(t)
	files := newMemShared()
	f := newChainFixture(t, HeapBackend, KeyGroupRange{0, chainMaxP})
	m := chainModel{}
	added := 0
	write := func(k string, v int64) {
		f.b.SetCurrentKey(k)
		f.count.Update(v)
		e := m[k]
		e.count, e.hasCount = v, true
		m[k] = e
	}
	var snap checkpoint.SubtaskSnapshot
	for id := checkpoint.ID(1); id <= 6; id++ {
		for i := range 100 * int(id) { // the state doubles at the second capture
			write(fmt.Sprint("g", added), int64(id))
			added++
			if i%10 == 0 {
				write(fmt.Sprint("g", i/10), -int64(id)) // an old key rewritten
			}
		}
		snap = incrementalNow(t, &fixture{b: f.b}, id, files)
		if err := f.b.CheckpointComplete(id); err != nil {
			t.Fatal(err)
		}
		// The first capture knows no changes: it starts the chain with a
		// full snapshot (100 keys), the others extend it: their change
		// sets (220 to 660 keys) add up to less than twice the state (up to
		// 2,100 keys).
		if want := int(id); len(snap.DBs) != 1 || len(snap.DBs[0].Files) != want {
			t.Fatalf("checkpoint %d of a growing state: chains %v, want one of %d files", id, snap.DBs, want)
		}
	}
	restoreChainInto(t, "the grown state", snap, files, m, rand.New(rand.NewPCG(4, 4)))
}

// TestHeapChainBackoff checks that a backend whose keys all change every
// interval records changes less and less often, and one that calms down
// starts a chain at the first capture that knows few changes.
func TestHeapChainBackoff(t *testing.T) {
	withHeapChains(t)
	files := newMemShared()
	f := newChainFixture(t, HeapBackend, KeyGroupRange{0, chainMaxP})
	changeAll := func() {
		for i := range chainKeys {
			f.b.SetCurrentKey(fmt.Sprint("k", i))
			f.count.Update(int64(i))
		}
	}
	var recorded []checkpoint.ID // the captures that knew the changes
	id := checkpoint.ID(0)
	for range 60 {
		changeAll()
		id++
		if f.b.tables["count"].(*heapValues[string, int64]).written != nil {
			recorded = append(recorded, id)
		}
		// The first knows no changes and starts a chain; the others find
		// every key changed: full snapshots, in files that start no chain.
		if snap := incrementalNow(t, &fixture{b: f.b}, id, files); len(snap.DBs) != 1 || len(snap.DBs[0].Files) != 1 {
			t.Fatalf("checkpoint %d with every key changed: %v, want a full snapshot in one file", id, snap.DBs)
		}
		if err := f.b.CheckpointComplete(id); err != nil {
			t.Fatal(err)
		}
	}
	// Recording starts at the first capture: the second knows the changes,
	// finds them busy and stops for 1, then 2, 4, 8 and 15 captures.
	want := []checkpoint.ID{2, 4, 7, 12, 21, 37, 53}
	if !slices.Equal(recorded, want) {
		t.Fatalf("captures that knew the changes: %v, want %v", recorded, want)
	}
	// Calm: the capture after recording starts again starts a chain.
	for {
		id++
		recording := f.b.tables["count"].(*heapValues[string, int64]).written != nil
		snap := incrementalNow(t, &fixture{b: f.b}, id, files)
		if err := f.b.CheckpointComplete(id); err != nil {
			t.Fatal(err)
		}
		if recording {
			if len(snap.DBs) != 1 || len(snap.DBs[0].Files) != 1 {
				t.Fatalf("checkpoint %d, the first calm one that knew its changes: %v, want a full snapshot", id, snap.DBs)
			}
			// It started a chain: the next one extends it.
			f.b.SetCurrentKey("k1")
			f.count.Update(-1)
			id++
			if snap := incrementalNow(t, &fixture{b: f.b}, id, files); len(snap.DBs) != 1 || len(snap.DBs[0].Files) != 2 {
				t.Fatalf("checkpoint %d, after the first calm one: %v, want its chain extended", id, snap.DBs)
			}
			break
		}
	}
}

// TestMergeChainBlobsKeyRemovedThenWritten checks that a key a change set
// removes and a later one writes again is in the merged blob once, with
// its last value.
func TestMergeChainBlobsKeyRemovedThenWritten(t *testing.T) {
	section := func(kind byte, key string, value ...string) []byte {
		entries := format.AppendBytes(nil, []byte(key))
		for _, v := range value {
			entries = format.AppendBytes(entries, []byte(v))
		}
		return format.AppendSection(nil, "count", kind, 1, entries)
	}
	merged, err := mergeChainBlobs([][]byte{
		section(byte(kindValue), "k", "v0"),
		section(kindRemoved, "k"),
		section(byte(kindValue), "k", "v2"),
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := section(byte(kindValue), "k", "v2"); string(merged) != string(want) {
		t.Fatalf("merged blob %q, want %q: the key once, with its last value", merged, want)
	}
}

// TestChainFileReadsAndSeeks: the reader of a chain file reads the file
// that its parts make, from any offset it seeks to, in reads of any size.
func TestChainFileReadsAndSeeks(t *testing.T) {
	blobs := map[int][]byte{7: bytes.Repeat([]byte{7}, 300), 2: {2, 2}, 40: bytes.Repeat([]byte{40}, 5)}
	file, size := chainFile(blobs)
	data := must(io.ReadAll(file))
	want := []byte{heapChainFileVersion, 3, 2, 2, 2, 2, 7, 0xac, 2}
	want = append(append(want, blobs[7]...), 40, 5)
	want = append(want, blobs[40]...)
	if !bytes.Equal(data, want) || int64(len(data)) != size {
		t.Fatalf("the file is %x (size %d), want %x", data, size, want)
	}
	if got, err := decodeChainFile(data); err != nil || !maps.EqualFunc(got, blobs, bytes.Equal) {
		t.Fatalf("decoded %v, %v; want the blobs", got, err)
	}
	checkReadsFrom(t, file, size, data)
	if _, err := file.Seek(-1, io.SeekStart); err == nil {
		t.Fatal("a seek before the start succeeded")
	}
}

// checkReadsFrom checks that file, of size bytes, reads data from every
// offset it is sought to, and that it seeks from its end.
func checkReadsFrom(t *testing.T, file io.ReadSeeker, size int64, data []byte) {
	t.Helper()
	buf := make([]byte, 7)
	for off := range size + 2 {
		if at, err := file.Seek(off, io.SeekStart); err != nil || at != off {
			t.Fatalf("Seek(%d) = %d, %v", off, at, err)
		}
		var rest []byte
		for {
			n, err := file.Read(buf)
			rest = append(rest, buf[:n]...)
			if err == io.EOF {
				break
			}
			if err != nil || n == 0 {
				t.Fatalf("from %d: Read = %d, %v", off, n, err)
			}
		}
		if !bytes.Equal(rest, data[min(off, size):]) {
			t.Fatalf("from %d read %x, want %x", off, rest, data[min(off, size):])
		}
	}
	if at, err := file.Seek(-3, io.SeekEnd); err != nil || at != size-3 {
		t.Fatalf("Seek(-3, end) = %d, %v", at, err)
	}
}

// TestChainWriterSpills checks that a heap chain file goes to a temporary
// file once its blobs reach the writer's limit, removed from its directory
// at once, and that the file reads as the one built in memory would, from
// every offset.
func TestChainWriterSpills(t *testing.T) {
	blobs := map[int][]byte{2: {2, 2}, 7: bytes.Repeat([]byte{7}, 300), 40: bytes.Repeat([]byte{40}, 5)}
	file, _ := chainFile(blobs)
	want := must(io.ReadAll(file))
	for _, limit := range []int{0, 2, 303, 308, 1 << 20} {
		dir := t.TempDir()
		w := &chainWriter{dir: dir, limit: limit}
		for _, kg := range slices.Sorted(maps.Keys(blobs)) {
			if err := w.put(kg, blobs[kg]); err != nil {
				t.Fatal(err)
			}
		}
		if spill := limit <= 307; w.spilled() != spill {
			t.Fatalf("limit %d: spilled %v, want %v (307 bytes of blobs)", limit, w.spilled(), spill)
		}
		if left := must(os.ReadDir(dir)); len(left) != 0 {
			t.Fatalf("limit %d: the directory holds %v", limit, left)
		}
		if !w.spilled() && !maps.EqualFunc(w.inMemory(), blobs, bytes.Equal) {
			t.Fatalf("limit %d: in memory %v, want the blobs", limit, w.inMemory())
		}
		r, size, err := w.file()
		if err != nil {
			t.Fatal(err)
		}
		if data := must(io.ReadAll(r)); !bytes.Equal(data, want) || size != int64(len(want)) {
			t.Fatalf("limit %d: the file is %x (size %d), want %x", limit, data, size, want)
		}
		checkReadsFrom(t, r, size, want)
		if err := w.close(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestEncodeInBatches checks that a heap backend's full snapshot encoded a
// batch of key groups at a time, whatever the batches' size, gives every
// key group its blob, in key-group order, of the size it has when encoded
// at once, and restores the state.
func TestEncodeInBatches(t *testing.T) {
	f, m, _ := newChangedChainFixture(t, 5)
	f.b.SetCurrentKey("k1")
	f.b.RegisterTimer(epoch.Add(time.Minute))
	sections := f.b.captureSections(func(table[string]) bool { return true })
	whole := must(encodeSections(sections, nil, f.b.keyCodec, chainMaxP, f.b.owned))
	old := snapshotBatchBytes
	t.Cleanup(func() { snapshotBatchBytes = old })
	for _, target := range []int64{0, 1, 2000, 1 << 30} {
		snapshotBatchBytes = target
		got := map[int][]byte{}
		last := -1
		err := encodeInBatches(sections, f.b.keyCodec, chainMaxP, f.b.owned, func(kg int, blob []byte) error {
			if kg <= last {
				t.Fatalf("batches of %d bytes: key group %d after %d", target, kg, last)
			}
			last, got[kg] = kg, blob
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if !maps.EqualFunc(got, whole, func(a, b []byte) bool { return len(a) == len(b) }) {
			t.Fatalf("batches of %d bytes: key groups %v, want %v of the same sizes", target, slices.Sorted(maps.Keys(got)), slices.Sorted(maps.Keys(whole)))
		}
		g := newChainFixture(t, HeapBackend, KeyGroupRange{0, chainMaxP})
		for kg, blob := range got {
			if err := g.b.Restore(kg, blob); err != nil {
				t.Fatal(err)
			}
		}
		g.check(t, fmt.Sprintf("batches of %d bytes", target), m)
		if timers := g.b.PopDueTimers(epoch.Add(time.Hour), nil); len(timers) != 1 || timers[0].Key != "k1" {
			t.Fatalf("batches of %d bytes: timers %v, want k1's", target, timers)
		}
	}
}

// failingReads is a SharedFiles whose reads of the file called name write
// the whole file, changed by change when set, then return err: as a
// download whose checksum does not match does.
type failingReads struct {
	*memShared
	name   string
	err    error
	change func([]byte) []byte
}

func (f failingReads) ReadShared(sf checkpoint.SharedFile, w io.Writer) error {
	b, err := f.read(sf)
	if err != nil || sf.Name != f.name {
		if err == nil {
			_, err = w.Write(b)
		}
		return err
	}
	if f.change != nil {
		b = f.change(slices.Clone(b))
	}
	if _, err := w.Write(b); err != nil {
		return err
	}
	return f.err
}

// TestHeapChainRestoreReadsFilesWhole checks that a restore of a heap
// chain, which downloads its files into temporary files and reads them
// side by side, fails on an error the download reports after the file's
// last byte (its checksum), also when it restores only some of the key
// groups, and on a file whose first bytes are wrong; and that it leaves no
// temporary file behind.
func TestHeapChainRestoreReadsFilesWhole(t *testing.T) {
	withHeapChains(t)
	files := newMemShared()
	f, m, rnd := newChangedChainFixture(t, 11)
	incrementalNow(t, &fixture{b: f.b}, 1, files)
	if err := f.b.CheckpointComplete(1); err != nil {
		t.Fatal(err)
	}
	f.b.SetCurrentKey("k1")
	f.count.Update(5)
	m["k1"] = chainEntry{count: 5, hasCount: true, seen: m["k1"].seen}
	snap := incrementalNow(t, &fixture{b: f.b}, 2, files)
	if len(snap.DBs) != 1 || len(snap.DBs[0].Files) != 2 {
		t.Fatalf("the second checkpoint: %v, want a chain of two files", snap.DBs)
	}
	restoreChainInto(t, "the chain", snap, files, m, rnd)

	// The full snapshot's file holds every key group: a restore has read
	// all it needs before the download reports the checksum.
	full := snap.DBs[0].Files[0].Shared.Name
	checksum := format.Corruptf("shared", "checksum mismatch")
	restore := func(owned KeyGroupRange, files checkpoint.SharedFiles) error {
		g := newChainFixture(t, HeapBackend, owned)
		g.b.spillDir = filepath.Join(t.TempDir(), "made")
		err := g.b.RestoreDBs(snap.DBs, files)
		if left, _ := os.ReadDir(g.b.spillDir); len(left) != 0 {
			t.Errorf("restoring %v: %v left in the temporary directory", owned, left)
		}
		if err == nil {
			g.check(t, fmt.Sprint("restored into ", owned), m)
		}
		return err
	}
	for _, owned := range []KeyGroupRange{{0, chainMaxP}, RangeForSubtask(0, 2, chainMaxP)} {
		if err := restore(owned, files); err != nil {
			t.Fatal(err)
		}
		err := restore(owned, failingReads{memShared: files, name: full, err: checksum})
		if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "checksum mismatch") {
			t.Errorf("restoring %v from a file whose checksum fails: %v", owned, err)
		}
	}
	err := restore(KeyGroupRange{0, chainMaxP}, failingReads{memShared: files, name: full, change: func(b []byte) []byte { b[0] = 0xff; return b }})
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "version 255") {
		t.Errorf("restoring files of another version: %v", err)
	}
}

// decodeChainFile returns the blobs of a heap chain file by key group, as
// a restore reads them.
func decodeChainFile(data []byte) (map[int][]byte, error) {
	r, err := newChainFileReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		return nil, err
	}
	out := make(map[int][]byte)
	for {
		kg, blob, ok, err := r.next()
		if err != nil {
			return nil, err
		}
		if !ok {
			return out, nil
		}
		out[kg] = blob
	}
}
