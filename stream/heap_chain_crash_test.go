package stream_test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/exactlyonce/exactly/connectors/file"
	"github.com/exactlyonce/exactly/internal/crashtest"
	"github.com/exactlyonce/exactly/internal/crashtest/crashtesting"
	"github.com/exactlyonce/exactly/state"
	"github.com/exactlyonce/exactly/stream"
)

// heapChainCrashRecords and heapChainCrashKeys size the heap chain crash
// test: each checkpoint changes a few of the keys, so that the heap
// backend writes changes on top of a chain.
const heapChainCrashRecords, heapChainCrashKeys = 12_000, 3_000

// TestHeapChainsCrashExactlyOnce runs a running sum per key over 3,000
// keys on the heap backend, its checkpoints written as heap chains at any
// size (BackendConfig.HeapInlineBytes -1), in a child process SIGKILLed
// again and again: what the file sink committed must equal the output of a
// failure-free run, line by line, and the checkpoints must have written
// chain files.
func TestHeapChainsCrashExactlyOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("crash test: skipped with -short")
	}
	dir := crashDir(t, "EXACTLY_HEAP_CHAIN_CRASH_DIR")
	if crashtest.IsChild() {
		if err := runHeapChainCrashJob(dir, true); err != nil {
			t.Fatal(err)
		}
		return
	}
	ref := t.TempDir()
	if err := runHeapChainCrashJob(ref, false); err != nil {
		t.Fatalf("failure-free run: %v", err)
	}
	want := readCommittedLines(t, filepath.Join(ref, "out"))
	if len(want) != heapChainCrashRecords {
		t.Fatalf("the failure-free run committed %d lines, want %d", len(want), heapChainCrashRecords)
	}
	crashtesting.RunLive(t, crashtest.Options{Kills: crashtesting.Sized(10, 30), MaxDelay: 1200 * time.Millisecond,
		Env: []string{"EXACTLY_HEAP_CHAIN_CRASH_DIR=" + dir}}, 6)
	if got := readCommittedLines(t, filepath.Join(dir, "out")); !slices.Equal(got, want) {
		t.Errorf("%d lines committed, the failure-free run committed %d; first difference: %s", len(got), len(want), firstDifference(got, want))
	}
	if n := heapChainFiles(t, filepath.Join(dir, "checkpoints")); n == 0 {
		t.Error("no heap chain file in the checkpoints: the test did not test them")
	} else {
		t.Logf("heap chain files in the shared directory at the end: %d", n)
	}
}

// runHeapChainCrashJob runs records [0, heapChainCrashRecords) -> keyBy(i
// % heapChainCrashKeys) -> running sum in a ValueState -> file sink out
// ("key,value,sum"), resuming from the checkpoints in dir. One split
// makes each key's sums deterministic; paced, the input outlasts the
// kills.
func runHeapChainCrashJob(dir string, paced bool) error {
	out, err := file.NewSink(filepath.Join(dir, "out"), func(dst []byte, s total) []byte {
		return fmt.Appendf(dst, "%d,%d,%d", s.Key, s.Value, s.Sum)
	}, file.SinkOptions{})
	if err != nil {
		return err
	}
	j := stream.New("heap-chains")
	nums := stream.Source(j, "numbers", pacedSource{n: heapChainCrashRecords, paced: paced})
	keyed := stream.KeyBy(nums, func(v int) int64 { return int64(v % heapChainCrashKeys) }, state.Int64Codec{})
	sums := stream.Process(keyed, "sums", sumsSetup(nil), stream.Parallelism(2))
	stream.SinkTo(sums, "out", out)
	j.SetStateBackend(state.BackendConfig{HeapInlineBytes: -1})
	return j.Run(context.Background(), crashRunOptions(dir))
}
