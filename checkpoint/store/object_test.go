package store

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/exactlyonce/exactly/checkpoint"
	"github.com/exactlyonce/exactly/internal/testenv"
)

// objectBackends runs test against the in-memory bucket and, when the
// test S3 server runs (scripts/s3.sh), against it: each gets a fresh
// prefix, removed at the end.
func objectBackends(t *testing.T, test func(t *testing.T, f objectFixture)) {
	t.Run("mem", func(t *testing.T) {
		test(t, objectFixture{b: newMemBucket(), prefix: "jobs/test"})
	})
	t.Run("s3", func(t *testing.T) {
		endpoint := testenv.S3(t)
		raw := make([]byte, 6)
		_, _ = rand.Read(raw)
		prefix := "store-test/" + strings.ReplaceAll(t.Name(), "/", "_") + "-" + hex.EncodeToString(raw)
		loc, err := parseS3URL("s3://" + testenv.S3Bucket + "/" + prefix + "?endpoint=" + endpoint)
		if err != nil {
			t.Fatal(err)
		}
		b, err := newS3Bucket(loc)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			keys, _ := b.list(context.Background(), prefix+"/")
			for _, k := range keys {
				_ = b.remove(context.Background(), k)
			}
		})
		test(t, objectFixture{b: b, prefix: prefix})
	})
}

type objectFixture struct {
	b      bucket
	prefix string
}

// open returns a store on the fixture's bucket.
func (f objectFixture) open(t *testing.T, opts Options) *ObjectStore {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger, _ = logBuffer()
	}
	s, err := openObject(f.b, f.prefix, opts)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// corrupt replaces an object by a copy with one byte flipped.
func (f objectFixture) corrupt(t *testing.T, key string) {
	t.Helper()
	data, _, err := f.b.get(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)/2] ^= 0xff
	if _, err := f.b.put(context.Background(), key, bytes.NewReader(data), int64(len(data)), putCondition{}); err != nil {
		t.Fatal(err)
	}
}

// keys returns the keys under the fixture's prefix, relative to it.
func (f objectFixture) keys(t *testing.T) []string {
	t.Helper()
	keys, err := f.b.list(context.Background(), f.prefix+"/")
	if err != nil {
		t.Fatal(err)
	}
	for i, k := range keys {
		keys[i] = strings.TrimPrefix(k, f.prefix+"/")
	}
	return keys
}

// realOwnership is ownership on the real clock with a short lease.
func realOwnership(holder string, lease time.Duration) OwnershipOptions {
	return OwnershipOptions{Lease: lease, Wait: 10 * lease, Holder: holder, Poll: lease / 10}
}

func acquireObject(t *testing.T, s *ObjectStore, o OwnershipOptions) Ownership {
	t.Helper()
	own, err := s.Acquire(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	return own
}

// TestObjectStoreRoundTrip: what is completed is what Latest, Load and
// ReadStateAt return, under the same names as in a directory.
func TestObjectStoreRoundTrip(t *testing.T) {
	objectBackends(t, func(t *testing.T, f objectFixture) {
		s := f.open(t, Options{})
		if m, err := s.Latest(); m != nil || err != nil {
			t.Fatalf("Latest of empty storage = %v, %v; want nil, nil", m, err)
		}
		acquireObject(t, s, realOwnership("a", time.Second))
		want := writeCheckpoint(t, s, checkpoint.KindCheckpoint)
		sp := writeCheckpoint(t, s, checkpoint.KindSavepoint)
		got, err := s.Latest()
		if err != nil || got.ID != sp.ID || got.Kind != checkpoint.KindSavepoint {
			t.Fatalf("Latest = %+v, %v; want savepoint %d", got, err, sp.ID)
		}
		loaded, err := s.Load(s.Dir(want.ID, want.Kind))
		if err != nil || loaded.ID != want.ID {
			t.Fatalf("Load(%s) = %+v, %v", s.Dir(want.ID, want.Kind), loaded, err)
		}
		for _, op := range loaded.Operators {
			for _, h := range op.Subtasks {
				snap, err := s.ReadStateAt(s.Dir(want.ID, want.Kind), h)
				if err != nil || !sameSnapshot(snap, snapshotFor(want.ID, op.Name, h.Subtask)) {
					t.Fatalf("state of %s[%d]: %v, %v", op.Name, h.Subtask, snap, err)
				}
			}
		}
		if !slices.Contains(f.keys(t), path.Join(dirName(want.ID, want.Kind), metadataFile)) {
			t.Fatalf("objects %v: no metadata of checkpoint %d", f.keys(t), want.ID)
		}
		if _, err := s.Load("s3://elsewhere/chk-00000000000000000001"); err == nil {
			t.Fatal("Load of another bucket succeeded")
		}
	})
}

// TestObjectStoreZombieCompletesNothing: a process whose ownership passed
// to another (it stopped renewing for longer than its lease) can reserve
// no id, complete no checkpoint and renew nothing; the metadata it wrote
// is not a completed checkpoint and is swept at the next completion.
func TestObjectStoreZombieCompletesNothing(t *testing.T) {
	objectBackends(t, func(t *testing.T, f objectFixture) {
		const lease = 300 * time.Millisecond
		zombie := f.open(t, Options{})
		zOwn := acquireObject(t, zombie, realOwnership("zombie", lease))
		before := writeCheckpoint(t, zombie, checkpoint.KindCheckpoint)
		id, err := zombie.ReserveAbove(0) // reserved before the pause
		if err != nil {
			t.Fatal(err)
		}
		// The zombie is paused: it renews nothing. The next owner waits for
		// its lease to pass and takes over.
		next := f.open(t, Options{})
		nOwn := acquireObject(t, next, realOwnership("next", lease))
		if nOwn.Epoch != zOwn.Epoch+1 || nOwn.Incarnation != zOwn.Incarnation {
			t.Fatalf("next owner %+v after %+v: want the next epoch, same incarnation", nOwn, zOwn)
		}
		// The zombie resumes and tries to complete the checkpoint it had
		// begun.
		m := checkpoint.Metadata{ID: id, Kind: checkpoint.KindCheckpoint, Job: "wordcount", MaxParallelism: 4}
		h, err := zombie.WriteState(id, checkpoint.KindCheckpoint, "Sink", 0, snapshotFor(id, "Sink", 0))
		if err != nil {
			t.Fatal(err)
		}
		m.Operators = []checkpoint.OperatorState{{Name: "Sink", Parallelism: 1, Subtasks: []checkpoint.StateHandle{h}}}
		if _, err := zombie.Complete(m); !errors.Is(err, ErrNotOwner) {
			t.Fatalf("zombie Complete = %v; want ErrNotOwner", err)
		}
		if _, err := zombie.ReserveAbove(0); !errors.Is(err, ErrNotOwner) {
			t.Fatalf("zombie ReserveAbove = %v; want ErrNotOwner", err)
		}
		if err := zombie.Renew(); !errors.Is(err, ErrNotOwner) {
			t.Fatalf("zombie Renew = %v; want ErrNotOwner", err)
		}
		latest, err := next.Latest()
		if err != nil || latest.ID != before.ID {
			t.Fatalf("Latest = %+v, %v; want checkpoint %d, the zombie's last completed one", latest, err, before.ID)
		}
		after := writeCheckpoint(t, next, checkpoint.KindCheckpoint)
		next.sweeps.Wait()
		if after.ID <= id {
			t.Fatalf("next owner's id %d: not above the zombie's reserved %d", after.ID, id)
		}
		for _, k := range f.keys(t) {
			if strings.HasPrefix(k, dirName(id, checkpoint.KindCheckpoint)) {
				t.Fatalf("the zombie's object %s was not swept after checkpoint %d completed", k, after.ID)
			}
		}
		if err := zombie.Release(); err != nil {
			t.Fatalf("zombie Release = %v; want nil (it releases nothing)", err)
		}
		if err := next.Renew(); err != nil {
			t.Fatalf("the owner's Renew after the zombie's Release: %v", err)
		}
	})
}

// TestObjectStoreReleasedIsTakenOverAtOnce: a released store is taken
// over without waiting for the lease; a live owner is waited for and the
// error names it.
func TestObjectStoreReleasedIsTakenOverAtOnce(t *testing.T) {
	objectBackends(t, func(t *testing.T, f objectFixture) {
		a := f.open(t, Options{})
		acquireObject(t, a, realOwnership("a", time.Hour))
		b := f.open(t, Options{})
		_, err := b.Acquire(context.Background(), OwnershipOptions{Lease: time.Hour, Wait: 200 * time.Millisecond, Holder: "b", Poll: 20 * time.Millisecond})
		if err == nil || !strings.Contains(err.Error(), "owned by a") || !strings.Contains(err.Error(), "did not run out") {
			t.Fatalf("Acquire while a lives = %v; want an error naming holder a and its lease", err)
		}
		if err := a.Release(); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		own := acquireObject(t, b, OwnershipOptions{Lease: time.Hour, Wait: time.Nanosecond, Holder: "b"})
		if own.Epoch != 2 {
			t.Fatalf("epoch after release = %d, want 2", own.Epoch)
		}
		_ = start
	})
}

// TestObjectStoreRetention keeps the newest Retained checkpoints in the
// manifest and deletes the objects of the others.
func TestObjectStoreRetention(t *testing.T) {
	objectBackends(t, func(t *testing.T, f objectFixture) {
		s := f.open(t, Options{Retained: 2})
		acquireObject(t, s, realOwnership("a", time.Second))
		var ids []checkpoint.ID
		for range 5 {
			ids = append(ids, writeCheckpoint(t, s, checkpoint.KindCheckpoint).ID)
		}
		s.sweeps.Wait()
		dirs := map[string]bool{}
		for _, k := range f.keys(t) {
			dir, _, _ := strings.Cut(k, "/")
			dirs[dir] = true
		}
		want := map[string]bool{manifestKey: true, dirName(ids[3], checkpoint.KindCheckpoint): true, dirName(ids[4], checkpoint.KindCheckpoint): true}
		if len(dirs) != len(want) {
			t.Fatalf("objects in %v; want only %v", dirs, want)
		}
		for d := range want {
			if !dirs[d] {
				t.Fatalf("objects in %v; want only %v", dirs, want)
			}
		}
	})
}

// TestObjectStoreCorruption: a listed checkpoint whose state does not
// verify stops Latest with ErrCorrupt, or is skipped with SkipCorrupt; a
// listed checkpoint whose metadata is missing is corrupt, not skipped.
func TestObjectStoreCorruption(t *testing.T) {
	objectBackends(t, func(t *testing.T, f objectFixture) {
		s := f.open(t, Options{})
		acquireObject(t, s, realOwnership("a", time.Second))
		first := writeCheckpoint(t, s, checkpoint.KindCheckpoint)
		second := writeCheckpoint(t, s, checkpoint.KindCheckpoint)
		dir := s.dirKey(second.ID, second.Kind)
		f.corrupt(t, path.Join(dir, second.Operators[0].Subtasks[1].File))
		if _, err := s.Latest(); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "checksum mismatch") {
			t.Fatalf("Latest with a corrupt state object = %v; want ErrCorrupt naming the checksum", err)
		}
		skipping := f.open(t, Options{SkipCorrupt: true})
		if m, err := skipping.Latest(); err != nil || m.ID != first.ID || skipping.Skipped() != 1 {
			t.Fatalf("Latest with SkipCorrupt = %+v, %v (skipped %d); want checkpoint %d, 1 skipped", m, err, skipping.Skipped(), first.ID)
		}
		if err := f.b.remove(context.Background(), path.Join(dir, metadataFile)); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Latest(); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "manifest lists") {
			t.Fatalf("Latest with a listed checkpoint's metadata gone = %v; want ErrCorrupt", err)
		}
		f.corrupt(t, f.prefix+"/"+manifestKey)
		if _, err := s.Latest(); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("Latest with a corrupt manifest = %v; want ErrCorrupt", err)
		}
	})
}

// TestObjectStoreLostAnswer: a manifest write whose answer was lost is
// recognised as this owner's own by its token, not taken for a takeover.
func TestObjectStoreLostAnswer(t *testing.T) {
	b := newMemBucket()
	f := objectFixture{b: b, prefix: "p"}
	s := f.open(t, Options{})
	acquireObject(t, s, realOwnership("a", time.Second))
	first, err := s.ReserveAbove(0)
	if err != nil {
		t.Fatal(err)
	}
	b.lostAnswers["p/"+manifestKey] = 1
	if _, err := s.ReserveAbove(0); err == nil {
		t.Fatal("ReserveAbove with a lost answer succeeded; want the error")
	}
	next, err := s.ReserveAbove(0)
	if err != nil || next <= first+1 {
		t.Fatalf("ReserveAbove after a lost answer = %d, %v; want an id above %d and no ErrNotOwner", next, err, first+1)
	}
	m := writeCheckpoint(t, s, checkpoint.KindCheckpoint)
	if latest, err := s.Latest(); err != nil || latest.ID != m.ID {
		t.Fatalf("Latest = %+v, %v", latest, err)
	}
}

// TestOpenStorage picks the store by location.
func TestOpenStorage(t *testing.T) {
	dir := t.TempDir()
	for _, loc := range []string{dir, "file://" + dir} {
		s, err := OpenStorage(loc, Options{})
		if _, ok := s.(*Store); err != nil || !ok {
			t.Fatalf("OpenStorage(%q) = %T, %v; want a *Store", loc, s, err)
		}
	}
	s, err := OpenStorage("s3://bucket/prefix?endpoint=http://127.0.0.1:1&region=eu-west-1", Options{})
	if o, ok := s.(*ObjectStore); err != nil || !ok || o.prefix != "prefix" {
		t.Fatalf("OpenStorage(s3://…) = %T, %v; want an *ObjectStore", s, err)
	}
	for loc, want := range map[string]string{
		"gs://bucket/x":                              "not supported",
		"s3:///prefix":                               "no bucket",
		"s3://key:secret@bucket/x":                   "credentials in the URL",
		"s3://bucket/x?endpont=http://h:1":           `unknown parameter "endpont"`,
		"s3://bucket/x?endpoint=http://h:1/p":        "endpoint",
		"file://host/x":                              "file:///absolute/path",
		"s3://AKIAX:hunter2pw@bucket/p%zz":           "does not parse",
		"s3://AKIAX:hunter2pw@bucket:badport/p":      "does not parse",
		"s3://bucket/p?endpoint=h:1&token=hunter2pw": `unknown parameter "token"`,
	} {
		_, err := OpenStorage(loc, Options{})
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("OpenStorage(%q) = %v; want an error containing %q", loc, err, want)
		}
		if err != nil && (strings.Contains(err.Error(), "secret@") || strings.Contains(err.Error(), "hunter2pw")) {
			t.Errorf("OpenStorage(%q): the error shows the secret: %v", loc, err)
		}
	}
}

// TestObjectStoreLoadChecksEverySharedObject: a checkpoint's shared
// objects are checked, many at a time, before it is restored; a missing or
// resized one makes it corrupt, and the error names the first such object
// in name order, whichever check ends first.
func TestObjectStoreLoadChecksEverySharedObject(t *testing.T) {
	objectBackends(t, func(t *testing.T, f objectFixture) {
		s := f.open(t, Options{})
		acquireObject(t, s, realOwnership("a", time.Minute))
		id, err := s.ReserveAbove(0)
		if err != nil {
			t.Fatal(err)
		}
		const files = 3*sharedChecksAtOnce + 5
		db := checkpoint.DBFiles{KeyGroupStart: 0, KeyGroupEnd: 4, States: []checkpoint.DBState{{Name: "count", Kind: 1, ID: 1}}}
		for i := range files {
			name := fmt.Sprintf("%06d.sst", i)
			sf, err := writeSharedBytes(s, id, "0123456789abcdef-"+name, fmt.Appendf(nil, "contents of %s", name))
			if err != nil {
				t.Fatal(err)
			}
			db.Files = append(db.Files, checkpoint.DBFile{Name: name, Shared: sf})
		}
		h, err := s.WriteState(id, checkpoint.KindCheckpoint, "keyed", 0, checkpoint.SubtaskSnapshot{DBs: []checkpoint.DBFiles{db}})
		if err != nil {
			t.Fatal(err)
		}
		h.KeyGroupStart, h.KeyGroupEnd = 0, 4
		m := checkpoint.Metadata{ID: id, Kind: checkpoint.KindCheckpoint, Job: "checks", MaxParallelism: 4,
			Operators: []checkpoint.OperatorState{{Name: "keyed", Parallelism: 1, Subtasks: []checkpoint.StateHandle{h}}}}
		if _, err := s.Complete(m); err != nil {
			t.Fatal(err)
		}
		if got, err := s.Latest(); err != nil || got.ID != id {
			t.Fatalf("Latest with every shared object present = %v, %v; want checkpoint %d", got, err, id)
		}
		key := func(i int) string { return path.Join(s.key(sharedDir), db.Files[i].Shared.Name) }
		ctx := context.Background()
		resized, missing := sharedChecksAtOnce+3, 2*sharedChecksAtOnce+1
		if _, err := f.b.put(ctx, key(resized), strings.NewReader("x"), 1, putCondition{}); err != nil {
			t.Fatal(err)
		}
		if err := f.b.remove(ctx, key(missing)); err != nil {
			t.Fatal(err)
		}
		_, err = s.Latest()
		if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), db.Files[resized].Shared.Name) || !strings.Contains(err.Error(), "is 1 bytes") {
			t.Fatalf("Latest with object %d resized and %d missing = %v; want ErrCorrupt naming the resized one", resized, missing, err)
		}
		if err := f.b.remove(ctx, key(resized)); err != nil {
			t.Fatal(err)
		}
		_, err = s.Latest()
		if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), db.Files[resized].Shared.Name) || !strings.Contains(err.Error(), "is missing") {
			t.Fatalf("Latest with objects %d and %d missing = %v; want ErrCorrupt naming the first", resized, missing, err)
		}
	})
}
