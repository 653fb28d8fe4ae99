package main

import (
	"bufio"
	"bytes"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
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

// runningExactly is a run of the exactly command in the background.
type runningExactly struct {
	cmd   *exec.Cmd
	lines chan string // its standard output, line by line; closed at its end
	done  chan struct{}
	err   error // Wait's, once done is closed
}

// startExactly starts the exactly command with args in the background; it
// is killed at the end of the test if still running.
func startExactly(t *testing.T, args ...string) *runningExactly {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), runMainEnv+"=1")
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	r := &runningExactly{cmd: cmd, lines: make(chan string, 100), done: make(chan struct{})}
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			r.lines <- sc.Text()
		}
		close(r.lines)
		r.err = cmd.Wait()
		close(r.done)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-r.done
	})
	return r
}

// waitLine returns the first line of r's output that holds want, failing
// the test if r ends or printed nothing matching for a minute.
func (r *runningExactly) waitLine(t *testing.T, want string) string {
	t.Helper()
	timeout := time.After(time.Minute)
	for {
		select {
		case line, ok := <-r.lines:
			if !ok {
				t.Fatalf("exactly %q ended without printing %q", r.cmd.Args[1:], want)
			}
			if strings.Contains(line, want) {
				return line
			}
		case <-timeout:
			t.Fatalf("exactly %q printed no %q in a minute", r.cmd.Args[1:], want)
		}
	}
}
