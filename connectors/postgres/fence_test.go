package postgres

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/exactlyonce/exactly/checkpoint"
	"github.com/exactlyonce/exactly/internal/testenv"
	"github.com/exactlyonce/exactly/sink"
)

// committerOf returns a committer of owner for sink name, fenced with
// restored (as the engine does on start) unless restored is negative.
func committerOf(t *testing.T, s *Sink[rec], name string, owner sink.Owner, takeOver bool, restored int64) sink.Committer {
	t.Helper()
	c := openCommitter(t, s, sink.CommitterInfo{Job: "test", Sink: name, Owner: owner, TakeOver: takeOver})
	if restored >= 0 {
		if err := c.Fence(context.Background(), checkpoint.ID(restored)); err != nil {
			t.Fatalf("Fence as %s: %v", owner, err)
		}
	}
	return c
}

// TestZombieIsFenced (issue 10, case 6): the committer of epoch 1 keeps
// running after a process of epoch 2 fenced the sink. It can neither
// commit nor abort, and its prepared data is left for the new owner, which
// commits it.
func TestZombieIsFenced(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode.String(), func(t *testing.T) {
			ctx := context.Background()
			conn := db(t)
			table := "zombie_" + mode.String()
			s := newTestSink(t, freshTable(t, conn, table, mode))
			old, current := testOwner, sink.Owner{Incarnation: testOwner.Incarnation, Epoch: testOwner.Epoch + 1}
			zombie := committerOf(t, s, "out", old, false, 0)
			cm := writePrepare(t, newOwnedWriter(t, s, "out", 0, old), 0, 1, recs(0, 3))
			successor := committerOf(t, s, "out", current, false, 1)

			err := zombie.Commit(ctx, cm)
			t.Logf("zombie Commit: %v", err)
			if !errors.Is(err, sink.ErrFenced) || !strings.Contains(err.Error(), current.String()) || !strings.Contains(err.Error(), old.String()) {
				t.Errorf("zombie Commit = %v, want an error wrapping sink.ErrFenced naming both owners", err)
			}
			if got := ids(t, conn, table); len(got) != 0 {
				t.Fatalf("the zombie's Commit made rows visible: %v", got)
			}
			if err := zombie.Abort(ctx, cm); !errors.Is(err, sink.ErrFenced) {
				t.Errorf("zombie Abort = %v, want sink.ErrFenced", err)
			}
			if err := zombie.AbortLingering(ctx, 0); !errors.Is(err, sink.ErrFenced) {
				t.Errorf("zombie AbortLingering = %v, want sink.ErrFenced", err)
			}
			if err := zombie.Fence(ctx, 0); !errors.Is(err, sink.ErrFenced) {
				t.Errorf("zombie Fence = %v, want sink.ErrFenced", err)
			}
			if staged, prepared := leftovers(t, conn, "test", table, "out"); staged+prepared == 0 {
				t.Fatal("the zombie removed the prepared transaction")
			}
			// The new owner restores checkpoint 1 and commits it.
			if err := successor.Fence(ctx, 1); err != nil {
				t.Fatalf("second Fence of the same owner: %v", err)
			}
			if err := successor.Commit(ctx, cm); err != nil {
				t.Fatal(err)
			}
			if got := ids(t, conn, table); !slices.Equal(got, want(0, 3)) {
				t.Fatalf("after the new owner's Commit: %v", got)
			}
		})
	}
}

// TestForeignProgress (issue 10, case 2): a job rerun with empty checkpoint
// storage (a new incarnation) over a table that holds another incarnation's
// progress stops at Fence, unless it takes the sink over on purpose or
// restores a checkpoint.
func TestForeignProgress(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode.String(), func(t *testing.T) {
			ctx := context.Background()
			conn := db(t)
			table := "foreign_" + mode.String()
			s := newTestSink(t, freshTable(t, conn, table, mode))
			first := committerOf(t, s, "out", testOwner, false, 0)
			w := newWriter(t, s, "out", 0)
			for cp := checkpoint.ID(1); cp <= 2; cp++ {
				if err := first.Commit(ctx, writePrepare(t, w, 0, cp, recs(int64(cp)*10, int64(cp)*10+2))); err != nil {
					t.Fatal(err)
				}
			}
			rerun := sink.Owner{Incarnation: "rerun-incarnation", Epoch: 1}
			err := committerOf(t, s, "out", rerun, false, -1).Fence(ctx, 0)
			if !errors.Is(err, sink.ErrForeignProgress) {
				t.Fatalf("Fence of a fresh rerun = %v, want sink.ErrForeignProgress", err)
			}
			t.Logf("Fence of a fresh rerun: %v", err)
			for _, part := range []string{`job "test"`, `sink "out"`, testOwner.Incarnation, rerun.Incarnation, "checkpoint 2", "take the output over", "checkpoint directory"} {
				if !strings.Contains(err.Error(), part) {
					t.Errorf("error %q does not name %q", err, part)
				}
			}
			// Restored from a checkpoint (a savepoint of the other
			// incarnation), or told to take over, the rerun owns the sink.
			committerOf(t, s, "out", rerun, false, 2)
			taker := sink.Owner{Incarnation: "third-incarnation", Epoch: 1}
			c := committerOf(t, s, "out", taker, true, 0)
			cm := writePrepare(t, newOwnedWriter(t, s, "out", 0, taker), 0, 1, recs(100, 102))
			cm.Incarnation = taker.Incarnation
			if err := c.Commit(ctx, cm); err != nil {
				t.Fatal(err)
			}
			if got, w := ids(t, conn, table), slices.Concat(want(10, 12), want(20, 22), want(100, 102)); !slices.Equal(got, w) {
				t.Fatalf("table %v, want %v", got, w)
			}
			if err := first.Commit(ctx, writePrepare(t, w, 0, 3, recs(30, 32))); !errors.Is(err, sink.ErrFenced) {
				t.Fatalf("Commit by the first incarnation after the take-over = %v, want sink.ErrFenced", err)
			}
		})
	}
}

// TestRerunLostStagingIsNotCommitted (issue 10, case 2): after a rerun
// whose checkpoint ids restart at 1, a staging table that is gone must not
// read as committed because the mark of the earlier run is higher.
func TestRerunLostStagingIsNotCommitted(t *testing.T) {
	ctx := context.Background()
	conn := db(t)
	table := "rerun_lost"
	s := newTestSink(t, freshTable(t, conn, table, Fenced))
	first := committerOf(t, s, "out", testOwner, false, 0)
	w := newWriter(t, s, "out", 0)
	for cp := checkpoint.ID(1); cp <= 3; cp++ {
		if err := first.Commit(ctx, writePrepare(t, w, 0, cp, recs(int64(cp)*10, int64(cp)*10+2))); err != nil {
			t.Fatal(err)
		}
	}
	rerun := sink.Owner{Incarnation: "rerun-incarnation", Epoch: 1}
	c := committerOf(t, s, "out", rerun, true, 0)
	cm := writePrepare(t, newOwnedWriter(t, s, "out", 0, rerun), 0, 1, recs(100, 102))
	cm.Incarnation = rerun.Incarnation
	dropTables(t, conn, sinkKeys(table, "test", "out")) // someone drops the staging table
	err := c.Commit(ctx, cm)
	t.Logf("Commit: %v", err)
	if !sink.IsPermanent(err) || !strings.Contains(err.Error(), testOwner.Incarnation) || !strings.Contains(err.Error(), rerun.Incarnation) {
		t.Fatalf("Commit of a lost staging table after a rerun = %v, want a permanent error naming both incarnations", err)
	}
	if got := ids(t, conn, table); !slices.Equal(got, slices.Concat(want(10, 12), want(20, 22), want(30, 32))) {
		t.Fatalf("table %v", got)
	}
}

// TestZombieAndSuccessorPrepareOneCheckpoint: a zombie writer and its
// successor's writer prepare the same checkpoint id of the same subtask
// (the zombie's ids ran on after the successor restored). Both prepare;
// the successor's commit makes only its own rows visible, and its
// AbortLingering removes the zombie's.
func TestZombieAndSuccessorPrepareOneCheckpoint(t *testing.T) {
	ctx := context.Background()
	conn := db(t)
	table := "zombie_same_id"
	s := newTestSink(t, freshTable(t, conn, table, Prepared))
	successorOwner := sink.Owner{Incarnation: testOwner.Incarnation, Epoch: testOwner.Epoch + 1}
	writePrepare(t, newOwnedWriter(t, s, "out", 0, testOwner), 0, 5, recs(0, 2)) // the zombie's
	w := newOwnedWriter(t, s, "out", 0, successorOwner)
	if err := w.Write(ctx, recs(10, 12)); err != nil {
		t.Fatal(err)
	}
	data, err := w.Prepare(ctx, 5)
	if err != nil {
		t.Fatalf("the successor's Prepare of the checkpoint id the zombie prepared: %v", err)
	}
	successor := committerOf(t, s, "out", successorOwner, false, 4)
	if err := successor.Commit(ctx, sink.Committable{Checkpoint: 5, Subtask: 0, Incarnation: successorOwner.Incarnation, Data: data}); err != nil {
		t.Fatal(err)
	}
	if err := successor.AbortLingering(ctx, 5); err != nil {
		t.Fatal(err)
	}
	if got := ids(t, conn, table); !slices.Equal(got, want(10, 12)) {
		t.Fatalf("table %v, want the successor's rows only", got)
	}
	if _, prepared := leftovers(t, conn, "test", table, "out"); prepared != 0 {
		t.Fatalf("%d prepared transactions left", prepared)
	}
}

// TestLegacyProgressMigrates: a progress table of the version before
// incarnations gets the incarnation column, its rows the incarnation "".
// A checkpoint of that version (committables without incarnation) still
// finds its commits done; a fresh start of a new incarnation over it is a
// fresh start over foreign progress.
func TestLegacyProgressMigrates(t *testing.T) {
	ctx := context.Background()
	conn := db(t)
	const schema = "exactly_legacy"
	freshSchema(t, conn, schema, true)
	defer freshSchema(t, conn, schema, false)
	opts := Options{DSN: testenv.Postgres(t), Schema: schema, Table: "t", CreateTable: true, Columns: []Column{{"id", "bigint"}, {"name", "text"}}}
	s := newTestSink(t, opts)
	key := s.core.sinkKey("test", "out")
	for _, q := range []string{
		"CREATE TABLE " + s.core.progress + " (sink text NOT NULL, subtask int NOT NULL, checkpoint bigint NOT NULL, PRIMARY KEY (sink, subtask))",
		"INSERT INTO " + s.core.progress + " VALUES ('" + key + "', 0, 7)",
	} {
		if _, err := conn.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	err := committerOf(t, s, "out", testOwner, false, -1).Fence(ctx, 0)
	t.Logf("Fence of a fresh start over legacy progress: %v", err)
	if !errors.Is(err, sink.ErrForeignProgress) || !strings.Contains(err.Error(), "before incarnations existed") || !strings.Contains(err.Error(), "checkpoint 7") {
		t.Fatalf("Fence of a fresh start over legacy progress = %v, want sink.ErrForeignProgress naming the legacy rows and checkpoint 7", err)
	}
	// Restored from the legacy checkpoint 7, whose committable is committed.
	c := committerOf(t, s, "out", testOwner, false, 7)
	legacy := sink.Committable{Checkpoint: 7, Data: committable{mode: Fenced, checkpoint: 7, id: 42}.encode()}
	if err := c.Commit(ctx, legacy); err != nil {
		t.Fatalf("Commit of a legacy committable the legacy mark covers: %v", err)
	}
	legacy.Checkpoint, legacy.Data = 8, committable{mode: Fenced, checkpoint: 8, id: 43}.encode()
	if err := c.Commit(ctx, legacy); !sink.IsPermanent(err) || !strings.Contains(err.Error(), "high-water mark is 7") {
		t.Fatalf("Commit of a lost legacy committable above the mark = %v, want the permanent 'prepared rows are gone'", err)
	}
}

// TestPausedCommitterDoesNotBlockItsSuccessor: a committer whose process
// is paused (SIGSTOP, a stalled machine) while it holds the sink's owner
// row (fenced mode: between the statements of its commit transaction) or
// the owner lock (prepared mode: between taking the lock and COMMIT
// PREPARED) must not block the Fence of the instance that takes its task
// over for as long as the pause lasts — the server cannot tell a paused
// client from a slow one. The multi-process cluster test found it: a
// paused instance kept its successor's Fence failing every LockTimeout
// for two minutes, and the task could not move. The server now ends the
// paused session after half of LockTimeout idle (at least 5s); the
// successor's Fence,
// retried as the engine retries a failed start, goes through, and the
// paused committer, resumed, is fenced.
func TestPausedCommitterDoesNotBlockItsSuccessor(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode.String(), func(t *testing.T) {
			ctx := context.Background()
			conn := db(t)
			opts := freshTable(t, conn, "paused_"+mode.String(), mode)
			opts.LockTimeout = 12 * time.Second // the paused session ends after 6s idle
			s := newTestSink(t, opts)
			old, current := testOwner, sink.Owner{Incarnation: testOwner.Incarnation, Epoch: testOwner.Epoch + 1}
			paused := committerOf(t, s, "out", old, false, 0).(*committer)
			cm := writePrepare(t, newOwnedWriter(t, s, "out", 0, old), 0, 1, recs(0, 3))

			// What a commit holds at the moment its process is paused.
			pconn, err := paused.connection(ctx)
			if err != nil {
				t.Fatal(err)
			}
			var resume func() error
			if mode == Fenced {
				tx, err := pconn.Begin(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if err := paused.checkOwner(ctx, tx, " FOR SHARE"); err != nil {
					t.Fatal(err)
				}
				resume = func() error { _, err := tx.Exec(ctx, "SELECT 1"); return err }
			} else {
				if err := paused.lockOwner(ctx, pconn); err != nil {
					t.Fatal(err)
				}
				resume = func() error { _, err := pconn.Exec(ctx, "SELECT 1"); return err }
			}

			successor := openCommitter(t, s, sink.CommitterInfo{Job: "test", Sink: "out", Owner: current})
			var fenceErr error
			for attempt := 1; attempt <= 3; attempt++ {
				if fenceErr = successor.Fence(ctx, 1); fenceErr == nil || sink.IsPermanent(fenceErr) {
					break
				}
				t.Logf("Fence attempt %d while the earlier owner's session is paused: %v", attempt, fenceErr)
			}
			if fenceErr != nil {
				t.Fatalf("the successor could not fence while the earlier owner's committer was paused holding the owner's lock: %v", fenceErr)
			}
			if err := resume(); err == nil {
				t.Error("the paused committer's session is still open after its successor fenced it: the server should have ended it")
			}
			if err := paused.Commit(ctx, cm); !errors.Is(err, sink.ErrFenced) {
				t.Errorf("the resumed committer's Commit = %v, want sink.ErrFenced", err)
			}
			if err := successor.Commit(ctx, cm); err != nil {
				t.Fatal(err)
			}
			if got := ids(t, conn, opts.Table); !slices.Equal(got, want(0, 3)) {
				t.Fatalf("after the successor's Commit: %v", got)
			}
		})
	}
}
