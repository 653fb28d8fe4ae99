package runtime_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/exactlyonce/exactly/checkpoint"
	"github.com/exactlyonce/exactly/checkpoint/store"
	"github.com/exactlyonce/exactly/connectors/file"
	"github.com/exactlyonce/exactly/internal/runtime"
	"github.com/exactlyonce/exactly/internal/testlog"
	"github.com/exactlyonce/exactly/internal/testwait"
	"github.com/exactlyonce/exactly/internal/vfs"
	"github.com/exactlyonce/exactly/sink"
	"github.com/exactlyonce/exactly/state"
	"github.com/exactlyonce/exactly/stream"
)

// The tests of this file are the regression tests of the ordinary
// operations of issue 10: clean stops whose commit fails, restarts with the
// same options, finished jobs started again, stuck tasks and two instances
// on one checkpoint directory.

// TestCleanStopCommitFailureKeepsCheckpoint (case 1): a clean stop whose
// final commit fails must not abort the completed checkpoint's
// transactions; Run says the output is safe, and the next start commits it.
// Before the fix the stop aborted them and the next start failed with
// "transaction ... was aborted: its records are lost".
func TestCleanStopCommitFailureKeepsCheckpoint(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n = 3000
		dir := t.TempDir()
		out := newTxSink()
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		var once atomic.Bool
		opts := stream.Options{
			CheckpointDir:      dir,
			CheckpointInterval: 20 * time.Millisecond,
			CommitRetries:      1,
			Probe: func(p runtime.ProbePoint, _ checkpoint.ID) {
				if p == runtime.ProbeMetadataWritten && once.CompareAndSwap(false, true) {
					out.failCommits.Store(true) // the sink goes down, and the user stops the job
					cancel()
				}
			},
		}
		err := intsJob(n, out).Run(ctx, opts)
		if !errors.Is(err, stream.ErrCommitPending) || !errors.Is(err, context.Canceled) {
			t.Fatalf("Run = %v, want context.Canceled and stream.ErrCommitPending", err)
		}
		out.failCommits.Store(false) // the sink is back
		if err := intsJob(n, out).Run(context.Background(), stream.Options{CheckpointDir: dir, CheckpointInterval: 10 * time.Millisecond}); err != nil {
			t.Fatal(err)
		}
		out.check(t, n)
	})
}

// TestCleanStopWithUnknownMetadataOutcome (case 4): a checkpoint whose
// metadata write failed after the rename may be complete; a concurrent
// clean stop must abort nothing it covers. Before the fix the next start
// found its transactions aborted.
func TestCleanStopWithUnknownMetadataOutcome(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n = 3000
		dir := t.TempDir()
		out := newTxSink()
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		var renamed, failed atomic.Bool
		fsys := vfs.WithErrors(vfs.Default, func(op, name string) error {
			switch {
			case op == vfs.OpRename && filepath.Base(name) == "_metadata.tmp":
				renamed.Store(true)
			case op == vfs.OpSyncDir && renamed.Load() && failed.CompareAndSwap(false, true):
				cancel() // the user stops the job at the same moment
				return errors.New("injected sync failure")
			}
			return nil
		})
		opts := runtime.WithFS(stream.Options{CheckpointDir: dir, CheckpointInterval: 20 * time.Millisecond}, fsys)
		err := intsJob(n, out).Run(ctx, opts)
		if !failed.Load() {
			t.Fatal("the failure was not injected")
		}
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Run = %v, want context.Canceled", err)
		}
		if err := intsJob(n, out).Run(context.Background(), stream.Options{CheckpointDir: dir, CheckpointInterval: 10 * time.Millisecond}); err != nil {
			t.Fatal(err)
		}
		out.check(t, n)
	})
}

// TestRestoreFromOnlyWithoutNewerCheckpoint (case 7): a process restarted
// with the same RestoreFrom resumes from the directory's newer checkpoint
// instead of replaying the savepoint. Before the fix the third run replayed
// from the savepoint and duplicated output.
func TestRestoreFromOnlyWithoutNewerCheckpoint(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n = 3000
		first, dir := t.TempDir(), t.TempDir()
		out := newTxSink()
		ctx := context.Background()
		r, err := intsJob(n, out).Start(ctx, stream.Options{CheckpointDir: first, CheckpointInterval: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		testwait.For(t, out.written.Reached(300), time.Minute, "300 records at the sink", nil)
		sp, err := r.StopWithSavepoint(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := r.Wait(); err != nil {
			t.Fatal(err)
		}
		// Second run: from the savepoint into its own directory, stopped after
		// its first committed checkpoint.
		runCtx, cancel := context.WithCancel(ctx)
		var committed atomic.Bool
		opts := stream.Options{CheckpointDir: dir, RestoreFrom: sp, CheckpointInterval: 20 * time.Millisecond,
			Probe: func(p runtime.ProbePoint, _ checkpoint.ID) {
				if p == runtime.ProbeCommitted && committed.CompareAndSwap(false, true) {
					cancel()
				}
			}}
		if err := intsJob(n, out).Run(runCtx, opts); !errors.Is(err, context.Canceled) {
			t.Fatalf("second run = %v, want context.Canceled", err)
		}
		cancel()
		// Third run: the same options, as a supervisor restarts a process.
		opts.Probe = nil
		if err := intsJob(n, out).Run(ctx, opts); err != nil {
			t.Fatal(err)
		}
		out.check(t, n)
	})
}

// TestFinishedJobRunsNothing (case 10): a job whose input ended is finished;
// started again it commits what its final checkpoint covers and reads
// nothing. RunFinished runs it on from there (a bounded source ends at once).
func TestFinishedJobRunsNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n = 2000
		dir := t.TempDir()
		out := newTxSink()
		opts := stream.Options{CheckpointDir: dir, CheckpointInterval: 10 * time.Millisecond}
		if err := intsJob(n, out).Run(context.Background(), opts); err != nil {
			t.Fatal(err)
		}
		for _, runFinished := range []bool{false, true} {
			opts.RunFinished = runFinished
			r, err := intsJob(n, out).Start(context.Background(), opts)
			if err != nil {
				t.Fatal(err)
			}
			if err := r.Wait(); err != nil {
				t.Fatalf("RunFinished=%t: %v", runFinished, err)
			}
			if got := r.Metrics().Records("numbers"); got != 0 {
				t.Fatalf("RunFinished=%t: the finished job read %d records again", runFinished, got)
			}
			out.check(t, n)
		}
	})
}

// TestStuckTaskFailsOver (case 11): a sink whose prepare hangs makes every
// checkpoint time out; after TolerableCheckpointFailures the job fails
// over, naming the subtask, and the restarted job completes. Before the fix
// checkpoints aborted forever and the job hung.
func TestStuckTaskFailsOver(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n = 2000
		dir := t.TempDir()
		out := newTxSink()
		out.stuck.Store(true)
		logs := &testlog.Buffer{}
		opts := stream.Options{
			CheckpointDir:               dir,
			CheckpointInterval:          10 * time.Millisecond,
			CheckpointTimeout:           50 * time.Millisecond,
			TolerableCheckpointFailures: 2,
			Restart:                     stream.RestartStrategy{InitialBackoff: time.Millisecond},
			Logger:                      slog.New(slog.NewTextHandler(logs, nil)),
		}
		r, err := intsJob(n, out).Start(context.Background(), opts)
		if err != nil {
			t.Fatal(err)
		}
		if err := r.Wait(); err != nil {
			t.Fatal(err)
		}
		if r.Metrics().Restarts.Load() == 0 {
			t.Fatal("the stuck job did not fail over")
		}
		if log := logs.String(); !strings.Contains(log, "3 checkpoints failed in a row") || !strings.Contains(log, "waiting for numbers[0] (numbers → out)") {
			t.Fatalf("the failover does not say why or name the stuck subtask:\n%s", log)
		}
		if log := logs.String(); !strings.Contains(log, "restarting from the beginning of the input: no checkpoint completed yet") {
			t.Fatalf("the restart does not say where it resumes:\n%s", log)
		}
		out.check(t, n)
	})
}

// TestSecondInstanceOnOneDirectory (case 6, in one process): while a job
// runs, a second start on its checkpoint directory fails with an error
// naming the owner, and writes nothing. Before the fix both ran and the
// output was written twice.
func TestSecondInstanceOnOneDirectory(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n = 30_000 // about 3s: the first instance runs throughout
		dir := t.TempDir()
		out := newTxSink()
		opts := stream.Options{CheckpointDir: dir, CheckpointInterval: 10 * time.Millisecond}
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		r, err := intsJob(n, out).Start(ctx, opts)
		if err != nil {
			t.Fatal(err)
		}
		second := opts
		second.OwnershipWait = 100 * time.Millisecond
		host, _ := os.Hostname()
		_, err = intsJob(n, out).Start(context.Background(), second)
		if err == nil || !strings.Contains(err.Error(), "another instance of the job is running") || !strings.Contains(err.Error(), host) {
			t.Fatalf("second Start = %v, want an error naming the running instance", err)
		}
		if r.Metrics().Records("numbers") == n {
			t.Fatal("the first instance finished before the second started: the test proves nothing")
		}
		cancel()
		if err := r.Wait(); !errors.Is(err, context.Canceled) {
			t.Fatal(err)
		}
		// Once the first has stopped, a new start takes over at once.
		if err := intsJob(n, out).Run(context.Background(), second); err != nil {
			t.Fatal(err)
		}
		out.check(t, n)
	})
}

// TestCorruptNewestCheckpointStops (case 3): one flipped byte in the newest
// completed checkpoint stops the job with an error naming the file, instead
// of a silent fallback that writes committed output again.
func TestCorruptNewestCheckpointStops(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n = 3000
		dir := t.TempDir()
		out := newTxSink()
		ctx, cancel := context.WithCancel(context.Background())
		var completions atomic.Int64
		opts := stream.Options{CheckpointDir: dir, CheckpointInterval: 10 * time.Millisecond,
			Probe: func(p runtime.ProbePoint, _ checkpoint.ID) {
				if p == runtime.ProbeCommitted && completions.Add(1) == 3 {
					cancel()
				}
			}}
		if err := intsJob(n, out).Run(ctx, opts); !errors.Is(err, context.Canceled) {
			t.Fatalf("first run = %v", err)
		}
		st, err := store.Open(dir, store.Options{})
		if err != nil {
			t.Fatal(err)
		}
		latest, err := st.Latest()
		if err != nil || latest == nil {
			t.Fatalf("Latest = %v, %v", latest, err)
		}
		file := filepath.Join(st.Dir(latest.ID, latest.Kind), latest.Operators[0].Subtasks[0].File)
		orig, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		damaged := append([]byte(nil), orig...)
		damaged[len(damaged)/2] ^= 1
		if err := os.WriteFile(file, damaged, 0o644); err != nil {
			t.Fatal(err)
		}
		opts.Probe = nil
		err = intsJob(n, out).Run(context.Background(), opts)
		if !errors.Is(err, store.ErrCorrupt) || !strings.Contains(err.Error(), file) || !strings.Contains(err.Error(), "start with stream.Options.SkipCorruptCheckpoints to fall back") {
			t.Fatalf("Run over a corrupt checkpoint = %v, want an error naming %s and the choices", err, file)
		}
		// The explicit recovery: the file is restored from a backup.
		if err := os.WriteFile(file, orig, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := intsJob(n, out).Run(context.Background(), opts); err != nil {
			t.Fatal(err)
		}
		out.check(t, n)
	})
}

// timersJob passes every number through and registers, per key (the
// number mod 10), a processing-time timer 300ms ahead whose firing emits
// -1-key: a bounded run ends, and takes its final checkpoint, before any
// timer is due.
func timersJob(n int, out *txSink) *stream.Job {
	j := stream.New("timers")
	keyed := stream.KeyBy(stream.Source(j, "numbers", ints{n}), func(v int) int { return v % 10 }, state.IntCodec{})
	timed := stream.Process(keyed, "timers", func(*stream.Context[int]) (stream.ProcessFunc[int, int, int], error) {
		return stream.ProcessFunc[int, int, int]{
			Process: func(ctx *stream.Context[int], v int, o *stream.Output[int]) error {
				ctx.RegisterTimer(time.Now().Add(300 * time.Millisecond))
				o.Emit(v)
				return nil
			},
			OnTimer: func(ctx *stream.Context[int], _ time.Time, o *stream.Output[int]) error {
				o.Emit(-1 - ctx.Key())
				return nil
			},
		}, nil
	})
	stream.SinkTo(timed, "out", sink.Sink[int](out))
	return j
}

// TestFinishedJobFiresNoTimers (case 10): processing-time timers still
// pending when a bounded job ends never fire — not after its final barrier,
// and not when the finished job is started again (before the fix the
// restart restored them and committed their output).
func TestFinishedJobFiresNoTimers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n = 200
		dir := t.TempDir()
		out := newTxSink()
		opts := stream.Options{CheckpointDir: dir, CheckpointInterval: 10 * time.Millisecond}
		for run := range 2 {
			if err := timersJob(n, out).Run(context.Background(), opts); err != nil {
				t.Fatalf("run %d: %v", run, err)
			}
			out.mu.Lock()
			for _, v := range out.visible {
				if v < 0 {
					out.mu.Unlock()
					t.Fatalf("run %d: a timer fired after the end of the input and its output %d was committed", run, v)
				}
			}
			out.mu.Unlock()
			// The restart comes after the pending timers are due. Not a wait
			// for the job (it has ended): in the bubble this moves the fake
			// clock past the timers' due time (300ms after registration),
			// which is the condition under test.
			time.Sleep(400 * time.Millisecond)
		}
		out.mu.Lock()
		defer out.mu.Unlock()
		if len(out.visible) != n {
			t.Fatalf("%d rows visible, want %d", len(out.visible), n)
		}
	})
}

// TestFinishedJobRunsOnWithRunFinished (case 9): a bounded job restored
// from its final checkpoint with RunFinished reopens its finished splits
// at their end and reads what arrived since — here lines appended to its
// file — exactly once; without RunFinished it reads nothing, and says so.
func TestFinishedJobRunsOnWithRunFinished(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dir := t.TempDir()
		input := filepath.Join(dir, "input.txt")
		appendLines := func(from, to int) {
			f, err := os.OpenFile(input, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
			if err != nil {
				t.Fatal(err)
			}
			for i := from; i < to; i++ {
				fmt.Fprintln(f, i)
			}
			if err := f.Close(); err != nil {
				t.Fatal(err)
			}
		}
		out := newTxSink()
		run := func(opts stream.Options) int64 {
			t.Helper()
			src, err := file.NewSource([]string{input}, func(line []byte) (int, error) { return strconv.Atoi(string(line)) })
			if err != nil {
				t.Fatal(err)
			}
			j := stream.New("lines")
			stream.SinkTo(stream.Source(j, "lines", src), "out", sink.Sink[int](out))
			r, err := j.Start(context.Background(), opts)
			if err != nil {
				t.Fatal(err)
			}
			if err := r.Wait(); err != nil {
				t.Fatal(err)
			}
			return r.Metrics().Records("lines")
		}
		opts := stream.Options{CheckpointDir: filepath.Join(dir, "checkpoints"), CheckpointInterval: 10 * time.Millisecond}
		appendLines(0, 100)
		if n := run(opts); n != 100 {
			t.Fatalf("first run read %d lines, want 100", n)
		}
		appendLines(100, 150)
		if n := run(opts); n != 0 {
			t.Fatalf("the finished job read %d lines without RunFinished", n)
		}
		out.check(t, 100)
		opts.RunFinished = true
		if n := run(opts); n != 50 {
			t.Fatalf("RunFinished read %d lines, want the 50 appended", n)
		}
		out.check(t, 150)
	})
}

// TestStartRetriesAFailedReadOfTheLatestCheckpoint: a read of the latest
// checkpoint that fails while the job starts (a connection to the S3
// server cut as it restarts) is tried again, not a failed start.
// TestCrashOnObjectStorage's child failed its start on "unexpected EOF"
// reading a state object (.ci/run of 9c6aa3a); here the first open of a
// state file fails once.
func TestStartRetriesAFailedReadOfTheLatestCheckpoint(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n = 3000
		dir := t.TempDir()
		out := newTxSink()
		ctx := context.Background()
		runCtx, cancel := context.WithCancel(ctx)
		var committed atomic.Bool
		first := stream.Options{CheckpointDir: dir, CheckpointInterval: 20 * time.Millisecond,
			Probe: func(p runtime.ProbePoint, _ checkpoint.ID) {
				if p == runtime.ProbeCommitted && committed.CompareAndSwap(false, true) {
					cancel()
				}
			}}
		if err := intsJob(n, out).Run(runCtx, first); !errors.Is(err, context.Canceled) {
			t.Fatalf("first run = %v, want context.Canceled", err)
		}
		cancel()
		var failed atomic.Bool
		fsys := vfs.WithErrors(vfs.Default, func(op, name string) error {
			if op == vfs.OpOpen && strings.HasSuffix(name, ".state") && failed.CompareAndSwap(false, true) {
				return errors.New("injected: connection reset while reading")
			}
			return nil
		})
		opts := runtime.WithFS(stream.Options{CheckpointDir: dir, CheckpointInterval: 20 * time.Millisecond}, fsys)
		if err := intsJob(n, out).Run(ctx, opts); err != nil {
			t.Fatalf("second run = %v, want the failed read retried", err)
		}
		if !failed.Load() {
			t.Fatal("the failure was not injected")
		}
		out.check(t, n)
	})
}
