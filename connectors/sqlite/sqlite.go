// Package sqlite writes records into a SQLite table exactly once, through
// the pure-Go driver modernc.org/sqlite.
//
// # Protocol
//
// Writers insert rows into a staging table, _exactly_staging_<table>, tagged
// with the sink name, the subtask, the checkpoint (0 while the transaction is
// open) and a sequence number, in columns named _exactly_sink,
// _exactly_subtask, _exactly_checkpoint and _exactly_seq so that they cannot
// clash with the user's columns. Rows are buffered in memory and written early
// when Options.FlushRows are buffered. Prepare, in one SQLite transaction,
// inserts the rest and tags the subtask's open rows with the checkpoint id:
// from then on they are durable (synchronous=FULL) and invisible.
//
// Commit moves one (sink, subtask, checkpoint) from staging into the target
// table in one SQLite transaction: it inserts the staged rows in sequence
// order, deletes them from staging, and raises the subtask's high-water mark
// in _exactly_progress. Because the move and the deletion commit together,
// staged rows exist exactly as long as they are uncommitted, which makes
// Commit idempotent: a repeated Commit finds no staged rows and a high-water
// mark at or above its checkpoint, and does nothing. When it finds no staged
// rows and a lower mark, the prepared data was deleted by someone else and
// Commit fails with a permanent error instead of losing it silently. That
// check relies on the engine committing the committables of one subtask in
// increasing checkpoint order, as package sink promises for subsumed ones.
//
// Abort deletes one checkpoint's staged rows; AbortLingering deletes every
// staged row of the sink, of every subtask.
//
// # Owners
//
// The sink's owner ([sink.Owner]: the job's incarnation and the owning
// process's epoch) is a row of _exactly_owner, keyed by sink name. Fence
// writes it; Commit, Abort, AbortLingering and the writers' staging
// transactions read it first, in the same SQLite transaction as their
// change, and fail with an error wrapping [sink.ErrFenced] when it names
// another owner. SQLite runs one write transaction at a time (every
// transaction here takes the write lock at BEGIN), so a Commit either
// precedes a Fence entirely or sees its row: once Fence has returned, an
// older owner changes nothing. A sink never fenced (no row) accepts every
// owner, as before owners existed.
//
// The high-water mark of a (sink, subtask) records the incarnation whose
// commit raised it, and "committed before" is concluded only when that
// incarnation is the committable's ([sink.Committable].Incarnation):
// checkpoint ids restart at 1 when a job is rerun with new checkpoint
// storage, so another incarnation's mark says nothing about this one's
// checkpoints. A commit of another incarnation replaces the mark. Progress
// tables created before incarnations existed gain the column, with the empty
// incarnation in the old rows: those marks match only committables of
// checkpoints written before incarnations, and count as another
// incarnation's progress for Fence.
//
// Sink names must be unique among all jobs that write to one database file.
// Several subtasks, and several processes, may write to the same file: the
// package shares one connection per file within a process, and SQLite's
// locking (WAL mode, busy timeout) orders the processes.
package sqlite

import (
	"context"
	"database/sql"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"

	"github.com/exactlyonce/exactly/checkpoint"
	"github.com/exactlyonce/exactly/sink"
)

const (
	// DefaultFlushRows is the default of [Options.FlushRows].
	DefaultFlushRows = 10000
	// progressTable holds each (sink, subtask)'s committed high-water mark
	// and the incarnation that committed it.
	progressTable = "_exactly_progress"
	// ownerTable holds each sink's owner: incarnation and epoch.
	ownerTable = "_exactly_owner"
	// reservedPrefix starts the names of the package's own tables and columns.
	reservedPrefix = "_exactly_"
	// maxParams is SQLite's default limit on bound parameters per statement.
	maxParams = 32766
	// maxRowsPerInsert bounds the rows of one multi-row INSERT.
	maxRowsPerInsert = 1000
	// committableVersion is the first byte of every committable.
	committableVersion = 1
)

var (
	identRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	// typeRE accepts SQLite type names such as "TEXT", "UNSIGNED BIG INT"
	// and "DECIMAL(10, 5)", and nothing that could alter the DDL.
	typeRE = regexp.MustCompile(`^([A-Za-z_][A-Za-z0-9_]*( [A-Za-z_][A-Za-z0-9_]*)* ?(\( ?[+-]?[0-9]+ ?(, ?[+-]?[0-9]+ ?)?\))?)?$`)
)

// Column is one column of the target table.
type Column struct {
	// Name is the column's name: a simple identifier [A-Za-z_][A-Za-z0-9_]*.
	Name string
	// Type is the column's SQLite type, e.g. "TEXT", "INTEGER", "REAL",
	// "BLOB"; empty for no type.
	Type string
}

// Options configures a SQLite [Sink].
type Options struct {
	// Path is the database file, created if missing.
	Path string
	// Table is the target table, created with Columns if missing. A simple
	// identifier, not starting with "_exactly_" or "sqlite_".
	Table string
	// Columns are the target table's columns, in the order toRow appends
	// their values. At least one.
	Columns []Column
	// FlushRows is how many rows a writer buffers in memory before it
	// writes them to the staging table ahead of the checkpoint. 0 means
	// DefaultFlushRows. Larger values use more memory and make Prepare
	// slower; smaller ones write more, smaller SQLite transactions.
	FlushRows int
}

// validate checks o and fills in defaults.
func (o *Options) validate() error {
	if o.Path == "" || strings.Contains(o.Path, "?") || strings.HasPrefix(o.Path, "file:") {
		return fmt.Errorf("sqlite: Options.Path is %q: use a file path without '?' and without a file: prefix", o.Path)
	}
	lower := strings.ToLower(o.Table)
	if !identRE.MatchString(o.Table) || strings.HasPrefix(lower, reservedPrefix) || strings.HasPrefix(lower, "sqlite_") {
		return fmt.Errorf("sqlite: Options.Table is %q: use a name matching [A-Za-z_][A-Za-z0-9_]* that does not start with %q or \"sqlite_\"", o.Table, reservedPrefix)
	}
	if len(o.Columns) == 0 {
		return errors.New("sqlite: Options.Columns is empty: list at least one column of the target table")
	}
	seen := map[string]int{}
	for i, c := range o.Columns {
		lower := strings.ToLower(c.Name)
		if !identRE.MatchString(c.Name) || strings.HasPrefix(lower, reservedPrefix) {
			return fmt.Errorf("sqlite: Options.Columns[%d].Name is %q: use a name matching [A-Za-z_][A-Za-z0-9_]* that does not start with %q", i, c.Name, reservedPrefix)
		}
		if j, dup := seen[lower]; dup {
			return fmt.Errorf("sqlite: Options.Columns[%d].Name %q repeats Options.Columns[%d].Name: column names must be unique (case-insensitively)", i, c.Name, j)
		}
		seen[lower] = i
		if !typeRE.MatchString(c.Type) {
			return fmt.Errorf("sqlite: Options.Columns[%d].Type is %q: use a SQLite type name such as TEXT, INTEGER, REAL, BLOB or NUMERIC(10, 2)", i, c.Type)
		}
	}
	if o.FlushRows < 0 {
		return fmt.Errorf("sqlite: Options.FlushRows is %d: use a positive number of rows, or 0 for the default %d", o.FlushRows, DefaultFlushRows)
	}
	if o.FlushRows == 0 {
		o.FlushRows = DefaultFlushRows
	}
	return nil
}

// Sink writes rows into a SQLite table exactly once. It implements
// [sink.Sink]; see the package documentation for the protocol.
type Sink[T any] struct {
	opts  Options
	toRow func(v T, row []any) []any
	sql   statements
}

var _ sink.Sink[int] = (*Sink[int])(nil)

// SharedByJobs reports why jobs of different names cannot write through
// the sink at once, as the tasks of one stage of a cluster would (package
// cluster asks it when it plans a job): its progress and owner rows are
// keyed by the sink's name, not the job's, so the jobs would fence each
// other; and the database file is local to a machine.
func (s *Sink[T]) SharedByJobs() error {
	return fmt.Errorf("sqlite: the sink writes to %s, whose progress and owner rows are keyed by the sink's name and not the job's: jobs sharing it would take its ownership from each other, and tasks on other machines would write to their own files. Write a stage that runs as many tasks to Kafka or PostgreSQL, or run the job in one process", s.opts.Path)
}

// NewSink returns a sink into opts.Table of opts.Path. toRow appends the
// values of v's columns, in Options.Columns order, to row and returns it;
// the values must be of types the driver accepts (integers, floats, strings,
// []byte, bool, time.Time, nil). The database is opened by the first writer
// or committer.
func NewSink[T any](opts Options, toRow func(v T, row []any) []any) (*Sink[T], error) {
	if err := opts.validate(); err != nil {
		return nil, err
	}
	if toRow == nil {
		return nil, errors.New("sqlite: NewSink: toRow is nil: pass a function that appends a record's column values to row")
	}
	return &Sink[T]{opts: opts, toRow: toRow, sql: newStatements(opts)}, nil
}

// statements holds the SQL text of a sink, built once.
type statements struct {
	schema       []string
	rowsPerChunk int    // rows of a full multi-row insert
	insertChunk  string // insert of rowsPerChunk rows into staging
	tag          string // tags a subtask's open staged rows with a checkpoint
	discardOpen  string // deletes a subtask's open staged rows
	commit       string // moves a checkpoint's staged rows into the target
	deleteStaged string // deletes a checkpoint's staged rows
	progress     string // reads a subtask's high-water mark and its incarnation
	advance      string // raises a subtask's high-water mark
	foreign      string // reads the highest mark of another incarnation
	owner        string // reads the sink's owner
	setOwner     string // records the sink's owner
	abortAll     string // deletes all staged rows of a sink
	target       string // the quoted target table, for messages
	insertHead   string // start of every staging insert
	nCols        int
}

// Staging table columns that precede the user's columns.
const (
	colSink       = `"_exactly_sink"`
	colSubtask    = `"_exactly_subtask"`
	colCheckpoint = `"_exactly_checkpoint"`
	colSeq        = `"_exactly_seq"`
)

func newStatements(o Options) statements {
	quote := func(s string) string { return `"` + s + `"` }
	target, staging := quote(o.Table), quote(reservedPrefix+"staging_"+o.Table)
	names := make([]string, len(o.Columns))
	defs := make([]string, len(o.Columns))
	for i, c := range o.Columns {
		names[i] = quote(c.Name)
		defs[i] = strings.TrimSpace(names[i] + " " + c.Type)
	}
	cols, colDefs := strings.Join(names, ", "), strings.Join(defs, ", ")
	key := colSink + " = ?1 AND " + colSubtask + " = ?2 AND " + colCheckpoint + " = ?3"
	st := statements{
		schema: []string{
			"CREATE TABLE IF NOT EXISTS " + target + " (" + colDefs + ")",
			"CREATE TABLE IF NOT EXISTS " + staging + " (" + colSink + " TEXT NOT NULL, " + colSubtask + " INTEGER NOT NULL, " +
				colCheckpoint + " INTEGER NOT NULL, " + colSeq + " INTEGER NOT NULL, " + colDefs + ")",
			"CREATE INDEX IF NOT EXISTS " + quote(reservedPrefix+"staging_"+o.Table+"_key") + " ON " + staging +
				" (" + colSink + ", " + colSubtask + ", " + colSeq + ")",
			"CREATE TABLE IF NOT EXISTS " + progressTable + " (sink TEXT NOT NULL, subtask INTEGER NOT NULL, checkpoint INTEGER NOT NULL, " +
				"incarnation TEXT NOT NULL DEFAULT '', PRIMARY KEY (sink, subtask))",
			"CREATE TABLE IF NOT EXISTS " + ownerTable + " (sink TEXT NOT NULL PRIMARY KEY, incarnation TEXT NOT NULL, epoch INTEGER NOT NULL)",
		},
		rowsPerChunk: min(maxRowsPerInsert, (maxParams-4)/len(o.Columns)),
		tag:          "UPDATE " + staging + " SET " + colCheckpoint + " = ?3 WHERE " + colSink + " = ?1 AND " + colSubtask + " = ?2 AND " + colCheckpoint + " = 0",
		discardOpen:  "DELETE FROM " + staging + " WHERE " + colSink + " = ?1 AND " + colSubtask + " = ?2 AND " + colCheckpoint + " = 0",
		commit:       "INSERT INTO " + target + " (" + cols + ") SELECT " + cols + " FROM " + staging + " WHERE " + key + " ORDER BY " + colSeq,
		deleteStaged: "DELETE FROM " + staging + " WHERE " + key,
		progress:     "SELECT checkpoint, incarnation FROM " + progressTable + " WHERE sink = ?1 AND subtask = ?2",
		// Another incarnation's mark is replaced, not compared.
		advance: "INSERT INTO " + progressTable + " (sink, subtask, checkpoint, incarnation) VALUES (?1, ?2, ?3, ?4) " +
			"ON CONFLICT (sink, subtask) DO UPDATE SET checkpoint = CASE WHEN incarnation = excluded.incarnation " +
			"THEN max(checkpoint, excluded.checkpoint) ELSE excluded.checkpoint END, incarnation = excluded.incarnation",
		foreign: "SELECT checkpoint, incarnation FROM " + progressTable + " WHERE sink = ?1 AND incarnation <> ?2 " +
			"ORDER BY checkpoint DESC LIMIT 1",
		owner: "SELECT incarnation, epoch FROM " + ownerTable + " WHERE sink = ?1",
		setOwner: "INSERT INTO " + ownerTable + " (sink, incarnation, epoch) VALUES (?1, ?2, ?3) " +
			"ON CONFLICT (sink) DO UPDATE SET incarnation = excluded.incarnation, epoch = excluded.epoch",
		abortAll:   "DELETE FROM " + staging + " WHERE " + colSink + " = ?1",
		target:     target,
		insertHead: "INSERT INTO " + staging + " (" + colSink + ", " + colSubtask + ", " + colCheckpoint + ", " + colSeq + ", " + cols + ") VALUES ",
		nCols:      len(o.Columns),
	}
	st.insertChunk = st.insert(st.rowsPerChunk)
	return st
}

// insert returns a staging insert of rows rows. Parameters: ?1 sink, ?2
// subtask, ?3 checkpoint, ?4 sequence number of the first row, then the
// rows' column values as anonymous parameters, which SQLite numbers from 5
// on. (Numbering them all would make binding quadratic in the driver.)
func (st *statements) insert(rows int) string {
	var b strings.Builder
	b.WriteString(st.insertHead)
	values := strings.Repeat(", ?", st.nCols) + ")"
	for r := range rows {
		if r > 0 {
			b.WriteString(", ")
		}
		b.WriteString("(?1, ?2, ?3, ?4 + ")
		b.WriteString(strconv.Itoa(r))
		b.WriteString(values)
	}
	return b.String()
}

// open acquires the database and creates the tables if missing, or
// migrates them.
func (s *Sink[T]) open(ctx context.Context, sinkName string) (*shared, error) {
	db, err := acquire(s.opts.Path)
	if err != nil {
		return nil, err
	}
	err = inTx(ctx, db.db, func(tx *sql.Tx) error {
		for _, stmt := range s.sql.schema {
			if _, err := tx.ExecContext(ctx, stmt); err != nil {
				return err
			}
		}
		return migrateProgress(ctx, tx)
	})
	if err != nil {
		return nil, errors.Join(fmt.Errorf("sqlite: sink %q: create tables in %s: %w", sinkName, s.opts.Path, err), db.release())
	}
	return db, nil
}

// migrateProgress adds the incarnation column to a progress table created
// before incarnations existed; its rows get the empty incarnation.
func migrateProgress(ctx context.Context, tx *sql.Tx) error {
	var n int
	err := tx.QueryRowContext(ctx, "SELECT count(*) FROM pragma_table_info('"+progressTable+"') WHERE name = 'incarnation'").Scan(&n)
	if err != nil || n > 0 {
		return err
	}
	_, err = tx.ExecContext(ctx, "ALTER TABLE "+progressTable+" ADD COLUMN incarnation TEXT NOT NULL DEFAULT ''")
	return err
}

// checkOwner fails with an error wrapping [sink.ErrFenced] when the sink's
// recorded owner is not owner. A sink never fenced accepts every owner.
func (st *statements) checkOwner(ctx context.Context, tx *sql.Tx, sinkName string, owner sink.Owner) error {
	rec, found, err := st.readOwner(ctx, tx, sinkName)
	if err != nil || !found || rec == owner {
		return err
	}
	return fmt.Errorf("the sink's owner in table %s is %s, this process is %s: a newer process took the job over, and this one must stop: %w", ownerTable, rec, owner, sink.ErrFenced)
}

// readOwner returns the sink's recorded owner, if any.
func (st *statements) readOwner(ctx context.Context, tx *sql.Tx, sinkName string) (owner sink.Owner, found bool, err error) {
	var epoch int64
	err = tx.QueryRowContext(ctx, st.owner, sinkName).Scan(&owner.Incarnation, &epoch)
	if errors.Is(err, sql.ErrNoRows) {
		return sink.Owner{}, false, nil
	}
	owner.Epoch = uint64(epoch)
	return owner, err == nil, err
}

// inTx runs f in a transaction and commits it, or rolls it back if f fails.
func inTx(ctx context.Context, db *sql.DB, f func(*sql.Tx) error) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := f(tx); err != nil {
		return errors.Join(err, tx.Rollback())
	}
	return tx.Commit()
}

// NewWriter opens the writer of one subtask.
func (s *Sink[T]) NewWriter(ctx context.Context, info sink.WriterInfo) (sink.Writer[T], error) {
	if info.Subtask < 0 {
		return nil, fmt.Errorf("sqlite: sink %q: subtask is %d: subtask indices start at 0", info.Sink, info.Subtask)
	}
	db, err := s.open(ctx, info.Sink)
	if err != nil {
		return nil, err
	}
	stmt, err := db.db.PrepareContext(ctx, s.sql.insertChunk)
	if err != nil {
		return nil, errors.Join(fmt.Errorf("sqlite: sink %q: prepare staging insert: %w", info.Sink, err), db.release())
	}
	return &writer[T]{s: s, db: db, sinkName: info.Sink, subtask: info.Subtask, owner: info.Owner, chunkStmt: stmt}, nil
}

// NewCommitter opens a committer.
func (s *Sink[T]) NewCommitter(ctx context.Context, info sink.CommitterInfo) (sink.Committer, error) {
	db, err := s.open(ctx, info.Sink)
	if err != nil {
		return nil, err
	}
	return &committer{sql: &s.sql, db: db, info: info}, nil
}

// writer is one subtask's writer.
type writer[T any] struct {
	s        *Sink[T]
	db       *shared // nil once closed
	sinkName string
	subtask  int
	owner    sink.Owner
	rows     []any // buffered rows' column values, row after row
	args     []any // scratch for statement arguments
	seq      int64 // sequence number of the next staged row
	open     bool  // rows staged with checkpoint 0 since the last Prepare
	// chunkStmt is the prepared insert of a full chunk. (It is prepared
	// outside transactions: the pool's single connection is busy inside.)
	chunkStmt *sql.Stmt
}

// Write buffers batch, staging the buffer early once it holds FlushRows rows.
func (w *writer[T]) Write(ctx context.Context, batch []T) error {
	n := w.s.sql.nCols
	for i, v := range batch {
		before := len(w.rows)
		w.rows = w.s.toRow(v, w.rows)
		if got := len(w.rows) - before; got != n {
			w.rows = w.rows[:before]
			return fmt.Errorf("sqlite: sink %q subtask %d: toRow appended %d values for record %d of the batch, want %d (one per column of Options.Columns)", w.sinkName, w.subtask, got, i, n)
		}
		if len(w.rows) >= w.s.opts.FlushRows*n {
			err := inTx(ctx, w.db.db, func(tx *sql.Tx) error { return w.stage(ctx, tx, 0) })
			if err != nil {
				return fmt.Errorf("sqlite: sink %q subtask %d: stage %d rows early: %w", w.sinkName, w.subtask, len(w.rows)/n, err)
			}
			w.open = true
		}
	}
	return nil
}

// stage inserts the buffered rows into staging with checkpoint cp, in
// multi-row statements, and empties the buffer. A fenced writer stages
// nothing: a new owner's AbortLingering removed what it staged before, and
// its rows must not join the new owner's checkpoints of the same id.
func (w *writer[T]) stage(ctx context.Context, tx *sql.Tx, cp int64) error {
	st := &w.s.sql
	if err := st.checkOwner(ctx, tx, w.sinkName, w.owner); err != nil {
		return err
	}
	for len(w.rows) > 0 {
		rows := min(len(w.rows)/st.nCols, st.rowsPerChunk)
		chunk := w.rows[:rows*st.nCols]
		w.args = append(append(w.args[:0], w.sinkName, w.subtask, cp, w.seq), chunk...)
		var err error
		if rows == st.rowsPerChunk {
			_, err = tx.StmtContext(ctx, w.chunkStmt).ExecContext(ctx, w.args...)
		} else {
			_, err = tx.ExecContext(ctx, st.insert(rows), w.args...)
		}
		if err != nil {
			return err
		}
		w.seq += int64(rows)
		clear(chunk)
		w.rows = w.rows[len(chunk):]
	}
	clear(w.args)
	w.rows = w.rows[:0:cap(w.rows)]
	return nil
}

// Prepare stages the buffered rows and tags the subtask's open rows with
// id, in one transaction.
func (w *writer[T]) Prepare(ctx context.Context, id checkpoint.ID) ([]byte, error) {
	if len(w.rows) == 0 && !w.open {
		return nil, nil
	}
	if id == 0 || id > math.MaxInt64 {
		return nil, fmt.Errorf("sqlite: sink %q subtask %d: checkpoint id %d is out of range [1, 2^63-1]", w.sinkName, w.subtask, id)
	}
	cp := int64(id)
	err := inTx(ctx, w.db.db, func(tx *sql.Tx) error {
		if err := w.stage(ctx, tx, cp); err != nil {
			return err
		}
		if !w.open {
			return nil
		}
		_, err := tx.ExecContext(ctx, w.s.sql.tag, w.sinkName, w.subtask, cp)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("sqlite: sink %q subtask %d: prepare checkpoint %d: %w", w.sinkName, w.subtask, id, err)
	}
	w.open = false
	return encodeCommittable(w.subtask, id), nil
}

// Close discards the rows written since the last Prepare.
func (w *writer[T]) Close() error {
	if w.db == nil {
		return nil
	}
	err := w.chunkStmt.Close()
	if w.open {
		if _, xerr := w.db.db.Exec(w.s.sql.discardOpen, w.sinkName, w.subtask); xerr != nil {
			err = errors.Join(err, fmt.Errorf("sqlite: sink %q subtask %d: discard open rows: %w", w.sinkName, w.subtask, xerr))
		}
	}
	err = errors.Join(err, w.db.release())
	w.db = nil
	return err
}

// encodeCommittable returns the committable of subtask's transaction
// prepared for checkpoint id: a version byte and two uvarints.
func encodeCommittable(subtask int, id checkpoint.ID) []byte {
	b := append(make([]byte, 0, 1+2*binary.MaxVarintLen64), committableVersion)
	return binary.AppendUvarint(binary.AppendUvarint(b, uint64(subtask)), uint64(id))
}

// decodeCommittable parses what encodeCommittable returned.
func decodeCommittable(data []byte) (subtask int, cp int64, ok bool) {
	if len(data) == 0 || data[0] != committableVersion {
		return 0, 0, false
	}
	s, n := binary.Uvarint(data[1:])
	if n <= 0 {
		return 0, 0, false
	}
	c, m := binary.Uvarint(data[1+n:])
	if m <= 0 || 1+n+m != len(data) || s > math.MaxInt32 || c == 0 || c > math.MaxInt64 {
		return 0, 0, false
	}
	return int(s), int64(c), true
}

// committer commits and aborts the staged checkpoints of one sink.
type committer struct {
	sql  *statements
	db   *shared // nil once closed
	info sink.CommitterInfo
}

// run decodes cm and runs f in a transaction that first checks the owner,
// wrapping its error with what was being done.
func (c *committer) run(ctx context.Context, op string, cm sink.Committable, f func(tx *sql.Tx, subtask int, cp int64) error) error {
	subtask, cp, ok := decodeCommittable(cm.Data)
	if !ok {
		return sink.Permanent(fmt.Errorf("sqlite: sink %q: %s checkpoint %d subtask %d: committable %x is malformed: the checkpoint is corrupt or was written by another sink", c.info.Sink, op, cm.Checkpoint, cm.Subtask, cm.Data))
	}
	err := inTx(ctx, c.db.db, func(tx *sql.Tx) error {
		if err := c.sql.checkOwner(ctx, tx, c.info.Sink, c.info.Owner); err != nil {
			return err
		}
		return f(tx, subtask, cp)
	})
	if err != nil {
		return fmt.Errorf("sqlite: sink %q: %s checkpoint %d subtask %d: %w", c.info.Sink, op, cp, subtask, err)
	}
	return nil
}

// Commit moves the checkpoint's staged rows into the target table.
func (c *committer) Commit(ctx context.Context, cm sink.Committable) error {
	return c.run(ctx, "commit", cm, func(tx *sql.Tx, subtask int, cp int64) error {
		res, err := tx.ExecContext(ctx, c.sql.commit, c.info.Sink, subtask, cp)
		if err != nil {
			return err
		}
		moved, err := res.RowsAffected()
		if err != nil {
			return err
		}
		if moved > 0 {
			if _, err := tx.ExecContext(ctx, c.sql.deleteStaged, c.info.Sink, subtask, cp); err != nil {
				return err
			}
			_, err = tx.ExecContext(ctx, c.sql.advance, c.info.Sink, subtask, cp, cm.Incarnation)
			return err
		}
		var mark int64
		var inc string
		markDesc := "no committed high-water mark"
		switch err := tx.QueryRowContext(ctx, c.sql.progress, c.info.Sink, subtask).Scan(&mark, &inc); {
		case err == nil && inc == cm.Incarnation && mark >= cp:
			return nil // committed before
		case err == nil:
			markDesc = fmt.Sprintf("the committed high-water mark is checkpoint %d of incarnation %s", mark, incarnationName(inc))
		case !errors.Is(err, sql.ErrNoRows):
			return err
		}
		return sink.Permanent(fmt.Errorf("no staged rows, and %s while this committable is of incarnation %s: the prepared data is gone (deleted from the staging table by someone else) and the table misses its rows; find out what removed it, then rerun the job from an earlier savepoint", markDesc, incarnationName(cm.Incarnation)))
	})
}

// incarnationName quotes inc for messages; "" is the incarnation of
// checkpoints and progress rows written before incarnations existed.
func incarnationName(inc string) string {
	if inc == "" {
		return `"" (written before incarnations existed)`
	}
	return strconv.Quote(inc)
}

// Abort deletes the checkpoint's staged rows.
func (c *committer) Abort(ctx context.Context, cm sink.Committable) error {
	return c.run(ctx, "abort", cm, func(tx *sql.Tx, subtask int, cp int64) error {
		_, err := tx.ExecContext(ctx, c.sql.deleteStaged, c.info.Sink, subtask, cp)
		return err
	})
}

// Fence records the committer's owner in _exactly_owner; see the package
// documentation and [sink.Committer].
func (c *committer) Fence(ctx context.Context, id checkpoint.ID) error {
	me := c.info.Owner
	err := inTx(ctx, c.db.db, func(tx *sql.Tx) error {
		rec, found, err := c.sql.readOwner(ctx, tx, c.info.Sink)
		if err != nil {
			return err
		}
		switch sink.DecideFence(rec, found, me, id, c.info.TakeOver) {
		case sink.FenceDone:
			return nil
		case sink.FenceRefuse:
			return fmt.Errorf("the sink's owner in table %s is %s, newer than this process's %s: another process took the job over, and this one must stop: %w", ownerTable, rec, me, sink.ErrFenced)
		case sink.FenceCheckForeign:
			var mark int64
			var inc string
			err := tx.QueryRowContext(ctx, c.sql.foreign, c.info.Sink, me.Incarnation).Scan(&mark, &inc)
			if err == nil {
				return fmt.Errorf("job %q starts without a checkpoint as incarnation %s, but table %s already holds the committed output of incarnation %s up to checkpoint %d: "+
					"rerunning from scratch would write that output again; restore the job's checkpoint directory to continue that run, "+
					"or take the output over to rerun into it on purpose: %w",
					c.info.Job, incarnationName(me.Incarnation), c.sql.target, incarnationName(inc), mark, sink.ErrForeignProgress)
			}
			if !errors.Is(err, sql.ErrNoRows) {
				return err
			}
		}
		_, err = tx.ExecContext(ctx, c.sql.setOwner, c.info.Sink, me.Incarnation, int64(me.Epoch))
		return err
	})
	if err != nil {
		return fmt.Errorf("sqlite: sink %q: fence as %s after restoring checkpoint %d: %w", c.info.Sink, me, id, err)
	}
	return nil
}

// AbortLingering deletes every staged row of the sink.
func (c *committer) AbortLingering(ctx context.Context, id checkpoint.ID) error {
	err := inTx(ctx, c.db.db, func(tx *sql.Tx) error {
		if err := c.sql.checkOwner(ctx, tx, c.info.Sink, c.info.Owner); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, c.sql.abortAll, c.info.Sink)
		return err
	})
	if err != nil {
		return fmt.Errorf("sqlite: sink %q: abort lingering rows after restoring checkpoint %d: %w", c.info.Sink, id, err)
	}
	return nil
}

// Close releases the database.
func (c *committer) Close() error {
	if c.db == nil {
		return nil
	}
	err := c.db.release()
	c.db = nil
	return err
}
