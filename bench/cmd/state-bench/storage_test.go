package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCopyTo: a plain download discards the object without a directory,
// and writes it into a new file named after its key (slashes flattened)
// with one, refusing to overwrite a file already there.
func TestCopyTo(t *testing.T) {
	if n, err := copyTo("", "shared/a/1.sst", strings.NewReader("12345")); n != 5 || err != nil {
		t.Fatalf("copyTo into io.Discard = %d, %v", n, err)
	}
	dir := t.TempDir()
	if n, err := copyTo(dir, "shared/a/1.sst", strings.NewReader("12345")); n != 5 || err != nil {
		t.Fatalf("copyTo into %s = %d, %v", dir, n, err)
	}
	got, err := os.ReadFile(filepath.Join(dir, "shared_a_1.sst"))
	if err != nil || string(got) != "12345" {
		t.Fatalf("the file holds %q, %v; want 12345", got, err)
	}
	if _, err := copyTo(dir, "shared/a/1.sst", strings.NewReader("x")); err == nil {
		t.Fatal("copyTo overwrote a file already there")
	}
}
