package state

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/exactlyonce/exactly/checkpoint"
	"github.com/exactlyonce/exactly/internal/format"
	"github.com/exactlyonce/exactly/state/internal/kv"
)

// retainingShared is a memShared with the object store's retention: when
// a checkpoint completes, only the newest retained completed checkpoints
// are kept, and the shared files none of them refers to that were uploaded
// for a lower id are deleted, as checkpoint/store's sweep does.
type retainingShared struct {
	*memShared
	retained int
	kept     []retainedSnapshot // oldest first
}

type retainedSnapshot struct {
	id   checkpoint.ID
	snap checkpoint.SubtaskSnapshot
}

// complete makes checkpoint id, whose snapshot is snap, complete, applies
// the retention, and returns an error naming a shared file that a retained
// checkpoint refers to and that is gone: a restore from it would fail.
func (r *retainingShared) complete(id checkpoint.ID, snap checkpoint.SubtaskSnapshot) error {
	r.kept = append(r.kept, retainedSnapshot{id, snap})
	if n := len(r.kept) - r.retained; n > 0 {
		r.kept = slices.Delete(r.kept, 0, n)
	}
	needed := map[string]bool{}
	for _, k := range r.kept {
		for _, f := range sharedFilesOf(k.snap) {
			needed[f.Name] = true
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for name := range r.files {
		if up, ok := format.SharedID(name); ok && up < id && !needed[name] {
			delete(r.files, name)
		}
	}
	for _, k := range r.kept {
		for _, f := range sharedFilesOf(k.snap) {
			if _, ok := r.files[f.Name]; !ok {
				return fmt.Errorf("checkpoint %d (retained after %d completed) refers to the shared file %s, which is gone", k.id, id, f.Name)
			}
		}
	}
	return nil
}

func sharedFilesOf(snap checkpoint.SubtaskSnapshot) []checkpoint.SharedFile {
	var out []checkpoint.SharedFile
	for _, db := range snap.DBs {
		for _, f := range db.Files {
			if f.Shared.Name != "" {
				out = append(out, f.Shared)
			}
		}
	}
	return out
}

// TestIncrementalNoticesLagBarriers runs incremental checkpoints whose
// uploads and completion notices lag the barriers at random, as they do
// when a checkpoint outlasts the interval (a slow S3): a snapshot may be
// taken before the previous one uploaded, and a keyed task may take
// barrier N+1 before the notice that N completed. Every retained
// checkpoint must keep referring only to files the storage keeps, with 1,
// 2 and 3 checkpoints retained, and the newest must restore the state.
//
// Before the fix, a file a completed checkpoint had uploaded was reused by
// a later snapshot even when a checkpoint in between, which uploaded the
// file again under its own name, completed first: its retention deleted
// the file the later checkpoint referred to (issue 27, case 1). This test
// did not catch it (Pebble's compactions rewrite a small database's files
// before three checkpoints share one); TestUploadsNoticesLagBarriers does.
func TestIncrementalNoticesLagBarriers(t *testing.T) {
	checkpoints, seeds := 24, 4
	if raceEnabled || testing.Short() {
		checkpoints, seeds = 16, 1
	}
	for retained := 1; retained <= 3; retained++ {
		for seed := range seeds {
			t.Run(fmt.Sprintf("retained=%d/seed=%d", retained, seed), func(t *testing.T) {
				noticesLagBarriers(t, retained, uint64(seed), checkpoints)
			})
		}
	}
}

func noticesLagBarriers(t *testing.T, retained int, seed uint64, checkpoints int) {
	const keys = 400
	rng := rand.New(rand.NewPCG(seed, uint64(retained)))
	f := subtaskFixture(t, PebbleBackend, 0, 1, 16)
	store := &retainingShared{memShared: newMemShared(), retained: retained}
	type upload struct {
		id     checkpoint.ID
		encode func() (checkpoint.SubtaskSnapshot, error)
	}
	type notice struct {
		id  checkpoint.ID
		due int // delivered before the snapshot of this checkpoint
	}
	var uploading []upload // in barrier order
	var notices []notice   // in completion order
	var newest retainedSnapshot
	finish := func(u upload, barrier int) {
		snap, err := u.encode()
		if err != nil {
			t.Fatalf("checkpoint %d: %v", u.id, err)
		}
		if err := store.complete(u.id, snap); err != nil {
			t.Fatalf("seed %d, retaining %d: %v", seed, retained, err)
		}
		newest = retainedSnapshot{u.id, snap}
		notices = append(notices, notice{u.id, barrier + 1 + rng.IntN(2)})
	}
	for n := 1; n <= checkpoints; n++ {
		for len(notices) > 0 && notices[0].due <= n {
			if err := f.b.CheckpointComplete(notices[0].id); err != nil {
				t.Fatal(err)
			}
			notices = notices[1:]
		}
		for range 40 {
			f.fill(rng.IntN(keys))
		}
		encode, err := f.b.SnapshotFor(checkpoint.ID(n), checkpoint.KindCheckpoint, store)
		if err != nil {
			t.Fatal(err)
		}
		uploading = append(uploading, upload{checkpoint.ID(n), encode})
		// The uploads finish in order; the newest may still run when the
		// next barrier comes.
		for len(uploading) > 1 || len(uploading) == 1 && rng.IntN(2) == 0 {
			finish(uploading[0], n)
			uploading = uploading[1:]
		}
	}
	for _, u := range uploading {
		finish(u, checkpoints)
	}
	restored := restoreSnapshots(t, PebbleBackend, []checkpoint.SubtaskSnapshot{newest.snap}, store, 1, 16)[0]
	for i := range keys {
		k := fmt.Sprint("key-", i)
		if got, want := restored.dump(k), f.dump(k); !got.equal(want) {
			t.Fatalf("restored from checkpoint %d: %s = %v, want %v", newest.id, k, got, want)
		}
	}
}

// TestUploadsNoticesLagBarriers is TestIncrementalNoticesLagBarriers on
// the uploads alone, with a database whose files live a random number of
// checkpoints (Pebble's compactions rewrite a small test database's files
// every other checkpoint): 200 seeds of 30 checkpoints for each retention.
func TestUploadsNoticesLagBarriers(t *testing.T) {
	seeds := 200
	if raceEnabled || testing.Short() {
		seeds = 50
	}
	for retained := 1; retained <= 3; retained++ {
		broken := 0
		var first error
		for seed := range seeds {
			if err := uploadsLagBarriers(t, retained, uint64(seed), 30); err != nil {
				broken++
				if first == nil {
					first = fmt.Errorf("seed %d: %w", seed, err)
				}
			}
		}
		if broken > 0 {
			t.Errorf("retaining %d: %d of %d seeds completed a checkpoint that refers to a deleted file; the first: %v", retained, broken, seeds, first)
		}
	}
}

// uploadsLagBarriers runs checkpoints 1..checkpoints of a simulated
// database through the uploads, with lagging uploads and notices, against
// a storage retaining retained checkpoints, and returns the first
// retention violation.
func uploadsLagBarriers(t *testing.T, retained int, seed uint64, checkpoints int) error {
	rng := rand.New(rand.NewPCG(seed, uint64(retained)))
	tmp := t.TempDir()
	store := &retainingShared{memShared: newMemShared(), retained: retained}
	var ups uploads
	local := kv.NewLocalFiles(filepath.Join(tmp, "db"))
	live, next := []string{}, 0
	type notice struct {
		id  checkpoint.ID
		due int
	}
	var uploading []*upload
	var notices []notice
	finish := func(u *upload, barrier int) error {
		files, err := u.run()
		if err != nil {
			t.Fatalf("checkpoint %d: %v", u.id, err)
		}
		snap := checkpoint.SubtaskSnapshot{DBs: []checkpoint.DBFiles{{Files: files}}}
		if err := store.complete(u.id, snap); err != nil {
			return err
		}
		notices = append(notices, notice{u.id, barrier + 1 + rng.IntN(2)})
		return nil
	}
	for n := 1; n <= checkpoints; n++ {
		for len(notices) > 0 && notices[0].due <= n {
			ups.completed(notices[0].id)
			notices = notices[1:]
		}
		// A fifth of the files go (compacted away), one or two come.
		live = slices.DeleteFunc(live, func(string) bool { return rng.IntN(5) == 0 })
		for range 1 + rng.IntN(2) {
			next++
			live = append(live, fmt.Sprintf("%06d.sst", next))
		}
		dir := filepath.Join(tmp, fmt.Sprint("checkpoint-", n))
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for _, name := range live {
			if err := os.WriteFile(filepath.Join(dir, name), []byte(name), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		uploading = append(uploading, newUpload(checkpoint.ID(n), dir, "db", store, &ups, local))
		for len(uploading) > 1 || len(uploading) == 1 && rng.IntN(2) == 0 {
			if err := finish(uploading[0], n); err != nil {
				return err
			}
			uploading = uploading[1:]
		}
	}
	for _, u := range uploading {
		if err := finish(u, checkpoints); err != nil {
			return err
		}
	}
	return nil
}
