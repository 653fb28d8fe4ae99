package crashtest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/exactlyonce/exactly/internal/runtime"
)

// envFinal marks the final run in TestSuperviseFinalEnv.
const envFinal = "EXACTLY_CRASHTEST_FINAL"

// envStopper makes the re-executed test binary the child of TestStopAt.
const envStopper = "EXACTLY_CRASHTEST_STOPPER"

// envParent makes the re-executed test binary the parent of
// TestDieWithParent: it starts a sleep that must die with it, prints the
// sleep's pid and waits to be killed.
const envParent = "EXACTLY_CRASHTEST_PARENT"

// TestMain runs the child of TestSuperviseFinalEnv when re-executed: a
// child that kills itself at any planned protocol point, waits for the
// timed kill otherwise, and exits 0 only in a run that got FinalEnv.
func TestMain(m *testing.M) {
	if os.Getenv(envParent) != "" {
		sleep := exec.Command("sleep", "60")
		DieWithParent(sleep)
		if err := sleep.Start(); err != nil {
			os.Exit(2)
		}
		fmt.Println(sleep.Process.Pid)
		time.Sleep(time.Minute)
		os.Exit(3)
	}
	if os.Getenv(envStopper) != "" {
		probe := Probe()
		for range 3 {
			probe(runtime.ProbeCommitted, 1) // stops at the second
		}
		os.Exit(0)
	}
	if IsChild() {
		if os.Getenv(envFinal) == "yes" {
			os.Exit(0)
		}
		if os.Getenv(envCrashAt) != "" {
			_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		}
		time.Sleep(time.Minute) // the timed kill, or the run's timeout
		os.Exit(3)
	}
	os.Exit(m.Run())
}

// TestSuperviseFinalEnv checks that only the final run, the one no kill is
// planned for, gets Options.FinalEnv, and that it overrides Env.
func TestSuperviseFinalEnv(t *testing.T) {
	command := func(ctx context.Context) *exec.Cmd { return exec.CommandContext(ctx, os.Args[0]) }
	rep, err := Supervise(Options{
		Kills: 4, Seed: 7, MaxDelay: 50 * time.Millisecond, Timeout: 20 * time.Second,
		Points:   []runtime.ProbePoint{runtime.ProbeCommitted},
		Env:      []string{envFinal + "=no"},
		FinalEnv: []string{envFinal + "=yes"},
	}, command, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Kills != 4 || rep.Runs != 5 {
		t.Fatalf("%d kills in %d runs, want 4 kills and a fifth, final run that exits 0: %s", rep.Kills, rep.Runs, rep)
	}
}

// TestStopAt checks that a process with StopAt's entry stops itself at
// the nth time it reaches the point, and goes on when continued.
func TestStopAt(t *testing.T) {
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), envStopper+"=1", StopAt(runtime.ProbeCommitted, 2))
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	// The child's state change, as its parent hears of it: stopped, or
	// (a failure) exited.
	var ws syscall.WaitStatus
	if _, err := syscall.Wait4(cmd.Process.Pid, &ws, syscall.WUNTRACED, nil); err != nil {
		t.Fatal(err)
	}
	if !ws.Stopped() || !Stopped(cmd.Process.Pid) {
		t.Fatalf("the child did not stop itself: wait status %#x", ws)
	}
	if err := cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("the continued child: %v, want exit 0", err)
	}
}

// TestDieWithParent checks that a child started with DieWithParent is
// killed when its parent is.
func TestDieWithParent(t *testing.T) {
	parent := exec.Command(os.Args[0])
	parent.Env = append(os.Environ(), envParent+"=1")
	out, err := parent.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := parent.Start(); err != nil {
		t.Fatal(err)
	}
	defer parent.Process.Kill()
	var pid int
	if _, err := fmt.Fscan(out, &pid); err != nil {
		t.Fatalf("reading the child's pid: %v", err)
	}
	if err := syscall.Kill(pid, 0); err != nil {
		t.Fatalf("the child %d is not running before its parent dies: %v", pid, err)
	}
	if err := parent.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = parent.Wait()
	// The child is the init process's now: it is reaped once it died.
	deadline := time.Now().Add(20 * time.Second)
	for syscall.Kill(pid, 0) == nil {
		if time.Now().After(deadline) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			t.Fatalf("the child %d still runs 20s after its parent was killed", pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
