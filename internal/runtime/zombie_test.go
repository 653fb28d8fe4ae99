package runtime_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/exactlyonce/exactly/connectors/file"
	"github.com/exactlyonce/exactly/stream"
)

const (
	envZombieChild = "EXACTLY_ZOMBIE_CHILD" // "checkpointDir|outputDir": run the job and exit
	zombieRecords  = 20_000                 // about 2s of input at the ints source's pace
	zombieLease    = time.Second
)

// TestZombieCommitsNothing (case 6): a job process paused (SIGSTOP) past its
// ownership lease is taken over by a new process, which finishes the job;
// resumed (SIGCONT), the old process must stop with an ownership error and
// commit nothing. The committed files must hold every record exactly once.
func TestZombieCommitsNothing(t *testing.T) {
	if spec := os.Getenv(envZombieChild); spec != "" {
		runZombieChild(spec)
		return
	}
	if testing.Short() {
		t.Skip("starts processes")
	}
	dirs := t.TempDir()
	chk, out := filepath.Join(dirs, "checkpoints"), filepath.Join(dirs, "out")
	if err := os.MkdirAll(out, 0o755); err != nil {
		t.Fatal(err)
	}
	start := func() (*exec.Cmd, *strings.Builder) {
		cmd := exec.Command(os.Args[0], "-test.run=^TestZombieCommitsNothing$")
		cmd.Env = append(os.Environ(), envZombieChild+"="+chk+"|"+out)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		return cmd, &stderr
	}
	zombie, zombieErr := start()
	defer zombie.Process.Kill()
	// Let it commit something, then pause it past its lease.
	for deadline := time.Now().Add(30 * time.Second); len(committedInts(t, out)) == 0; {
		if time.Now().After(deadline) {
			t.Fatalf("the first process committed nothing in 30s:\n%s", zombieErr)
		}
		time.Sleep(5 * time.Millisecond)
	}
	pauseOutsideLock(t, zombie.Process, filepath.Join(chk, "_lock"))
	paused := len(committedInts(t, out))
	time.Sleep(zombieLease + zombieLease/2)
	next, nextErr := start()
	if err := next.Wait(); err != nil {
		t.Fatalf("the new owner failed: %v\n%s", err, nextErr)
	}
	if err := zombie.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- zombie.Wait() }()
	select {
	case err := <-done:
		var exit *exec.ExitError
		if !errors.As(err, &exit) || !strings.Contains(zombieErr.String(), "no longer owns") && !strings.Contains(zombieErr.String(), "fenced") {
			t.Fatalf("the resumed zombie exited with %v, want an ownership error:\n%s", err, zombieErr)
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("the resumed zombie did not stop within 60s:\n%s", zombieErr)
	}
	got := committedInts(t, out)
	seen := make([]int, zombieRecords)
	for _, v := range got {
		if v < 0 || v >= zombieRecords {
			t.Fatalf("committed value %d out of range", v)
		}
		seen[v]++
	}
	for v, n := range seen {
		if n != 1 {
			t.Fatalf("value %d committed %d times (%d records committed, %d when the zombie was paused)", v, n, len(got), paused)
		}
	}
	t.Logf("%d records committed exactly once; %d were committed before the pause; zombie: %s",
		len(got), paused, lastLine(zombieErr.String()))
}

// pauseOutsideLock SIGSTOPs p at a moment when it does not hold the
// checkpoint directory's lock file (a flock it takes for a few file
// operations at a time): paused inside it, p would only delay the new
// owner, which then fails with the "another instance" error, and the test
// would prove nothing about zombies. It resumes and pauses p again until
// the lock is free while p is stopped.
func pauseOutsideLock(t *testing.T, p *os.Process, lock string) {
	t.Helper()
	for range 1000 {
		if err := p.Signal(syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		f, err := os.Open(lock)
		if err != nil {
			t.Fatal(err)
		}
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		f.Close() // releases the flock, if taken
		if err == nil {
			return
		}
		if err := p.Signal(syscall.SIGCONT); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatal("the process held the directory lock at each of 1000 pauses")
}

// runZombieChild runs the job of TestZombieCommitsNothing and exits: 0 when
// it finished, 3 with the error on stderr otherwise.
func runZombieChild(spec string) {
	chk, out, _ := strings.Cut(spec, "|")
	sk, err := file.NewSink(out, func(dst []byte, v int) []byte { return strconv.AppendInt(dst, int64(v), 10) }, file.SinkOptions{})
	if err == nil {
		j := stream.New("zombie")
		stream.SinkTo(stream.Source(j, "numbers", ints{zombieRecords}), "out", sk)
		err = j.Run(context.Background(), stream.Options{CheckpointDir: chk, CheckpointInterval: 50 * time.Millisecond, OwnershipLease: zombieLease})
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(3)
	}
	os.Exit(0)
}

// committedInts reads every committed file of the file sink in dir.
func committedInts(t *testing.T, dir string) []int {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var all []int
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") || !strings.HasSuffix(e.Name(), file.DefaultSuffix) {
			continue
		}
		f, err := os.Open(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			v, err := strconv.Atoi(sc.Text())
			if err != nil {
				t.Fatalf("%s: %v", e.Name(), err)
			}
			all = append(all, v)
		}
		f.Close()
	}
	return all
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}
