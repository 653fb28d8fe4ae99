package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/exactlyonce/exactly/checkpoint"
	"github.com/exactlyonce/exactly/sink"
)

// rec is the test record.
type rec struct {
	ID   int64
	Name string
}

func recRow(v rec, row []any) []any { return append(row, v.ID, v.Name) }

func testOptions(path string) Options {
	return Options{Path: path, Table: "out", Columns: []Column{{"id", "INTEGER"}, {"name", "TEXT"}}}
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
	w, err := s.NewWriter(context.Background(), sink.WriterInfo{Sink: name, Subtask: subtask, Parallelism: subtask + 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	return w
}

func newCommitter(t testing.TB, s *Sink[rec], name string) sink.Committer {
	t.Helper()
	c, err := s.NewCommitter(context.Background(), sink.CommitterInfo{Sink: name})
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
	return sink.Committable{Checkpoint: cp, Subtask: subtask, Data: data}
}

// query returns the ids in table, in rowid order, read through a separate
// connection as an outside reader would.
func query(t *testing.T, path, q string) []int64 {
	t.Helper()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Query(q)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var ids []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return ids
}

func ids(t *testing.T, path string) []int64 {
	return query(t, path, "SELECT id FROM out ORDER BY rowid")
}

func staged(t *testing.T, path string) []int64 {
	return query(t, path, "SELECT id FROM _exactly_staging_out ORDER BY id")
}

func want(from, to int64) []int64 {
	var out []int64
	for i := from; i < to; i++ {
		out = append(out, i)
	}
	return out
}

func TestVisibleOnlyAfterCommitAndIdempotent(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "db.sqlite")
	s := newTestSink(t, testOptions(path))
	w := newWriter(t, s, "sink", 0)
	c := newCommitter(t, s, "sink")
	if data, err := w.Prepare(ctx, 1); data != nil || err != nil {
		t.Fatalf("empty Prepare = %x, %v", data, err)
	}
	cm := writePrepare(t, w, 0, 2, recs(0, 5))
	if got := ids(t, path); len(got) != 0 {
		t.Fatalf("visible before Commit: %v", got)
	}
	if err := w.Write(ctx, recs(5, 7)); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := c.Commit(ctx, cm); err != nil {
			t.Fatal(err)
		}
		if got := ids(t, path); !slices.Equal(got, want(0, 5)) {
			t.Fatalf("after Commit: %v", got)
		}
	}
	if got := staged(t, path); len(got) != 0 {
		t.Errorf("staging after Commit: %v (the unprepared rows should still be in memory)", got)
	}
}

func TestEarlyFlushThenPrepare(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "db.sqlite")
	opts := testOptions(path)
	opts.FlushRows = 10
	s := newTestSink(t, opts)
	w := newWriter(t, s, "sink", 0)
	c := newCommitter(t, s, "sink")
	if err := w.Write(ctx, recs(0, 25)); err != nil {
		t.Fatal(err)
	}
	if got := staged(t, path); !slices.Equal(got, want(0, 20)) {
		t.Fatalf("staged after writing 25 rows with FlushRows 10: %v", got)
	}
	if got := ids(t, path); len(got) != 0 {
		t.Fatalf("visible before Prepare: %v", got)
	}
	cm := writePrepare(t, w, 0, 1, recs(25, 27))
	// Rows staged early and the rest are all tagged with the checkpoint.
	if got := query(t, path, "SELECT count(*) FROM _exactly_staging_out WHERE _exactly_checkpoint = 1"); got[0] != 27 {
		t.Fatalf("rows tagged with checkpoint 1: %v, want 27", got)
	}
	// Early-staged rows of the next transaction are not part of checkpoint 1.
	if err := w.Write(ctx, recs(27, 40)); err != nil {
		t.Fatal(err)
	}
	if err := c.Commit(ctx, cm); err != nil {
		t.Fatal(err)
	}
	if got := ids(t, path); !slices.Equal(got, want(0, 27)) {
		t.Fatalf("after Commit: %v", got)
	}
	// Closing the writer discards its open, early-staged rows.
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if got := staged(t, path); len(got) != 0 {
		t.Errorf("staging after Close: %v", got)
	}
}

func TestRecoveryInNewInstance(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "db.sqlite")
	opts := testOptions(path)
	opts.FlushRows = 3
	s1 := newTestSink(t, opts)
	var cms []sink.Committable
	for subtask := range 3 {
		w := newWriter(t, s1, "sink", subtask)
		base := int64(subtask * 100)
		cms = append(cms, writePrepare(t, w, subtask, 4, recs(base, base+5)))
		writePrepare(t, w, subtask, 5, recs(base+5, base+8))        // checkpoint 5 never completes
		if err := w.Write(ctx, recs(base+8, base+12)); err != nil { // open transaction
			t.Fatal(err)
		}
	}
	// "Crash": a new sink instance restores checkpoint 4 with parallelism 1.
	s2 := newTestSink(t, opts)
	c := newCommitter(t, s2, "sink")
	for _, cm := range cms {
		if err := c.Commit(ctx, cm); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.AbortLingering(ctx, 4); err != nil {
		t.Fatal(err)
	}
	if got := staged(t, path); len(got) != 0 {
		t.Fatalf("staging after AbortLingering: %v", got)
	}
	wantIDs := slices.Concat(want(0, 5), want(100, 105), want(200, 205))
	if got := ids(t, path); !slices.Equal(got, wantIDs) {
		t.Fatalf("after recovery: %v, want %v", got, wantIDs)
	}
	// Committing again after recovery changes nothing.
	for _, cm := range cms {
		if err := c.Commit(ctx, cm); err != nil {
			t.Fatal(err)
		}
	}
	if got := ids(t, path); !slices.Equal(got, wantIDs) {
		t.Fatalf("after repeated commits: %v", got)
	}
}

func TestCommitOfLostDataIsPermanent(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "db.sqlite")
	s := newTestSink(t, testOptions(path))
	cm := writePrepare(t, newWriter(t, s, "sink", 0), 0, 3, recs(0, 2))
	c := newCommitter(t, s, "sink")
	if err := c.AbortLingering(ctx, 0); err != nil {
		t.Fatal(err)
	}
	err := c.Commit(ctx, cm)
	if !sink.IsPermanent(err) || !strings.Contains(err.Error(), "prepared data is gone") {
		t.Fatalf("Commit of deleted rows = %v, want a permanent data-loss error", err)
	}
	bad := sink.Committable{Checkpoint: 3, Data: []byte{9, 9}}
	if err := c.Commit(ctx, bad); !sink.IsPermanent(err) || !strings.Contains(err.Error(), "malformed") {
		t.Errorf("Commit of a malformed committable = %v", err)
	}
}

func TestAbortAndAbortLingeringScope(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "db.sqlite")
	s := newTestSink(t, testOptions(path))
	c := newCommitter(t, s, "a")
	cm := writePrepare(t, newWriter(t, s, "a", 0), 0, 1, recs(0, 2))
	writePrepare(t, newWriter(t, s, "a", 1), 1, 1, recs(10, 12))
	writePrepare(t, newWriter(t, s, "b", 0), 0, 1, recs(20, 22))
	for range 2 {
		if err := c.Abort(ctx, cm); err != nil {
			t.Fatal(err)
		}
	}
	if got := staged(t, path); !slices.Equal(got, []int64{10, 11, 20, 21}) {
		t.Fatalf("staged after Abort: %v", got)
	}
	if err := c.AbortLingering(ctx, 0); err != nil {
		t.Fatal(err)
	}
	if got := staged(t, path); !slices.Equal(got, []int64{20, 21}) {
		t.Fatalf("staged after AbortLingering of sink a: %v, want sink b's rows only", got)
	}
}

func TestConcurrentSubtasksShareFile(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "db.sqlite")
	opts := testOptions(path)
	opts.FlushRows = 50
	s := newTestSink(t, opts)
	const subtasks, perCheckpoint, checkpoints = 4, 120, 5
	writers := make([]sink.Writer[rec], subtasks)
	for i := range writers {
		writers[i] = newWriter(t, s, "sink", i)
	}
	var wg sync.WaitGroup
	errs := make([]error, subtasks)
	for i, w := range writers {
		wg.Go(func() {
			c, err := s.NewCommitter(ctx, sink.CommitterInfo{Sink: "sink"})
			if err != nil {
				errs[i] = err
				return
			}
			defer c.Close()
			for cp := range checkpoint.ID(checkpoints) {
				base := int64(i*10000) + int64(cp)*perCheckpoint
				for _, batch := range slices.Collect(slices.Chunk(recs(base, base+perCheckpoint), 7)) {
					if errs[i] = w.Write(ctx, batch); errs[i] != nil {
						return
					}
				}
				data, err := w.Prepare(ctx, cp+1)
				if err == nil {
					err = c.Commit(ctx, sink.Committable{Checkpoint: cp + 1, Subtask: i, Data: data})
				}
				if errs[i] = err; err != nil {
					return
				}
			}
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("subtask %d: %v", i, err)
		}
	}
	got := ids(t, path)
	if len(got) != subtasks*perCheckpoint*checkpoints {
		t.Fatalf("got %d rows, want %d", len(got), subtasks*perCheckpoint*checkpoints)
	}
	// Each subtask's rows appear in the order written.
	last := map[int64]int64{}
	for _, id := range got {
		sub := id / 10000
		if prev, ok := last[sub]; ok && id != prev+1 {
			t.Fatalf("subtask %d: id %d follows %d", sub, id, prev)
		}
		last[sub] = id
	}
}

func TestSharedDatabaseIsReferenceCounted(t *testing.T) {
	path := filepath.Join(t.TempDir(), "db.sqlite")
	s := newTestSink(t, testOptions(path))
	w1, w2 := newWriter(t, s, "x", 0), newWriter(t, s, "x", 1)
	key, _ := filepath.Abs(path)
	ref := func() int {
		registryMu.Lock()
		defer registryMu.Unlock()
		if sh := registry[key]; sh != nil {
			return sh.refs
		}
		return 0
	}
	if ref() != 2 {
		t.Fatalf("refs = %d, want 2", ref())
	}
	for _, w := range []sink.Writer[rec]{w1, w2, w1} { // a second Close is harmless
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if ref() != 0 {
		t.Errorf("refs after closing both = %d, want the database closed", ref())
	}
}

func TestOptionsValidation(t *testing.T) {
	good := testOptions("db.sqlite")
	for _, tc := range []struct {
		edit func(*Options)
		want string
	}{
		{func(o *Options) { o.Path = "" }, `Options.Path is ""`},
		{func(o *Options) { o.Path = "x?mode=ro" }, `Options.Path is "x?mode=ro"`},
		{func(o *Options) { o.Table = "my-table" }, `Options.Table is "my-table"`},
		{func(o *Options) { o.Table = "_exactly_progress" }, `Options.Table is "_exactly_progress"`},
		{func(o *Options) { o.Columns = nil }, "Options.Columns is empty"},
		{func(o *Options) { o.Columns = []Column{{"a b", "TEXT"}} }, `Options.Columns[0].Name is "a b"`},
		{func(o *Options) { o.Columns = []Column{{"a", "TEXT"}, {"A", "INT"}} }, `Options.Columns[1].Name "A" repeats`},
		{func(o *Options) { o.Columns = []Column{{"a", "TEXT); DROP TABLE x; --"}} }, "Options.Columns[0].Type is"},
		{func(o *Options) { o.FlushRows = -1 }, "Options.FlushRows is -1"},
	} {
		o := good
		o.Columns = slices.Clone(good.Columns)
		tc.edit(&o)
		if _, err := NewSink(o, recRow); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("NewSink(%+v) = %v, want an error containing %q", o, err, tc.want)
		}
	}
	for _, typ := range []string{"", "TEXT", "UNSIGNED BIG INT", "DECIMAL(10, 5)", "VARCHAR(255)"} {
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

func TestWriteRejectsWrongColumnCount(t *testing.T) {
	path := filepath.Join(t.TempDir(), "db.sqlite")
	s, err := NewSink(testOptions(path), func(v rec, row []any) []any { return append(row, v.ID) })
	if err != nil {
		t.Fatal(err)
	}
	w, err := s.NewWriter(context.Background(), sink.WriterInfo{Sink: "s"})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if err := w.Write(context.Background(), recs(0, 1)); err == nil || !strings.Contains(err.Error(), "appended 1 values") {
		t.Errorf("Write = %v", err)
	}
}

func BenchmarkSQLiteSink(b *testing.B) {
	const rows = 100_000
	ctx := context.Background()
	s := newTestSink(b, testOptions(filepath.Join(b.TempDir(), "db.sqlite")))
	w := newWriter(b, s, "bench", 0)
	c := newCommitter(b, s, "bench")
	batch := recs(0, 1000)
	cp := checkpoint.ID(0)
	for b.Loop() {
		for range rows / len(batch) {
			if err := w.Write(ctx, batch); err != nil {
				b.Fatal(err)
			}
		}
		cp++
		data, err := w.Prepare(ctx, cp)
		if err != nil {
			b.Fatal(err)
		}
		if err := c.Commit(ctx, sink.Committable{Checkpoint: cp, Data: data}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(rows*b.N)/b.Elapsed().Seconds(), "rows/s")
}
