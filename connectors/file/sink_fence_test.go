package file

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/exactlyonce/exactly/checkpoint"
	"github.com/exactlyonce/exactly/sink"
)

var (
	ownerA1 = sink.Owner{Incarnation: "inca", Epoch: 1}
	ownerA2 = sink.Owner{Incarnation: "inca", Epoch: 2}
	ownerB1 = sink.Owner{Incarnation: "incb", Epoch: 1}
)

// ownedWriter opens a writer of owner for sink "out".
func ownedWriter(t testing.TB, s *Sink[int], owner sink.Owner, subtask int) sink.Writer[int] {
	t.Helper()
	w, err := s.NewWriter(context.Background(), sink.WriterInfo{Job: "job", Sink: "out", Subtask: subtask, Parallelism: subtask + 1, Owner: owner})
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// ownedCommitter opens a committer of owner for sink "out".
func ownedCommitter(t testing.TB, s *Sink[int], owner sink.Owner, takeOver bool) sink.Committer {
	t.Helper()
	c, err := s.NewCommitter(context.Background(), sink.CommitterInfo{Job: "job", Sink: "out", Owner: owner, TakeOver: takeOver})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// fencedCommitter opens a committer of owner and fences with restored as
// the restored checkpoint.
func fencedCommitter(t testing.TB, s *Sink[int], owner sink.Owner, restored checkpoint.ID) sink.Committer {
	t.Helper()
	c := ownedCommitter(t, s, owner, false)
	if err := c.Fence(context.Background(), restored); err != nil {
		t.Fatalf("Fence(%d) as %s: %v", restored, owner, err)
	}
	return c
}

// ownedPrepare writes batch and prepares cp, recording the committable as
// the engine does: with the writer's incarnation.
func ownedPrepare(t testing.TB, w sink.Writer[int], owner sink.Owner, subtask int, cp checkpoint.ID, batch ...int) sink.Committable {
	t.Helper()
	cm := writePrepare(t, w, subtask, cp, batch...)
	cm.Incarnation = owner.Incarnation
	return cm
}

// TestSinkZombieCommitIsFenced: after a new owner (epoch 2) fenced, the old
// owner (epoch 1) can neither commit, abort nor prepare; the new owner
// commits the restored committable.
func TestSinkZombieCommitIsFenced(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := newIntSink(t, dir)
	zombie := fencedCommitter(t, s, ownerA1, 0)
	zw := ownedWriter(t, s, ownerA1, 0)
	cm := ownedPrepare(t, zw, ownerA1, 0, 3, 1, 2, 3)

	fresh := fencedCommitter(t, s, ownerA2, 3)
	if err := zombie.Commit(ctx, cm); !errors.Is(err, sink.ErrFenced) {
		t.Errorf("zombie Commit = %v, want an error wrapping sink.ErrFenced", err)
	}
	if got := visible(t, dir); len(got) != 0 {
		t.Errorf("visible after the zombie's Commit: %q", got)
	}
	if err := zombie.Abort(ctx, cm); !errors.Is(err, sink.ErrFenced) {
		t.Errorf("zombie Abort = %v, want an error wrapping sink.ErrFenced", err)
	}
	if err := zombie.AbortLingering(ctx, 2); !errors.Is(err, sink.ErrFenced) {
		t.Errorf("zombie AbortLingering = %v, want an error wrapping sink.ErrFenced", err)
	}
	if !slices.Contains(names(t, dir), ".part-out-0-3.pending") {
		t.Fatalf("pending file gone after the zombie's Abort and AbortLingering: %q", names(t, dir))
	}
	if err := zw.Write(ctx, []int{10}); err != nil {
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
	if got := visible(t, dir); !slices.Equal(got, []string{"1", "2", "3"}) {
		t.Errorf("visible after the new owner's Commit: %q", got)
	}
	if err := fresh.AbortLingering(ctx, 3); err != nil {
		t.Fatal(err)
	}
	for _, n := range names(t, dir) {
		if strings.HasSuffix(n, pendingExt) || strings.HasSuffix(n, inProgressExt) {
			t.Errorf("left behind: %s", n)
		}
	}
}

// TestSinkFreshStartOverForeignProgress: a new incarnation starting without
// a checkpoint over another incarnation's committed files fails, unless it
// takes the sink over deliberately or restores a checkpoint.
func TestSinkFreshStartOverForeignProgress(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := newIntSink(t, dir)
	a := fencedCommitter(t, s, ownerA1, 0)
	for _, subtask := range []int{0, 1} {
		w := ownedWriter(t, s, ownerA1, subtask)
		for cp := checkpoint.ID(1); cp <= checkpoint.ID(6+subtask); cp++ {
			if err := a.Commit(ctx, ownedPrepare(t, w, ownerA1, subtask, cp, int(cp))); err != nil {
				t.Fatal(err)
			}
		}
	}
	err := ownedCommitter(t, s, ownerB1, false).Fence(ctx, 0)
	if !errors.Is(err, sink.ErrForeignProgress) {
		t.Fatalf("fresh Fence over foreign progress = %v, want an error wrapping sink.ErrForeignProgress", err)
	}
	for _, s := range []string{`"job"`, `"out"`, "inca", "incb", "checkpoint 7", "take the output over", "checkpoint directory"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q does not mention %s", err, s)
		}
	}
	if err := ownedCommitter(t, s, ownerB1, false).Fence(ctx, 7); err != nil {
		t.Errorf("Fence restoring checkpoint 7: %v", err)
	}
	dir2 := t.TempDir()
	s2 := newIntSink(t, dir2)
	if err := fencedCommitter(t, s2, ownerA1, 0).Commit(ctx, ownedPrepare(t, ownedWriter(t, s2, ownerA1, 0), ownerA1, 0, 1, 1)); err != nil {
		t.Fatal(err)
	}
	if err := ownedCommitter(t, s2, ownerB1, true).Fence(ctx, 0); err != nil {
		t.Errorf("Fence with TakeOver: %v", err)
	}
}

// TestSinkRerunNeverReadsAnotherIncarnationsFile is issue 10 case 2: a
// rerun whose checkpoint ids restart at 1 must not read the earlier run's
// final file of checkpoint 1 as its own, committed.
func TestSinkRerunNeverReadsAnotherIncarnationsFile(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := newIntSink(t, dir)
	a := fencedCommitter(t, s, ownerA1, 0)
	wa := ownedWriter(t, s, ownerA1, 0)
	for cp := checkpoint.ID(1); cp <= 3; cp++ {
		if err := a.Commit(ctx, ownedPrepare(t, wa, ownerA1, 0, cp, int(cp))); err != nil {
			t.Fatal(err)
		}
	}
	b := ownedCommitter(t, s, ownerB1, true)
	if err := b.Fence(ctx, 0); err != nil {
		t.Fatal(err)
	}
	if err := b.AbortLingering(ctx, 0); err != nil {
		t.Fatal(err)
	}
	wb := ownedWriter(t, s, ownerB1, 0)
	lost := ownedPrepare(t, wb, ownerB1, 0, 1, 100)
	if err := os.Remove(filepath.Join(dir, ".part-out-0-1.pending")); err != nil { // the pending file is lost
		t.Fatal(err)
	}
	err := b.Commit(ctx, lost)
	if !sink.IsPermanent(err) || !strings.Contains(err.Error(), "prepared data is gone") {
		t.Errorf("Commit of the rerun's lost checkpoint 1 = %v, want a permanent data-loss error", err)
	}
	good := ownedPrepare(t, wb, ownerB1, 0, 2, 200)
	for range 2 {
		if err := b.Commit(ctx, good); err != nil {
			t.Fatalf("Commit of the rerun's checkpoint 2: %v", err)
		}
	}
	got := visible(t, dir)
	slices.Sort(got)
	if !slices.Equal(got, []string{"1", "2", "200", "3"}) {
		t.Errorf("visible: %q, want both runs' committed lines", got)
	}
}

// TestSinkFenceIsIdempotent: fencing again with the same owner succeeds,
// and a committer of the same owner that did not fence commits.
func TestSinkFenceIsIdempotent(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := newIntSink(t, dir)
	c := fencedCommitter(t, s, ownerA1, 0)
	for range 2 {
		if err := c.Fence(ctx, 0); err != nil {
			t.Fatalf("second Fence: %v", err)
		}
	}
	other := ownedCommitter(t, s, ownerA1, false)
	if err := other.Commit(ctx, ownedPrepare(t, ownedWriter(t, s, ownerA1, 0), ownerA1, 0, 1, 7)); err != nil {
		t.Fatal(err)
	}
	if got := visible(t, dir); !slices.Equal(got, []string{"7"}) {
		t.Errorf("visible: %q", got)
	}
}

// TestSinkFenceCommitRace runs a zombie's Commit against a new owner's
// Fence many times: either the Commit came first and its file is visible,
// or it fails with sink.ErrFenced and nothing is visible.
func TestSinkFenceCommitRace(t *testing.T) {
	ctx := context.Background()
	for i := range 50 {
		dir := t.TempDir()
		s := newIntSink(t, dir)
		zombie := fencedCommitter(t, s, ownerA1, 0)
		cm := ownedPrepare(t, ownedWriter(t, s, ownerA1, 0), ownerA1, 0, 1, 1, 2)
		fresh := ownedCommitter(t, s, ownerA2, false)
		var wg sync.WaitGroup
		var commitErr, fenceErr error
		wg.Go(func() { commitErr = zombie.Commit(ctx, cm) })
		wg.Go(func() { fenceErr = fresh.Fence(ctx, 1) })
		wg.Wait()
		if fenceErr != nil {
			t.Fatalf("run %d: Fence: %v", i, fenceErr)
		}
		got := visible(t, dir)
		switch {
		case commitErr == nil && slices.Equal(got, []string{"1", "2"}):
		case errors.Is(commitErr, sink.ErrFenced) && len(got) == 0:
		default:
			t.Fatalf("run %d: zombie Commit = %v with %q visible", i, commitErr, got)
		}
		if err := zombie.Commit(ctx, cm); !errors.Is(err, sink.ErrFenced) {
			t.Fatalf("run %d: zombie Commit after Fence = %v", i, err)
		}
	}
}

// TestSinkFenceWaitsForPausedLockHolder: a committer paused (SIGSTOP) while
// it holds the sink's lock, between its owner check and its rename, only
// delays the new owner's Fence, which then fences it.
func TestSinkFenceWaitsForPausedLockHolder(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := newIntSink(t, dir)
	fencedCommitter(t, s, ownerA1, 0)
	// The "paused" commit: the sink's lock, taken as Commit takes it.
	lockPath := filepath.Join(dir, ".part-out-owner.lock")
	held, err := os.OpenFile(lockPath, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	if err := syscall.Flock(int(held.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	fenced := make(chan error, 1)
	go func() { fenced <- ownedCommitter(t, s, ownerA2, false).Fence(ctx, 1) }()
	waitForLockWaiter(t, lockPath, fenced)
	if err := held.Close(); err != nil { // the paused process resumes and finishes
		t.Fatal(err)
	}
	if err := <-fenced; err != nil {
		t.Fatalf("Fence after the holder released the lock: %v", err)
	}
}

// waitForLockWaiter returns once /proc/locks lists a process blocked on a
// flock of path: Fence is waiting for the lock, not merely slow to start.
// It fails if Fence returns first.
func waitForLockWaiter(t *testing.T, path string, fenced <-chan error) {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		t.Fatal(err)
	}
	// A waiter's entry reads "1: -> FLOCK  ADVISORY  WRITE pid maj:min:inode 0 EOF".
	inode := fmt.Sprintf(":%d ", st.Ino)
	for {
		select {
		case err := <-fenced:
			t.Fatalf("Fence returned %v while another holder had the sink's lock", err)
		default:
		}
		locks, err := os.ReadFile("/proc/locks")
		if err != nil {
			t.Skipf("no /proc/locks to observe the waiting Fence: %v", err)
		}
		for _, line := range strings.Split(string(locks), "\n") {
			if strings.Contains(line, "-> FLOCK") && strings.Contains(line, inode) {
				return
			}
		}
		runtime.Gosched()
	}
}

// TestSinkFinalNameCarriesIncarnation: final files are named with the
// writer's incarnation; both name forms parse.
func TestSinkFinalNameCarriesIncarnation(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := newIntSink(t, dir)
	owner := sink.Owner{Incarnation: "in-c", Epoch: 1}
	cm := ownedPrepare(t, ownedWriter(t, s, owner, 3), owner, 3, 2, 1)
	if err := newCommitter(t, s, "out").Commit(ctx, cm); err != nil {
		t.Fatal(err)
	}
	const name = "part-out-in%2Dc-0003-00000000000000000002.jsonl"
	if got := names(t, dir); !slices.Equal(got, []string{name}) {
		t.Fatalf("files: %q, want %q", got, name)
	}
	for in, want := range map[string]foreignFinal{
		name: {name: name, incarnation: "in%2Dc", checkpoint: 2},
		"part-out-0003-00000000000000000002.jsonl": {name: "part-out-0003-00000000000000000002.jsonl", checkpoint: 2},
	} {
		if got, ok := parseFinal(in, "part-out-", ".jsonl"); !ok || got != want {
			t.Errorf("parseFinal(%q) = %+v, %v; want %+v", in, got, ok, want)
		}
	}
	for _, in := range []string{"part-out--0003-1.jsonl", "part-out-x-0003-1.txt", "part-out-a-b-0003-1.jsonl", "part-outer-0003-1.jsonl", "part-out-0003-x.jsonl"} {
		if got, ok := parseFinal(in, "part-out-", ".jsonl"); ok {
			t.Errorf("parseFinal(%q) = %+v, want no match", in, got)
		}
	}
}
