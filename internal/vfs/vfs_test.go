package vfs

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

func writeFile(t *testing.T, fsys FS, name, data string, sync bool) {
	t.Helper()
	f, err := fsys.Create(name)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(f, data); err != nil {
		t.Fatal(err)
	}
	if sync {
		if err := f.Sync(); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// readFile returns the file's contents, or "<missing>" if it does not exist.
func readFile(t *testing.T, fsys FS, name string) string {
	t.Helper()
	f, err := fsys.Open(name)
	if errors.Is(err, fs.ErrNotExist) {
		return "<missing>"
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b, err := io.ReadAll(f)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestConformance runs the same operations on the OS and on MemFS.
func TestConformance(t *testing.T) {
	for _, tc := range []struct {
		name string
		fs   FS
		root string
	}{
		{"os", Default, t.TempDir()},
		{"mem", NewCrashableMem(), "/data"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fsys, root := tc.fs, tc.root
			dir := filepath.Join(root, "a", "b")
			if err := fsys.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := fsys.MkdirAll(dir, 0o755); err != nil {
				t.Fatalf("MkdirAll of an existing dir: %v", err)
			}
			writeFile(t, fsys, filepath.Join(dir, "z"), "zzz", true)
			writeFile(t, fsys, filepath.Join(dir, "x"), "hello", false)
			if got := readFile(t, fsys, filepath.Join(dir, "x")); got != "hello" {
				t.Fatalf("read x = %q", got)
			}
			writeFile(t, fsys, filepath.Join(dir, "x"), "hi", false) // truncates
			if got := readFile(t, fsys, filepath.Join(dir, "x")); got != "hi" {
				t.Fatalf("read x after re-create = %q", got)
			}
			fi, err := fsys.Stat(filepath.Join(dir, "x"))
			if err != nil || fi.Size() != 2 || fi.IsDir() || fi.Name() != "x" {
				t.Fatalf("Stat x = %v, %v", fi, err)
			}
			if fi, err := fsys.Stat(dir); err != nil || !fi.IsDir() {
				t.Fatalf("Stat dir = %v, %v", fi, err)
			}
			names, err := fsys.ReadDir(dir)
			if err != nil || !slices.Equal(names, []string{"x", "z"}) {
				t.Fatalf("ReadDir = %v, %v", names, err)
			}
			if err := fsys.Rename(filepath.Join(dir, "x"), filepath.Join(dir, "z")); err != nil {
				t.Fatal(err)
			}
			if got := readFile(t, fsys, filepath.Join(dir, "z")); got != "hi" {
				t.Fatalf("read z after rename = %q", got)
			}
			if err := fsys.SyncDir(dir); err != nil {
				t.Fatal(err)
			}
			if _, err := fsys.Stat(filepath.Join(dir, "x")); !errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("Stat of renamed-away file: %v", err)
			}
			if _, err := fsys.Open(filepath.Join(dir, "nope")); !errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("Open missing: %v", err)
			}
			if _, err := fsys.Create(filepath.Join(root, "nope", "f")); !errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("Create in missing dir: %v", err)
			}
			if err := fsys.Remove(filepath.Join(root, "a")); err == nil {
				t.Fatal("Remove of a non-empty dir succeeded")
			}
			if err := fsys.Remove(filepath.Join(dir, "z")); err != nil {
				t.Fatal(err)
			}
			if err := fsys.RemoveAll(filepath.Join(root, "a")); err != nil {
				t.Fatal(err)
			}
			if err := fsys.RemoveAll(filepath.Join(root, "a")); err != nil {
				t.Fatalf("RemoveAll of a missing dir: %v", err)
			}
			if _, err := fsys.ReadDir(dir); !errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("ReadDir of removed dir: %v", err)
			}
		})
	}
}

// TestOpenFileConformance runs the same OpenFile calls on the OS and on
// MemFS: exclusive creation, truncation, modes, read-write files, Lstat,
// and the flags every implementation refuses.
func TestOpenFileConformance(t *testing.T) {
	for _, tc := range []struct {
		name string
		fs   FS
		root string
	}{
		{"os", Default, t.TempDir()},
		{"mem", NewCrashableMem(), "/data"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fsys := WithErrors(tc.fs, func(op, name string) error { return nil }) // errorFS passes OpenFile through
			if err := fsys.MkdirAll(tc.root, 0o755); err != nil {
				t.Fatal(err)
			}
			name := filepath.Join(tc.root, "f")
			open := func(flag int, perm os.FileMode) File {
				t.Helper()
				f, err := fsys.OpenFile(name, flag, perm)
				if err != nil {
					t.Fatalf("OpenFile(%#x, %v): %v", flag, perm, err)
				}
				return f
			}
			if _, err := fsys.OpenFile(name, os.O_RDONLY, 0); !errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("OpenFile of a missing file without O_CREATE: %v", err)
			}
			f := open(os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
			if _, err := io.WriteString(f, "hello"); err != nil {
				t.Fatal(err)
			}
			if err := f.Close(); err != nil {
				t.Fatal(err)
			}
			if fi, err := fsys.Lstat(name); err != nil || fi.Mode() != 0o600 || fi.Size() != 5 {
				t.Fatalf("Lstat of the new file = %v, %v; want mode 0600, 5 bytes", fi, err)
			}
			if _, err := fsys.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644); !errors.Is(err, fs.ErrExist) {
				t.Fatalf("O_EXCL of an existing file: %v, want fs.ErrExist", err)
			}
			if _, err := fsys.OpenFile(tc.root, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644); !errors.Is(err, fs.ErrExist) {
				t.Fatalf("O_EXCL of an existing directory: %v, want fs.ErrExist", err)
			}
			f = open(os.O_RDWR, 0)
			if _, err := io.WriteString(f, "J"); err != nil {
				t.Fatal(err)
			}
			if b, err := io.ReadAll(f); err != nil || string(b) != "ello" {
				t.Fatalf("read after write on O_RDWR = %q, %v", b, err)
			}
			f.Close()
			if got := readFile(t, fsys, name); got != "Jello" {
				t.Fatalf("after writing without O_TRUNC: %q", got)
			}
			f = open(os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
			if _, err := io.WriteString(f, "x"); err != nil {
				t.Fatal(err)
			}
			f.Close()
			if fi, err := fsys.Stat(name); err != nil || fi.Mode() != 0o600 || readFile(t, fsys, name) != "x" {
				t.Fatalf("after O_TRUNC: %v, %v, %q; want the old mode 0600 and the new contents", fi, err, readFile(t, fsys, name))
			}
			if _, err := open(os.O_WRONLY, 0).Read(make([]byte, 1)); err == nil {
				t.Fatal("read of a file opened O_WRONLY succeeded")
			}
			for _, flag := range []int{os.O_WRONLY | os.O_APPEND, os.O_RDWR | os.O_SYNC, os.O_RDONLY | os.O_TRUNC, os.O_WRONLY | os.O_EXCL, os.O_WRONLY | os.O_RDWR} {
				if _, err := fsys.OpenFile(name, flag, 0o644); !errors.Is(err, fs.ErrInvalid) {
					t.Errorf("OpenFile with flags %#x = %v, want fs.ErrInvalid", flag, err)
				}
			}
			if _, err := fsys.Lstat(filepath.Join(tc.root, "nope")); !errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("Lstat of a missing file: %v", err)
			}
		})
	}
}

func TestMemFileModes(t *testing.T) {
	m := NewCrashableMem()
	w, err := m.Create("f")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(w, "abc"); err != nil {
		t.Fatal(err)
	}
	r, err := m.Open("/f")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Write([]byte("x")); err == nil {
		t.Fatal("write to a file opened for reading succeeded")
	}
	w.Close()
	if _, err := w.Write([]byte("x")); !errors.Is(err, fs.ErrClosed) {
		t.Fatalf("write after close: %v", err)
	}
	if _, err := m.Open("/"); err == nil {
		t.Fatal("Open of a directory succeeded")
	}
}

func TestMemCrash(t *testing.T) {
	m := NewCrashableMem()
	if err := m.MkdirAll("/d", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := m.SyncDir("/"); err != nil {
		t.Fatal(err)
	}
	writeFile(t, m, "/d/synced-entry-synced-data", "1", true)
	writeFile(t, m, "/d/synced-entry-unsynced-data", "2", false)
	writeFile(t, m, "/d/old", "old", true)
	writeFile(t, m, "/d/removed", "r", true)
	excl, err := m.OpenFile("/d/exclusive-unsynced-data", os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(excl, "lost"); err != nil {
		t.Fatal(err)
	}
	if err := m.SyncDir("/d"); err != nil {
		t.Fatal(err)
	}
	// Changes after the last SyncDir of /d.
	writeFile(t, m, "/d/unsynced-entry", "3", true)
	writeFile(t, m, "/d/new", "new", true)
	if err := m.Rename("/d/new", "/d/old"); err != nil {
		t.Fatal(err)
	}
	if err := m.Remove("/d/removed"); err != nil {
		t.Fatal(err)
	}
	// A directory whose entry in its parent is not durable loses everything.
	if err := m.MkdirAll("/e", 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, m, "/e/f", "e", true)
	if err := m.SyncDir("/e"); err != nil {
		t.Fatal(err)
	}

	c := m.Crash()
	for name, want := range map[string]string{
		"/d/synced-entry-synced-data":   "1",
		"/d/synced-entry-unsynced-data": "",
		"/d/old":                        "old",
		"/d/removed":                    "r",
		"/d/exclusive-unsynced-data":    "",
		"/d/unsynced-entry":             "<missing>",
		"/d/new":                        "<missing>",
		"/e/f":                          "<missing>",
	} {
		if got := readFile(t, c, name); got != want {
			t.Errorf("after crash %s = %q, want %q", name, got, want)
		}
	}
	// The original is unaffected by Crash.
	if got := readFile(t, m, "/d/old"); got != "new" {
		t.Errorf("original /d/old = %q, want new", got)
	}

	// Once synced, the rename and removal survive.
	if err := m.SyncDir("/d"); err != nil {
		t.Fatal(err)
	}
	c = m.Crash()
	for name, want := range map[string]string{
		"/d/old":     "new",
		"/d/new":     "<missing>",
		"/d/removed": "<missing>",
	} {
		if got := readFile(t, c, name); got != want {
			t.Errorf("after sync and crash %s = %q, want %q", name, got, want)
		}
	}

	// Rewriting a durable file without syncing it keeps the old contents.
	writeFile(t, c, "/d/old", "newer", false)
	if got := readFile(t, c.Crash(), "/d/old"); got != "new" {
		t.Errorf("unsynced rewrite survived the crash: %q", got)
	}
}

func TestWithErrors(t *testing.T) {
	errDisk := syscall.ENOSPC
	var calls []string
	fsys := WithErrors(NewCrashableMem(), func(op, name string) error {
		calls = append(calls, op+" "+name)
		if op == OpWrite && strings.HasSuffix(name, "full") {
			return errDisk
		}
		return nil
	})
	writeFile(t, fsys, "/ok", "fine", true)
	if got := readFile(t, fsys, "/ok"); got != "fine" {
		t.Fatalf("read through WithErrors = %q", got)
	}
	f, err := fsys.Create("/full")
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.Write([]byte("x"))
	if !errors.Is(err, syscall.ENOSPC) || !strings.Contains(err.Error(), "/full") {
		t.Fatalf("injected error = %v, want ENOSPC naming /full", err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	want := []string{"create /ok", "write /ok", "sync /ok", "close /ok", "open /ok", "read /ok"}
	if !slices.Equal(calls[:len(want)], want) {
		t.Fatalf("calls = %v, want prefix %v", calls, want)
	}
	calls = nil
	if f, err := fsys.OpenFile("/ok", os.O_WRONLY, 0); err != nil {
		t.Fatal(err)
	} else if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := fsys.Lstat("/ok"); err != nil {
		t.Fatal(err)
	}
	l, err := fsys.Lock("/ok.lock")
	if err != nil {
		t.Fatal(err)
	}
	l.Close()
	want = []string{"openfile /ok", "close /ok", "lstat /ok", "lock /ok.lock"}
	if !slices.Equal(calls, want) {
		t.Fatalf("calls = %v, want %v", calls, want)
	}
}

// TestTryLock: on the OS and on MemFS, a held lock refuses a second holder
// (in the same process too) with ErrLocked, and is free again once closed;
// a MemFS crash releases every lock, as a process death does.
func TestTryLock(t *testing.T) {
	for _, tc := range []struct {
		name string
		fs   FS
		path string
	}{
		{"os", Default, filepath.Join(t.TempDir(), "_lock")},
		{"mem", NewCrashableMem(), "/data/_lock"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, err := tc.fs.TryLock(tc.path)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := tc.fs.TryLock(tc.path); !errors.Is(err, ErrLocked) {
				t.Fatalf("second TryLock = %v, want ErrLocked", err)
			}
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			again, err := tc.fs.TryLock(tc.path)
			if err != nil {
				t.Fatalf("TryLock after release = %v", err)
			}
			again.Close()
		})
	}
	mem := NewCrashableMem()
	if _, err := mem.TryLock("/a"); err != nil {
		t.Fatal(err)
	}
	if l, err := mem.Crash().TryLock("/a"); err != nil {
		t.Fatalf("TryLock after a crash = %v, want the lock released", err)
	} else {
		l.Close()
	}
}

// TestLock: on the OS and on MemFS, Lock waits while another holder (a
// Lock or a TryLock, in this process too) has the lock, and returns once
// it is released; TryLock fails while a Lock holds it. Closing a MemFS lock
// twice does not release a later holder's lock.
func TestLock(t *testing.T) {
	for _, tc := range []struct {
		name string
		fs   FS
		path string
	}{
		{"os", Default, filepath.Join(t.TempDir(), "_lock")},
		{"mem", NewCrashableMem(), "/data/_lock"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			held, err := tc.fs.TryLock(tc.path)
			if err != nil {
				t.Fatal(err)
			}
			got := make(chan io.Closer)
			go func() {
				l, err := tc.fs.Lock(tc.path)
				if err != nil {
					t.Error(err)
				}
				got <- l
			}()
			select {
			case <-got:
				t.Fatal("Lock returned while TryLock held the lock")
			case <-time.After(50 * time.Millisecond):
			}
			if err := held.Close(); err != nil {
				t.Fatal(err)
			}
			l := <-got
			if _, err := tc.fs.TryLock(tc.path); !errors.Is(err, ErrLocked) {
				t.Fatalf("TryLock while Lock holds the lock = %v, want ErrLocked", err)
			}
			if err := held.Close(); err == nil {
				t.Fatal("second Close of a released lock succeeded")
			}
			if _, err := tc.fs.TryLock(tc.path); !errors.Is(err, ErrLocked) {
				t.Fatalf("a second Close of the first lock released the second: TryLock = %v", err)
			}
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			again, err := tc.fs.Lock(tc.path)
			if err != nil {
				t.Fatalf("Lock after release = %v", err)
			}
			again.Close()
		})
	}
}

// TestMkdirAllDurable: directories made by MkdirAllDurable survive a
// crash; made by MkdirAll alone, they do not.
func TestMkdirAllDurable(t *testing.T) {
	mem := NewCrashableMem()
	if err := MkdirAllDurable(mem, "/a/b/c", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := mem.MkdirAll("/x/y", 0o755); err != nil {
		t.Fatal(err)
	}
	after := mem.Crash()
	if _, err := after.Stat("/a/b/c"); err != nil {
		t.Fatalf("/a/b/c after a crash: %v", err)
	}
	if _, err := after.Stat("/x"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("/x, never synced, after a crash: %v; want it gone", err)
	}
	if err := MkdirAllDurable(after, "/a/b/c", 0o755); err != nil {
		t.Fatalf("an existing directory: %v", err)
	}
}
