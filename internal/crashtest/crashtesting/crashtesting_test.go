package crashtesting

import (
	"os"
	"path/filepath"
	"testing"
)

// TestModuleRoot checks that the children's binaries go under the
// checkout: the module root is found from a package's directory.
func TestModuleRoot(t *testing.T) {
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	root, err := moduleRoot(wd)
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(wd, "..", "..", ".."); filepath.Clean(want) != root {
		t.Errorf("moduleRoot(%s) = %s, want %s", wd, root, filepath.Clean(want))
	}
	if root, err := moduleRoot(t.TempDir()); err == nil {
		t.Errorf("moduleRoot of a directory outside any module = %s, want an error", root)
	}
}

// TestSized checks the size knob: the test command's size unset, the full
// size with EXACTLY_TEST_SIZE=full.
func TestSized(t *testing.T) {
	t.Setenv(EnvSize, "")
	if got := Sized(20, 60); got != 20 || Full() {
		t.Errorf("unset: Sized(20, 60) = %d, Full() = %v", got, Full())
	}
	t.Setenv(EnvSize, "full")
	if got := Sized(20, 60); got != 60 || !Full() {
		t.Errorf("full: Sized(20, 60) = %d, Full() = %v", got, Full())
	}
}
