package crashtesting

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

// ChildBinary returns the test binary a crash test's child processes run:
// this one, or, when it was built with -race, the same package's test
// binary built without -race (once per test process, with `go test -c`,
// into a directory of os.TempDir() named after the package's directory,
// which the next run reuses).
//
// The children of a crash test are judged by the output they commit: the
// checker finds a lost or duplicated record whatever the cause, while a
// child under -race spends several times the CPU, and a crash test runs
// dozens of children. Races in the code the children run are the business
// of the in-process tests, which run under -race.
func ChildBinary(t testing.TB) string {
	t.Helper()
	if !race {
		return os.Args[0]
	}
	child.once.Do(func() { child.path, child.err = buildChild() })
	if child.err != nil {
		t.Fatalf("crashtesting: %v", child.err)
	}
	return child.path
}

// child is this process's child binary without -race.
var child struct {
	once sync.Once
	path string
	err  error
}

// buildChild builds the test binary of the package in the working
// directory (go test runs a package's tests in its directory) without
// -race.
func buildChild() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256([]byte(wd))
	dir := filepath.Join(os.TempDir(), "exactly-crash-children", filepath.Base(wd)+"-"+hex.EncodeToString(sum[:6]))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	path := filepath.Join(dir, "child.test")
	cmd := exec.Command("go", "test", "-c", "-o", path, ".")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building the children's test binary without -race in %s: %v\n%s", wd, err, out)
	}
	return path, nil
}
