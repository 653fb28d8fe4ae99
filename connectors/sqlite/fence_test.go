package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/exactlyonce/exactly/checkpoint"
	"github.com/exactlyonce/exactly/sink"
)

var (
	ownerA1 = sink.Owner{Incarnation: "inc-a", Epoch: 1}
	ownerA2 = sink.Owner{Incarnation: "inc-a", Epoch: 2}
	ownerB1 = sink.Owner{Incarnation: "inc-b", Epoch: 1}
)

// ownedWriter opens a writer of owner for sink "sink".
func ownedWriter(t testing.TB, s *Sink[rec], owner sink.Owner, subtask int) sink.Writer[rec] {
	t.Helper()
	w, err := s.NewWriter(context.Background(), sink.WriterInfo{Job: "job", Sink: "sink", Subtask: subtask, Parallelism: subtask + 1, Owner: owner})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	return w
}

// fencedCommitter opens a committer of owner for sink "sink" and fences
// with restored as the restored checkpoint.
func fencedCommitter(t testing.TB, s *Sink[rec], owner sink.Owner, restored checkpoint.ID) sink.Committer {
	t.Helper()
	c, err := s.NewCommitter(context.Background(), sink.CommitterInfo{Job: "job", Sink: "sink", Owner: owner})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if err := c.Fence(context.Background(), restored); err != nil {
		t.Fatalf("Fence(%d) as %s: %v", restored, owner, err)
	}
	return c
}

// ownedPrepare writes batch with w and prepares cp, as the engine records
// the committable: with the writer's incarnation.
func ownedPrepare(t testing.TB, w sink.Writer[rec], owner sink.Owner, subtask int, cp checkpoint.ID, batch []rec) sink.Committable {
	t.Helper()
	cm := writePrepare(t, w, subtask, cp, batch)
	cm.Incarnation = owner.Incarnation
	return cm
}

// TestZombieCommitIsFenced: after a new owner (epoch 2) fenced, the old
// owner (epoch 1), paused until then, can neither commit nor abort, and its
// writer can stage nothing; the new owner commits the restored committable.
func TestZombieCommitIsFenced(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "db.sqlite")
	s := newTestSink(t, testOptions(path))
	zombie := fencedCommitter(t, s, ownerA1, 0)
	zw := ownedWriter(t, s, ownerA1, 0)
	cm := ownedPrepare(t, zw, ownerA1, 0, 3, recs(0, 3))

	fresh := fencedCommitter(t, s, ownerA2, 3)
	if err := zombie.Commit(ctx, cm); !errors.Is(err, sink.ErrFenced) {
		t.Errorf("zombie Commit = %v, want an error wrapping sink.ErrFenced", err)
	}
	if got := ids(t, path); len(got) != 0 {
		t.Errorf("visible after the zombie's Commit: %v", got)
	}
	if err := zombie.Abort(ctx, cm); !errors.Is(err, sink.ErrFenced) {
		t.Errorf("zombie Abort = %v, want an error wrapping sink.ErrFenced", err)
	}
	if err := zombie.AbortLingering(ctx, 2); !errors.Is(err, sink.ErrFenced) {
		t.Errorf("zombie AbortLingering = %v, want an error wrapping sink.ErrFenced", err)
	}
	if got := staged(t, path); !slices.Equal(got, want(0, 3)) {
		t.Fatalf("staged after the zombie's Abort and AbortLingering: %v, want the prepared rows kept", got)
	}
	if err := zw.Write(ctx, recs(10, 12)); err != nil {
		t.Fatal(err)
	}
	if _, err := zw.Prepare(ctx, 4); !errors.Is(err, sink.ErrFenced) {
		t.Errorf("zombie Prepare = %v, want an error wrapping sink.ErrFenced", err)
	}
	err := zombie.Fence(ctx, 3)
	if !errors.Is(err, sink.ErrFenced) || !strings.Contains(err.Error(), ownerA1.String()) || !strings.Contains(err.Error(), ownerA2.String()) {
		t.Errorf("zombie Fence = %v, want sink.ErrFenced naming %s and %s", err, ownerA1, ownerA2)
	}
	if err := fresh.Commit(ctx, cm); err != nil {
		t.Fatalf("new owner's Commit of the restored committable: %v", err)
	}
	if got := ids(t, path); !slices.Equal(got, want(0, 3)) {
		t.Errorf("visible after the new owner's Commit: %v", got)
	}
}

// TestFreshStartOverForeignProgress: a new incarnation starting without a
// checkpoint over another incarnation's committed progress fails, unless it
// takes the sink over deliberately or restores a checkpoint.
func TestFreshStartOverForeignProgress(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "db.sqlite")
	s := newTestSink(t, testOptions(path))
	a := fencedCommitter(t, s, ownerA1, 0)
	wa := ownedWriter(t, s, ownerA1, 0)
	for cp := checkpoint.ID(1); cp <= 7; cp++ {
		if err := a.Commit(ctx, ownedPrepare(t, wa, ownerA1, 0, cp, recs(int64(cp), int64(cp)+1))); err != nil {
			t.Fatal(err)
		}
	}
	b, err := s.NewCommitter(ctx, sink.CommitterInfo{Job: "job", Sink: "sink", Owner: ownerB1})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	err = b.Fence(ctx, 0)
	if !errors.Is(err, sink.ErrForeignProgress) {
		t.Fatalf("fresh Fence over foreign progress = %v, want an error wrapping sink.ErrForeignProgress", err)
	}
	for _, s := range []string{`"job"`, `"sink"`, "inc-a", "inc-b", "checkpoint 7", "take the output over", "checkpoint directory"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q does not mention %s", err, s)
		}
	}
	// Restoring a checkpoint (a savepoint of the other incarnation) takes over.
	if err := b.Fence(ctx, 7); err != nil {
		t.Errorf("Fence restoring checkpoint 7: %v", err)
	}
	path2 := filepath.Join(t.TempDir(), "db.sqlite")
	s2 := newTestSink(t, testOptions(path2))
	if err := fencedCommitter(t, s2, ownerA1, 0).Commit(ctx, ownedPrepare(t, ownedWriter(t, s2, ownerA1, 0), ownerA1, 0, 1, recs(0, 1))); err != nil {
		t.Fatal(err)
	}
	tb, err := s2.NewCommitter(ctx, sink.CommitterInfo{Job: "job", Sink: "sink", Owner: ownerB1, TakeOver: true})
	if err != nil {
		t.Fatal(err)
	}
	defer tb.Close()
	if err := tb.Fence(ctx, 0); err != nil {
		t.Errorf("Fence with TakeOver: %v", err)
	}
}

// TestRerunNeverReadsAnotherIncarnationsMark is issue 10 case 2: a rerun
// whose checkpoint ids restart at 1 must not read the earlier run's
// high-water mark as "checkpoint 1 is committed".
func TestRerunNeverReadsAnotherIncarnationsMark(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "db.sqlite")
	s := newTestSink(t, testOptions(path))
	a := fencedCommitter(t, s, ownerA1, 0)
	wa := ownedWriter(t, s, ownerA1, 0)
	for cp := checkpoint.ID(1); cp <= 5; cp++ {
		if err := a.Commit(ctx, ownedPrepare(t, wa, ownerA1, 0, cp, recs(int64(cp), int64(cp)+1))); err != nil {
			t.Fatal(err)
		}
	}
	b, err := s.NewCommitter(ctx, sink.CommitterInfo{Job: "job", Sink: "sink", Owner: ownerB1, TakeOver: true})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if err := b.Fence(ctx, 0); err != nil {
		t.Fatal(err)
	}
	if err := b.AbortLingering(ctx, 0); err != nil {
		t.Fatal(err)
	}
	wb := ownedWriter(t, s, ownerB1, 0)
	lost := ownedPrepare(t, wb, ownerB1, 0, 1, recs(100, 103))
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec("DELETE FROM _exactly_staging_out"); err != nil { // the staged rows are lost
		t.Fatal(err)
	}
	err = b.Commit(ctx, lost)
	if !sink.IsPermanent(err) || !strings.Contains(err.Error(), "prepared data is gone") {
		t.Errorf("Commit of the rerun's lost checkpoint 1 = %v, want a permanent data-loss error", err)
	}
	good := ownedPrepare(t, wb, ownerB1, 0, 2, recs(200, 202))
	for range 2 {
		if err := b.Commit(ctx, good); err != nil {
			t.Fatalf("Commit of the rerun's checkpoint 2: %v", err)
		}
	}
	if got := ids(t, path); !slices.Equal(got, []int64{1, 2, 3, 4, 5, 200, 201}) {
		t.Errorf("visible: %v", got)
	}
}

// TestFenceIsIdempotent: fencing again with the same owner succeeds and
// commits still work; an unfenced committer of the same owner commits too.
func TestFenceIsIdempotent(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "db.sqlite")
	s := newTestSink(t, testOptions(path))
	c := fencedCommitter(t, s, ownerA1, 0)
	for range 2 {
		if err := c.Fence(ctx, 0); err != nil {
			t.Fatalf("second Fence: %v", err)
		}
	}
	other, err := s.NewCommitter(ctx, sink.CommitterInfo{Job: "job", Sink: "sink", Owner: ownerA1})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if err := other.Commit(ctx, ownedPrepare(t, ownedWriter(t, s, ownerA1, 0), ownerA1, 0, 1, recs(0, 2))); err != nil {
		t.Fatal(err)
	}
	if got := ids(t, path); !slices.Equal(got, want(0, 2)) {
		t.Errorf("visible: %v", got)
	}
}

// TestFenceCommitRace runs a zombie's Commit against a new owner's Fence
// many times: either the Commit came first and its rows are visible, or it
// fails with sink.ErrFenced and nothing is visible; never anything else.
func TestFenceCommitRace(t *testing.T) {
	ctx := context.Background()
	for i := range 10 {
		path := filepath.Join(t.TempDir(), "db.sqlite")
		s := newTestSink(t, testOptions(path))
		zombie := fencedCommitter(t, s, ownerA1, 0)
		cm := ownedPrepare(t, ownedWriter(t, s, ownerA1, 0), ownerA1, 0, 1, recs(0, 3))
		fresh, err := s.NewCommitter(ctx, sink.CommitterInfo{Job: "job", Sink: "sink", Owner: ownerA2})
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		var commitErr, fenceErr error
		wg.Go(func() { commitErr = zombie.Commit(ctx, cm) })
		wg.Go(func() { fenceErr = fresh.Fence(ctx, 1) })
		wg.Wait()
		if fenceErr != nil {
			t.Fatalf("run %d: Fence: %v", i, fenceErr)
		}
		got := ids(t, path)
		switch {
		case commitErr == nil && slices.Equal(got, want(0, 3)):
		case errors.Is(commitErr, sink.ErrFenced) && len(got) == 0:
		default:
			t.Fatalf("run %d: zombie Commit = %v with %v visible", i, commitErr, got)
		}
		if err := zombie.Commit(ctx, cm); !errors.Is(err, sink.ErrFenced) {
			t.Fatalf("run %d: zombie Commit after Fence = %v", i, err)
		}
		fresh.Close()
	}
}

// TestLegacyProgressRows: a progress table written before incarnations
// gains the column; its rows count as incarnation "", which only
// committables of checkpoints written before incarnations carry.
func TestLegacyProgressRows(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "db.sqlite")
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`CREATE TABLE _exactly_progress (sink TEXT NOT NULL, subtask INTEGER NOT NULL, checkpoint INTEGER NOT NULL, PRIMARY KEY (sink, subtask));
		INSERT INTO _exactly_progress VALUES ('sink', 0, 9)`); err != nil {
		t.Fatal(err)
	}
	s := newTestSink(t, testOptions(path))
	fresh, err := s.NewCommitter(ctx, sink.CommitterInfo{Job: "job", Sink: "sink", Owner: ownerB1})
	if err != nil {
		t.Fatal(err)
	}
	defer fresh.Close()
	if err := fresh.Fence(ctx, 0); !errors.Is(err, sink.ErrForeignProgress) || !strings.Contains(err.Error(), "checkpoint 9") {
		t.Errorf("fresh Fence over legacy progress = %v, want sink.ErrForeignProgress naming checkpoint 9", err)
	}
	// Restored from the legacy checkpoint 9: its committables (no
	// incarnation) are recognised as committed.
	c := fencedCommitter(t, s, ownerB1, 9)
	if err := c.Commit(ctx, sink.Committable{Checkpoint: 9, Data: encodeCommittable(0, 9)}); err != nil {
		t.Errorf("Commit of a legacy committable at the legacy mark: %v", err)
	}
	if err := c.Commit(ctx, sink.Committable{Checkpoint: 9, Incarnation: "inc-b", Data: encodeCommittable(0, 9)}); !sink.IsPermanent(err) {
		t.Errorf("Commit of incarnation inc-b's checkpoint 9 against the legacy mark = %v, want a permanent data-loss error", err)
	}
}
