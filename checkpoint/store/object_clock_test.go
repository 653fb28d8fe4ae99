package store

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestObjectStoreTakeoverIgnoresOwnerClocks: a live owner whose clock is
// an hour behind is not taken over by a second instance (review finding
// F6: the takeover compared the owner's recorded renewal, by its clock,
// with the newcomer's clock, so any owner whose clock lagged by more than
// a lease was taken over while it ran).
func TestObjectStoreTakeoverIgnoresOwnerClocks(t *testing.T) {
	objectBackends(t, func(t *testing.T, f objectFixture) {
		const lease = time.Hour
		a := f.open(t, Options{})
		behind := func() time.Time { return time.Now().Add(-time.Hour) }
		acquireObject(t, a, OwnershipOptions{Lease: lease, Wait: time.Second, Holder: "a", Now: behind})
		b := f.open(t, Options{})
		_, err := b.Acquire(context.Background(), OwnershipOptions{Lease: lease, Wait: 300 * time.Millisecond, Holder: "b", Poll: 20 * time.Millisecond})
		if err == nil || !strings.Contains(err.Error(), "owned by a") {
			t.Fatalf("Acquire while a lives, its clock an hour behind = %v; want an error naming holder a", err)
		}
	})
}

// TestObjectStoreDeadOwnerTakenOverByServerClock: an owner that died more
// than a lease ago, by the storage server's clock, is taken over at once,
// without waiting a lease by the newcomer's clock; one that died less than
// a lease ago is waited for.
func TestObjectStoreDeadOwnerTakenOverByServerClock(t *testing.T) {
	const lease = time.Hour
	var mu sync.Mutex
	server := time.Now()
	mem := newMemBucket()
	mem.now = func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		return server
	}
	f := objectFixture{b: mem, prefix: "jobs/clock"}
	dead := f.open(t, Options{})
	acquireObject(t, dead, OwnershipOptions{Lease: lease, Wait: time.Second, Holder: "dead"})

	mu.Lock()
	server = server.Add(lease / 2)
	mu.Unlock()
	next := f.open(t, Options{})
	if _, err := next.Acquire(context.Background(), OwnershipOptions{Lease: lease, Wait: 100 * time.Millisecond, Holder: "next", Poll: 10 * time.Millisecond}); err == nil {
		t.Fatal("took over an owner whose manifest is half a lease old by the server's clock")
	}
	mu.Lock()
	server = server.Add(lease/2 + 2*serverClockResolution)
	mu.Unlock()
	own, err := next.Acquire(context.Background(), OwnershipOptions{Lease: lease, Wait: 100 * time.Millisecond, Holder: "next", Poll: 10 * time.Millisecond})
	if err != nil || own.Epoch != 2 {
		t.Fatalf("Acquire after the owner's manifest is a lease old by the server's clock = %+v, %v; want epoch 2 at once", own, err)
	}
}
