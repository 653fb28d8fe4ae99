package store

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/exactlyonce/exactly/checkpoint"
	"github.com/exactlyonce/exactly/internal/vfs"
)

// fakeClock is a clock that moves when told, and by a millisecond at every
// reading, so that a wait measured on it ends.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(time.Millisecond)
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func ownership(clock *fakeClock, holder string) OwnershipOptions {
	return OwnershipOptions{Lease: 10 * time.Second, Wait: time.Nanosecond, Holder: holder, Now: clock.Now, Poll: time.Millisecond}
}

func mustAcquire(t *testing.T, s *Store, o OwnershipOptions) Ownership {
	t.Helper()
	own, err := s.Acquire(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	return own
}

// TestOwnershipEpochs: every new owner gets a higher epoch and the same
// incarnation; a released directory is taken over at once.
func TestOwnershipEpochs(t *testing.T) {
	fsys := vfs.NewCrashableMem()
	clock := &fakeClock{now: time.Unix(1_700_000_000, 0)}
	var last Ownership
	for i := range 3 {
		s := mustOpen(t, testDir, Options{FS: fsys})
		own := mustAcquire(t, s, ownership(clock, "a"))
		if own.Epoch != uint64(i+1) || len(own.Incarnation) != 32 || (i > 0 && own.Incarnation != last.Incarnation) {
			t.Fatalf("owner %d = %+v, previous %+v: want epoch %d and the same 32-hex-digit incarnation", i, own, last, i+1)
		}
		writeCheckpoint(t, s, checkpoint.KindCheckpoint)
		if err := s.Release(); err != nil {
			t.Fatal(err)
		}
		last = own
	}
	// Another directory is another incarnation.
	other := mustAcquire(t, mustOpen(t, "/data/other", Options{FS: fsys}), ownership(clock, "a"))
	if other.Incarnation == last.Incarnation || other.Epoch != 1 {
		t.Fatalf("other directory: %+v, want a new incarnation at epoch 1", other)
	}
}

// TestSecondOwnerWaitsForLiveOwner: while the owner lives and renews, a
// second store cannot take over; it fails naming the holder.
func TestSecondOwnerWaitsForLiveOwner(t *testing.T) {
	fsys := vfs.NewCrashableMem()
	clock := &fakeClock{now: time.Unix(1_700_000_000, 0)}
	first := mustOpen(t, testDir, Options{FS: fsys})
	mustAcquire(t, first, ownership(clock, "first-host pid 1"))
	clock.Advance(9 * time.Second)
	if err := first.Renew(); err != nil {
		t.Fatal(err)
	}
	clock.Advance(9 * time.Second) // 18s after the start, 9s after the renewal
	second := mustOpen(t, testDir, Options{FS: fsys})
	_, err := second.Acquire(context.Background(), ownership(clock, "second"))
	if err == nil || !strings.Contains(err.Error(), "first-host pid 1") || !strings.Contains(err.Error(), "another instance") {
		t.Fatalf("second Acquire = %v, want an error naming the holder", err)
	}
	if _, err := first.ReserveID(); err != nil {
		t.Fatalf("the first owner lost its directory to a failed Acquire: %v", err)
	}
}

// TestZombieIsFenced: an owner that stopped renewing past its lease (a
// paused process) is taken over; afterwards it can reserve no id, complete
// no checkpoint and renew nothing, and the new owner's work is intact.
func TestZombieIsFenced(t *testing.T) {
	fsys := vfs.NewCrashableMem()
	clock := &fakeClock{now: time.Unix(1_700_000_000, 0)}
	zombie := mustOpen(t, testDir, Options{FS: fsys})
	zOwn := mustAcquire(t, zombie, ownership(clock, "zombie"))
	writeCheckpoint(t, zombie, checkpoint.KindCheckpoint)
	// The zombie reserves an id and writes its state, then is paused.
	id, err := zombie.ReserveID()
	if err != nil {
		t.Fatal(err)
	}
	h, err := zombie.WriteState(id, checkpoint.KindCheckpoint, "op", 0, snapshotFor(id, "op", 0))
	if err != nil {
		t.Fatal(err)
	}
	clock.Advance(11 * time.Second)
	next := mustOpen(t, testDir, Options{FS: fsys})
	nOwn := mustAcquire(t, next, ownership(clock, "next"))
	if nOwn.Epoch != zOwn.Epoch+1 || nOwn.Incarnation != zOwn.Incarnation {
		t.Fatalf("new owner %+v after %+v", nOwn, zOwn)
	}
	// The zombie resumes.
	m := checkpoint.Metadata{ID: id, Kind: checkpoint.KindCheckpoint, Job: "wordcount", MaxParallelism: 4,
		Operators: []checkpoint.OperatorState{{Name: "op", Parallelism: 1, Subtasks: []checkpoint.StateHandle{h}}}}
	if _, err := zombie.Complete(m); !errors.Is(err, ErrNotOwner) {
		t.Fatalf("zombie Complete = %v, want ErrNotOwner", err)
	}
	if _, err := zombie.ReserveID(); !errors.Is(err, ErrNotOwner) {
		t.Fatalf("zombie ReserveID = %v, want ErrNotOwner", err)
	}
	if err := zombie.Renew(); !errors.Is(err, ErrNotOwner) {
		t.Fatalf("zombie Renew = %v, want ErrNotOwner", err)
	}
	if err := zombie.Release(); err != nil {
		t.Fatalf("zombie Release = %v: releasing a lost directory is a no-op", err)
	}
	latest, err := next.Latest()
	if err != nil || latest == nil || latest.ID >= id {
		t.Fatalf("Latest = %+v, %v: the zombie's checkpoint %d must not have completed", latest, err, id)
	}
	got := writeCheckpoint(t, next, checkpoint.KindCheckpoint)
	if got.ID <= id {
		t.Fatalf("the new owner reserved id %d, not above the zombie's %d", got.ID, id)
	}
	// The zombie released nothing: a third owner must still wait for the
	// new owner's lease.
	third := mustOpen(t, testDir, Options{FS: fsys})
	if _, err := third.Acquire(context.Background(), ownership(clock, "third")); err == nil {
		t.Fatal("a third owner took over from a live owner after the zombie's Release")
	}
}

// TestDeadOwnerIsTakenOverAtOnce: an owner that died without releasing
// (its _alive lock is gone with its process) is taken over without waiting
// for its lease.
func TestDeadOwnerIsTakenOverAtOnce(t *testing.T) {
	fsys := vfs.NewCrashableMem()
	clock := &fakeClock{now: time.Unix(1_700_000_000, 0)}
	dead := mustOpen(t, testDir, Options{FS: fsys})
	mustAcquire(t, dead, ownership(clock, "dead"))
	writeCheckpoint(t, dead, checkpoint.KindCheckpoint)
	after := fsys.Crash() // the process dies: its locks are released
	s := mustOpen(t, testDir, Options{FS: after})
	own := mustAcquire(t, s, ownership(clock, "next")) // no time passed
	if own.Epoch != 2 {
		t.Fatalf("epoch %d after a dead owner of epoch 1", own.Epoch)
	}
}

// TestAcquireWaitsForLease: with a wait longer than the lease, a second
// owner takes over once the first stops renewing.
func TestAcquireWaitsForLease(t *testing.T) {
	fsys := vfs.NewCrashableMem()
	clock := &fakeClock{now: time.Unix(1_700_000_000, 0)}
	first := mustOpen(t, testDir, Options{FS: fsys})
	mustAcquire(t, first, ownership(clock, "first"))
	o := ownership(clock, "second")
	o.Wait = -1
	o.Now = func() time.Time { clock.Advance(time.Second); return clock.Now() } // each look costs a second
	second := mustOpen(t, testDir, Options{FS: fsys})
	own, err := second.Acquire(context.Background(), o)
	if err != nil || own.Epoch != 2 {
		t.Fatalf("Acquire = %+v, %v", own, err)
	}
	if _, err := first.ReserveID(); !errors.Is(err, ErrNotOwner) {
		t.Fatalf("first ReserveID = %v, want ErrNotOwner", err)
	}
}

// BenchmarkOwnership measures what ownership adds to the per-checkpoint
// steps on the OS filesystem: reserving an id on a store nobody owns, the
// same as the owner (under the _lock flock, after reading _owner), and one
// renewal of the lease (every third of the lease in a running job).
func BenchmarkOwnership(b *testing.B) {
	for _, c := range []struct {
		name  string
		owned bool
		step  func(*Store) error
	}{
		{"reserve-id/unowned", false, func(s *Store) error { _, err := s.ReserveID(); return err }},
		{"reserve-id/owned", true, func(s *Store) error { _, err := s.ReserveID(); return err }},
		{"renew", true, (*Store).Renew},
	} {
		b.Run(c.name, func(b *testing.B) {
			s := mustOpen(b, b.TempDir(), Options{})
			if c.owned {
				if _, err := s.Acquire(context.Background(), OwnershipOptions{}); err != nil {
					b.Fatal(err)
				}
				defer s.Release()
			}
			b.ReportAllocs()
			for b.Loop() {
				if err := c.step(s); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
