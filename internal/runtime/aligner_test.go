package runtime

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/exactlyonce/exactly/checkpoint"
)

var rewrite = flag.Bool("rewrite", false, "rewrite the expected output in testdata/*.txt")

// TestAlignerScripts replays every testdata/aligner_*.txt script.
//
// A script is a sequence of commands, each on a line starting with "> ",
// followed by what the aligner answered: "take" and the barrier when a
// checkpoint is to be taken, then the inputs that may be read and how many
// have not ended. Lines starting with "#" are comments. Commands:
//
//	inputs N                           a new aligner of N inputs
//	barrier INPUT ID [savepoint] [end-of-input]
//	end INPUT                          the end of INPUT's stream
//
// Run with -rewrite to regenerate the expected output after a deliberate change.
func TestAlignerScripts(t *testing.T) {
	files, err := filepath.Glob("testdata/aligner_*.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("no scripts found: %v", err)
	}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) { runAlignerScript(t, file) })
	}
}

func runAlignerScript(t *testing.T, file string) {
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var (
		a   *aligner
		out strings.Builder
	)
	num := func(s string) int {
		n, err := strconv.Atoi(s)
		if err != nil {
			t.Fatalf("%s: %q is not a number", file, s)
		}
		return n
	}
	for _, line := range strings.Split(string(data), "\n") {
		if !strings.HasPrefix(line, "> ") && !strings.HasPrefix(line, "#") {
			continue // expected output: regenerated below
		}
		out.WriteString(line + "\n")
		if strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(strings.TrimPrefix(line, "> "))
		if f[0] != "inputs" && a == nil {
			t.Fatalf("%s: %q before inputs", file, line)
		}
		var (
			take barrier
			ok   bool
		)
		switch f[0] {
		case "inputs":
			a = newAligner(num(f[1]))
		case "barrier":
			b := barrier{id: uint64(num(f[2])), kind: checkpoint.KindCheckpoint}
			for _, opt := range f[3:] {
				switch opt {
				case "savepoint":
					b.kind = checkpoint.KindSavepoint
				case "end-of-input":
					b.endOfInput = true
				default:
					t.Fatalf("%s: unknown barrier option %q", file, opt)
				}
			}
			take, ok = a.onBarrier(num(f[1]), b)
		case "end":
			take, ok = a.onEnd(num(f[1]))
		default:
			t.Fatalf("%s: unknown command %q", file, f[0])
		}
		if ok {
			fmt.Fprintf(&out, "take id=%d kind=%s end-of-input=%t\n", take.id, take.kind, take.endOfInput)
		}
		var readable []string
		for i := range a.blocked {
			if a.readable(i) {
				readable = append(readable, strconv.Itoa(i))
			}
		}
		fmt.Fprintf(&out, "readable=[%s] live=%d\n", strings.Join(readable, " "), a.liveInputs())
	}
	got := out.String()
	if *rewrite {
		if err := os.WriteFile(file, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if got != string(data) {
		t.Errorf("%s: output differs (run with -rewrite to accept):\ngot:\n%s\nwant:\n%s", file, got, data)
	}
}
