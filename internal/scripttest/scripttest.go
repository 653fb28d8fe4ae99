// Package scripttest replays the script tests of the engine's pure state
// machines (the checkpoint coordinator, the recovery decision, the barrier
// aligner): files of commands, each followed by the output it must produce,
// in the style of etcd's raft and CockroachDB's datadriven tests. It is
// test infrastructure: only tests import it.
package scripttest

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var rewrite = flag.Bool("rewrite", false, "rewrite the expected output of the script tests in testdata/")

// Run replays, each as a subtest, every script file matching pattern. A
// script is a sequence of commands, each on a line starting with "> ",
// each followed by the lines of output it produced; lines starting with "#"
// are comments. For each script newScript returns the function that runs
// one command, given its fields, and returns its output lines; it fails
// the test on a command it does not know. The output is compared with the
// file; with -rewrite the file is rewritten instead, to accept a deliberate
// change.
func Run(t *testing.T, pattern string, newScript func(t *testing.T) func(fields []string) []string) {
	t.Helper()
	files, err := filepath.Glob(pattern)
	if err != nil || len(files) == 0 {
		t.Fatalf("no scripts match %s: %v", pattern, err)
	}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) { replay(t, file, newScript(t)) })
	}
}

// replay runs one script file.
func replay(t *testing.T, file string, command func(fields []string) []string) {
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	for _, line := range strings.Split(string(data), "\n") {
		if !strings.HasPrefix(line, "> ") && !strings.HasPrefix(line, "#") {
			continue // expected output: produced again below
		}
		out.WriteString(line + "\n")
		if strings.HasPrefix(line, "#") {
			continue
		}
		for _, l := range command(strings.Fields(strings.TrimPrefix(line, "> "))) {
			out.WriteString(l + "\n")
		}
	}
	got := out.String()
	if *rewrite {
		if err := os.WriteFile(file, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if got != string(data) {
		t.Errorf("%s: output differs (run with -rewrite to accept):\n%s", file, DiffLines(string(data), got))
	}
}

// DiffLines lists the lines where want and got differ, for the failure
// of a golden-file test.
func DiffLines(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	var b strings.Builder
	for i := 0; i < len(w) || i < len(g); i++ {
		var wl, gl string
		if i < len(w) {
			wl = w[i]
		}
		if i < len(g) {
			gl = g[i]
		}
		if wl != gl {
			fmt.Fprintf(&b, "line %d:\n  want: %s\n  got:  %s\n", i+1, wl, gl)
		}
	}
	return b.String()
}
