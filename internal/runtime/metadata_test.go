package runtime_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/exactlyonce/exactly/checkpoint"
	"github.com/exactlyonce/exactly/internal/runtime"
	"github.com/exactlyonce/exactly/internal/testwait"
	"github.com/exactlyonce/exactly/internal/vfs"
	"github.com/exactlyonce/exactly/sink"
	"github.com/exactlyonce/exactly/source"
	"github.com/exactlyonce/exactly/stream"
	"go.uber.org/goleak"
)

// ints is a bounded source of [0, n), one split, with a pause per read.
type ints struct{ n int }

func (ints) Splits(context.Context) ([]string, error) { return []string{"0"}, nil }
func (s ints) Open(_ context.Context, _ string, pos []byte) (source.Reader[int], error) {
	next, _ := binary.Uvarint(pos)
	return &intsReader{n: s.n, next: int(next)}, nil
}

type intsReader struct{ n, next int }

func (r *intsReader) Read(_ context.Context, buf []int) (int, error) {
	// The source's pace, not a wait: it keeps a job of a few thousand
	// records running across several checkpoint intervals (fake time in
	// the synctest bubbles; real time in the zombie test's processes).
	time.Sleep(time.Millisecond)
	k := 0
	for k < len(buf) && k < 10 && r.next < r.n {
		buf[k] = r.next
		k++
		r.next++
	}
	if k == 0 {
		return 0, io.EOF
	}
	return k, nil
}
func (r *intsReader) Position() []byte { return binary.AppendUvarint(nil, uint64(r.next)) }
func (r *intsReader) Close() error     { return nil }

// txSink keeps prepared transactions by key until committed or aborted.
type txSink struct {
	mu       sync.Mutex
	prepared map[string][]int
	done     map[string]bool
	visible  []int
	// written counts the records the writers received, for tests to
	// wait on.
	written testwait.Counter
	// failCommits makes every Commit fail (a sink outage).
	failCommits atomic.Bool
	// stuck makes the Prepare of the writers opened while it is set block
	// until its context ends (a stuck write); that clears it.
	stuck atomic.Bool
}

func newTxSink() *txSink { return &txSink{prepared: map[string][]int{}, done: map[string]bool{}} }

// check fails t unless the visible rows are 0..n-1, each once, in order.
func (s *txSink) check(t *testing.T, n int) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.visible) != n {
		t.Fatalf("%d rows visible, want %d", len(s.visible), n)
	}
	for i, v := range s.visible {
		if v != i {
			t.Fatalf("row %d is %d: output lost or duplicated", i, v)
		}
	}
}

func (s *txSink) NewWriter(_ context.Context, info sink.WriterInfo) (sink.Writer[int], error) {
	return &txWriter{s: s, subtask: info.Subtask, stuck: s.stuck.Load()}, nil
}
func (s *txSink) NewCommitter(context.Context, sink.CommitterInfo) (sink.Committer, error) {
	return txCommitter{s}, nil
}

type txWriter struct {
	s       *txSink
	subtask int
	stuck   bool
	open    []int
}

func (w *txWriter) Write(_ context.Context, b []int) error {
	w.open = append(w.open, b...)
	w.s.written.Add(int64(len(b)))
	return nil
}
func (w *txWriter) Prepare(ctx context.Context, id checkpoint.ID) ([]byte, error) {
	if w.stuck {
		<-ctx.Done()
		w.s.stuck.Store(false)
		return nil, ctx.Err()
	}
	if len(w.open) == 0 {
		return nil, nil
	}
	key := fmt.Sprintf("%d-%d", w.subtask, id)
	w.s.mu.Lock()
	w.s.prepared[key] = w.open
	w.s.mu.Unlock()
	w.open = nil
	return []byte(key), nil
}
func (w *txWriter) Close() error { return nil }

type txCommitter struct{ s *txSink }

func (c txCommitter) Commit(_ context.Context, p sink.Committable) error {
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	key := string(p.Data)
	if c.s.done[key] {
		return nil
	}
	if c.s.failCommits.Load() {
		return errors.New("the sink is unreachable")
	}
	rows, ok := c.s.prepared[key]
	if !ok {
		return sink.Permanent(fmt.Errorf("transaction %s was aborted: its records are lost", key))
	}
	c.s.visible = append(c.s.visible, rows...)
	c.s.done[key] = true
	delete(c.s.prepared, key)
	return nil
}
func (c txCommitter) Abort(_ context.Context, p sink.Committable) error {
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	delete(c.s.prepared, string(p.Data))
	return nil
}
func (c txCommitter) Fence(context.Context, checkpoint.ID) error { return nil }
func (c txCommitter) AbortLingering(context.Context, checkpoint.ID) error {
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	clear(c.s.prepared)
	return nil
}
func (c txCommitter) Close() error { return nil }

func intsJob(n int, out *txSink) *stream.Job {
	j := stream.New("ints")
	stream.SinkTo(stream.Source(j, "numbers", ints{n}), "out", sink.Sink[int](out))
	return j
}

// TestMetadataWriteFailureIsNotAnAbort: when the write of a savepoint's
// metadata fails after its rename (the directory sync fails), the savepoint
// may be complete on disk. Treating it as aborted let a clean stop abort the
// transactions it covers, and the next run, restoring from it, lost them.
func TestMetadataWriteFailureIsNotAnAbort(t *testing.T) {
	defer goleak.VerifyNone(t)
	synctest.Test(t, func(t *testing.T) {
		const n = 3000
		dir := t.TempDir()
		out := &txSink{prepared: map[string][]int{}, done: map[string]bool{}}
		var renamed, failed atomic.Bool
		fsys := vfs.WithErrors(vfs.Default, func(op, name string) error {
			switch {
			case op == vfs.OpRename && filepath.Base(name) == "_metadata.tmp" && strings.Contains(name, "savepoints"):
				renamed.Store(true)
			case op == vfs.OpSyncDir && renamed.Load() && failed.CompareAndSwap(false, true):
				return errors.New("injected sync failure")
			}
			return nil
		})
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		opts := runtime.WithFS(stream.Options{
			CheckpointDir:      dir,
			CheckpointInterval: time.Hour,
			Restart:            stream.RestartStrategy{InitialBackoff: time.Millisecond},
		}, fsys)
		r, err := intsJob(n, out).Start(ctx, opts)
		if err != nil {
			t.Fatal(err)
		}
		testwait.For(t, out.written.Reached(1), time.Minute, "the first record at the sink", nil)
		if _, err := r.Savepoint(ctx); err == nil {
			t.Fatal("Savepoint succeeded despite the injected failure")
		}
		if !failed.Load() {
			t.Fatal("the failure was not injected")
		}
		cancel() // a clean stop
		if err := r.Wait(); !errors.Is(err, context.Canceled) {
			t.Fatalf("Wait = %v, want context.Canceled", err)
		}
		// The next run restores from the latest on disk, the savepoint if its
		// metadata made it, and must find its transactions.
		if err := intsJob(n, out).Run(context.Background(), stream.Options{CheckpointDir: dir, CheckpointInterval: 10 * time.Millisecond}); err != nil {
			t.Fatal(err)
		}
		out.mu.Lock()
		defer out.mu.Unlock()
		if len(out.visible) != n {
			t.Fatalf("%d rows visible, want %d", len(out.visible), n)
		}
		for i, v := range out.visible {
			if v != i {
				t.Fatalf("row %d is %d: output lost or duplicated", i, v)
			}
		}
	})
}
