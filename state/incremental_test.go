package state

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/exactlyonce/exactly/checkpoint"
	"github.com/exactlyonce/exactly/internal/format"
)

// memShared is an in-memory checkpoint.SharedFiles that counts the bytes
// written to it and the files read from it.
type memShared struct {
	mu      sync.Mutex
	files   map[string][]byte
	written int64
	reads   int
	// foreign makes Reusable false: a restore from another storage.
	foreign bool
}

func newMemShared() *memShared { return &memShared{files: map[string][]byte{}} }

func (m *memShared) Reusable() bool { return !m.foreign }

func (m *memShared) readCount() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.reads
}

func (m *memShared) WriteShared(id checkpoint.ID, key string, r io.ReadSeeker, size int64) (checkpoint.SharedFile, error) {
	data, err := io.ReadAll(r)
	if err != nil || int64(len(data)) != size {
		return checkpoint.SharedFile{}, fmt.Errorf("WriteShared %s: %d bytes of %d, %v", key, len(data), size, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	name := format.SharedName(id, key)
	m.files[name] = append([]byte(nil), data...)
	m.written += int64(len(data))
	return checkpoint.SharedFile{Name: name, Size: int64(len(data)), CRC32C: format.Checksum(data)}, nil
}

func (m *memShared) ReadShared(f checkpoint.SharedFile, w io.Writer) error {
	b, err := m.read(f)
	if err == nil {
		_, err = w.Write(b)
	}
	return err
}

func (m *memShared) read(f checkpoint.SharedFile) ([]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.reads++
	b, ok := m.files[f.Name]
	switch {
	case !ok:
		return nil, format.Corruptf(f.Name, "missing")
	case int64(len(b)) != f.Size || format.Checksum(b) != f.CRC32C:
		return nil, format.Corruptf(f.Name, "size or checksum mismatch")
	}
	return b, nil
}

func (m *memShared) bytesWritten() int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.written
}

// incrementalNow takes an incremental snapshot of f for checkpoint id.
func incrementalNow(t testing.TB, f *fixture, id checkpoint.ID, files checkpoint.SharedFiles) checkpoint.SubtaskSnapshot {
	t.Helper()
	encode, err := f.b.SnapshotFor(id, checkpoint.KindCheckpoint, files)
	if err != nil {
		t.Fatal(err)
	}
	snap, err := encode()
	if err != nil {
		t.Fatal(err)
	}
	return snap
}

// stateFileSize is the size of the state file that would hold snap.
func stateFileSize(t testing.TB, snap checkpoint.SubtaskSnapshot) int64 {
	t.Helper()
	b, err := format.EncodeState(snap)
	if err != nil {
		t.Fatal(err)
	}
	return int64(len(b))
}

func TestIncrementalUploadsWhatChanged(t *testing.T) {
	const n, changed = 50_000, 200
	f := subtaskFixture(t, PebbleBackend, 0, 1, 128)
	// Timers are in the database too: one key in ten has one of each kind.
	for i := range n {
		f.b.SetCurrentKey(fmt.Sprint("key-", i))
		f.count.Update(int64(i))
		f.seen.Put("u", i)
		f.events.Add(fmt.Sprint("e", i))
		if i%10 == 0 {
			f.b.RegisterTimer(epoch.Add(time.Duration(i) * time.Second))
			f.b.RegisterEventTimer(epoch.Add(time.Duration(i%60) * time.Minute))
		}
	}
	// A background compaction between the checkpoints would rewrite files
	// that did not change: none is due once the database settled.
	f.b.writeBackCaches()
	if err := f.b.disk.db.Settle(); err != nil {
		t.Fatal(err)
	}
	files := newMemShared()
	first := incrementalNow(t, f, 1, files)
	firstShared, firstFile := files.bytesWritten(), stateFileSize(t, first)
	f.b.CheckpointComplete(1)
	for i := range changed {
		k := i * (n / changed)
		f.b.SetCurrentKey(fmt.Sprint("key-", k))
		f.count.Update(-1)
		f.b.DeleteTimer(epoch.Add(time.Duration(k) * time.Second))
		f.b.RegisterTimer(epoch.Add(time.Duration(k) * time.Hour))
	}
	second := incrementalNow(t, f, 2, files)
	secondShared, secondFile := files.bytesWritten()-firstShared, stateFileSize(t, second)
	full := int64(0)
	for _, blob := range snapshotNow(t, f.b) {
		full += int64(len(blob))
	}
	t.Logf("%d keys, then %d changed: checkpoint 1 uploaded %d shared bytes + a %d-byte state file; checkpoint 2 %d shared bytes + a %d-byte state file; a full snapshot is %d bytes of blobs",
		n, changed, firstShared, firstFile, secondShared, secondFile, full)
	if got, limit := secondShared+secondFile, (firstShared+firstFile)/2; got >= limit {
		t.Errorf("checkpoint 2 uploaded %d bytes, want < %d (half of checkpoint 1's)", got, limit)
	}
	// A checkpoint that held every timer would be at least their part of the
	// full snapshot, well over a twentieth of it.
	if got, limit := secondShared+secondFile, full/20; got >= limit {
		t.Errorf("checkpoint 2 uploaded %d bytes, want < %d (a twentieth of a full snapshot, which holds %d timers)", got, limit, 2*n)
	}
	if len(second.DBs) != 1 || len(second.DBs[0].Files) == 0 {
		t.Fatalf("second snapshot has databases %+v, want one with files", second.DBs)
	}
	if len(second.KeyGroups) != 0 {
		t.Errorf("second snapshot has %d key-group blobs, want none: the timers are in the database", len(second.KeyGroups))
	}
}

func TestIncrementalSavepointIsFull(t *testing.T) {
	f := subtaskFixture(t, PebbleBackend, 0, 1, 16)
	for i := range 100 {
		f.fill(i)
	}
	files := newMemShared()
	encode, err := f.b.SnapshotFor(7, checkpoint.KindSavepoint, files)
	if err != nil {
		t.Fatal(err)
	}
	snap, err := encode()
	if err != nil {
		t.Fatal(err)
	}
	if len(snap.DBs) != 0 || files.bytesWritten() != 0 || len(snap.KeyGroups) == 0 {
		t.Fatalf("savepoint: %d databases, %d shared bytes, %d key groups; want a full snapshot", len(snap.DBs), files.bytesWritten(), len(snap.KeyGroups))
	}
}

// restoreSnapshots restores the snapshots of former subtasks into the p
// subtasks of backends of kind, each taking what it owns.
func restoreSnapshots(t *testing.T, kind BackendKind, snaps []checkpoint.SubtaskSnapshot, files checkpoint.SharedFiles, p, maxP int) []*fixture {
	t.Helper()
	fs := make([]*fixture, p)
	for i := range fs {
		fs[i] = subtaskFixture(t, kind, i, p, maxP)
		for _, snap := range snaps {
			if err := fs[i].b.RestoreDBs(snap.DBs, files); err != nil {
				t.Fatal(err)
			}
			for kg, blob := range snap.KeyGroups {
				if fs[i].b.KeyGroupRange().Contains(kg) {
					if err := fs[i].b.Restore(kg, blob); err != nil {
						t.Fatal(err)
					}
				}
			}
		}
	}
	return fs
}

// TestIncrementalRescale restores incremental snapshots 1 -> 2 -> 3 -> 1,
// into Pebble and heap backends, and compares every key with the source.
func TestIncrementalRescale(t *testing.T) {
	const maxP, n = 32, 2000
	src := subtaskFixture(t, PebbleBackend, 0, 1, maxP)
	for i := range n {
		src.fill(i)
	}
	want := map[string]keyState{}
	for i := range n {
		k := fmt.Sprint("key-", i)
		want[k] = src.dump(k)
	}
	check := func(fs []*fixture, what string) {
		t.Helper()
		p := len(fs)
		for k, w := range want {
			owner := SubtaskForKeyGroup(src.b.KeyGroupOf(k), p, maxP)
			for i, f := range fs {
				got := f.dump(k)
				switch {
				case i == owner && !got.equal(w):
					t.Fatalf("%s: owner %d has %s = %v, want %v", what, i, k, got, w)
				case i != owner && !got.empty():
					t.Fatalf("%s: subtask %d is not the owner of %s but has %v", what, i, k, got)
				}
			}
		}
	}
	files := newMemShared()
	id := checkpoint.ID(0)
	snapshotAll := func(fs []*fixture) []checkpoint.SubtaskSnapshot {
		id++
		var snaps []checkpoint.SubtaskSnapshot
		for _, f := range fs {
			snaps = append(snaps, incrementalNow(t, f, id, files))
		}
		return snaps
	}
	snaps := snapshotAll([]*fixture{src})
	for _, kind := range backendKinds {
		check(restoreSnapshots(t, kind, snaps, files, 1, maxP), "1 -> 1 "+kind.String())
	}
	two := restoreSnapshots(t, PebbleBackend, snaps, files, 2, maxP)
	check(two, "1 -> 2")
	three := restoreSnapshots(t, PebbleBackend, snapshotAll(two), files, 3, maxP)
	check(three, "2 -> 3")
	threeSnaps := snapshotAll(three)
	check(restoreSnapshots(t, PebbleBackend, threeSnaps, files, 1, maxP), "3 -> 1 pebble")
	check(restoreSnapshots(t, HeapBackend, threeSnaps, files, 2, maxP), "3 -> 2 heap")
}

// TestIncrementalRescaleDownAtOnce restores the databases of two subtasks
// into one in a single RestoreDBs, as a job does: it adopts one and
// ingests the other, downloaded meanwhile. Every key restores; with a
// shared file of the ingested one damaged, the restore fails naming it and
// leaves no download directory behind.
func TestIncrementalRescaleDownAtOnce(t *testing.T) {
	const maxP, n = 32, 2000
	files := newMemShared()
	var dbs []checkpoint.DBFiles
	want := map[string]keyState{}
	for i := range 2 {
		src := subtaskFixture(t, PebbleBackend, i, 2, maxP)
		for k := range n {
			if SubtaskForKeyGroup(src.b.KeyGroupOf(fmt.Sprint("key-", k)), 2, maxP) == i {
				src.fill(k)
				want[fmt.Sprint("key-", k)] = src.dump(fmt.Sprint("key-", k))
			}
		}
		dbs = append(dbs, incrementalNow(t, src, 1, files).DBs...)
	}
	one := subtaskFixture(t, PebbleBackend, 0, 1, maxP)
	if err := one.b.RestoreDBs(dbs, files); err != nil {
		t.Fatal(err)
	}
	for k, w := range want {
		if got := one.dump(k); !got.equal(w) {
			t.Fatalf("after 2 -> 1: %s = %v, want %v", k, got, w)
		}
	}

	var victim string
	for _, f := range dbs[1].Files {
		if f.Shared.Name != "" {
			victim = f.Shared.Name
		}
	}
	good := files.files[victim]
	files.files[victim] = good[:len(good)/2]
	defer func() { files.files[victim] = good }()
	broken := subtaskFixture(t, PebbleBackend, 0, 1, maxP)
	err := broken.b.RestoreDBs(dbs, files)
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), victim) {
		t.Fatalf("RestoreDBs with %s truncated = %v, want ErrCorrupt naming it", victim, err)
	}
	dir := broken.b.disk.db.Dir()
	entries, err := os.ReadDir(filepath.Dir(dir))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), filepath.Base(dir)+".download-") {
			t.Errorf("the failed restore left %s", e.Name())
		}
	}
}

func TestIncrementalCorruptSharedFile(t *testing.T) {
	f := subtaskFixture(t, PebbleBackend, 0, 1, 16)
	for i := range 500 {
		f.fill(i)
	}
	files := newMemShared()
	snap := incrementalNow(t, f, 1, files)
	var victim string
	for _, file := range snap.DBs[0].Files {
		if file.Shared.Name != "" {
			victim = file.Shared.Name
		}
	}
	if victim == "" {
		t.Fatal("no shared file")
	}
	for name, damage := range map[string]func(){
		"missing":   func() { delete(files.files, victim) },
		"truncated": func() { files.files[victim] = files.files[victim][:10] },
		"flipped":   func() { files.files[victim][len(files.files[victim])/2] ^= 1 },
	} {
		t.Run(name, func(t *testing.T) {
			good := append([]byte(nil), files.files[victim]...)
			defer func() { files.files[victim] = good }()
			damage()
			to := subtaskFixture(t, HeapBackend, 0, 1, 16)
			err := to.b.RestoreDBs(snap.DBs, files)
			if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), victim) {
				t.Fatalf("RestoreDBs = %v, want ErrCorrupt naming %s", err, victim)
			}
			if got := to.dump("key-1"); !got.empty() {
				t.Fatalf("after a failed restore key-1 = %v, want nothing", got)
			}
		})
	}
}
