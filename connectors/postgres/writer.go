package postgres

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"

	"github.com/exactlyonce/exactly/checkpoint"
	"github.com/exactlyonce/exactly/sink"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// NewWriter opens the writer of one subtask: a connection of its own, on
// which it creates the tables it needs and checks the target's columns.
func (s *Sink[T]) NewWriter(ctx context.Context, info sink.WriterInfo) (sink.Writer[T], error) {
	c := s.core
	who := fmt.Sprintf("sink %q subtask %d", info.Sink, info.Subtask)
	if info.Subtask < 0 {
		return nil, fmt.Errorf("postgres: %s: subtask indices start at 0", who)
	}
	conn, err := c.connect(ctx)
	if err != nil {
		return nil, err
	}
	oids, stagingCols, err := c.setup(ctx, conn)
	if err != nil {
		return nil, errors.Join(c.describe(err, who, "set up the tables"), conn.Close(ctx))
	}
	w := &writer[T]{s: s, conn: conn, who: who, key: c.sinkKey(info.Job, info.Sink), tag: ownerTag(info.Owner), subtask: info.Subtask, oids: oids,
		stagingCols: stagingCols, table: pgx.Identifier{c.opts.Schema, c.opts.Table}, cols: c.names}
	w.src.width = len(c.names)
	if c.opts.Write == Upsert {
		w.src.numbered = true
		w.cols = append([]string{seqColumn}, c.names...)
	}
	return w, nil
}

// writer is one subtask's writer. Rows are buffered, then COPYed inside a
// server transaction that stays open until Prepare.
type writer[T any] struct {
	s           *Sink[T]
	conn        *pgx.Conn // nil once closed
	who         string    // sink and subtask, for messages
	key         string    // sink key
	tag         string    // owner tag of the global ids it prepares
	subtask     int
	oids        []uint32       // type of each of Options.Columns
	stagingCols string         // fenced: column definitions of a staging table
	table       pgx.Identifier // the COPY's table: the target (prepared) or the open transaction's staging table (fenced)
	cols        []string       // columns of the COPY
	src         copySource
	open        bool          // a server transaction is open
	txn         int64         // fenced: the open transaction's id, which names its staging table
	last        checkpoint.ID // the last checkpoint prepared, for messages
}

// Write buffers batch, sending the buffer once it holds FlushRows rows.
func (w *writer[T]) Write(ctx context.Context, batch []T) error {
	n := w.src.width
	for i, v := range batch {
		before := len(w.src.rows)
		w.src.rows = w.s.toRow(v, w.src.rows)
		if got := len(w.src.rows) - before; got != n {
			w.src.rows = w.src.rows[:before]
			return sink.Permanent(fmt.Errorf("postgres: %s: table %s: toRow appended %d values for record %d of the batch, want %d (one per entry of Options.Columns)",
				w.who, w.s.core.table, got, i, n))
		}
		if len(w.src.rows) >= w.s.core.opts.FlushRows*n {
			if err := w.flush(ctx); err != nil {
				return w.s.core.describe(w.explainLockTimeout(ctx, err), w.who, w.openCheckpoint())
			}
		}
	}
	return nil
}

// openCheckpoint says which checkpoint the rows being written belong to.
func (w *writer[T]) openCheckpoint() string {
	if w.last == 0 {
		return "write the rows of this writer's first checkpoint"
	}
	return fmt.Sprintf("write the rows of the checkpoint after %d", w.last)
}

// flush COPYs the buffered rows into the open transaction, opening one if
// needed, and empties the buffer.
func (w *writer[T]) flush(ctx context.Context) error {
	if len(w.src.rows) == 0 {
		return nil
	}
	if !w.open {
		if _, err := w.conn.Exec(ctx, "BEGIN"); err != nil {
			return err
		}
		w.open = true
		w.src.seq = 0
		if c := w.s.core; c.opts.Mode == Fenced {
			w.txn = rand.Int64() // 63 random bits: unique in practice, never reused
			name := stagingName(w.key, w.txn)
			w.table = pgx.Identifier{c.opts.Schema, name}
			if _, err := w.conn.Exec(ctx, createStaging(c.staging(name), w.stagingCols)); err != nil {
				return err
			}
		}
	}
	w.src.i = -1
	n, err := w.conn.CopyFrom(ctx, w.table, w.cols, &w.src)
	if err != nil {
		var pg *pgconn.PgError
		// pgx reports a value it cannot encode as a cancelled COPY.
		if (!errors.As(err, &pg) || pg.Code == "57014") && w.src.i >= 0 && w.src.i*w.src.width < len(w.src.rows) {
			if enc := diagnoseEncode(w.conn.TypeMap(), w.s.core.names, w.oids, w.src.current()); enc != nil {
				err = enc
			}
		}
		return err
	}
	w.src.seq += n
	clear(w.src.rows)
	w.src.rows = w.src.rows[:0]
	return nil
}

// Prepare sends the buffered rows and makes the open transaction durable:
// COMMIT into staging (fenced) or PREPARE TRANSACTION (prepared).
func (w *writer[T]) Prepare(ctx context.Context, id checkpoint.ID) ([]byte, error) {
	if len(w.src.rows) == 0 && !w.open {
		return nil, nil
	}
	what := fmt.Sprintf("prepare checkpoint %d", id)
	if id == 0 || id > math.MaxInt64 {
		return nil, fmt.Errorf("postgres: %s: %s: the id is out of range [1, 2^63-1]", w.who, what)
	}
	c, err := w.prepare(ctx, id)
	if err != nil {
		return nil, w.s.core.describe(w.explainLockTimeout(ctx, err), w.who, what)
	}
	w.open, w.last = false, id
	return c.encode(), nil
}

func (w *writer[T]) prepare(ctx context.Context, id checkpoint.ID) (committable, error) {
	if err := w.flush(ctx); err != nil {
		return committable{}, err
	}
	c := committable{mode: w.s.core.opts.Mode, subtask: w.subtask, checkpoint: id}
	stmt, want := "COMMIT", "COMMIT"
	if c.mode == Fenced {
		c.id = uint64(w.txn)
	} else {
		var xid string
		if err := w.conn.QueryRow(ctx, "SELECT pg_current_xact_id()::text").Scan(&xid); err != nil {
			return c, err
		}
		xact, err := strconv.ParseUint(xid, 10, 64)
		if err != nil {
			return c, fmt.Errorf("parse the transaction id %q: %w", xid, err)
		}
		c.id, c.tag = xact, w.tag
		stmt, want = "PREPARE TRANSACTION "+literal(gid(w.key, w.subtask, id, c.tag)), "PREPARE TRANSACTION"
	}
	tag, err := w.conn.Exec(ctx, stmt)
	if err != nil {
		return c, err
	}
	if tag.String() != want {
		// The server rolls back a failed transaction instead of committing it.
		return c, fmt.Errorf("%s ended with %q: the server rolled the transaction back", stmt, tag.String())
	}
	return c, nil
}

// explainLockTimeout adds the likely cause to a statement that waited
// longer than Options.LockTimeout for a lock. The failed statement aborted
// the open transaction (the writer cannot go on after an error anyway):
// the writer rolls it back, which also releases its locks, and asks the
// server which prepared transactions hold locks on the table. In Prepared
// mode the usual one is the sink's own transaction of the previous
// checkpoint, holding the row lock of a unique key written again; the
// error stays retryable, and the failover's recovery commits it.
func (w *writer[T]) explainLockTimeout(ctx context.Context, err error) error {
	if !isLockTimeout(err) {
		return err
	}
	c := w.s.core
	cause := fmt.Sprintf("another session holds a conflicting lock on table %s: find it in pg_locks, or raise Options.LockTimeout", c.table)
	if w.open {
		if _, rerr := w.conn.Exec(ctx, "ROLLBACK"); rerr == nil {
			w.open = false
			if gids := w.lockingPrepared(ctx); len(gids) > 0 {
				cause = fmt.Sprintf("prepared transactions %s hold locks on table %s, most likely the row lock of a unique key that this transaction writes again "+
					"(a prepared transaction keeps its locks until COMMIT PREPARED, which runs after its checkpoint completes): the job fails over and recovery commits them; "+
					"if this recurs, the job writes a unique key that an earlier checkpoint wrote too, and recovery then stops at the unique violation", strings.Join(gids, ", "), c.table)
			}
		}
	}
	return fmt.Errorf("waited longer than Options.LockTimeout (%s) for a lock: %s: %w", c.opts.LockTimeout, cause, err)
}

// lockingPrepared returns the quoted global ids of the sink's prepared
// transactions and of other prepared transactions that hold a lock on the
// target table, oldest first; nil if the server cannot tell.
func (w *writer[T]) lockingPrepared(ctx context.Context) []string {
	rows, err := w.conn.Query(ctx, `SELECT quote_literal(gid) FROM pg_prepared_xacts p WHERE database = current_database() AND (starts_with(gid, $1)
		OR EXISTS (SELECT 1 FROM pg_locks l WHERE l.pid IS NULL AND l.relation = to_regclass($2) AND l.virtualtransaction = '-1/' || p.transaction::text))
		ORDER BY prepared`, gidPrefix+w.key+":", w.s.core.target)
	if err != nil {
		return nil
	}
	gids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil
	}
	return gids
}

// Close closes the connection, which makes the server roll back an open,
// unprepared transaction. Prepared transactions are left to the committer.
func (w *writer[T]) Close() error {
	if w.conn == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), defaultConnectTimeout)
	defer cancel()
	err := w.conn.Close(ctx)
	w.conn = nil
	if err != nil {
		return fmt.Errorf("postgres: %s: close: %w", w.who, err)
	}
	return nil
}

// copySource feeds buffered rows to CopyFrom, prefixing each with its
// sequence number in the transaction when numbered is set.
type copySource struct {
	rows     []any // row after row of width values
	width    int
	numbered bool  // upsert: prefix the sequence number
	seq      int64 // sequence number of the first buffered row
	i        int   // current row
	row      []any // scratch for a numbered row
}

// Next advances to the next buffered row.
func (s *copySource) Next() bool {
	s.i++
	return (s.i+1)*s.width <= len(s.rows)
}

// Values returns the current row, numbered in Upsert mode.
func (s *copySource) Values() ([]any, error) {
	vals := s.current()
	if !s.numbered {
		return vals, nil
	}
	s.row = append(append(s.row[:0], s.seq+int64(s.i)), vals...)
	return s.row, nil
}

// Err reports no error: the rows are in memory.
func (s *copySource) Err() error { return nil }

// current returns the user values of the current row.
func (s *copySource) current() []any { return s.rows[s.i*s.width : (s.i+1)*s.width] }

// literal quotes s as an SQL string literal (for statements that take no
// parameters, such as COMMIT PREPARED).
func literal(s string) string {
	out := []byte{'\''}
	for i := 0; i < len(s); i++ {
		if s[i] == '\'' {
			out = append(out, '\'')
		}
		out = append(out, s[i])
	}
	return string(append(out, '\''))
}
