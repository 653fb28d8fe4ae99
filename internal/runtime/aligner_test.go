package runtime

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/exactlyonce/exactly/checkpoint"
	"github.com/exactlyonce/exactly/internal/scripttest"
)

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
	scripttest.Run(t, "testdata/aligner_*.txt", newAlignerScript)
}

func newAlignerScript(t *testing.T) func(f []string) []string {
	var a *aligner
	num := func(s string) int {
		n, err := strconv.Atoi(s)
		if err != nil {
			t.Fatalf("%q is not a number", s)
		}
		return n
	}
	return func(f []string) []string {
		var out strings.Builder
		if f[0] != "inputs" && a == nil {
			t.Fatalf("%q before inputs", f)
		}
		var (
			take barrier
			ok   bool
		)
		switch f[0] {
		case "inputs":
			a = newAligner(num(f[1]))
		case "barrier":
			b := barrier{id: checkpoint.ID(num(f[2])), kind: checkpoint.KindCheckpoint}
			for _, opt := range f[3:] {
				switch opt {
				case "savepoint":
					b.kind = checkpoint.KindSavepoint
				case "end-of-input":
					b.endOfInput = true
				default:
					t.Fatalf("unknown barrier option %q", opt)
				}
			}
			take, ok = a.onBarrier(num(f[1]), b)
		case "end":
			take, ok = a.onEnd(num(f[1]))
		default:
			t.Fatalf("unknown command %q", f[0])
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
		return lines(out.String())
	}
}

// lines splits a command's output into its lines.
func lines(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(strings.TrimSuffix(s, "\n"), "\n")
}
