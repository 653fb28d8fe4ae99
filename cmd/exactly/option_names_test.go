package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestMessagesOfferTheFlagsOfExactlyRun: every choice the engine's
// messages offer a user of exactly run is made with a flag of exactly run,
// and the message names the flag (they named stream.Options fields, which
// a user of the binary cannot set): a finished pipeline run again, a rerun
// from scratch into sinks that hold the output of an earlier run, and a
// corrupt latest checkpoint. Each run with the flag named then succeeds.
func TestMessagesOfferTheFlagsOfExactlyRun(t *testing.T) {
	example := exampleCopy(t, "orders-sqlite.yaml")
	args := []string{"run", example, "--log-level", "info", "--control-addr", ""}
	mustRun := func(step string, extra ...string) commandRun {
		t.Helper()
		r := runExactly(t, append(args, extra...)...)
		if r.code != 0 {
			t.Fatalf("%s: exit %d\nstdout:\n%s\nstderr:\n%s", step, r.code, r.stdout, r.stderr)
		}
		return r
	}
	mustSay := func(step string, r commandRun, want string) {
		t.Helper()
		if !strings.Contains(r.stderr, want) {
			t.Fatalf("%s: the logs and error do not say %q:\n%s", step, want, r.stderr)
		}
		for _, goName := range []string{"stream.Options", "RunFinished", "TakeOverSinks", "SkipCorruptCheckpoints"} {
			if strings.Contains(r.stderr, goName) {
				t.Fatalf("%s: a message names the Go option %q:\n%s", step, goName, r.stderr)
			}
		}
	}
	mustRun("first run")

	finished := mustRun("the finished pipeline run again")
	mustSay("the finished pipeline run again", finished, "start it with --run-finished to run it on from there")
	mustRun("--run-finished", "--run-finished")

	if err := os.RemoveAll("orders-per-minute-checkpoints"); err != nil {
		t.Fatal(err)
	}
	rerun := runExactly(t, args...)
	if rerun.code == 0 {
		t.Fatalf("a rerun from scratch into the earlier run's table succeeded:\n%s", rerun.stderr)
	}
	mustSay("a rerun from scratch", rerun, "to take the output over, start it with --take-over-sinks")
	mustRun("--take-over-sinks", "--take-over-sinks")

	metadata, err := filepath.Glob(filepath.Join("orders-per-minute-checkpoints", "chk-*", "_metadata"))
	if err != nil || len(metadata) == 0 {
		t.Fatalf("no completed checkpoint to corrupt: %v", err)
	}
	for _, m := range metadata {
		corruptFile(t, m)
	}
	corrupt := runExactly(t, args...)
	if corrupt.code == 0 {
		t.Fatalf("a run on corrupt checkpoints succeeded:\n%s", corrupt.stderr)
	}
	mustSay("corrupt checkpoints", corrupt, "or start with --skip-corrupt-checkpoints to fall back")
	mustSay("corrupt checkpoints", corrupt, "or start from a savepoint with --from")
	mustRun("--skip-corrupt-checkpoints", "--skip-corrupt-checkpoints", "--take-over-sinks")
}

// corruptFile flips a byte in the middle of the file at path.
func corruptFile(t *testing.T, path string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)/2] ^= 0xff
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}
