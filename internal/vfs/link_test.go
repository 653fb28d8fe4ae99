package vfs

import (
	"os"
	"path/filepath"
	"testing"
)

// TestLinker: the operating system's filesystem links a file under a
// second name (the same file, its contents readable through both); the
// in-memory and error-injecting filesystems are no Linker, so that the
// store copies on them.
func TestLinker(t *testing.T) {
	dir := t.TempDir()
	src, dst := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	if err := os.WriteFile(src, []byte("exactly"), 0o644); err != nil {
		t.Fatal(err)
	}
	l, ok := Default.(Linker)
	if !ok {
		t.Fatal("Default is not a Linker")
	}
	if err := l.Link(src, dst); err != nil {
		t.Fatal(err)
	}
	a, errA := os.Stat(src)
	b, errB := os.Stat(dst)
	if errA != nil || errB != nil || !os.SameFile(a, b) {
		t.Fatalf("after Link, %s and %s are not the same file (%v, %v)", src, dst, errA, errB)
	}
	if err := l.Link(src, dst); err == nil {
		t.Error("Link onto an existing name succeeded")
	}
	for name, fs := range map[string]FS{"MemFS": NewCrashableMem(), "WithErrors": WithErrors(Default, func(string, string) error { return nil })} {
		if _, ok := fs.(Linker); ok {
			t.Errorf("%s is a Linker: what runs on it would link instead of copying", name)
		}
	}
}
