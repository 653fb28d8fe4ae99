package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/exactlyonce/exactly/checkpoint"
	"github.com/exactlyonce/exactly/internal/vfs"
)

// fakeDB models the files of one database instance across incremental
// checkpoints as the Pebble backend makes them: every checkpoint adds a
// file and compacts the oldest away once there are four; a file is
// uploaded once, and reused only after a checkpoint that refers to it
// completed.
type fakeDB struct {
	instance  string
	next      int
	live      []string
	pending   map[string]checkpoint.SharedFile
	confirmed map[string]checkpoint.SharedFile
}

func newFakeDB(instance string) *fakeDB { return &fakeDB{instance: instance} }

func (d *fakeDB) snapshot(s Storage, id checkpoint.ID) (checkpoint.SubtaskSnapshot, error) {
	d.next++
	d.live = append(d.live, fmt.Sprintf("%06d.sst", d.next))
	if len(d.live) > 4 {
		d.live = d.live[1:]
	}
	db := checkpoint.DBFiles{KeyGroupStart: 0, KeyGroupEnd: 4, States: []checkpoint.DBState{{Name: "count", Kind: 1, ID: 1}}}
	d.pending = map[string]checkpoint.SharedFile{}
	for _, name := range d.live {
		f, ok := d.confirmed[name]
		if !ok {
			var err error
			if f, err = writeSharedBytes(s, id, d.instance+"-"+name, fmt.Appendf(nil, "%s %s contents", d.instance, name)); err != nil {
				return checkpoint.SubtaskSnapshot{}, err
			}
		}
		d.pending[name] = f
		db.Files = append(db.Files, checkpoint.DBFile{Name: name, Shared: f})
	}
	db.Files = append(db.Files, checkpoint.DBFile{Name: "MANIFEST-000001", Data: fmt.Appendf(nil, "manifest of %d", id)})
	return checkpoint.SubtaskSnapshot{DBs: []checkpoint.DBFiles{db}}, nil
}

func (d *fakeDB) completed() { d.confirmed = d.pending }

// tryIncremental takes an incremental checkpoint of db and completes it.
// The returned metadata has the reserved ID set as soon as it is known.
func tryIncremental(s Storage, db *fakeDB) (checkpoint.Metadata, error) {
	id, err := s.ReserveAbove(0)
	if err != nil {
		return checkpoint.Metadata{}, err
	}
	m := checkpoint.Metadata{ID: id, Kind: checkpoint.KindCheckpoint, Job: "incremental", MaxParallelism: 4,
		Triggered: time.Unix(1700000000, 0).UTC(), Completed: time.Unix(1700000001, 0).UTC()}
	snap, err := db.snapshot(s, id)
	if err != nil {
		return m, err
	}
	h, err := s.WriteState(id, checkpoint.KindCheckpoint, "keyed", 0, snap)
	if err != nil {
		return m, err
	}
	h.KeyGroupStart, h.KeyGroupEnd = 0, 4
	m.Operators = []checkpoint.OperatorState{{Name: "keyed", Parallelism: 1, Subtasks: []checkpoint.StateHandle{h}}}
	if _, err := s.Complete(m); err != nil {
		return m, err
	}
	m.FormatVersion = FormatVersion
	db.completed()
	return m, nil
}

func writeIncremental(t *testing.T, s Storage, db *fakeDB) checkpoint.Metadata {
	t.Helper()
	m, err := tryIncremental(s, db)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// checkRestorable reads every file of checkpoint m back.
func checkRestorable(t *testing.T, s Storage, m *checkpoint.Metadata) {
	t.Helper()
	dir := s.Dir(m.ID, m.Kind)
	for _, op := range m.Operators {
		for _, h := range op.Subtasks {
			snap, err := s.ReadStateAt(dir, h)
			if err != nil {
				t.Fatalf("checkpoint %d: %v", m.ID, err)
			}
			for _, db := range snap.DBs {
				for _, f := range db.Files {
					if f.Shared.Name == "" {
						continue
					}
					if _, err := readSharedBytes(s, dir, f.Shared); err != nil {
						t.Fatalf("checkpoint %d: %v", m.ID, err)
					}
				}
			}
		}
	}
}

// sharedView is what a test sees of a store's shared files: those that
// exist, and those the completed checkpoints need.
type sharedView struct {
	present func() []string
	needed  func() []string
}

func localShared(t *testing.T, s *Store) sharedView {
	return sharedView{
		present: func() []string {
			names, err := s.fs.ReadDir(filepath.Join(s.dir, sharedDir))
			if err != nil {
				t.Fatal(err)
			}
			return names
		},
		needed: func() []string {
			needed, err := s.neededShared()
			if err != nil {
				t.Fatal(err)
			}
			return sortedKeys(needed)
		},
	}
}

func objectShared(t *testing.T, s *ObjectStore) sharedView {
	return sharedView{
		present: func() []string {
			s.sweeps.Wait()
			keys, err := s.b.list(context.Background(), s.key(sharedDir)+"/")
			if err != nil {
				t.Fatal(err)
			}
			for i, k := range keys {
				keys[i] = path.Base(k)
			}
			return keys
		},
		needed: func() []string {
			m, _, err := s.readManifest(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			needed := map[string]bool{}
			for _, id := range m.Checkpoints {
				md, err := s.load(s.dirKey(id, checkpoint.KindCheckpoint), id, checkpoint.KindCheckpoint)
				if err != nil {
					t.Fatal(err)
				}
				for name := range sharedOf(md) {
					needed[name] = true
				}
			}
			return sortedKeys(needed)
		},
	}
}

func sortedKeys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// checkNoOrphans fails unless the shared files present are exactly those
// the completed checkpoints need.
func checkNoOrphans(t *testing.T, v sharedView, when string) {
	t.Helper()
	if present, needed := v.present(), v.needed(); !slices.Equal(present, needed) {
		t.Fatalf("%s: shared files %v, but the retained checkpoints need %v", when, present, needed)
	}
}

// storesForShared runs test on a local store on an in-memory filesystem
// and on an object store on an in-memory bucket (and on the S3 server,
// with EXACTLY_S3 set), each retaining two checkpoints.
func storesForShared(t *testing.T, test func(t *testing.T, s Storage, v sharedView)) {
	t.Run("local", func(t *testing.T) {
		s := mustOpen(t, testDir, Options{FS: vfs.NewCrashableMem(), Retained: 2})
		test(t, s, localShared(t, s))
	})
	objectBackends(t, func(t *testing.T, f objectFixture) {
		s := f.open(t, Options{Retained: 2})
		acquireObject(t, s, realOwnership("test", time.Minute))
		test(t, s, objectShared(t, s))
	})
}

// TestSharedFilesRetention: checkpoints share the files they have in
// common, each retained one restores, and no file outlives the last
// retained checkpoint that needs it.
func TestSharedFilesRetention(t *testing.T) {
	storesForShared(t, func(t *testing.T, s Storage, v sharedView) {
		db := newFakeDB("0123456789abcdef")
		var uploaded []string
		for i := range 8 {
			m := writeIncremental(t, s, db)
			for _, f := range m.Operators[0].Subtasks[0].Shared {
				if !slices.Contains(uploaded, f.Name) {
					uploaded = append(uploaded, f.Name)
				}
			}
			checkNoOrphans(t, v, fmt.Sprintf("after checkpoint %d", m.ID))
			latest, err := s.Latest()
			if err != nil || latest.ID != m.ID {
				t.Fatalf("Latest = %v, %v; want checkpoint %d", latest, err, m.ID)
			}
			checkRestorable(t, s, latest)
			if i > 0 && len(m.Operators[0].Subtasks[0].Shared) < 2 {
				t.Fatalf("checkpoint %d lists %v: want the files it shares with the previous one", m.ID, m.Operators[0].Subtasks[0].Shared)
			}
		}
		if len(uploaded) != 8 {
			t.Errorf("uploaded %d distinct shared files for 8 checkpoints adding one file each, want 8", len(uploaded))
		}
		// A savepoint must be self-contained.
		id, err := s.ReserveAbove(0)
		if err != nil {
			t.Fatal(err)
		}
		m := checkpoint.Metadata{ID: id, Kind: checkpoint.KindSavepoint, Job: "incremental", MaxParallelism: 4,
			Operators: []checkpoint.OperatorState{{Name: "keyed", Parallelism: 1, Subtasks: []checkpoint.StateHandle{{File: "keyed-0.state", Size: 100,
				Shared: []checkpoint.SharedFile{{Name: "00000000000000000001-x.sst", Size: 1}}}}}}}
		if _, err := s.Complete(m); err == nil || !strings.Contains(err.Error(), "savepoint") {
			t.Fatalf("Complete of a savepoint with shared files = %v, want a refusal", err)
		}
	})
}

// TestSharedFilesCorrupt: a missing, truncated or changed shared file is
// ErrCorrupt naming it, when loading and when reading.
func TestSharedFilesCorrupt(t *testing.T) {
	s := mustOpen(t, testDir, Options{FS: vfs.NewCrashableMem()})
	m := writeIncremental(t, s, newFakeDB("0123456789abcdef"))
	f := m.Operators[0].Subtasks[0].Shared[0]
	path := filepath.Join(testDir, sharedDir, f.Name)
	dir := s.Dir(m.ID, m.Kind)
	for name, damage := range map[string]func() error{
		"changed": func() error {
			_, err := writeSharedBytes(s, 1, strings.TrimPrefix(f.Name, "00000000000000000001-"), make([]byte, f.Size))
			return err
		},
		"truncated": func() error {
			_, err := writeSharedBytes(s, 1, strings.TrimPrefix(f.Name, "00000000000000000001-"), []byte("x"))
			return err
		},
		"missing": func() error { return s.fs.Remove(path) },
	} {
		t.Run(name, func(t *testing.T) {
			if err := damage(); err != nil {
				t.Fatal(err)
			}
			if _, err := readSharedBytes(s, dir, f); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), path) {
				t.Fatalf("ReadSharedAt = %v, want ErrCorrupt naming %s", err, path)
			}
			if name != "changed" {
				if _, err := s.Latest(); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), path) {
					t.Fatalf("Latest = %v, want ErrCorrupt naming %s", err, path)
				}
			}
		})
	}
}

// TestSharedFilesCrash crashes a local store at every point of an
// incremental checkpoint (uploads, state file, completion, retention,
// sweep): every checkpoint left restores, and after the next completion
// no shared file is left that no retained checkpoint needs.
func TestSharedFilesCrash(t *testing.T) {
	for _, mode := range []string{"fail-nth", "fail-from-nth"} {
		t.Run(mode, func(t *testing.T) {
			for n := 1; ; n++ {
				mem := vfs.NewCrashableMem()
				setup := mustOpen(t, testDir, Options{FS: mem, Retained: 2})
				db := newFakeDB("0123456789abcdef")
				for range 3 {
					writeIncremental(t, setup, db)
				}
				ops, failed := 0, ""
				faulty := vfs.WithErrors(mem, func(op, name string) error {
					ops++
					if ops == n || (mode == "fail-from-nth" && ops > n) {
						if failed == "" {
							failed = op + " " + name
						}
						return errInjected
					}
					return nil
				})
				s := mustOpen(t, testDir, Options{FS: mem, Retained: 2})
				s.fs = faulty
				if _, err := tryIncremental(s, db); err != nil && failed == "" {
					t.Fatalf("n=%d: checkpoint failed without an injected failure: %v", n, err)
				}

				after := mustOpen(t, testDir, Options{FS: mem.Crash(), Retained: 2})
				got, err := after.Latest()
				if err != nil || got == nil {
					t.Fatalf("n=%d (%s): Latest after crash = %v, %v", n, failed, got, err)
				}
				checkRestorable(t, after, got)
				// The restarted job's database is a new instance.
				next := writeIncremental(t, after, newFakeDB("fedcba9876543210"))
				checkNoOrphans(t, localShared(t, after), fmt.Sprintf("n=%d (%s): after the next checkpoint", n, failed))
				if latest, err := after.Latest(); err != nil || latest.ID != next.ID {
					t.Fatalf("n=%d: Latest = %v, %v; want checkpoint %d", n, latest, err, next.ID)
				}
				for _, id := range mustList(t, after) {
					md, err := after.load(after.Dir(id, checkpoint.KindCheckpoint), id, checkpoint.KindCheckpoint)
					if err != nil {
						t.Fatalf("n=%d (%s): retained checkpoint %d: %v", n, failed, id, err)
					}
					checkRestorable(t, after, md)
				}
				if failed == "" {
					t.Logf("%d crash points", n-1)
					return
				}
			}
		})
	}
}

// mustList returns the ids of the completed checkpoints of s.
func mustList(t *testing.T, s *Store) []checkpoint.ID {
	t.Helper()
	ids, err := s.list(checkpoint.KindCheckpoint)
	if err != nil {
		t.Fatal(err)
	}
	var done []checkpoint.ID
	for _, id := range ids {
		if _, err := s.fs.Stat(filepath.Join(s.Dir(id, checkpoint.KindCheckpoint), metadataFile)); err == nil {
			done = append(done, id)
		}
	}
	return done
}

// TestSharedFilesLostAnswers loses the answer to each write of an
// incremental checkpoint on object storage in turn (the object is
// written, the store sees an error): every checkpoint left restores, and
// the next completion leaves no unneeded shared object.
func TestSharedFilesLostAnswers(t *testing.T) {
	for step := 0; ; step++ {
		b := newMemBucket()
		f := objectFixture{b: b, prefix: "jobs/test"}
		s := f.open(t, Options{Retained: 2})
		acquireObject(t, s, realOwnership("test", time.Minute))
		db := newFakeDB("0123456789abcdef")
		for range 3 {
			writeIncremental(t, s, db)
		}
		before := f.keys(t)
		// Lose the answer to the step-th write of the next checkpoint.
		writes := 0
		b.onPut = func(key string) bool { writes++; return writes == step+1 }
		_, err := tryIncremental(s, db)
		b.onPut = nil
		if err == nil && writes <= step {
			t.Logf("%d writes per checkpoint, each answer lost once", step)
			return
		}
		if err == nil {
			t.Fatalf("step %d: a lost answer went unnoticed", step)
		}
		latest, lerr := s.Latest()
		if lerr != nil {
			t.Fatalf("step %d: Latest = %v", step, lerr)
		}
		checkRestorable(t, s, latest)
		writeIncremental(t, s, newFakeDB("fedcba9876543210"))
		checkNoOrphans(t, objectShared(t, s), fmt.Sprintf("step %d (keys before: %v)", step, before))
	}
}

// writeSharedBytes writes data as a shared file of s.
func writeSharedBytes(s Storage, id checkpoint.ID, key string, data []byte) (checkpoint.SharedFile, error) {
	return s.WriteShared(id, key, bytes.NewReader(data), int64(len(data)))
}

// readSharedBytes reads a shared file of s whole.
func readSharedBytes(s Storage, dir string, f checkpoint.SharedFile) ([]byte, error) {
	var b bytes.Buffer
	err := s.ReadSharedAt(dir, f, &b)
	return b.Bytes(), err
}
