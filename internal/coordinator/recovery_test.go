package coordinator

import (
	"strings"
	"testing"

	"github.com/exactlyonce/exactly/internal/scripttest"
)

// TestRecoveryScripts replays every testdata/recovery_*.txt script, as
// TestCoordinatorScripts does for the coordinator. Commands:
//
//	config max=N initial=D max-backoff=D [finished]
//	attempt succeeded|transient|permanent|fenced|stopped [checkpointed] [final] [unknown] [pending]
//
// Run with -rewrite to regenerate the expected output.
func TestRecoveryScripts(t *testing.T) {
	scripttest.Run(t, "testdata/recovery_*.txt", newRecoveryScript)
}

func newRecoveryScript(t *testing.T) func(f []string) []string {
	var (
		r *Recovery
	)
	return func(f []string) []string {
		var out strings.Builder
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
					t.Fatalf("unknown config key %q", k)
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
					t.Fatalf("unknown attempt flag %q", flag)
				}
			}
			out.WriteString(r.AttemptEnded(a).String() + "\n")
		default:
			t.Fatalf("unknown command %q", f[0])
		}
		return lines(out.String())
	}
}
