package coordinator

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRecoveryScripts replays every testdata/recovery_*.txt script, as
// TestCoordinatorScripts does for the coordinator. Commands:
//
//	config max=N initial=D max-backoff=D [finished]
//	attempt succeeded|transient|permanent|fenced|stopped [checkpointed] [final] [unknown] [pending]
//
// Run with -rewrite to regenerate the expected output.
func TestRecoveryScripts(t *testing.T) {
	files, err := filepath.Glob("testdata/recovery_*.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("no scripts found: %v", err)
	}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) { runRecoveryScript(t, file) })
	}
}

func runRecoveryScript(t *testing.T, file string) {
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var (
		r   *Recovery
		out strings.Builder
	)
	for _, line := range strings.Split(string(data), "\n") {
		if !strings.HasPrefix(line, "> ") && !strings.HasPrefix(line, "#") {
			continue
		}
		out.WriteString(line + "\n")
		if strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(strings.TrimPrefix(line, "> "))
		switch f[0] {
		case "config":
			var cfg RecoveryConfig
			finished := false
			for _, kv := range f[1:] {
				k, v, _ := strings.Cut(kv, "=")
				switch k {
				case "max":
					cfg.MaxAttempts = mustInt(t, v)
				case "initial":
					cfg.InitialBackoff = mustDuration(t, v)
				case "max-backoff":
					cfg.MaxBackoff = mustDuration(t, v)
				case "finished":
					finished = true
				default:
					t.Fatalf("%s: unknown config key %q", file, k)
				}
			}
			r = NewRecovery(cfg, finished)
			if r.CommitOnly() {
				out.WriteString("commit-only\n")
			}
		case "attempt":
			var a AttemptEnd
			for i, name := range failureNames {
				if f[1] == name {
					a.Failure = Failure(i)
				}
			}
			for _, flag := range f[2:] {
				switch flag {
				case "checkpointed":
					a.Checkpointed = true
				case "final":
					a.Final = true
				case "unknown":
					a.OutcomeUnknown = true
				case "pending":
					a.CommitPending = true
				default:
					t.Fatalf("%s: unknown attempt flag %q", file, flag)
				}
			}
			out.WriteString(r.AttemptEnded(a).String() + "\n")
		default:
			t.Fatalf("%s: unknown command %q", file, f[0])
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
		t.Errorf("%s: output differs (run with -rewrite to accept):\n%s", file, diffLines(string(data), got))
	}
}
