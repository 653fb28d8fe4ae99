package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/exactlyonce/exactly/checkpoint"
)

// hookBucket is a memBucket with the faults of a real client and server:
// a slow listing, a write that lands but is answered 412 (minio-go retries
// a request whose answer was lost, and the retry fails its condition), and
// failing reads.
type hookBucket struct {
	*memBucket
	mu sync.Mutex
	// blockList, when non-nil, is waited on by the next list of a key
	// under "shared/" (the sweep), then cleared; started is closed when it
	// is reached.
	blockList chan struct{}
	started   chan struct{}
	// writtenButPrecondition: the next n puts of key succeed but answer
	// errPrecondition (minio-go's internal retry after a lost answer).
	writtenButPrecondition map[string]int
	// failGet: the next n gets of key fail with a network error.
	failGet map[string]int
	// outage, when non-nil, is asked before each get of key, with the
	// number of earlier gets of key: true fails this one with a network
	// error.
	outage func(key string, call int) bool
	gets   map[string]int
	// late: the next n puts of key are held instead of applied: they answer
	// a client timeout at once and land when land is called, as a request
	// the client gave up on while the server still works on it. Their
	// conditions are checked when they land or, with checkEarly, when they
	// are sent (versitygw's posix backend checks before it writes).
	late       map[string]int
	checkEarly bool
	pending    []func()
	// landAfterReadBack: the held puts land right after the first get of
	// a key that follows a successful put of it (a takeover's read-back).
	landAfterReadBack bool
	written           map[string]bool
}

// hold makes the next n puts of key land late (see late).
func (b *hookBucket) hold(key string, n int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.late[key] += n
}

// landAfterNextReadBack has the held puts land right after the next get
// of a key that follows a successful put of it from now on.
func (b *hookBucket) landAfterNextReadBack() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.landAfterReadBack, b.written = true, map[string]bool{}
}

// land applies the held puts, in the order they were sent.
func (b *hookBucket) land() {
	b.mu.Lock()
	pending := b.pending
	b.pending = nil
	b.mu.Unlock()
	for _, p := range pending {
		p()
	}
}

// holdPut holds a put (see late); b.mu is held.
func (b *hookBucket) holdPut(key string, body io.Reader, size int64, cond putCondition) (string, error) {
	b.late[key]--
	data, err := io.ReadAll(body)
	if err != nil {
		return "", err
	}
	if b.checkEarly {
		b.memBucket.mu.Lock()
		err := b.memBucket.check(key, cond)
		b.memBucket.mu.Unlock()
		if err != nil {
			return "", err
		}
		cond = putCondition{}
	}
	b.pending = append(b.pending, func() {
		_, _ = b.memBucket.put(context.Background(), key, bytes.NewReader(data), size, cond)
	})
	return "", fmt.Errorf("%s: %w", key, context.DeadlineExceeded)
}

func (b *hookBucket) list(ctx context.Context, prefix string) ([]string, error) {
	b.mu.Lock()
	ch, st := b.blockList, b.started
	if ch != nil && strings.HasSuffix(prefix, "chk-") {
		b.blockList = nil
	} else {
		ch = nil
	}
	b.mu.Unlock()
	if ch != nil {
		close(st)
		<-ch
	}
	return b.memBucket.list(ctx, prefix)
}

func (b *hookBucket) put(ctx context.Context, key string, body io.Reader, size int64, cond putCondition) (string, error) {
	b.mu.Lock()
	if b.late[key] > 0 {
		defer b.mu.Unlock()
		return b.holdPut(key, body, size, cond)
	}
	b.mu.Unlock()
	tag, err := b.memBucket.put(ctx, key, body, size, cond)
	b.mu.Lock()
	defer b.mu.Unlock()
	b.written[key] = b.written[key] || err == nil
	if err == nil && b.writtenButPrecondition[key] > 0 {
		b.writtenButPrecondition[key]--
		return "", fmt.Errorf("%s (retry after lost answer): %w", key, errPrecondition)
	}
	return tag, err
}

func (b *hookBucket) get(ctx context.Context, key string) ([]byte, string, error) {
	b.mu.Lock()
	call := b.gets[key]
	b.gets[key]++
	if b.failGet[key] > 0 || (b.outage != nil && b.outage(key, call)) {
		if b.failGet[key] > 0 {
			b.failGet[key]--
		}
		b.mu.Unlock()
		return nil, "", errors.New("connection reset by peer")
	}
	readBack := b.landAfterReadBack && b.written[key]
	if readBack {
		b.landAfterReadBack = false
	}
	b.mu.Unlock()
	data, etag, err := b.memBucket.get(ctx, key)
	if readBack {
		b.land()
	}
	return data, etag, err
}

func newHookBucket() *hookBucket {
	return &hookBucket{memBucket: newMemBucket(), writtenButPrecondition: map[string]int{}, failGet: map[string]int{}, gets: map[string]int{},
		late: map[string]int{}, written: map[string]bool{}}
}

// TestObjectStoreSweepAfterRelease: a sweep that runs after the store
// released its ownership (one still queued when the job ended) deletes
// nothing: it read what to keep from its own copy of the manifest, empty
// once released, and deleted the shared files of the newest checkpoint.
func TestObjectStoreSweepAfterRelease(t *testing.T) {
	f := objectFixture{b: newMemBucket(), prefix: "p"}
	s := f.open(t, Options{Retained: 2})
	acquireObject(t, s, realOwnership("a", time.Minute))
	db := newFakeDB("0123456789abcdef")
	var last checkpoint.Metadata
	for range 4 {
		last = writeIncremental(t, s, db)
		s.sweeps.Wait()
	}
	if err := s.Release(); err != nil {
		t.Fatal(err)
	}
	s.sweep(last.ID + 1) // a sweep queued before the release
	next := f.open(t, Options{Retained: 2})
	acquireObject(t, next, realOwnership("b", time.Minute))
	if got, err := next.Latest(); err != nil || got.ID != last.ID {
		t.Fatalf("after a sweep that ran past the release: Latest = %v, %v; want checkpoint %d", got, err, last.ID)
	}
}

// pendingCheckpoint reserves an id and writes one state file for it.
func pendingCheckpoint(t *testing.T, s *ObjectStore) checkpoint.Metadata {
	t.Helper()
	id, err := s.ReserveAbove(0)
	if err != nil {
		t.Fatal(err)
	}
	m := checkpoint.Metadata{ID: id, Kind: checkpoint.KindCheckpoint, Job: "wordcount", MaxParallelism: 4}
	h, err := s.WriteState(id, checkpoint.KindCheckpoint, "Sink", 0, snapshotFor(id, "Sink", 0))
	if err != nil {
		t.Fatal(err)
	}
	m.Operators = []checkpoint.OperatorState{{Name: "Sink", Parallelism: 1, Subtasks: []checkpoint.StateHandle{h}}}
	return m
}

// TestObjectStoreOwnWritesAnswered412: manifest writes of this owner that
// landed but were answered 412 (after a lost answer of an earlier write,
// or of this one) are recognised as its own: the completion succeeds and
// the checkpoint restores; nothing is taken for a takeover.
func TestObjectStoreOwnWritesAnswered412(t *testing.T) {
	for _, c := range []struct {
		name      string
		lostRenew bool // a Renew before lands without its answer
		answered  int  // manifest writes of Complete that land but are answered 412
	}{{"twice", false, 2}, {"after a lost renewal", true, 1}, {"once", false, 1}} {
		t.Run(c.name, func(t *testing.T) {
			b := newHookBucket()
			f := objectFixture{b: b, prefix: "p"}
			s := f.open(t, Options{})
			acquireObject(t, s, realOwnership("a", time.Minute))
			writeCheckpoint(t, s, checkpoint.KindCheckpoint)
			m := pendingCheckpoint(t, s)
			if c.lostRenew {
				b.lostAnswers["p/"+manifestKey] = 1
				if err := s.Renew(); err == nil {
					t.Fatal("Renew with a lost answer succeeded")
				}
			}
			b.mu.Lock()
			b.writtenButPrecondition["p/"+manifestKey] = c.answered
			b.mu.Unlock()
			if _, err := s.Complete(m); err != nil {
				t.Fatalf("Complete = %v; want success (its write landed)", err)
			}
			if err := s.Discard(m.ID, m.Kind); err == nil {
				t.Fatal("Discard of the completed checkpoint succeeded")
			}
			if got, err := f.open(t, Options{}).Latest(); err != nil || got.ID != m.ID {
				t.Fatalf("Latest = %v, %v; want checkpoint %d", got, err, m.ID)
			}
			if err := s.Renew(); err != nil {
				t.Fatalf("Renew after = %v", err)
			}
		})
	}
}

// TestObjectStoreMetadataReadBackFails: a _metadata write answered 412
// whose read-back fails is undecided, not the "id used twice" of a
// process that lost ownership.
func TestObjectStoreMetadataReadBackFails(t *testing.T) {
	b := newHookBucket()
	f := objectFixture{b: b, prefix: "p"}
	s := f.open(t, Options{})
	acquireObject(t, s, realOwnership("a", time.Minute))
	m := pendingCheckpoint(t, s)
	key := "p/" + dirName(m.ID, checkpoint.KindCheckpoint) + "/" + metadataFile
	b.mu.Lock()
	b.writtenButPrecondition[key] = 1
	b.failGet[key] = 1
	b.mu.Unlock()
	if _, err := s.Complete(m); err == nil || errors.Is(err, ErrNotOwner) {
		t.Fatalf("Complete with a failed read-back = %v; want an error that is not ErrNotOwner", err)
	}
	if _, err := s.Complete(m); err != nil {
		t.Fatalf("Complete again = %v; want success", err)
	}
}

// slowBucket is a memBucket whose HEAD and DELETE requests take delay
// each, and fail as a real client does when their context ends first.
type slowBucket struct {
	*memBucket
	delay time.Duration
}

func (b *slowBucket) wait(ctx context.Context) error {
	select {
	case <-time.After(b.delay):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (b *slowBucket) size(ctx context.Context, key string) (int64, error) {
	if err := b.wait(ctx); err != nil {
		return 0, err
	}
	return b.memBucket.size(ctx, key)
}

func (b *slowBucket) remove(ctx context.Context, key string) error {
	if err := b.wait(ctx); err != nil {
		return err
	}
	return b.memBucket.remove(ctx, key)
}

// slowCheckpoint completes a checkpoint of four subtasks, each with a
// state object and a shared object of its own.
func slowCheckpoint(t *testing.T, s *ObjectStore) checkpoint.ID {
	t.Helper()
	id, err := s.ReserveAbove(0)
	if err != nil {
		t.Fatal(err)
	}
	m := checkpoint.Metadata{ID: id, Kind: checkpoint.KindCheckpoint, Job: "slow", MaxParallelism: 4}
	op := checkpoint.OperatorState{Name: "keyed", Parallelism: 4}
	for sub := range 4 {
		shared, err := writeSharedBytes(s, id, fmt.Sprintf("db%d-000001.sst", sub), []byte("sst"))
		if err != nil {
			t.Fatal(err)
		}
		snap := checkpoint.SubtaskSnapshot{DBs: []checkpoint.DBFiles{{KeyGroupStart: sub, KeyGroupEnd: sub + 1,
			States: []checkpoint.DBState{{Name: "count", Kind: 1, ID: 1}},
			Files:  []checkpoint.DBFile{{Name: "000001.sst", Shared: shared}}}}}
		h, err := s.WriteState(id, checkpoint.KindCheckpoint, "keyed", sub, snap)
		if err != nil {
			t.Fatal(err)
		}
		h.KeyGroupStart, h.KeyGroupEnd = sub, sub+1
		op.Subtasks = append(op.Subtasks, h)
	}
	m.Operators = []checkpoint.OperatorState{op}
	if _, err := s.Complete(m); err != nil {
		t.Fatalf("Complete of checkpoint %d (8 HEADs of %v under a request timeout of %v): %v", id, s.b.(*slowBucket).delay, s.timeout, err)
	}
	return id
}

// TestObjectStoreTimeoutPerRequest: RequestTimeout bounds each request,
// not the checks and deletions of many objects that a completion, a
// restore and a sweep make (here every HEAD and DELETE takes 40% of the
// timeout, and a checkpoint has four state objects and four shared
// objects). A 10 GB checkpoint on a loaded machine failed its completion
// when one 30 s context covered the HEADs of all its new shared objects.
func TestObjectStoreTimeoutPerRequest(t *testing.T) {
	b := &slowBucket{memBucket: newMemBucket(), delay: 40 * time.Millisecond}
	f := objectFixture{b: b, prefix: "p"}
	opts := Options{RequestTimeout: 100 * time.Millisecond, Retained: 1}
	s := f.open(t, opts)
	acquireObject(t, s, realOwnership("a", time.Minute))
	first := slowCheckpoint(t, s)
	id := slowCheckpoint(t, s)
	s.sweeps.Wait()
	if err := s.Release(); err != nil {
		t.Fatal(err)
	}
	keys, _ := b.memBucket.list(context.Background(), "")
	for _, k := range keys {
		if strings.Contains(k, fmt.Sprintf("%020d", first)) {
			t.Errorf("%s of checkpoint %d is left after a sweep of 9 DELETEs", k, first)
		}
	}
	next := f.open(t, opts)
	acquireObject(t, next, realOwnership("b", time.Minute))
	if got, err := next.Latest(); err != nil || got.ID != id {
		t.Fatalf("Latest = %v, %v; want checkpoint %d", got, err, id)
	}
}

// ownedWithFrozenServerClock returns a hook bucket whose server clock is
// frozen, so that only this process's clock can end a lease; a store of
// it under prefix that holder owns with lease; and a second store of it.
func ownedWithFrozenServerClock(t *testing.T, prefix, holder string, lease time.Duration) (*hookBucket, *ObjectStore, *ObjectStore) {
	t.Helper()
	b := newHookBucket()
	frozen := time.Now()
	b.memBucket.now = func() time.Time { return frozen }
	f := objectFixture{b: b, prefix: prefix}
	owner := f.open(t, Options{})
	acquireObject(t, owner, OwnershipOptions{Lease: lease, Wait: time.Second, Holder: holder})
	return b, owner, f.open(t, Options{})
}

// TestObjectStoreOutageDoesNotUseUpTheWait: an owner that died just
// before the storage stopped answering (a server restarting) is taken
// over once its lease is seen to pass after the storage answers again.
// The outage took most of Acquire's wait, and the wait for the lease
// counted it: the start failed with "another instance of the job is
// running" although none was (TestCrashOnObjectStorage of package
// postgres, whose S3 server restarts under it, failed so in CI). The
// server's clock is frozen, so only this process's clock can end the
// lease.
func TestObjectStoreOutageDoesNotUseUpTheWait(t *testing.T) {
	const lease = 200 * time.Millisecond
	b, _, next := ownedWithFrozenServerClock(t, "jobs/outage", "dead", lease)
	b.mu.Lock()
	b.failGet[next.key(manifestKey)] = 30 // about 300 ms of the 400 ms wait, at a poll of 10 ms
	b.mu.Unlock()
	own, err := next.Acquire(context.Background(), OwnershipOptions{Lease: lease, Wait: 2 * lease, Holder: "next", Poll: 10 * time.Millisecond})
	if err != nil || own.Epoch != 2 {
		t.Fatalf("Acquire after an outage of most of the wait = %+v, %v; want the dead owner taken over (epoch 2)", own, err)
	}
}

// TestObjectStoreOutageAfterAnAnswer: the storage answers (the dead
// owner's manifest is seen), then stops answering for longer than the
// wait for a live owner (versitygw takes about 2 s to restart; the wait is
// twice a 1 s lease), then answers again: the dead owner is taken over.
// The wait used to count the outage and fail with "another instance of
// the job is running" (CI: TestCrashOnObjectStorage of package postgres).
// An outage longer than opts.Outage still fails, naming the storage.
func TestObjectStoreOutageAfterAnAnswer(t *testing.T) {
	const lease = 200 * time.Millisecond
	for _, tc := range []struct {
		name   string
		outage time.Duration
		ok     bool
	}{
		{"shorter than Outage", 0, true},
		{"longer than Outage", 300 * time.Millisecond, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, _, next := ownedWithFrozenServerClock(t, "jobs/outage-after", "dead", lease)
			key := next.key(manifestKey)
			b.mu.Lock()
			first := b.gets[key]
			b.outage = func(k string, call int) bool {
				// One answer, then 60 failed reads: about 600 ms at a poll
				// of 10 ms, more than the 400 ms wait.
				return k == key && call > first && call <= first+60
			}
			b.mu.Unlock()
			own, err := next.Acquire(context.Background(), OwnershipOptions{Lease: lease, Wait: 2 * lease, Outage: tc.outage, Holder: "next", Poll: 10 * time.Millisecond})
			if tc.ok {
				if err != nil || own.Epoch != 2 {
					t.Fatalf("Acquire through an outage longer than the wait = %+v, %v; want the dead owner taken over (epoch 2)", own, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), "did not answer for 300ms") || !strings.Contains(err.Error(), "owned by dead") {
				t.Fatalf("Acquire through an outage longer than Outage: %v; want an error naming the outage and the owner seen", err)
			}
		})
	}
}

// TestObjectStoreOwnedByTellsWhyTheWaitEnded: the error of a wait that
// ended on a live-looking owner says what was seen. An owner that renews
// is another instance; one that does not renew while short outages keep
// restarting the watch of its lease (the CI failure of 66f1eac's
// TestTortureObjectStorage, a SIGKILLed owner said to be renewing) may
// have stopped, and the error says so and how to wait longer.
func TestObjectStoreOwnedByTellsWhyTheWaitEnded(t *testing.T) {
	const lease = 200 * time.Millisecond
	for _, tc := range []struct {
		name    string
		renew   bool // the owner renews through the wait
		outages bool // every 5th read of the manifest fails
		want    []string
		notWant string
	}{
		{"renewing", true, false, []string{"owned by owner", "whose lease is renewed", "another instance of the job is running"}, "stopped"},
		{"silent through outages", false, true, []string{"owned by owner", "did not renew its lease (200ms)", "stopped answering", "stopped without releasing", "OwnershipWait"}, "another instance of the job is running"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, owner, next := ownedWithFrozenServerClock(t, "jobs/owned-by", "owner", lease)
			key := next.key(manifestKey)
			if tc.outages {
				b.mu.Lock()
				first := b.gets[key]
				b.outage = func(k string, call int) bool { return k == key && call > first && call%5 == 0 }
				b.mu.Unlock()
			}
			done := make(chan struct{})
			renewed := make(chan struct{})
			go func() {
				defer close(renewed)
				if !tc.renew {
					return
				}
				tick := time.NewTicker(lease / 4)
				defer tick.Stop()
				for {
					select {
					case <-done:
						return
					case <-tick.C:
						if err := owner.Renew(); err != nil {
							t.Errorf("the owner's Renew: %v", err)
							return
						}
					}
				}
			}()
			_, err := next.Acquire(context.Background(), OwnershipOptions{Lease: lease, Wait: 2 * lease, Holder: "next", Poll: 10 * time.Millisecond})
			close(done)
			<-renewed
			if err == nil {
				t.Fatal("Acquire took over an owner whose lease never ran out")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Acquire's error %q does not say %q", err, w)
				}
			}
			if strings.Contains(err.Error(), tc.notWant) {
				t.Errorf("Acquire's error %q says %q", err, tc.notWant)
			}
		})
	}
}

// TestObjectStoreLatestSettlesAWriteOfUnknownOutcome: Complete's manifest
// write times out at the client but lands later, and the renewal in the
// same brownout fails too. The recovery decision (Latest) must not read the
// manifest before that write can no longer land: it would restore the
// checkpoint before and abort the transactions of the one the late write
// then lists, which the next restore commits ("aborted … records are
// lost"). Whether the write lands before or after, Latest's answer is the
// one the manifest keeps.
func TestObjectStoreLatestSettlesAWriteOfUnknownOutcome(t *testing.T) {
	for _, c := range []struct {
		name       string
		landsFirst bool
	}{{"the late write lands after the recovery reads", false}, {"the late write landed before", true}} {
		t.Run(c.name, func(t *testing.T) {
			b := newHookBucket()
			f := objectFixture{b: b, prefix: "p"}
			s := f.open(t, Options{})
			acquireObject(t, s, realOwnership("a", time.Minute))
			before := writeCheckpoint(t, s, checkpoint.KindCheckpoint)
			m := pendingCheckpoint(t, s)
			key := "p/" + manifestKey
			b.hold(key, 2)
			if _, err := s.Complete(m); err == nil {
				t.Fatal("Complete whose manifest write timed out succeeded")
			}
			if err := s.Renew(); err == nil {
				t.Fatal("Renew whose write timed out succeeded")
			}
			if !c.landsFirst {
				b.hold(key, 1)
				if got, err := s.Latest(); err == nil || !strings.Contains(err.Error(), "unknown outcome") {
					t.Fatalf("Latest while the write that settles the unknown one times out too = %v, %v; want an error saying why it decides nothing", got, err)
				}
			} else {
				b.land()
			}
			got, err := s.Latest()
			if err != nil {
				t.Fatal(err)
			}
			b.land()
			kept, err := f.open(t, Options{}).Latest()
			if err != nil {
				t.Fatal(err)
			}
			if got.ID != kept.ID {
				t.Fatalf("recovery read checkpoint %d as the latest, but once the late writes landed the manifest lists %d: recovery aborted what the next restore commits", got.ID, kept.ID)
			}
			want := before.ID
			if c.landsFirst {
				want = m.ID
			}
			if got.ID != want {
				t.Fatalf("Latest = checkpoint %d; want %d", got.ID, want)
			}
			if err := s.Renew(); err != nil {
				t.Fatalf("Renew after = %v", err)
			}
		})
	}
}

// TestTakeoverFindsAWriteThatLandsAfterItsReadBack: on a server that checks
// a write's condition before it writes (versitygw's posix backend), the
// previous owner's renewal, checked before the takeover, lands right after
// the new owner read its manifest back. The new owner must not believe it
// owns the storage while the manifest holds the old owner's token: both
// would then fence and commit. Its confirming write finds the late one.
func TestTakeoverFindsAWriteThatLandsAfterItsReadBack(t *testing.T) {
	b := newHookBucket()
	b.checkEarly = true
	f := objectFixture{b: b, prefix: "p"}
	a := f.open(t, Options{})
	acquireObject(t, a, realOwnership("a", 50*time.Millisecond))
	writeCheckpoint(t, a, checkpoint.KindCheckpoint)
	b.hold("p/"+manifestKey, 1)
	if err := a.Renew(); err == nil {
		t.Fatal("Renew whose write timed out succeeded")
	}
	b.landAfterNextReadBack()
	nb := f.open(t, Options{})
	acquireObject(t, nb, realOwnership("b", 50*time.Millisecond))
	if err := a.Renew(); !errors.Is(err, ErrNotOwner) {
		t.Fatalf("the old owner's Renew after the takeover = %v; want ErrNotOwner (two owners at once)", err)
	}
	if err := nb.Renew(); err != nil {
		t.Fatalf("the new owner's Renew = %v", err)
	}
}
