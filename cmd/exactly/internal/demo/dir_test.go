package demo

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPrepareDir: a new directory is created and marked; a marked one is
// cleared, or kept with resume; one with someone else's files is refused
// and left as it was.
func TestPrepareDir(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "demo")
	if err := PrepareDir(dir, false); err != nil {
		t.Fatal(err)
	}
	old := filepath.Join(dir, "totals.db")
	if err := os.WriteFile(old, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := PrepareDir(dir, true); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(old); err != nil {
		t.Fatalf("--resume removed the demo's output: %v", err)
	}
	if err := PrepareDir(dir, false); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(old); err == nil {
		t.Fatal("a fresh run kept the previous run's output")
	}

	theirs := filepath.Join(root, "theirs")
	precious := filepath.Join(theirs, "thesis.tex")
	if err := os.MkdirAll(theirs, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(precious, []byte("years of work"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, resume := range []bool{false, true} {
		err := PrepareDir(theirs, resume)
		if err == nil || !strings.Contains(err.Error(), "--dir "+theirs) || !strings.Contains(err.Error(), "new or empty directory") {
			t.Fatalf("resume=%t: PrepareDir on a directory with other files = %v; want a refusal naming --dir", resume, err)
		}
	}
	if b, err := os.ReadFile(precious); err != nil || string(b) != "years of work" {
		t.Fatalf("the refused directory's file: %q, %v", b, err)
	}
}
