package file

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/exactlyonce/exactly/checkpoint"
	"github.com/exactlyonce/exactly/internal/vfs"
	"github.com/exactlyonce/exactly/sink"
)

// crashDir is the sink's directory on the MemFS of the crash tests.
const crashDir = "/data/out"

var (
	errInjected = errors.New("injected I/O error")
	ownerA3     = sink.Owner{Incarnation: "inca", Epoch: 3}
)

// crashSetup returns a crashable MemFS holding what a first process (owner
// A1) left behind: checkpoint 1 (records 1 and 2) committed, a pending
// file of checkpoint 2, which never completed, and the in-progress files
// of subtasks 0 and 1. Everything is durable except the in-progress files.
// The returned committable is checkpoint 1's, which the checkpoint holds.
func crashSetup(t *testing.T) (*vfs.MemFS, sink.Committable) {
	t.Helper()
	ctx := context.Background()
	mem := vfs.NewCrashableMem()
	// NewSink creates the missing output directory durably.
	s, err := newSink(mem, crashDir, appendInt, SinkOptions{Suffix: ".jsonl"})
	if err != nil {
		t.Fatal(err)
	}
	c := fencedCommitter(t, s, ownerA1, 0)
	w := ownedWriter(t, s, ownerA1, 0)
	cm1 := ownedPrepare(t, w, ownerA1, 0, 1, 1, 2)
	if err := c.Commit(ctx, cm1); err != nil {
		t.Fatal(err)
	}
	ownedPrepare(t, w, ownerA1, 0, 2, 3)
	if err := w.Write(ctx, []int{4}); err != nil {
		t.Fatal(err)
	}
	if err := ownedWriter(t, s, ownerA1, 1).Write(ctx, []int{5}); err != nil {
		t.Fatal(err)
	}
	return mem, cm1
}

// restorePoint is a completed checkpoint of the crash test's job: its id,
// the committables it holds and the records visible once they are
// committed.
type restorePoint struct {
	id      checkpoint.ID
	entries []sink.Committable
	visible []string
}

// crashAttempt runs a second process (owner A2) on fsys as the engine
// would: it restores checkpoint 1 (fence, commit checkpoint 1's
// committable again, abort lingering files), writes and commits
// checkpoints 3, 4 (nothing written: no file operation, so the commit of
// checkpoint 3 before it must be durable by itself) and 5, prepares
// checkpoint 6, which never completes, writes more and stops cleanly
// (aborting checkpoint 6, discarding the open transaction). It stops at
// the first error, as a crashing process would. done is called with each
// checkpoint that completes, in order.
func crashAttempt(fsys vfs.FS, cm1 sink.Committable, done func(restorePoint)) error {
	ctx := context.Background()
	s, err := newSink(fsys, crashDir, appendInt, SinkOptions{Suffix: ".jsonl"})
	if err != nil {
		return err
	}
	c, err := s.NewCommitter(ctx, sink.CommitterInfo{Job: "job", Sink: "out", Owner: ownerA2})
	if err != nil {
		return err
	}
	if err := c.Fence(ctx, 1); err != nil {
		return err
	}
	if err := c.Commit(ctx, cm1); err != nil {
		return err
	}
	if err := c.AbortLingering(ctx, 1); err != nil {
		return err
	}
	w, err := s.NewWriter(ctx, sink.WriterInfo{Job: "job", Sink: "out", Subtask: 0, Parallelism: 1, Owner: ownerA2})
	if err != nil {
		return err
	}
	// prepare writes batch and prepares checkpoint cp.
	prepare := func(cp checkpoint.ID, batch ...int) (sink.Committable, error) {
		if err := w.Write(ctx, batch); err != nil {
			return sink.Committable{}, err
		}
		data, err := w.Prepare(ctx, cp)
		return sink.Committable{Checkpoint: cp, Incarnation: ownerA2.Incarnation, Data: data}, err
	}
	cm3, err := prepare(3, 10, 11)
	if err != nil {
		return err
	}
	done(restorePoint{3, []sink.Committable{cm3}, []string{"1", "10", "11", "2"}})
	if err := c.Commit(ctx, cm3); err != nil {
		return err
	}
	if data, err := w.Prepare(ctx, 4); err != nil || data != nil {
		return fmt.Errorf("Prepare(4) with nothing written = %q, %w", data, err)
	}
	done(restorePoint{4, nil, []string{"1", "10", "11", "2"}})
	cm5, err := prepare(5, 12)
	if err != nil {
		return err
	}
	done(restorePoint{5, []sink.Committable{cm5}, []string{"1", "10", "11", "12", "2"}})
	if err := c.Commit(ctx, cm5); err != nil {
		return err
	}
	cm6, err := prepare(6, 13)
	if err != nil {
		return err
	}
	if err := w.Write(ctx, []int{14}); err != nil {
		return err
	}
	// A clean stop: checkpoint 6 never completed.
	if err := c.Abort(ctx, cm6); err != nil {
		return err
	}
	return errors.Join(w.Close(), c.Close())
}

// TestSinkCrash interrupts crashAttempt at each of its file operations in
// turn (91 of them: every create, write, sync, close, rename, removal,
// directory fsync, lock, read and stat of the prepare → commit cycles, of
// Fence, Abort and AbortLingering), in three ways: a power cut right after
// the operation (every later one fails, then only what was fsynced
// survives), the operation failing with an I/O error (the process stops,
// the machine does not), and both. The attempt must fail with an error
// that wraps the injected one, names the file and is not permanent (an
// I/O error may pass; the engine retries). A third process (owner A3) then
// restores the latest completed checkpoint on what survived, as the engine
// does: Fence, Commit of every committable the checkpoint holds,
// AbortLingering. Every step of the restore must succeed; afterwards
// exactly the records of the completed checkpoints are visible, each
// once, no in-progress, pending or temporary file is left, and the sink
// commits a new checkpoint.
func TestSinkCrash(t *testing.T) {
	for _, mode := range []struct {
		name string
		// failFrom: every operation from the n-th on fails (the machine
		// stopped after the (n-1)-th), else only the n-th fails.
		failFrom bool
		// powerCut: the restore sees only what was durable.
		powerCut bool
	}{
		{"power cut after each operation", true, true},
		{"each operation fails", false, false},
		{"each operation fails, then a power cut", false, true},
	} {
		t.Run(mode.name, func(t *testing.T) {
			for n := 1; ; n++ {
				mem, cm1 := crashSetup(t)
				ops, failed, failedFile := 0, "", ""
				faulty := vfs.WithErrors(mem, func(op, name string) error {
					ops++
					if ops == n || (mode.failFrom && ops > n) {
						if failed == "" {
							failed, failedFile = fmt.Sprintf("operation %d (%s %s)", ops, op, name), name
						}
						return errInjected
					}
					return nil
				})
				restored := restorePoint{1, []sink.Committable{cm1}, []string{"1", "2"}}
				err := crashAttempt(faulty, cm1, func(p restorePoint) { restored = p })
				if err != nil && failed == "" {
					t.Fatalf("n=%d: the attempt failed without an injected failure: %v", n, err)
				}
				if err != nil && (!errors.Is(err, errInjected) || !strings.Contains(err.Error(), failedFile) || sink.IsPermanent(err)) {
					t.Fatalf("n=%d: %s failed; the attempt's error does not wrap it, does not name the file or is permanent: %v", n, failed, err)
				}
				if err == nil && failed != "" {
					t.Fatalf("n=%d: %s failed, yet the attempt succeeded: the sink ignored an I/O error", n, failed)
				}
				survivor := mem
				if mode.powerCut {
					survivor = mem.Crash()
				}
				checkRestore(t, fmt.Sprintf("n=%d, %s failed, restoring checkpoint %d", n, failed, restored.id), survivor, restored)
				if failed == "" {
					t.Logf("%d crash points: the attempt's %d file operations, each interrupted in turn", n-1, n-1)
					return
				}
			}
		})
	}
}

// checkRestore restores p on fsys as the third owner and checks the
// invariants of TestSinkCrash; what names the case in failures.
func checkRestore(t *testing.T, what string, fsys vfs.FS, p restorePoint) {
	t.Helper()
	ctx := context.Background()
	s, err := newSink(fsys, crashDir, appendInt, SinkOptions{Suffix: ".jsonl"})
	if err != nil {
		t.Fatalf("%s: NewSink: %v", what, err)
	}
	c := ownedCommitter(t, s, ownerA3, false)
	if err := c.Fence(ctx, p.id); err != nil {
		t.Fatalf("%s: Fence: %v", what, err)
	}
	for _, cm := range p.entries {
		if err := c.Commit(ctx, cm); err != nil {
			t.Fatalf("%s: Commit of checkpoint %d again: %v", what, cm.Checkpoint, err)
		}
	}
	if err := c.AbortLingering(ctx, p.id); err != nil {
		t.Fatalf("%s: AbortLingering: %v", what, err)
	}
	check := func(when string, want []string) {
		t.Helper()
		got := visibleOn(t, fsys, crashDir)
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Fatalf("%s: visible %s: %q, want %q", what, when, got, want)
		}
		for _, name := range namesOn(t, fsys, crashDir) {
			if strings.HasPrefix(name, ".") {
				t.Fatalf("%s: %s left %s behind (files: %q)", what, when, name, namesOn(t, fsys, crashDir))
			}
		}
	}
	check("after the restore", p.visible)
	cm := ownedPrepare(t, ownedWriter(t, s, ownerA3, 0), ownerA3, 0, 7, 20)
	if err := c.Commit(ctx, cm); err != nil {
		t.Fatalf("%s: Commit after the restore: %v", what, err)
	}
	check("after the next checkpoint", append(slices.Clone(p.visible), "20"))
}
