package store

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/exactlyonce/exactly/checkpoint"
	"github.com/exactlyonce/exactly/internal/format"
	"github.com/exactlyonce/exactly/internal/vfs"
)

const testDir = "/data/job"

// logBuffer returns a logger writing warnings as text to the returned buffer.
func logBuffer() (*slog.Logger, *bytes.Buffer) {
	var buf bytes.Buffer
	return slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelWarn})), &buf
}

func mustOpen(t testing.TB, dir string, opts Options) *Store {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger, _ = logBuffer()
	}
	s, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// testOperators are the operators of the test job; the names exercise escaping.
var testOperators = []string{"counts/by key", "Sink"}

// snapshotFor returns distinct, deterministic state for one subtask.
func snapshotFor(id checkpoint.ID, op string, subtask int) checkpoint.SubtaskSnapshot {
	return checkpoint.SubtaskSnapshot{
		KeyGroups: map[int][]byte{
			subtask * 2:     fmt.Appendf(nil, "%s/%d/%d/a", op, subtask, id),
			subtask*2 + 1:   bytes.Repeat([]byte{byte(id)}, 300),
			subtask*2 + 100: nil,
		},
		Entries: [][]byte{fmt.Appendf(nil, "offset=%d", id*10), nil},
	}
}

// writeCheckpoint writes the state of every subtask of the test job for a
// new id and completes it; it returns the metadata passed to Complete.
func writeCheckpoint(t testing.TB, s Storage, kind checkpoint.Kind) checkpoint.Metadata {
	t.Helper()
	m, err := tryCheckpoint(s, kind)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// tryCheckpoint is writeCheckpoint, stopping at the first error. The
// returned metadata has the reserved ID set as soon as it is known.
func tryCheckpoint(s Storage, kind checkpoint.Kind) (checkpoint.Metadata, error) {
	id, err := s.ReserveAbove(0)
	if err != nil {
		return checkpoint.Metadata{}, err
	}
	m := checkpoint.Metadata{
		FormatVersion:  format.BaseVersion,
		ID:             id,
		Kind:           kind,
		Job:            "wordcount",
		MaxParallelism: 4,
		Triggered:      time.Unix(1700000000+int64(id), 0).UTC(),
		Completed:      time.Unix(1700000001+int64(id), 500).UTC(),
	}
	for _, op := range testOperators {
		st := checkpoint.OperatorState{Name: op, Parallelism: 2}
		for sub := range 2 {
			h, err := s.WriteState(id, kind, op, sub, snapshotFor(id, op, sub))
			if err != nil {
				return m, err
			}
			h.KeyGroupStart, h.KeyGroupEnd = sub*2, sub*2+2
			st.Subtasks = append(st.Subtasks, h)
		}
		m.Operators = append(m.Operators, st)
	}
	_, err = s.Complete(m)
	return m, err
}

func sameSnapshot(a, b checkpoint.SubtaskSnapshot) bool {
	if len(a.KeyGroups) != len(b.KeyGroups) || len(a.Entries) != len(b.Entries) {
		return false
	}
	for g, v := range a.KeyGroups {
		w, ok := b.KeyGroups[g]
		if !ok || !bytes.Equal(v, w) {
			return false
		}
	}
	for i := range a.Entries {
		if !bytes.Equal(a.Entries[i], b.Entries[i]) {
			return false
		}
	}
	return true
}

func TestStateRoundTrip(t *testing.T) {
	s := mustOpen(t, t.TempDir(), Options{})
	big := make([]byte, 1<<20)
	for i := range big {
		big[i] = byte(i * 7)
	}
	for i, snap := range []checkpoint.SubtaskSnapshot{
		{},
		{KeyGroups: map[int][]byte{0: nil}},
		{KeyGroups: map[int][]byte{5: []byte("x"), 1: []byte("yy"), 1 << 20: big}},
		{Entries: [][]byte{nil, []byte("a"), big}},
		snapshotFor(9, "op", 1),
	} {
		h, err := s.WriteState(7, checkpoint.KindCheckpoint, "op", i, snap)
		if err != nil {
			t.Fatal(err)
		}
		if h.Subtask != i || h.File != fmt.Sprintf("op-%d.state", i) || h.Size < format.EnvelopeSize {
			t.Fatalf("handle = %+v", h)
		}
		got, err := s.ReadState(7, checkpoint.KindCheckpoint, h)
		if err != nil {
			t.Fatal(err)
		}
		if !sameSnapshot(got, snap) {
			t.Fatalf("snapshot %d: read back a different snapshot", i)
		}
	}
	if _, err := s.WriteState(7, checkpoint.KindCheckpoint, "op", 0, checkpoint.SubtaskSnapshot{KeyGroups: map[int][]byte{-1: nil}}); err == nil {
		t.Fatal("WriteState accepted a negative key group")
	}
}

func TestMetadataRoundTrip(t *testing.T) {
	for _, kind := range []checkpoint.Kind{checkpoint.KindCheckpoint, checkpoint.KindSavepoint} {
		t.Run(string(kind), func(t *testing.T) {
			s := mustOpen(t, t.TempDir(), Options{})
			want := writeCheckpoint(t, s, kind)
			got, err := s.Load(s.Dir(want.ID, kind))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(*got, want) {
				t.Fatalf("Load = %+v\nwant %+v", *got, want)
			}
			if _, err := s.Load(filepath.Join(s.Dir(want.ID, kind), metadataFile)); err != nil {
				t.Fatalf("Load of the _metadata file: %v", err)
			}
			latest, err := s.Latest()
			if err != nil {
				t.Fatal(err)
			}
			// Savepoints count as restore points: sinks commit on them.
			if latest == nil || !reflect.DeepEqual(*latest, want) {
				t.Fatalf("Latest = %+v, want %+v", latest, want)
			}
			for _, op := range got.Operators {
				for _, h := range op.Subtasks {
					snap, err := s.ReadState(got.ID, kind, h)
					if err != nil {
						t.Fatal(err)
					}
					if !sameSnapshot(snap, snapshotFor(got.ID, op.Name, h.Subtask)) {
						t.Fatalf("%s/%d: wrong state", op.Name, h.Subtask)
					}
				}
			}
		})
	}
}

func TestLoadErrors(t *testing.T) {
	s := mustOpen(t, t.TempDir(), Options{})
	if _, err := s.Load(filepath.Join(s.dir, "elsewhere")); err == nil || !strings.Contains(err.Error(), "elsewhere") {
		t.Fatalf("Load of a non-checkpoint directory: %v", err)
	}
	missing := s.Dir(5, checkpoint.KindSavepoint)
	if _, err := s.Load(missing); !errors.Is(err, fs.ErrNotExist) || errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), missing) {
		t.Fatalf("Load of a missing directory: %v", err)
	}
	if _, err := s.WriteState(6, checkpoint.KindCheckpoint, "op", 0, checkpoint.SubtaskSnapshot{}); err != nil {
		t.Fatal(err)
	}
	incomplete := s.Dir(6, checkpoint.KindCheckpoint)
	if _, err := s.Load(incomplete); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), incomplete) {
		t.Fatalf("Load of an incomplete checkpoint: %v", err)
	}
}

func TestStateFileNames(t *testing.T) {
	long := strings.Repeat("x", 300)
	ops := []string{"a", "A", "a-1", "a-1-", "%41", "a/b", `a\b`, "..", ".", "a b", "ä", "_x", long, long + "y", strings.Repeat("/", 100)}
	seen := map[string]string{}
	for _, op := range ops {
		for sub := range 12 {
			name := stateFileName(op, sub)
			if len(name) > 255 || !validStateFile(name) {
				t.Errorf("stateFileName(%q, %d) = %q: unsafe", op, sub, name)
			}
			for _, c := range name {
				if !strings.ContainsRune("abcdefghijklmnopqrstuvwxyz0123456789_-.%ABCDEF~", c) {
					t.Errorf("stateFileName(%q, %d) = %q holds %q", op, sub, name, c)
				}
			}
			key := strings.ToLower(name) // unambiguous on case-insensitive filesystems too
			if prev, dup := seen[key]; dup {
				t.Errorf("stateFileName(%q, %d) = %q, same as for %s", op, sub, name, prev)
			}
			seen[key] = fmt.Sprintf("%q/%d", op, sub)
		}
	}
}

func TestReserveID(t *testing.T) {
	dir := t.TempDir()
	reserve := func(s *Store, want checkpoint.ID) {
		t.Helper()
		id, err := s.ReserveID()
		if err != nil {
			t.Fatal(err)
		}
		if id != want {
			t.Fatalf("ReserveID = %d, want %d", id, want)
		}
	}
	s := mustOpen(t, dir, Options{})
	reserve(s, 1)
	reserve(s, 2)
	s = mustOpen(t, dir, Options{}) // restart
	reserve(s, 3)
	m := writeCheckpoint(t, s, checkpoint.KindCheckpoint) // 4
	if m.ID != 4 {
		t.Fatalf("checkpoint id %d, want 4", m.ID)
	}
	// Deleting every checkpoint does not bring old ids back.
	if err := os.RemoveAll(s.Dir(m.ID, checkpoint.KindCheckpoint)); err != nil {
		t.Fatal(err)
	}
	s = mustOpen(t, dir, Options{})
	reserve(s, 5)
	// A directory above _ids (e.g. copied in) is not reused either.
	if _, err := s.WriteState(41, checkpoint.KindSavepoint, "op", 0, checkpoint.SubtaskSnapshot{}); err != nil {
		t.Fatal(err)
	}
	reserve(s, 42)
	if _, err := s.WriteState(50, checkpoint.KindCheckpoint, "op", 0, checkpoint.SubtaskSnapshot{}); err != nil {
		t.Fatal(err)
	}
	reserve(mustOpen(t, dir, Options{}), 51)

	// A corrupt _ids stops reservation rather than risk reusing an id.
	if err := os.WriteFile(filepath.Join(dir, idsFile), []byte("garbage"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ReserveID(); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), idsFile) {
		t.Fatalf("ReserveID with a corrupt _ids: %v", err)
	}
}

func TestOpenOptions(t *testing.T) {
	if _, err := Open(t.TempDir(), Options{Retained: -1}); err == nil || !strings.Contains(err.Error(), "Options.Retained = -1") {
		t.Fatalf("Open with Retained -1: %v", err)
	}
	if _, err := Open("", Options{}); err == nil {
		t.Fatal("Open with an empty dir succeeded")
	}
	s := mustOpen(t, filepath.Join(t.TempDir(), "a", "b"), Options{})
	if s.retained != DefaultRetained || s.fs != vfs.Default || s.log == nil {
		t.Fatalf("defaults not applied: %+v", s)
	}
	if _, err := s.WriteState(1, "snapshot", "op", 0, checkpoint.SubtaskSnapshot{}); err == nil {
		t.Fatal("WriteState accepted an unknown kind")
	}
}

// memFiles returns the names of the files of a checkpoint directory.
func memFiles(t *testing.T, fsys vfs.FS, dir string) []string {
	t.Helper()
	names, err := fsys.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	return names
}

func readAll(t *testing.T, fsys vfs.FS, name string) []byte {
	t.Helper()
	f, err := fsys.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b, err := io.ReadAll(f)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func overwrite(t *testing.T, fsys vfs.FS, name string, b []byte) {
	t.Helper()
	f, err := fsys.Create(name)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestCorruption damages each file of the newest checkpoint in turn, every
// byte of it. A completed checkpoint that does not verify stops Latest with
// an error that names the file and the choices; with SkipCorrupt, Latest
// falls back to the previous checkpoint with a warning naming the file and
// counts the skip. Load always reports ErrCorrupt.
func TestCorruption(t *testing.T) {
	mem := vfs.NewCrashableMem()
	logger, logs := logBuffer()
	s := mustOpen(t, testDir, Options{FS: mem, Logger: logger})
	skipping := mustOpen(t, testDir, Options{FS: mem, Logger: logger, SkipCorrupt: true})
	prev := writeCheckpoint(t, s, checkpoint.KindCheckpoint)
	newest := writeCheckpoint(t, s, checkpoint.KindCheckpoint)
	dir := s.Dir(newest.ID, checkpoint.KindCheckpoint)

	check := func(t *testing.T, path, damage string) {
		t.Helper()
		got, err := s.Latest()
		if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), path) || !errors.Is(err, ErrCorruptCompleted) || got != nil {
			t.Fatalf("%s %s: Latest = %+v, %v; want an error naming the file and the choices", damage, path, got, err)
		}
		logs.Reset()
		skips := skipping.Skipped()
		got, err = skipping.Latest()
		if err != nil {
			t.Fatalf("%s %s: Latest with SkipCorrupt: %v", damage, path, err)
		}
		if got == nil || got.ID != prev.ID {
			t.Fatalf("%s %s: Latest with SkipCorrupt = %+v, want checkpoint %d", damage, path, got, prev.ID)
		}
		if log := logs.String(); !strings.Contains(log, "level=WARN") || !strings.Contains(log, path) {
			t.Fatalf("%s %s: warning does not name the file: %q", damage, path, log)
		}
		if skipping.Skipped() != skips+1 {
			t.Fatalf("%s %s: Skipped = %d, want %d", damage, path, skipping.Skipped(), skips+1)
		}
		if _, err := s.Load(dir); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), path) {
			t.Fatalf("%s %s: Load: %v", damage, path, err)
		}
	}

	files := memFiles(t, mem, dir)
	if len(files) != 5 {
		t.Fatalf("checkpoint files = %v, want 4 state files and _metadata", files)
	}
	for _, name := range files {
		path := filepath.Join(dir, name)
		orig := readAll(t, mem, path)
		t.Run(name, func(t *testing.T) {
			for i := range orig {
				b := slices.Clone(orig)
				b[i] ^= 0x20
				overwrite(t, mem, path, b)
				check(t, path, fmt.Sprintf("flip byte %d of", i))
			}
			for _, n := range []int{0, 1, format.EnvelopeSize, len(orig) - 1} {
				overwrite(t, mem, path, orig[:n])
				check(t, path, fmt.Sprintf("truncate to %d bytes", n))
			}
			overwrite(t, mem, path, append(slices.Clone(orig), 0))
			check(t, path, "extend")
			if err := mem.Remove(path); err != nil {
				t.Fatal(err)
			}
			check(t, path, "delete")
		})
		overwrite(t, mem, path, orig)
		if got, err := s.Latest(); err != nil || got.ID != newest.ID {
			t.Fatalf("after repairing %s: Latest = %+v, %v", name, got, err)
		}
	}

	// A state file swapped with another intact one is caught by the
	// metadata's size and checksum.
	a, b := filepath.Join(dir, files[0]), filepath.Join(dir, files[1])
	ab, bb := readAll(t, mem, a), readAll(t, mem, b)
	overwrite(t, mem, a, bb)
	check(t, a, "swap")
	overwrite(t, mem, a, ab)

	// When every checkpoint is corrupt the directory is not taken for an
	// empty one: an error, or with SkipCorrupt a fresh start with one
	// warning per checkpoint and one for the fresh start.
	for _, m := range []checkpoint.Metadata{prev, newest} {
		if err := mem.Remove(filepath.Join(s.Dir(m.ID, checkpoint.KindCheckpoint), files[0])); err != nil {
			t.Fatal(err)
		}
	}
	if got, err := s.Latest(); !errors.Is(err, ErrCorrupt) || got != nil {
		t.Fatalf("Latest with all corrupt = %+v, %v; want ErrCorrupt", got, err)
	}
	logs.Reset()
	got, err := skipping.Latest()
	if got != nil || err != nil {
		t.Fatalf("Latest with all corrupt and SkipCorrupt = %+v, %v; want nil, nil", got, err)
	}
	if n := strings.Count(logs.String(), "level=WARN"); n != 3 {
		t.Fatalf("%d warnings, want 3:\n%s", n, logs)
	}
	// Every directory deleted, _ids kept: still not empty.
	for _, m := range []checkpoint.Metadata{prev, newest} {
		if err := mem.RemoveAll(s.Dir(m.ID, checkpoint.KindCheckpoint)); err != nil {
			t.Fatal(err)
		}
	}
	if got, err := s.Latest(); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "up to id 2") {
		t.Fatalf("Latest with every checkpoint deleted = %+v, %v; want ErrCorrupt naming the completed id", got, err)
	}
}

// TestIncompleteCheckpointIsSkippedQuietly: a checkpoint that never
// completed (no metadata, above the completed id) is the normal trace of a
// crash: skipped without a warning.
func TestIncompleteCheckpointIsSkippedQuietly(t *testing.T) {
	mem := vfs.NewCrashableMem()
	logger, logs := logBuffer()
	s := mustOpen(t, testDir, Options{FS: mem, Logger: logger})
	done := writeCheckpoint(t, s, checkpoint.KindCheckpoint)
	id, err := s.ReserveID()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.WriteState(id, checkpoint.KindCheckpoint, "op", 0, snapshotFor(id, "op", 0)); err != nil {
		t.Fatal(err)
	}
	got, err := s.Latest()
	if err != nil || got == nil || got.ID != done.ID {
		t.Fatalf("Latest = %+v, %v; want checkpoint %d", got, err, done.ID)
	}
	if logs.Len() != 0 {
		t.Fatalf("an incomplete checkpoint logged a warning: %s", logs)
	}
}

// TestNewerVersion checks that an intact file of an unknown newer version is
// reported as such, and not skipped as corrupt.
func TestNewerVersion(t *testing.T) {
	mem := vfs.NewCrashableMem()
	s := mustOpen(t, testDir, Options{FS: mem})
	writeCheckpoint(t, s, checkpoint.KindCheckpoint)
	m := writeCheckpoint(t, s, checkpoint.KindCheckpoint)
	path := filepath.Join(s.Dir(m.ID, checkpoint.KindCheckpoint), metadataFile)
	// Re-seal the file with the next version: intact, but unknown.
	b := readAll(t, mem, path)
	body := b[:len(b)-4] // without the checksum
	body[11] = FormatVersion + 1
	overwrite(t, mem, path, binary.BigEndian.AppendUint32(body, format.Checksum(body)))
	if _, err := s.Latest(); !errors.Is(err, ErrNewerVersion) || errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), path) {
		t.Fatalf("Latest with a newer metadata version: %v", err)
	}
}

func TestRetention(t *testing.T) {
	mem := vfs.NewCrashableMem()
	s := mustOpen(t, testDir, Options{FS: mem, Retained: 2})
	sp := writeCheckpoint(t, s, checkpoint.KindSavepoint)
	var ids []checkpoint.ID
	for range 4 {
		ids = append(ids, writeCheckpoint(t, s, checkpoint.KindCheckpoint).ID)
	}
	// An aborted checkpoint, below the next one to complete.
	aborted, err := s.ReserveID()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.WriteState(aborted, checkpoint.KindCheckpoint, "op", 0, checkpoint.SubtaskSnapshot{}); err != nil {
		t.Fatal(err)
	}
	// The fifth checkpoint completes while the next one is in progress.
	last, err := s.ReserveID()
	if err != nil {
		t.Fatal(err)
	}
	inProgress, err := s.ReserveID()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.WriteState(inProgress, checkpoint.KindCheckpoint, "op", 0, checkpoint.SubtaskSnapshot{}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Complete(checkpoint.Metadata{ID: last, Kind: checkpoint.KindCheckpoint}); err != nil {
		t.Fatal(err)
	}
	ids = append(ids, last)

	want := []string{
		dirName(ids[3], checkpoint.KindCheckpoint),
		dirName(ids[4], checkpoint.KindCheckpoint),
		dirName(inProgress, checkpoint.KindCheckpoint),
	}
	var got []string
	for _, name := range memFiles(t, mem, testDir) {
		if strings.HasPrefix(name, chkPrefix) {
			got = append(got, name)
		}
	}
	if !slices.Equal(got, want) {
		t.Fatalf("checkpoint directories = %v, want %v", got, want)
	}
	if _, err := s.Load(s.Dir(sp.ID, checkpoint.KindSavepoint)); err != nil {
		t.Fatalf("savepoint removed or damaged by retention: %v", err)
	}
}

func TestDiscard(t *testing.T) {
	mem := vfs.NewCrashableMem()
	s := mustOpen(t, testDir, Options{FS: mem})
	m := writeCheckpoint(t, s, checkpoint.KindCheckpoint)
	if err := s.Discard(m.ID, checkpoint.KindCheckpoint); err == nil {
		t.Fatal("Discard removed a complete checkpoint")
	}
	id, err := s.ReserveID()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.WriteState(id, checkpoint.KindSavepoint, "op", 0, checkpoint.SubtaskSnapshot{}); err != nil {
		t.Fatal(err)
	}
	if err := s.Discard(id, checkpoint.KindSavepoint); err != nil {
		t.Fatal(err)
	}
	if _, err := mem.Stat(s.Dir(id, checkpoint.KindSavepoint)); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("discarded savepoint still there: %v", err)
	}
	if err := s.Discard(id, checkpoint.KindSavepoint); err != nil {
		t.Fatalf("Discard of a missing checkpoint: %v", err)
	}
}

var errInjected = errors.New("injected failure")

// TestCrash interrupts a whole checkpoint (ReserveID, WriteState, Complete)
// at its n-th file operation, for every n, then crashes the filesystem. After
// the crash Latest must return the new checkpoint complete or the previous
// one, never a broken one; a checkpoint whose Complete succeeded must
// survive; a reserved id must not be handed out again; and the store must
// be able to take the next checkpoint.
func TestCrash(t *testing.T) {
	for _, mode := range []string{"fail-nth", "fail-from-nth"} {
		t.Run(mode, func(t *testing.T) {
			for n := 1; ; n++ {
				mem := vfs.NewCrashableMem()
				prev := writeCheckpoint(t, mustOpen(t, testDir, Options{FS: mem}), checkpoint.KindCheckpoint)

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
				s := mustOpen(t, testDir, Options{FS: mem})
				s.fs = faulty // Open succeeded; fail from here on
				m, cerr := tryCheckpoint(s, checkpoint.KindCheckpoint)
				// Failures the store may ignore: closing a file it read,
				// removing old checkpoints (retention logs them).
				if cerr != nil && failed == "" {
					t.Fatalf("n=%d: checkpoint failed without an injected failure: %v", n, cerr)
				}

				logger, logs := logBuffer()
				after := mustOpen(t, testDir, Options{FS: mem.Crash(), Logger: logger})
				got, err := after.Latest()
				if err != nil {
					t.Fatalf("n=%d (%s): Latest after crash: %v", n, failed, err)
				}
				switch {
				case got == nil:
					t.Fatalf("n=%d (%s): Latest after crash = nil, want checkpoint %d or %d", n, failed, prev.ID, m.ID)
				case cerr == nil && !reflect.DeepEqual(*got, m):
					t.Fatalf("n=%d: Complete succeeded but after the crash Latest = %+v", n, got)
				case got.ID == prev.ID && reflect.DeepEqual(*got, prev):
				case m.ID != 0 && reflect.DeepEqual(*got, m):
				default:
					t.Fatalf("n=%d (%s): Latest after crash = %+v\nwant %+v\nor %+v\nlogs: %s", n, failed, got, prev, m, logs)
				}
				if m.ID != 0 {
					id, err := after.ReserveID()
					if err != nil {
						t.Fatal(err)
					}
					if id <= m.ID {
						t.Fatalf("n=%d (%s): id %d reserved again after the crash", n, failed, id)
					}
				}
				next := writeCheckpoint(t, after, checkpoint.KindCheckpoint)
				if got, err := after.Latest(); err != nil || !reflect.DeepEqual(*got, next) {
					t.Fatalf("n=%d: checkpoint after recovery: Latest = %+v, %v", n, got, err)
				}
				if failed == "" {
					t.Logf("%d crash points", n-1)
					return
				}
			}
		})
	}
}

func TestWriteErrors(t *testing.T) {
	for _, tc := range []struct {
		op, suffix string
		errno      syscall.Errno
	}{
		{vfs.OpMkdirAll, "chk-00000000000000000002", syscall.EROFS},
		{vfs.OpCreate, ".state", syscall.EROFS},
		{vfs.OpWrite, ".state", syscall.ENOSPC},
		{vfs.OpSync, ".state", syscall.EIO},
		{vfs.OpClose, ".state", syscall.EIO},
		{vfs.OpCreate, "_metadata.tmp", syscall.EACCES},
		{vfs.OpWrite, "_metadata.tmp", syscall.ENOSPC},
		{vfs.OpSync, "_metadata.tmp", syscall.EIO},
		{vfs.OpRename, "_metadata.tmp", syscall.EIO},
		{vfs.OpSyncDir, "chk-00000000000000000002", syscall.EIO},
		{vfs.OpCreate, "_ids.tmp", syscall.EROFS},
		{vfs.OpWrite, "_ids.tmp", syscall.ENOSPC},
		{vfs.OpSync, "_ids.tmp", syscall.EIO},
	} {
		t.Run(tc.op+" "+tc.suffix, func(t *testing.T) {
			mem := vfs.NewCrashableMem()
			s := mustOpen(t, testDir, Options{FS: mem})
			writeCheckpoint(t, s, checkpoint.KindCheckpoint)
			var file string
			s.fs = vfs.WithErrors(mem, func(op, name string) error {
				if op == tc.op && strings.HasSuffix(name, tc.suffix) {
					file = name
					return tc.errno
				}
				return nil
			})
			_, err := tryCheckpoint(s, checkpoint.KindCheckpoint)
			if file == "" {
				t.Fatalf("no %s of a file ending in %s happened", tc.op, tc.suffix)
			}
			if !errors.Is(err, tc.errno) || !strings.Contains(err.Error(), file) {
				t.Fatalf("error = %v, want %v naming %s", err, tc.errno, file)
			}
			if strings.Count(err.Error(), file) != 1 {
				t.Errorf("error names the file more than once: %v", err)
			}
		})
	}
}

func BenchmarkWriteState(b *testing.B) {
	s := mustOpen(b, b.TempDir(), Options{})
	snap := checkpoint.SubtaskSnapshot{KeyGroups: map[int][]byte{}}
	for g := range 128 {
		blob := make([]byte, 8<<10)
		for i := range blob {
			blob[i] = byte(g + i)
		}
		snap.KeyGroups[g] = blob
	}
	h, err := s.WriteState(1, checkpoint.KindCheckpoint, "op", 0, snap)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(h.Size)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.WriteState(1, checkpoint.KindCheckpoint, "op", 0, snap); err != nil {
			b.Fatal(err)
		}
	}
}

func TestReserveAboveFloor(t *testing.T) {
	s := mustOpen(t, t.TempDir(), Options{})
	id, err := s.ReserveAbove(41)
	if err != nil || id != 42 {
		t.Fatalf("ReserveAbove(41) = %d, %v; want 42", id, err)
	}
	if id, err = s.ReserveID(); err != nil || id != 43 {
		t.Fatalf("ReserveID after the floor = %d, %v; want 43", id, err)
	}
	if id, err = s.ReserveAbove(5); err != nil || id != 44 {
		t.Fatalf("ReserveAbove(5) = %d, %v; want 44: a low floor must not lower ids", id, err)
	}
}
