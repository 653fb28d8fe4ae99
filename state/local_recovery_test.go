package state

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/exactlyonce/exactly/checkpoint"
	"github.com/exactlyonce/exactly/state/internal/kv"
)

// pebbleFixtureIn returns a Pebble fixture of one subtask whose database
// is under dir, as every process of a job on one machine would have it.
func pebbleFixtureIn(t *testing.T, dir string, maxP int) *fixture {
	t.Helper()
	b, err := OpenKeyedBackend(BackendConfig{Kind: PebbleBackend, Dir: dir}, "op", 0, StringCodec{}, maxP, RangeForSubtask(0, 1, maxP))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return fixtureOf(t, b)
}

// checkFilled checks that f holds what fill(0..n-1) wrote, as src does,
// for every 7th key (dump lists every timer per key).
func checkFilled(t *testing.T, f, src *fixture, n int) {
	t.Helper()
	for i := 0; i < n; i += 7 {
		k := fmt.Sprint("key-", i)
		if got, want := f.dump(k), src.dump(k); !got.equal(want) {
			t.Fatalf("%s = %v, want %v", k, got, want)
		}
	}
}

// TestRestoreAdoptsTheDatabase: a Pebble backend restoring a checkpoint of
// the same key groups adopts its database, and its next checkpoint uploads
// only what changed since; restored from another storage, it uploads its
// files anew (they are not in the storage it writes to).
func TestRestoreAdoptsTheDatabase(t *testing.T) {
	const n, changed, maxP = 10_000, 100, 64
	src := pebbleFixtureIn(t, t.TempDir(), maxP)
	for i := range n {
		src.fill(i)
	}
	// As in TestIncrementalUploadsWhatChanged: no compaction due.
	src.b.writeBackCaches()
	if err := src.b.disk.db.Settle(); err != nil {
		t.Fatal(err)
	}
	files := newMemShared()
	snap := incrementalNow(t, src, 1, files)
	first := files.bytesWritten()
	for _, foreign := range []bool{false, true} {
		t.Run(fmt.Sprint("foreign=", foreign), func(t *testing.T) {
			files.foreign = foreign
			to := pebbleFixtureIn(t, t.TempDir(), maxP)
			if err := to.b.RestoreDBs(snap.DBs, files); err != nil {
				t.Fatal(err)
			}
			for kg, blob := range snap.KeyGroups {
				if err := to.b.Restore(kg, blob); err != nil {
					t.Fatal(err)
				}
			}
			checkFilled(t, to, src, n)
			for i := range changed {
				to.b.SetCurrentKey(fmt.Sprint("key-", i*(n/changed)))
				to.count.Update(-1)
			}
			before := files.bytesWritten()
			incrementalNow(t, to, 2, files)
			uploaded := files.bytesWritten() - before
			t.Logf("checkpoint 1 uploaded %d shared bytes; after the restore, %d changed keys: %d", first, changed, uploaded)
			if !foreign && uploaded >= first/2 {
				t.Errorf("the first checkpoint after the restore uploaded %d bytes, want < %d (half of the full upload)", uploaded, first/2)
			}
			if foreign && uploaded < first/2 {
				t.Errorf("restored from another storage, the next checkpoint uploaded %d bytes: it must not refer to that storage's %d", uploaded, first)
			}
		})
	}
}

// TestLocalRecovery: after a restart in the same place the shared files
// are taken from the local copies, none downloaded; a local copy that is
// not what the checkpoint records (damaged, or written by a database that
// moved on: the KAFKA-20685 case) is downloaded instead, and the state is
// the checkpoint's either way.
func TestLocalRecovery(t *testing.T) {
	const n, maxP = 3000, 16
	dir := t.TempDir()
	src := pebbleFixtureIn(t, dir, maxP)
	for i := range n {
		src.fill(i)
	}
	files := newMemShared()
	snap := incrementalNow(t, src, 1, files)
	if err := src.b.CheckpointComplete(1); err != nil {
		t.Fatal(err)
	}
	// The state moves past the checkpoint; the copy for comparisons keeps
	// the checkpoint's.
	want := pebbleFixtureIn(t, t.TempDir(), maxP)
	for i := range n {
		want.fill(i)
	}
	for i := range n {
		src.fill(i + n)
	}
	incrementalNow(t, src, 2, files) // never completes
	if err := src.b.Close(); err != nil {
		t.Fatal(err)
	}
	local := kv.NewLocalFiles(filepath.Join(dir, "op-0"))
	shared := 0
	for _, f := range snap.DBs[0].Files {
		if f.Shared.Name != "" {
			shared++
		}
	}
	restore := func(what string, wantReads int) {
		t.Helper()
		reads := files.readCount()
		to := pebbleFixtureIn(t, dir, maxP)
		if err := to.b.RestoreDBs(snap.DBs, files); err != nil {
			t.Fatal(err)
		}
		for kg, blob := range snap.KeyGroups {
			if err := to.b.Restore(kg, blob); err != nil {
				t.Fatal(err)
			}
		}
		checkFilled(t, to, want, n)
		if got := to.dump(fmt.Sprint("key-", n+1)); !got.empty() {
			t.Fatalf("%s: key-%d, written after the checkpoint, = %v", what, n+1, got)
		}
		if got := files.readCount() - reads; got != wantReads {
			t.Fatalf("%s: %d shared files downloaded, want %d (of %d)", what, got, wantReads, shared)
		}
		if err := to.b.Close(); err != nil {
			t.Fatal(err)
		}
	}
	restore("restart", 0)

	entries, err := os.ReadDir(local.Dir())
	if err != nil || len(entries) == 0 {
		t.Fatalf("local copies in %s: %v, %v", local.Dir(), entries, err)
	}
	var victim string
	for _, f := range snap.DBs[0].Files {
		if f.Shared.Name != "" {
			victim = f.Shared.Name
		}
	}
	path := filepath.Join(local.Dir(), victim)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/2] ^= 1
	// A new file: the kept one may be a hard link to a file of the
	// adopted database.
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	restore("damaged local copy", 1)
	restore("after the damaged copy was downloaded again", 0)
}

// TestLocalCopiesRetained: a completed checkpoint removes the local copies
// no later checkpoint refers to, and keeps those of checkpoints not yet
// complete.
func TestLocalCopiesRetained(t *testing.T) {
	dir := t.TempDir()
	f := pebbleFixtureIn(t, dir, 16)
	files := newMemShared()
	local := kv.NewLocalFiles(filepath.Join(dir, "op-0"))
	names := func() map[string]bool {
		entries, _ := os.ReadDir(local.Dir())
		out := map[string]bool{}
		for _, e := range entries {
			out[e.Name()] = true
		}
		return out
	}
	sharedNames := func(snap checkpoint.SubtaskSnapshot) map[string]bool {
		out := map[string]bool{}
		for _, file := range snap.DBs[0].Files {
			if file.Shared.Name != "" {
				out[file.Shared.Name] = true
			}
		}
		return out
	}
	var snaps []checkpoint.SubtaskSnapshot
	for id := checkpoint.ID(1); id <= 3; id++ {
		for i := range 500 {
			f.fill(i + int(id)*500)
		}
		// Deletes make the compaction drop files of older checkpoints.
		f.b.SetCurrentKey(fmt.Sprint("key-", id))
		f.count.Clear()
		snaps = append(snaps, incrementalNow(t, f, id, files))
	}
	if err := f.b.CheckpointComplete(2); err != nil {
		t.Fatal(err)
	}
	got := names()
	for name := range sharedNames(snaps[1]) {
		if !got[name] {
			t.Errorf("local copy %s of completed checkpoint 2 removed", name)
		}
	}
	for name := range sharedNames(snaps[2]) {
		if !got[name] {
			t.Errorf("local copy %s of checkpoint 3, not complete yet, removed", name)
		}
	}
	for name := range got {
		if !sharedNames(snaps[1])[name] && !sharedNames(snaps[2])[name] {
			t.Errorf("local copy %s kept, though neither checkpoint 2 nor 3 refers to it", name)
		}
	}
}
