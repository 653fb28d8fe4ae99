package stream_test

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/exactlyonce/exactly/internal/testwait"
	"github.com/exactlyonce/exactly/state"
	"github.com/exactlyonce/exactly/stream"
	"go.uber.org/goleak"
)

func pebbleBackend(t *testing.T) state.BackendConfig {
	return state.BackendConfig{Kind: state.PebbleBackend, Dir: t.TempDir()}
}

// TestPebbleWindowsFailoverExactlyOnce is TestWindowsFailoverExactlyOnce
// with the window state on disk.
func TestPebbleWindowsFailoverExactlyOnce(t *testing.T) {
	defer goleak.VerifyNone(t)
	out := newMemSink[windowOut]()
	var failed atomic.Bool
	src := counting{n: 6000, splits: 3, delay: time.Millisecond}
	j := windowSums(src, stream.Sliding(100*time.Millisecond, 50*time.Millisecond), out, func(v int) error {
		if v == 4000 && failed.CompareAndSwap(false, true) {
			return errors.New("injected failure")
		}
		return nil
	})
	j.SetStateBackend(pebbleBackend(t))
	r, err := j.Start(context.Background(), stream.Options{
		CheckpointDir:      t.TempDir(),
		CheckpointInterval: 10 * time.Millisecond,
		WatermarkInterval:  time.Millisecond,
		Restart:            stream.RestartStrategy{InitialBackoff: time.Millisecond},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Wait(); err != nil {
		t.Fatal(err)
	}
	if !failed.Load() || r.Metrics().Restarts.Load() != 1 {
		t.Fatalf("failed=%v restarts=%d: the injected failure did not happen once", failed.Load(), r.Metrics().Restarts.Load())
	}
	checkWindows(t, out.Visible(), 6000, 100, 50)
}

// TestSwitchStateBackendAcrossRuns stops a job in the middle of its input
// and resumes it from its checkpoints with the other backend (and another
// parallelism), twice.
func TestSwitchStateBackendAcrossRuns(t *testing.T) {
	defer goleak.VerifyNone(t)
	out := newMemSink[total]()
	dir := t.TempDir()
	src := counting{n: 20000, splits: 4, delay: 5 * time.Millisecond} // seconds of input: it outlasts two checkpoints on a loaded machine
	for i, run := range []struct {
		backend state.BackendConfig
		par     int
	}{{pebbleBackend(t), 2}, {state.BackendConfig{}, 3}, {pebbleBackend(t), 1}} {
		ctx, cancel := context.WithCancel(context.Background())
		j := runningSums(src, out, run.par)
		j.SetStateBackend(run.backend)
		var done testwait.Counter
		r, err := j.Start(ctx, stream.Options{CheckpointDir: dir, CheckpointInterval: 10 * time.Millisecond, Probe: testwait.Checkpoints(&done, nil)})
		if err != nil {
			t.Fatal(err)
		}
		if i < 2 {
			untilCheckpoints(t, r, &done, 2, time.Minute, cancel)
			if run.backend.Kind == state.PebbleBackend {
				if dbs, err := filepath.Glob(filepath.Join(run.backend.Dir, "sums-0.*.lock")); err != nil || len(dbs) != 1 {
					t.Fatalf("run %d: the Pebble database of sums[0]: %v, %v", i, dbs, err)
				}
			}
			cancel()
			if err := r.Wait(); !errors.Is(err, context.Canceled) {
				t.Fatalf("run %d: %v", i, err)
			}
			continue
		}
		if err := r.Wait(); err != nil {
			t.Fatal(err)
		}
		cancel()
	}
	checkSums(t, out.Visible(), 20000)
}

// TestRescaleAcrossRunsHeapChains is TestRescaleAcrossRuns (parallelism
// 1, 2, 3, then 1) with 2,000 keys, whose checkpoints after the first ones
// change few of them: the heap backend writes them as heap chains (every
// size, BackendConfig.HeapInlineBytes -1), which each run restores,
// rescaled, from the last.
func TestRescaleAcrossRunsHeapChains(t *testing.T) {
	defer goleak.VerifyNone(t)
	synctest.Test(t, func(t *testing.T) {
		const n, keys = 12000, 2000
		out := newMemSink[total]()
		dir := t.TempDir()
		src := counting{n: n, splits: 4, delay: 2 * time.Millisecond}
		chains := 0
		for i, par := range rescales {
			ctx, cancel := context.WithCancel(context.Background())
			j := runningSumsOf(src, out, par, keys, nil)
			j.SetStateBackend(state.BackendConfig{HeapInlineBytes: -1})
			var done testwait.Counter
			r, err := j.Start(ctx, stream.Options{CheckpointDir: dir, CheckpointInterval: 10 * time.Millisecond, Probe: testwait.Checkpoints(&done, nil)})
			if err != nil {
				t.Fatal(err)
			}
			if i < len(rescales)-1 {
				untilCheckpoints(t, r, &done, 6, time.Minute, cancel)
				cancel()
				if err := r.Wait(); !errors.Is(err, context.Canceled) {
					t.Fatalf("run %d (parallelism %d): %v", i, par, err)
				}
				chains += heapChainFiles(t, dir)
				continue
			}
			if err := r.Wait(); err != nil {
				t.Fatal(err)
			}
			cancel()
		}
		checkSumsOf(t, out.Visible(), n, keys)
		if chains == 0 {
			t.Fatal("no checkpoint wrote a heap chain file: the test did not test them")
		}
	})
}

// heapChainFiles counts the files of heap chains in the shared directory
// of the checkpoints in dir.
func heapChainFiles(t *testing.T, dir string) int {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(dir, "shared"))
	if errors.Is(err, fs.ErrNotExist) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), "-heap") {
			n++
		}
	}
	return n
}

func TestPebbleBackendNeedsDir(t *testing.T) {
	j := runningSums(counting{n: 10, splits: 1}, newMemSink[total](), 1)
	j.SetStateBackend(state.BackendConfig{Kind: state.PebbleBackend})
	err := j.Run(context.Background(), stream.Options{CheckpointDir: t.TempDir()})
	if err == nil || !strings.Contains(err.Error(), "Job.SetStateBackend") || !strings.Contains(err.Error(), "BackendConfig.Dir is empty") {
		t.Fatalf("Run without a Pebble directory: %v", err)
	}
}

// TestRescaleAcrossRunsPebble is TestRescaleAcrossRuns (parallelism 1, 2,
// 3, then 1) with the state in the Pebble backend.
func TestRescaleAcrossRunsPebble(t *testing.T) {
	defer goleak.VerifyNone(t)
	out := newMemSink[total]()
	dir := t.TempDir()
	src := counting{n: 20000, splits: 4, delay: 5 * time.Millisecond} // seconds of input: it outlasts two checkpoints on a loaded machine
	for i, par := range rescales {
		ctx, cancel := context.WithCancel(context.Background())
		j := runningSums(src, out, par)
		j.SetStateBackend(pebbleBackend(t))
		var done testwait.Counter
		r, err := j.Start(ctx, stream.Options{CheckpointDir: dir, CheckpointInterval: 10 * time.Millisecond, Probe: testwait.Checkpoints(&done, nil)})
		if err != nil {
			t.Fatal(err)
		}
		if i < len(rescales)-1 {
			untilCheckpoints(t, r, &done, 2, time.Minute, cancel)
			cancel()
			if err := r.Wait(); !errors.Is(err, context.Canceled) {
				t.Fatalf("run %d (parallelism %d): %v", i, par, err)
			}
			continue
		}
		if err := r.Wait(); err != nil {
			t.Fatal(err)
		}
		cancel()
	}
	checkSums(t, out.Visible(), 20000)
}
