package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"testing"
)

// runMainEnv, set to 1, makes this test binary run the exactly command
// itself (see TestMain).
const runMainEnv = "EXACTLY_TEST_RUN_MAIN"

// TestMain runs the exactly command instead of the tests when runMainEnv
// is set: the tests of the command line run this binary as a user runs
// exactly, and read its output, logs and exit code.
func TestMain(m *testing.M) {
	if os.Getenv(runMainEnv) == "1" {
		os.Args = append([]string{"exactly"}, os.Args[1:]...)
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// commandRun is what a run of the exactly command printed and how it
// ended.
type commandRun struct {
	stdout, stderr string
	code           int
}

// runExactly runs the exactly command with args in the working directory
// and returns what it printed and its exit code.
func runExactly(t *testing.T, args ...string) commandRun {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), runMainEnv+"=1")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatalf("exactly %q: %v", args, err)
	}
	return commandRun{stdout: stdout.String(), stderr: stderr.String(), code: cmd.ProcessState.ExitCode()}
}
