package postgres

import (
	"context"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/exactlyonce/exactly/checkpoint"
	"github.com/exactlyonce/exactly/internal/testenv"
	"github.com/exactlyonce/exactly/sink"
	"github.com/jackc/pgx/v5"
)

// rec is the test record.
type rec struct {
	ID   int64
	Name string
}

func recRow(v rec, row []any) []any { return append(row, v.ID, v.Name) }

var modes = []CommitMode{Fenced, Prepared}

// db connects to the test server as an outside reader.
func db(t testing.TB) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), testenv.Postgres(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

// dropTables drops tables after rolling back the prepared transactions
// and dropping the staging tables of the sinks with keys (sinkKeys), which
// earlier runs left: a prepared transaction locks its table. Only those:
// the tests of other packages use the same server at the same time. (It
// used to roll back every prepared transaction and drop every staging
// table of the server: a cluster test in CI lost the staging tables of its
// PostgreSQL sink's prepared checkpoints to it, and failed with "the
// prepared rows are gone".)
func dropTables(t testing.TB, conn *pgx.Conn, keys []string, tables ...string) {
	t.Helper()
	ctx := context.Background()
	var gids, staging []string
	for _, key := range keys {
		rows, err := conn.Query(ctx, "SELECT gid FROM pg_prepared_xacts WHERE database = current_database() AND starts_with(gid, $1)", gidPrefix+key+":")
		if err != nil {
			t.Fatal(err)
		}
		g, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		gids = append(gids, g...)
		rows, err = conn.Query(ctx, "SELECT relname::text FROM pg_class WHERE relnamespace = 'public'::regnamespace AND relkind = 'r' AND starts_with(relname, $1)", stagingPrefix+key+"_")
		if err != nil {
			t.Fatal(err)
		}
		st, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		staging = append(staging, st...)
	}
	for _, g := range gids {
		if err := rollbackPrepared(ctx, conn, g); err != nil {
			t.Fatal(err)
		}
	}
	for _, tb := range append(tables, staging...) {
		if _, err := conn.Exec(ctx, "DROP TABLE IF EXISTS "+quoteIdent(tb)); err != nil {
			t.Fatal(err)
		}
	}
}

// sinkKeys returns the keys of the sinks of job on public.table.
func sinkKeys(table, job string, sinks ...string) []string {
	return sinkKeysIn("public", table, job, sinks...)
}

// sinkKeysIn returns the keys of the sinks of job on schema.table.
func sinkKeysIn(schema, table, job string, sinks ...string) []string {
	var keys []string
	for _, name := range sinks {
		keys = append(keys, (&core{table: schema + "." + table}).sinkKey(job, name))
	}
	return keys
}

// testSinks are the sink names the tests use with job "test".
var testSinks = []string{"out", "a", "b"}

// testOwner owns the test sinks unless a test says otherwise.
var testOwner = sink.Owner{Incarnation: "test-incarnation", Epoch: 1}

// forgetSinks deletes the progress and owner rows that earlier runs left
// for the sinks of job on schema.table.
func forgetSinks(t testing.TB, conn *pgx.Conn, schema, table, job string, sinks ...string) {
	t.Helper()
	keys := sinkKeysIn(schema, table, job, sinks...)
	for _, tb := range []string{progressTable, ownerTable} {
		q := pgx.Identifier{schema, tb}.Sanitize()
		var exists bool
		if err := conn.QueryRow(context.Background(), "SELECT to_regclass($1) IS NOT NULL", q).Scan(&exists); err != nil {
			t.Fatal(err)
		}
		if !exists {
			continue
		}
		if _, err := conn.Exec(context.Background(), "DELETE FROM "+q+" WHERE sink = ANY($1)", keys); err != nil {
			t.Fatal(err)
		}
	}
}

// freshTable drops table and the staging tables, forgets the test sinks'
// progress and owners, and returns options for it.
func freshTable(t testing.TB, conn *pgx.Conn, table string, mode CommitMode) Options {
	t.Helper()
	dropTables(t, conn, sinkKeys(table, "test", testSinks...), table)
	forgetSinks(t, conn, "public", table, "test", testSinks...)
	return Options{
		DSN:         testenv.Postgres(t),
		Table:       table,
		Columns:     []Column{{"id", "bigint"}, {"name", "text"}},
		CreateTable: true,
		Mode:        mode,
	}
}

func newTestSink(t testing.TB, opts Options) *Sink[rec] {
	t.Helper()
	s, err := NewSink(opts, recRow)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func newWriter(t testing.TB, s *Sink[rec], name string, subtask int) sink.Writer[rec] {
	t.Helper()
	return newOwnedWriter(t, s, name, subtask, testOwner)
}

func newOwnedWriter(t testing.TB, s *Sink[rec], name string, subtask int, owner sink.Owner) sink.Writer[rec] {
	t.Helper()
	w, err := s.NewWriter(context.Background(), sink.WriterInfo{Job: "test", Sink: name, Subtask: subtask, Parallelism: subtask + 1, Owner: owner})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	return w
}

// newCommitter returns a committer of testOwner, fenced as the engine does
// on a fresh start.
func newCommitter(t testing.TB, s *Sink[rec], name string) sink.Committer {
	t.Helper()
	c := openCommitter(t, s, sink.CommitterInfo{Job: "test", Sink: name, Owner: testOwner})
	if err := c.Fence(context.Background(), 0); err != nil {
		t.Fatal(err)
	}
	return c
}

// openCommitter returns an unfenced committer.
func openCommitter(t testing.TB, s *Sink[rec], info sink.CommitterInfo) sink.Committer {
	t.Helper()
	c, err := s.NewCommitter(context.Background(), info)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// recs returns records with ids from, from+1, ... to-1.
func recs(from, to int64) []rec {
	var out []rec
	for i := from; i < to; i++ {
		out = append(out, rec{i, fmt.Sprint("r", i)})
	}
	return out
}

func want(from, to int64) []int64 {
	var out []int64
	for i := from; i < to; i++ {
		out = append(out, i)
	}
	return out
}

// writePrepare writes batch and prepares checkpoint cp.
func writePrepare(t testing.TB, w sink.Writer[rec], subtask int, cp checkpoint.ID, batch []rec) sink.Committable {
	t.Helper()
	ctx := context.Background()
	if err := w.Write(ctx, batch); err != nil {
		t.Fatal(err)
	}
	data, err := w.Prepare(ctx, cp)
	if err != nil || data == nil {
		t.Fatalf("Prepare(%d) = %x, %v", cp, data, err)
	}
	return sink.Committable{Checkpoint: cp, Subtask: subtask, Incarnation: testOwner.Incarnation, Data: data}
}

func ints(t testing.TB, conn *pgx.Conn, q string, args ...any) []int64 {
	t.Helper()
	rows, err := conn.Query(context.Background(), q, args...)
	if err != nil {
		t.Fatal(err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func ids(t testing.TB, conn *pgx.Conn, table string) []int64 {
	return ints(t, conn, "SELECT id FROM "+quoteIdent(table)+" ORDER BY id")
}

// leftovers counts the staged rows and prepared transactions that sink
// name of job left for table. An empty staging table counts as one row.
func leftovers(t testing.TB, conn *pgx.Conn, job, table, name string) (staged, prepared int64) {
	t.Helper()
	key := (&core{table: "public." + table}).sinkKey(job, name)
	prepared = ints(t, conn, "SELECT count(*) FROM pg_prepared_xacts WHERE starts_with(gid, $1)", gidPrefix+key+":")[0]
	rows, err := conn.Query(context.Background(), "SELECT relname::text FROM pg_class WHERE starts_with(relname, $1)", stagingPrefix+key+"_")
	if err != nil {
		t.Fatal(err)
	}
	tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	for _, tb := range tables {
		staged += max(1, ints(t, conn, "SELECT count(*) FROM "+quoteIdent(tb))[0])
	}
	return staged, prepared
}

func TestVisibleOnlyAfterCommitAndIdempotent(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode.String(), func(t *testing.T) {
			ctx := context.Background()
			conn := db(t)
			table := "visible_" + mode.String()
			s := newTestSink(t, freshTable(t, conn, table, mode))
			w := newWriter(t, s, "out", 0)
			c := newCommitter(t, s, "out")
			if data, err := w.Prepare(ctx, 1); data != nil || err != nil {
				t.Fatalf("empty Prepare = %x, %v", data, err)
			}
			cm := writePrepare(t, w, 0, 2, recs(0, 5))
			if got := ids(t, conn, table); len(got) != 0 {
				t.Fatalf("visible before Commit: %v", got)
			}
			if err := w.Write(ctx, recs(5, 7)); err != nil { // the next, open transaction
				t.Fatal(err)
			}
			for range 2 {
				if err := c.Commit(ctx, cm); err != nil {
					t.Fatal(err)
				}
				if got := ids(t, conn, table); !slices.Equal(got, want(0, 5)) {
					t.Fatalf("after Commit: %v", got)
				}
			}
			// A committer of a new instance sees the commit as done, too.
			if err := newCommitter(t, newTestSink(t, s.core.opts), "out").Commit(ctx, cm); err != nil {
				t.Fatal(err)
			}
			if got := ids(t, conn, table); !slices.Equal(got, want(0, 5)) {
				t.Fatalf("after a duplicate Commit in a new instance: %v", got)
			}
			cm2 := writePrepare(t, w, 0, 3, recs(7, 9))
			if err := c.Commit(ctx, cm2); err != nil {
				t.Fatal(err)
			}
			if got := ids(t, conn, table); !slices.Equal(got, want(0, 9)) {
				t.Fatalf("after the second checkpoint: %v", got)
			}
			if staged, prepared := leftovers(t, conn, "test", table, "out"); staged != 0 || prepared != 0 {
				t.Errorf("after committing everything: %d staged rows, %d prepared transactions", staged, prepared)
			}
		})
	}
}

// TestConcurrentDuplicateCommit commits one fenced transaction from two
// committers at once (a zombie and its replacement): one moves the rows, the
// other waits for it and finds the commit done.
func TestConcurrentDuplicateCommit(t *testing.T) {
	ctx := context.Background()
	conn := db(t)
	table := "concurrent_fenced"
	s := newTestSink(t, freshTable(t, conn, table, Fenced))
	cm := writePrepare(t, newWriter(t, s, "out", 0), 0, 1, recs(0, 1000))
	committers := []sink.Committer{newCommitter(t, s, "out"), newCommitter(t, newTestSink(t, s.core.opts), "out")}
	errs := make(chan error, len(committers))
	for _, c := range committers {
		go func() { errs <- c.Commit(ctx, cm) }()
	}
	for range committers {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if got := ids(t, conn, table); !slices.Equal(got, want(0, 1000)) {
		t.Fatalf("after two concurrent Commits: %d rows, want ids 0..999 once", len(got))
	}
	if staged, _ := leftovers(t, conn, "test", table, "out"); staged != 0 {
		t.Fatalf("%d staged rows left", staged)
	}
}

func TestFlushesBeforeTheBarrier(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode.String(), func(t *testing.T) {
			ctx := context.Background()
			conn := db(t)
			table := "flush_" + mode.String()
			opts := freshTable(t, conn, table, mode)
			opts.FlushRows = 10
			s := newTestSink(t, opts)
			w := newWriter(t, s, "out", 0)
			c := newCommitter(t, s, "out")
			for _, batch := range slices.Collect(slices.Chunk(recs(0, 45), 7)) {
				if err := w.Write(ctx, batch); err != nil {
					t.Fatal(err)
				}
			}
			if got := ids(t, conn, table); len(got) != 0 {
				t.Fatalf("visible before Prepare: %v", got)
			}
			cm := writePrepare(t, w, 0, 1, recs(45, 47))
			if err := c.Commit(ctx, cm); err != nil {
				t.Fatal(err)
			}
			if got := ids(t, conn, table); !slices.Equal(got, want(0, 47)) {
				t.Fatalf("after Commit: %v", got)
			}
		})
	}
}

func TestRecoveryInNewInstance(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode.String(), func(t *testing.T) {
			ctx := context.Background()
			conn := db(t)
			table := "recovery_" + mode.String()
			opts := freshTable(t, conn, table, mode)
			opts.FlushRows = 3
			s1 := newTestSink(t, opts)
			var covered []sink.Committable
			for subtask := range 3 {
				w := newWriter(t, s1, "out", subtask)
				base := int64(subtask * 100)
				covered = append(covered, writePrepare(t, w, subtask, 4, recs(base, base+5)))
				writePrepare(t, w, subtask, 5, recs(base+5, base+8))        // checkpoint 5 never completes
				if err := w.Write(ctx, recs(base+8, base+12)); err != nil { // open transaction
					t.Fatal(err)
				}
				// The process dies: its connections close.
				if err := w.Close(); err != nil {
					t.Fatal(err)
				}
			}
			if staged, prepared := leftovers(t, conn, "test", table, "out"); mode == Fenced && staged != 3*8 || mode == Prepared && prepared != 6 {
				t.Fatalf("before recovery: %d staged rows, %d prepared transactions", staged, prepared)
			}
			// A new sink instance restores checkpoint 4, with parallelism 1.
			c := newCommitter(t, newTestSink(t, opts), "out")
			for _, cm := range covered {
				if err := c.Commit(ctx, cm); err != nil {
					t.Fatal(err)
				}
			}
			if err := c.AbortLingering(ctx, 4); err != nil {
				t.Fatal(err)
			}
			if staged, prepared := leftovers(t, conn, "test", table, "out"); staged != 0 || prepared != 0 {
				t.Fatalf("after AbortLingering: %d staged rows, %d prepared transactions", staged, prepared)
			}
			wantIDs := slices.Concat(want(0, 5), want(100, 105), want(200, 205))
			if got := ids(t, conn, table); !slices.Equal(got, wantIDs) {
				t.Fatalf("after recovery: %v, want %v", got, wantIDs)
			}
			// A second recovery from the same checkpoint changes nothing.
			for _, cm := range covered {
				if err := c.Commit(ctx, cm); err != nil {
					t.Fatal(err)
				}
			}
			if err := c.AbortLingering(ctx, 4); err != nil {
				t.Fatal(err)
			}
			if got := ids(t, conn, table); !slices.Equal(got, wantIDs) {
				t.Fatalf("after repeated recovery: %v", got)
			}
		})
	}
}

func TestAbortAndAbortLingeringScope(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode.String(), func(t *testing.T) {
			ctx := context.Background()
			conn := db(t)
			table := "scope_" + mode.String()
			s := newTestSink(t, freshTable(t, conn, table, mode))
			c := newCommitter(t, s, "a")
			cm := writePrepare(t, newWriter(t, s, "a", 0), 0, 1, recs(0, 2))
			writePrepare(t, newWriter(t, s, "a", 1), 1, 1, recs(10, 12))
			other := writePrepare(t, newWriter(t, s, "b", 0), 0, 1, recs(20, 22))
			for range 2 {
				if err := c.Abort(ctx, cm); err != nil {
					t.Fatal(err)
				}
			}
			count := func(name string) int64 {
				staged, prepared := leftovers(t, conn, "test", table, name)
				return staged + prepared
			}
			if a, b := count("a"), count("b"); (mode == Fenced && (a != 2 || b != 2)) || (mode == Prepared && (a != 1 || b != 1)) {
				t.Fatalf("after Abort: sink a has %d leftovers, sink b %d", a, b)
			}
			if err := c.AbortLingering(ctx, 0); err != nil {
				t.Fatal(err)
			}
			if a, b := count("a"), count("b"); a != 0 || b == 0 {
				t.Fatalf("after AbortLingering of sink a: sink a has %d leftovers, sink b %d (want 0 and untouched)", a, b)
			}
			if err := newCommitter(t, s, "b").Commit(ctx, other); err != nil {
				t.Fatal(err)
			}
			if got := ids(t, conn, table); !slices.Equal(got, want(20, 22)) {
				t.Fatalf("table: %v, want sink b's rows only", got)
			}
		})
	}
}

func TestUpsertLastRecordWins(t *testing.T) {
	ctx := context.Background()
	conn := db(t)
	opts := freshTable(t, conn, "upsert", Fenced)
	opts.Write, opts.Key, opts.FlushRows = Upsert, []string{"id"}, 4
	s := newTestSink(t, opts)
	w := newWriter(t, s, "out", 0)
	c := newCommitter(t, s, "out")
	batch := []rec{{1, "a"}, {2, "b"}, {1, "c"}, {3, "d"}, {2, "e"}, {1, "f"}}
	cm := writePrepare(t, w, 0, 1, batch)
	for range 2 {
		if err := c.Commit(ctx, cm); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Commit(ctx, writePrepare(t, w, 0, 2, []rec{{3, "g"}, {4, "h"}})); err != nil {
		t.Fatal(err)
	}
	rows, err := conn.Query(ctx, "SELECT id, name FROM upsert ORDER BY id")
	if err != nil {
		t.Fatal(err)
	}
	got, err := pgx.CollectRows(rows, pgx.RowToStructByPos[rec])
	if err != nil {
		t.Fatal(err)
	}
	if w := []rec{{1, "f"}, {2, "e"}, {3, "g"}, {4, "h"}}; !slices.Equal(got, w) {
		t.Fatalf("table: %v, want %v", got, w)
	}
}

func TestLostPreparedDataIsPermanent(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode.String(), func(t *testing.T) {
			ctx := context.Background()
			conn := db(t)
			table := "lost_" + mode.String()
			s := newTestSink(t, freshTable(t, conn, table, mode))
			cm := writePrepare(t, newWriter(t, s, "out", 0), 0, 3, recs(0, 2))
			c := newCommitter(t, s, "out")
			if err := c.AbortLingering(ctx, 0); err != nil { // wrongly: the data of a completed checkpoint
				t.Fatal(err)
			}
			err := c.Commit(ctx, cm)
			if !sink.IsPermanent(err) || !strings.Contains(err.Error(), "checkpoint 3") {
				t.Fatalf("Commit of removed data = %v, want a permanent error naming checkpoint 3", err)
			}
			bad := sink.Committable{Checkpoint: 3, Data: []byte{9, 9}}
			if err := c.Commit(ctx, bad); !sink.IsPermanent(err) || !strings.Contains(err.Error(), "malformed") {
				t.Errorf("Commit of a malformed committable = %v", err)
			}
		})
	}
}

func TestBadInputErrors(t *testing.T) {
	ctx := context.Background()
	conn := db(t)
	dsn := testenv.Postgres(t)
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	const secret = "s3cret-Pa55word"
	u.User = url.UserPassword(u.User.Username(), secret)
	expect := func(t *testing.T, err error, permanent bool, parts ...string) {
		t.Helper()
		if err == nil {
			t.Fatalf("no error, want one containing %q", parts)
		}
		if sink.IsPermanent(err) != permanent {
			t.Errorf("permanent = %v, want %v: %v", sink.IsPermanent(err), permanent, err)
		}
		for _, p := range parts {
			if !strings.Contains(err.Error(), p) {
				t.Errorf("error %q does not contain %q", err, p)
			}
		}
		if strings.Contains(err.Error(), secret) || strings.Contains(err.Error(), ":exactly@") {
			t.Errorf("error %q reveals a password", err)
		}
	}
	t.Run("wrong password", func(t *testing.T) {
		opts := freshTable(t, conn, "bad_input", Fenced)
		opts.DSN = u.String()
		s := newTestSink(t, opts)
		_, err := s.NewWriter(ctx, sink.WriterInfo{Job: "test", Sink: "out"})
		expect(t, err, true, "password authentication failed", "127.0.0.1")
	})
	t.Run("missing table", func(t *testing.T) {
		opts := freshTable(t, conn, "bad_input", Fenced)
		opts.CreateTable = false
		_, err := newTestSink(t, opts).NewWriter(ctx, sink.WriterInfo{Job: "test", Sink: "out"})
		expect(t, err, true, "public.bad_input does not exist", `sink "out" subtask 0`)
	})
	t.Run("missing column", func(t *testing.T) {
		opts := freshTable(t, conn, "bad_input", Fenced)
		if _, err := conn.Exec(ctx, "CREATE TABLE bad_input (id bigint)"); err != nil {
			t.Fatal(err)
		}
		opts.CreateTable = false
		_, err := newTestSink(t, opts).NewWriter(ctx, sink.WriterInfo{Job: "test", Sink: "out"})
		expect(t, err, true, `table public.bad_input has no column "name" (Options.Columns[1])`)
	})
	for _, mode := range modes {
		t.Run("type mismatch "+mode.String(), func(t *testing.T) {
			opts := freshTable(t, conn, "bad_input", mode)
			s, err := NewSink(opts, func(v rec, row []any) []any { return append(row, v.Name, v.Name) })
			if err != nil {
				t.Fatal(err)
			}
			w, err := s.NewWriter(ctx, sink.WriterInfo{Job: "test", Sink: "out"})
			if err != nil {
				t.Fatal(err)
			}
			defer w.Close()
			if err := w.Write(ctx, recs(0, 2)); err != nil {
				t.Fatal(err)
			}
			_, err = w.Prepare(ctx, 7)
			expect(t, err, true, "table public.bad_input", `column "id" (Options.Columns[0])`, "checkpoint 7")
		})
		t.Run("constraint violation "+mode.String(), func(t *testing.T) {
			opts := freshTable(t, conn, "bad_input", mode)
			if _, err := conn.Exec(ctx, "CREATE TABLE bad_input (id bigint CONSTRAINT id_small CHECK (id < 3), name text)"); err != nil {
				t.Fatal(err)
			}
			s := newTestSink(t, opts)
			w := newWriter(t, s, "out", 0)
			c := newCommitter(t, s, "out")
			if err := w.Write(ctx, recs(0, 5)); err != nil {
				t.Fatal(err)
			}
			data, err := w.Prepare(ctx, 8)
			if mode == Prepared {
				// Written straight into the table: the check fails at the COPY.
				expect(t, err, true, "table public.bad_input", `constraint "id_small"`, "checkpoint 8")
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			err = c.Commit(ctx, sink.Committable{Checkpoint: 8, Incarnation: testOwner.Incarnation, Data: data})
			expect(t, err, true, "table public.bad_input", `constraint "id_small"`, "commit checkpoint 8")
			// The rows stay staged for a retry after the table is fixed.
			if staged, _ := leftovers(t, conn, "test", "bad_input", "out"); staged != 5 {
				t.Fatalf("%d staged rows after the failed commit, want 5", staged)
			}
			if _, err := conn.Exec(ctx, "ALTER TABLE bad_input DROP CONSTRAINT id_small"); err != nil {
				t.Fatal(err)
			}
			if err := c.Commit(ctx, sink.Committable{Checkpoint: 8, Incarnation: testOwner.Incarnation, Data: data}); err != nil {
				t.Fatal(err)
			}
			if got := ids(t, conn, "bad_input"); !slices.Equal(got, want(0, 5)) {
				t.Fatalf("after fixing the table: %v", got)
			}
		})
	}
	t.Run("upsert key without unique index", func(t *testing.T) {
		opts := freshTable(t, conn, "bad_input", Fenced)
		if _, err := conn.Exec(ctx, "CREATE TABLE bad_input (id bigint, name text)"); err != nil {
			t.Fatal(err)
		}
		opts.Write, opts.Key = Upsert, []string{"id"}
		_, err := newTestSink(t, opts).NewWriter(ctx, sink.WriterInfo{Job: "test", Sink: "out"})
		expect(t, err, true, "table public.bad_input", "ON CONFLICT")
	})
	t.Run("wrong number of values", func(t *testing.T) {
		opts := freshTable(t, conn, "bad_input", Fenced)
		s, err := NewSink(opts, func(v rec, row []any) []any { return append(row, v.ID) })
		if err != nil {
			t.Fatal(err)
		}
		w, err := s.NewWriter(ctx, sink.WriterInfo{Job: "test", Sink: "out"})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		expect(t, w.Write(ctx, recs(0, 1)), true, "toRow appended 1 values")
	})
}

func TestPreparedCapacityMessage(t *testing.T) {
	if err := checkPreparedCapacity(64); err != nil {
		t.Fatal(err)
	}
	err := checkPreparedCapacity(0)
	if !sink.IsPermanent(err) || !strings.Contains(err.Error(), "max_prepared_transactions = 0") || !strings.Contains(err.Error(), "Fenced") {
		t.Fatalf("checkPreparedCapacity(0) = %v", err)
	}
}

func TestOptionsValidation(t *testing.T) {
	good := Options{DSN: "postgres://u:pw@127.0.0.1/db", Table: "t", Columns: []Column{{"id", "bigint"}, {"name", "text"}}}
	for _, tc := range []struct {
		edit func(*Options)
		want string
	}{
		{func(o *Options) { o.DSN = "" }, `option DSN = "" is invalid`},
		{func(o *Options) { o.DSN = "postgres://u:pw@[bad" }, "option DSN cannot be parsed"},
		{func(o *Options) { o.Table = "" }, `option Table = "" is invalid`},
		{func(o *Options) { o.Table = "_exactly_progress" }, `option Table = "_exactly_progress"`},
		{func(o *Options) { o.Table = strings.Repeat("t", 64) }, "at most 63 bytes"},
		{func(o *Options) { o.Columns = nil }, "option Columns = [] is invalid"},
		{func(o *Options) { o.Columns = []Column{{"a", "int"}, {"a", "int"}} }, `option Columns[1].Name = "a" is invalid: remove it`},
		{func(o *Options) { o.Columns = []Column{{"a", "int); DROP TABLE x; --"}} }, "option Columns[0].Type"},
		{func(o *Options) { o.CreateTable, o.Columns = true, []Column{{"a", ""}} }, `option Columns[0].Type = "" is invalid`},
		{func(o *Options) { o.Mode = 7 }, "option Mode = CommitMode(7)"},
		{func(o *Options) { o.Mode, o.Write, o.Key = Prepared, Upsert, []string{"id"} }, "option Write = upsert is invalid: use Mode Fenced"},
		{func(o *Options) { o.Write = Upsert }, "option Key = [] is invalid"},
		{func(o *Options) { o.Key = []string{"id"} }, "leave Key empty in Append mode"},
		{func(o *Options) { o.Write, o.Key = Upsert, []string{"nope"} }, `option Key[0] = "nope"`},
		{func(o *Options) { o.FlushRows = -1 }, "option FlushRows = -1"},
		{func(o *Options) { o.LockTimeout = -time.Second }, "option LockTimeout = -1s is invalid: use a duration of at least 1ms"},
		{func(o *Options) { o.LockTimeout = time.Microsecond }, "option LockTimeout = 1µs"},
	} {
		o := good
		tc.edit(&o)
		_, err := NewSink(o, recRow)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("NewSink(%+v) = %v, want an error containing %q", o, err, tc.want)
		}
		if err != nil && strings.Contains(err.Error(), ":pw@") {
			t.Errorf("error %q reveals the password", err)
		}
	}
	for _, typ := range []string{"", "bigint", "double precision", "numeric(12, 2)", "text[]", "timestamp with time zone", "varchar(20)"} {
		o := good
		o.Columns = []Column{{"a", typ}}
		if _, err := NewSink(o, recRow); err != nil {
			t.Errorf("type %q rejected: %v", typ, err)
		}
	}
	if _, err := NewSink[rec](good, nil); err == nil {
		t.Error("nil toRow accepted")
	}
}

func TestCommittableRoundTrip(t *testing.T) {
	for _, c := range []committable{{Fenced, 0, 1, 0, ""}, {Prepared, 3, 1 << 40, 1<<63 - 1, ownerTag(testOwner)}} {
		got, ok := decodeCommittable(c.encode())
		if !ok || got != c {
			t.Errorf("decode(encode(%+v)) = %+v, %v", c, got, ok)
		}
	}
	// Version 1, written before owner tags: prepared, subtask 3, checkpoint 7, id 9.
	if got, ok := decodeCommittable([]byte{1, 1, 3, 7, 9}); !ok || got != (committable{Prepared, 3, 7, 9, ""}) {
		t.Errorf("decode(version 1) = %+v, %v", got, ok)
	}
	for _, bad := range [][]byte{nil, {1}, {3, 0, 0, 1, 0}, {1, 5, 0, 1, 0}, {1, 0, 0, 0, 0}, {1, 0, 0, 1, 0, 0},
		{2, 1, 0, 1, 0}, {2, 1, 0, 1, 0, 2, 'a'}, {2, 1, 0, 1, 0, 1, '\''}, {2, 1, 0, 1, 0, 0, 0}} {
		if _, ok := decodeCommittable(bad); ok {
			t.Errorf("decode(%x) accepted", bad)
		}
	}
}
