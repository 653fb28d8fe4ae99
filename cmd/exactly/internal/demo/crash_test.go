package demo

import (
	"bytes"
	"context"
	"os"
	"testing"
	"time"

	"github.com/exactlyonce/exactly/internal/crashtest"
	"github.com/exactlyonce/exactly/internal/crashtest/crashtesting"
)

// envUnthrottled lifts the child's rate limit in the final run.
const envUnthrottled = "EXACTLY_DEMO_UNTHROTTLED"

// TestCrashRecoveryIsExactlyOnce runs the demo job in a child process,
// SIGKILLs it at least 25 times — at random moments and at every point of
// the checkpoint protocol, including after the checkpoint metadata is
// durable and before the sinks commit — restarts it each time, and checks
// that the SQLite table and the files hold every order exactly once with
// the right running totals.
func TestCrashRecoveryIsExactlyOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("crash test: skipped with -short")
	}
	dir := os.Getenv("EXACTLY_DEMO_DIR")
	if dir == "" {
		dir = t.TempDir()
	}
	// 60,000 orders at 1,000/s: the input outlasts the kill schedule even
	// on a loaded machine, so the kills land while the job has work
	// (checked below); the final run, after the last kill, reads the rest
	// unthrottled.
	cfg := Config{Dir: dir, Events: 60_000, Customers: 50, Seed: 7, Rate: 1_000, Parallelism: 2, CheckpointInterval: 50 * time.Millisecond}
	if crashtest.IsChild() {
		if os.Getenv(envUnthrottled) != "" {
			cfg.Rate = 0
		}
		cfg.Probe = crashtest.Probe()
		if err := Run(context.Background(), cfg, nil); err != nil {
			t.Fatal(err)
		}
		return
	}
	rep := crashtesting.RunLive(t, crashtest.Options{Kills: crashtesting.Sized(25, 60), MaxDelay: 1500 * time.Millisecond, Env: []string{"EXACTLY_DEMO_DIR=" + dir},
		FinalEnv: []string{envUnthrottled + "=1"}}, 20)
	if rep.ByKind["metadata-written"] == 0 {
		t.Errorf("no kill between checkpoint completion and commit: %v", rep)
	}
	vr, err := Verify(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	vr.Print(&out)
	t.Log("\n" + out.String())
	if !vr.OK() {
		t.Fatal("committed output differs from the expected output")
	}
}
