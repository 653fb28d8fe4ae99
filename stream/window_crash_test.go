package stream_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/exactlyonce/exactly/connectors/file"
	"github.com/exactlyonce/exactly/connectors/generator"
	"github.com/exactlyonce/exactly/internal/crashtest"
	"github.com/exactlyonce/exactly/internal/crashtest/crashtesting"
	"github.com/exactlyonce/exactly/state"
	"github.com/exactlyonce/exactly/stream"
)

// TestWindowsCrashExactlyOnce runs a sliding-window job in a child process
// and SIGKILLs it repeatedly, at every point of the checkpoint protocol and
// at random; the windows committed to the exactly-once file sink must equal
// those of a failure-free run, value by value.
func TestWindowsCrashExactlyOnce(t *testing.T) { windowsCrashTest(t, state.HeapBackend) }

// TestWindowsCrashExactlyOncePebble is TestWindowsCrashExactlyOnce with the
// window state in the Pebble backend: each process finds the previous
// one's database directory, which moved past the checkpoint (the case of
// Kafka Streams' double count after a SIGKILL, KAFKA-20685), and the local
// copies of the checkpoint's files; it must restore exactly the
// checkpoint's state, from the local copies that match it (that they are
// used is TestLocalRecovery's proof, in package state).
func TestWindowsCrashExactlyOncePebble(t *testing.T) { windowsCrashTest(t, state.PebbleBackend) }

func windowsCrashTest(t *testing.T, backend state.BackendKind) {
	if testing.Short() {
		t.Skip("crash test: skipped with -short")
	}
	dir := crashDir(t, "EXACTLY_WINDOW_CRASH_DIR")
	// 30,000 values at 6,000/s, event time = the value in ms: the input
	// outlasts most of the kill schedule.
	const n, size, slide = 30_000, 100, 50
	out := filepath.Join(dir, "out")
	if crashtest.IsChild() {
		if err := runWindowCrashJob(dir, out, n, size, slide, backend); err != nil {
			t.Fatal(err)
		}
		return
	}
	crashtesting.RunLive(t, crashtest.Options{Kills: crashtesting.Sized(12, 30), MaxDelay: 1500 * time.Millisecond, Env: []string{"EXACTLY_WINDOW_CRASH_DIR=" + dir}}, 8)
	got, err := readWindowFiles(out)
	if err != nil {
		t.Fatal(err)
	}
	checkWindows(t, got, n, size, slide)
	if backend == state.PebbleBackend {
		// Informative only: once every window fired the final checkpoint
		// may hold no table file, and then no local copy is left.
		local, _ := filepath.Glob(filepath.Join(dir, "pebble", "*.files", "*"))
		t.Logf("%d local copies of checkpoint files at the end", len(local))
	}
}

// runWindowCrashJob runs generator -> keyBy(v % 10) -> sliding windows of
// count and sum -> file sink, with the window state in backend, resuming
// from the checkpoints in dir.
func runWindowCrashJob(dir, out string, n, size, slide int, backend state.BackendKind) error {
	src, err := generator.New(generator.Options{Count: uint64(n), Splits: 4, Rate: 6000}, func(i uint64) int { return int(i) })
	if err != nil {
		return err
	}
	snk, err := file.NewSink(out, func(dst []byte, w windowOut) []byte {
		return fmt.Appendf(dst, "%d,%d,%d,%d", w.Key, w.Start.UnixMilli(), w.Count, w.Sum)
	}, file.SinkOptions{})
	if err != nil {
		return err
	}
	j := windowSums(src, stream.Sliding(time.Duration(size)*time.Millisecond, time.Duration(slide)*time.Millisecond), snk, nil)
	if backend == state.PebbleBackend {
		j.SetStateBackend(state.BackendConfig{Kind: backend, Dir: filepath.Join(dir, "pebble")})
	}
	return j.Run(context.Background(), stream.Options{
		CheckpointDir:      filepath.Join(dir, "checkpoints"),
		CheckpointInterval: 50 * time.Millisecond,
		WatermarkInterval:  5 * time.Millisecond,
		Probe:              crashtest.Probe(),
	})
}

// crashDir returns the directory of a crash test: the one the parent
// passed its children in the environment variable env, or in the parent a
// new one, which it passes on.
func crashDir(t *testing.T, env string) string {
	if dir := os.Getenv(env); dir != "" {
		return dir
	}
	return t.TempDir()
}

// readWindowFiles reads the committed (visible) files of the file sink.
func readWindowFiles(dir string) ([]windowOut, error) {
	lines, err := committedLines(dir)
	if err != nil {
		return nil, err
	}
	var got []windowOut
	for _, l := range lines {
		w, ok := parseWindowLine(l)
		if !ok {
			return nil, fmt.Errorf("%s: malformed line %q", dir, l)
		}
		got = append(got, w)
	}
	return got, nil
}

// readCommittedLines returns the lines of the committed files of the file
// sink in dir, sorted.
func readCommittedLines(t *testing.T, dir string) []string {
	t.Helper()
	lines, err := committedLines(dir)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(lines)
	return lines
}

// committedLines returns the lines of the committed (visible) files of the
// file sink in dir.
func committedLines(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var lines []string
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") {
			continue // in progress or pending: not committed
		}
		f, err := os.Open(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, err
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			lines = append(lines, sc.Text())
		}
		err = sc.Err()
		f.Close()
		if err != nil {
			return nil, err
		}
	}
	return lines, nil
}

// parseWindowLine parses "key,start,count,sum".
func parseWindowLine(line string) (windowOut, bool) {
	fields := strings.Split(line, ",")
	if len(fields) != 4 {
		return windowOut{}, false
	}
	var v [4]int64
	for i, f := range fields {
		var err error
		if v[i], err = strconv.ParseInt(f, 10, 64); err != nil {
			return windowOut{}, false
		}
	}
	return windowOut{Key: v[0], Start: time.UnixMilli(v[1]), Count: int(v[2]), Sum: int(v[3])}, true
}
