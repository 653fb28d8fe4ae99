package crashtesting

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// ChildBinary returns the test binary a crash test's child processes run:
// this one, or, when it was built with -race, the same package's test
// binary built without -race (once per test process, with `go test -c`,
// into the module's .tmp/crash-children/, one file per package, which the
// next run of the same checkout overwrites).
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
	root, err := moduleRoot(wd)
	if err != nil {
		return "", err
	}
	rel, err := filepath.Rel(root, wd)
	if err != nil {
		return "", err
	}
	dir := filepath.Join(root, ".tmp", "crash-children")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	name := strings.ReplaceAll(filepath.ToSlash(rel), "/", "-")
	if name == "." {
		name = "root"
	}
	path := filepath.Join(dir, name+".test")
	cmd := exec.Command("go", "test", "-c", "-o", path, ".")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building the children's test binary without -race in %s: %v\n%s", wd, err, out)
	}
	return path, nil
}

// moduleRoot returns the directory of the go.mod above dir.
func moduleRoot(dir string) (string, error) {
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d, nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("no go.mod above %s", dir)
		}
	}
}
