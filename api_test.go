// Package exactly_test pins the exported API of every public package of
// the module: testdata/api/ holds the `go doc -all` of each, and the test
// fails when the API changes. Regenerate on purpose, after a deliberate
// change, with
//
//	go test -run TestAPI -update .
//
// and review the diff like code: every line is something a user can
// depend on.
package exactly_test

import (
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/exactlyonce/exactly/internal/scripttest"
)

var update = flag.Bool("update", false, "rewrite testdata/api/*.txt from the current code")

// TestAPI compares each public package's `go doc -all` with its golden
// file, and fails on a public package without one (or a golden file
// without a package).
func TestAPI(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command on PATH")
	}
	out, err := exec.Command(goBin, "list", "./...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	const module = "github.com/exactlyonce/exactly/"
	want := map[string]bool{}
	for _, pkg := range strings.Fields(string(out)) {
		rel := strings.TrimPrefix(pkg, module)
		if rel == pkg || strings.Contains("/"+rel+"/", "/internal/") || strings.Contains("/"+rel+"/", "/cmd/") {
			continue // not importable by users, or programs
		}
		golden := filepath.Join("testdata", "api", strings.ReplaceAll(rel, "/", "_")+".txt")
		want[golden] = true
		doc, err := exec.Command(goBin, "doc", "-all", pkg).Output()
		if err != nil {
			t.Fatalf("go doc -all %s: %v", pkg, err)
		}
		if *update {
			if err := os.MkdirAll(filepath.Dir(golden), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(golden, doc, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		old, err := os.ReadFile(golden)
		if err != nil {
			t.Errorf("%s has no golden API file (%v): run go test -run TestAPI -update . and review it", pkg, err)
			continue
		}
		if string(old) != string(doc) {
			t.Errorf("the exported API of %s changed: if deliberate, run go test -run TestAPI -update . and review the diff of %s\n%s", pkg, golden, scripttest.DiffLines(string(old), string(doc)))
		}
	}
	files, _ := filepath.Glob(filepath.Join("testdata", "api", "*.txt"))
	for _, f := range files {
		if !want[f] {
			if *update {
				if err := os.Remove(f); err != nil {
					t.Fatal(err)
				}
				continue
			}
			t.Errorf("%s names no public package: remove it (go test -run TestAPI -update .)", f)
		}
	}
}
