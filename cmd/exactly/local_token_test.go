package main

import (
	"os"
	"strings"
	"testing"
)

// TestLocalTokenIsPrivateAndKept: the local token of a job is written
// once, readable by its user only, and kept for the job's next runs; a
// token file that others may read is refused, not used.
func TestLocalTokenIsPrivateAndKept(t *testing.T) {
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	path, err := ensureLocalToken("orders/eu") // a name that is no file name
	if err != nil {
		t.Fatal(err)
	}
	first, err := os.ReadFile(path)
	if err != nil || len(strings.TrimSpace(string(first))) != 64 {
		t.Fatalf("the token file holds %q (%v); want 32 random bytes in hex", first, err)
	}
	st, err := os.Stat(path)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("the token file: %v, mode %v; want 0600", err, st.Mode())
	}
	again, err := ensureLocalToken("orders/eu")
	if err != nil || again != path {
		t.Fatalf("the next run's token: %s, %v; want the same file %s", again, err, path)
	}
	if second, _ := os.ReadFile(path); string(second) != string(first) {
		t.Fatal("the next run replaced the token")
	}
	other, err := ensureLocalToken("orders-eu")
	if err != nil || other == path {
		t.Fatalf("another job's token: %s, %v; want a file of its own", other, err)
	}
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ensureLocalToken("orders/eu"); err == nil || !strings.Contains(err.Error(), "others may read it") {
		t.Fatalf("a token file others may read: %v; want it refused", err)
	}
}
