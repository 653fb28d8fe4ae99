package postgres

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strconv"
	"strings"

	"github.com/exactlyonce/exactly/checkpoint"
	"github.com/exactlyonce/exactly/sink"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// NewCommitter returns a committer. It connects on first use, and again
// after a failure, so that the engine's retries ride over a server restart.
func (s *Sink[T]) NewCommitter(_ context.Context, info sink.CommitterInfo) (sink.Committer, error) {
	log := info.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if info.Owner.Epoch > math.MaxInt64 {
		return nil, fmt.Errorf("postgres: job %q sink %q: owner epoch %d is out of range [0, 2^63-1]", info.Job, info.Sink, info.Owner.Epoch)
	}
	return &committer{c: s.core, who: fmt.Sprintf("job %q sink %q", info.Job, info.Sink), key: s.core.sinkKey(info.Job, info.Sink),
		owner: info.Owner, takeOver: info.TakeOver, log: log}, nil
}

// committer commits and aborts the transactions of one sink, as owner.
type committer struct {
	c        *core
	conn     *pgx.Conn // nil until connected, and after a failure
	who      string    // job and sink, for messages
	key      string    // sink key
	owner    sink.Owner
	takeOver bool
	log      *slog.Logger
}

// connection returns the open connection, connecting if needed.
//
// A committer's session holds the sink's owner row (fenced mode, and
// Fence) or the owner lock (prepared mode) while it checks that it owns
// the sink and acts, and a successor's Fence waits for both. The server
// cannot tell a paused process (SIGSTOP, a stalled virtual machine) from
// a slow one, so the session of a committer paused there would block the
// successor for as long as the pause lasts: the task could not move. So
// the server ends a committer's session that stays idle that long: inside
// a transaction, through idle_in_transaction_session_timeout, set on
// every committer session; holding the owner lock outside one, through
// idle_session_timeout, set only while the lock is held (lockOwner). The
// limit is half of Options.LockTimeout, at least 5s (idleLimit), so that a
// successor's wait ends within its own lock_timeout. The paused committer finds
// its connection closed when it resumes and, reconnecting, that it was
// fenced.
func (m *committer) connection(ctx context.Context) (*pgx.Conn, error) {
	if m.conn != nil && !m.conn.IsClosed() {
		return m.conn, nil
	}
	conn, err := m.c.connectWith(ctx, m.c.committerCfg)
	if err != nil {
		return nil, err
	}
	m.conn = conn
	return conn, nil
}

// run decodes cm and runs f on the connection, wrapping its error with what
// was being done. After a failure the connection is dropped: the next call
// reconnects.
func (m *committer) run(ctx context.Context, op string, cm sink.Committable, f func(*pgx.Conn, committable) error) error {
	c, ok := decodeCommittable(cm.Data)
	if !ok {
		return sink.Permanent(fmt.Errorf("postgres: %s: %s checkpoint %d subtask %d: committable %x is malformed: the checkpoint is corrupt or was written by another sink",
			m.who, op, cm.Checkpoint, cm.Subtask, cm.Data))
	}
	conn, err := m.connection(ctx)
	if err == nil {
		err = f(conn, c)
	}
	if err != nil {
		m.drop()
		return m.c.describe(err, m.who, fmt.Sprintf("%s checkpoint %d of subtask %d (%s mode)", op, c.checkpoint, c.subtask, c.mode))
	}
	return nil
}

// drop closes the connection after a failure.
func (m *committer) drop() {
	if m.conn == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), defaultConnectTimeout)
	defer cancel()
	_ = m.conn.Close(ctx) // the connection failed already; its close error says nothing new
	m.conn = nil
}

// Commit makes a prepared transaction visible; see the package
// documentation for how a repeated Commit is recognized.
func (m *committer) Commit(ctx context.Context, cm sink.Committable) error {
	return m.run(ctx, "commit", cm, func(conn *pgx.Conn, c committable) error {
		if c.mode == Fenced {
			return m.commitStaged(ctx, conn, c, cm.Incarnation)
		}
		return m.commitPrepared(ctx, conn, c, cm.Incarnation)
	})
}

// commitStaged moves a staged transaction into the target table, drops its
// staging table and raises the subtask's high-water mark, in one
// transaction that first checks, holding a share lock on the sink's owner
// row, that this committer's owner still owns the sink: Fence updates that
// row, so it waits for commits in flight, and a commit after it sees the
// new owner. When the staging table does not exist, the mark tells whether
// an earlier Commit moved it.
func (m *committer) commitStaged(ctx context.Context, conn *pgx.Conn, c committable, incarnation string) error {
	staging := m.c.staging(stagingName(m.key, int64(c.id)))
	err := m.inOwnerTx(ctx, conn, func(tx pgx.Tx) error {
		// Locking first makes a concurrent duplicate Commit wait here and
		// then find the table gone, rather than deadlock at the DROP.
		if _, err := tx.Exec(ctx, "LOCK TABLE "+staging+" IN ACCESS EXCLUSIVE MODE"); err != nil {
			if isUndefinedTable(err) {
				return errNoStaging
			}
			return err
		}
		if _, err := tx.Exec(ctx, m.c.move(staging)); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, "DROP TABLE "+staging); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, m.c.advance, m.key, c.subtask, int64(c.checkpoint), incarnation)
		return err
	})
	if !errors.Is(err, errNoStaging) {
		return err
	}
	var (
		mark    int64
		markInc string
	)
	err = conn.QueryRow(ctx, m.c.markOf, m.key, c.subtask).Scan(&mark, &markInc)
	found := err == nil
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return err
	}
	switch {
	case found && markInc == incarnation && checkpoint.ID(mark) >= c.checkpoint:
		return nil // committed before
	case found && markInc != incarnation:
		return sink.Permanent(fmt.Errorf("staging table %s of transaction %d does not exist, and the high-water mark of subtask %d is checkpoint %d of incarnation %s, not of incarnation %s, which prepared this transaction: "+
			"checkpoint ids restart with every incarnation, so the mark cannot tell whether these rows were committed; if the table misses them, the prepared rows are gone (dropped by someone else): find out what removed them, then rerun the job from an earlier savepoint",
			staging, c.id, c.subtask, mark, incarnationText(markInc), incarnationText(incarnation)))
	}
	return sink.Permanent(fmt.Errorf("staging table %s of transaction %d does not exist and the committed high-water mark is %d: the prepared rows are gone (dropped by someone else) and the table misses them; find out what removed them, then rerun the job from an earlier savepoint",
		staging, c.id, mark))
}

// errNoStaging reports, inside commitStaged, that the staging table does not exist.
var errNoStaging = errors.New("no staging table")

// isUndefinedTable reports "relation ... does not exist".
func isUndefinedTable(err error) bool {
	var pg *pgconn.PgError
	return errors.As(err, &pg) && pg.Code == "42P01"
}

// commitPrepared runs COMMIT PREPARED holding the owner lock (see
// asOwner); when the transaction no longer exists, it asks the server
// whether it committed. Once it knows the transaction committed, it raises
// the subtask's high-water mark, which in this mode serves only Fence's
// check for another incarnation's progress: the commit decision rests on
// the transaction id, which no other transaction shares.
func (m *committer) commitPrepared(ctx context.Context, conn *pgx.Conn, c committable, incarnation string) error {
	return m.asOwner(ctx, conn, func() error {
		if err := m.commitPreparedOnce(ctx, conn, c); err != nil {
			return err
		}
		if _, err := conn.Exec(ctx, m.c.advance, m.key, c.subtask, int64(c.checkpoint), incarnation); err != nil {
			return fmt.Errorf("committed; raising the high-water mark: %w", err)
		}
		return nil
	})
}

// commitPreparedOnce runs COMMIT PREPARED, or finds out that the
// transaction committed before.
func (m *committer) commitPreparedOnce(ctx context.Context, conn *pgx.Conn, c committable) error {
	g := gid(m.key, c.subtask, c.checkpoint, c.tag)
	_, err := conn.Exec(ctx, "COMMIT PREPARED "+literal(g))
	if !isUndefinedObject(err) {
		return err
	}
	if c.id > math.MaxInt64 {
		return sink.Permanent(fmt.Errorf("prepared transaction %q does not exist and its transaction id %d is invalid", g, c.id))
	}
	var status *string
	if err := conn.QueryRow(ctx, "SELECT pg_xact_status($1::text::xid8)", strconv.FormatUint(c.id, 10)).Scan(&status); err != nil {
		return fmt.Errorf("prepared transaction %q does not exist; asking for the status of transaction %d: %w", g, c.id, err)
	}
	switch {
	case status != nil && *status == "committed":
		return nil // committed before
	case status != nil && *status == "aborted":
		return sink.Permanent(fmt.Errorf("prepared transaction %q (transaction %d) was rolled back by someone else: its rows are lost from the table; find out who ran ROLLBACK PREPARED, then rerun the job from an earlier savepoint", g, c.id))
	case status == nil:
		return sink.Permanent(fmt.Errorf("prepared transaction %q does not exist and the server no longer knows whether transaction %d committed: check the table for the checkpoint's rows by hand", g, c.id))
	}
	return fmt.Errorf("prepared transaction %q does not exist and transaction %d is %q", g, c.id, *status)
}

// isUndefinedObject reports "prepared transaction with identifier ... does not exist".
func isUndefinedObject(err error) bool {
	var pg *pgconn.PgError
	return errors.As(err, &pg) && pg.Code == "42704"
}

// Abort discards a prepared transaction, as owner. Aborting an unknown one
// succeeds.
func (m *committer) Abort(ctx context.Context, cm sink.Committable) error {
	return m.run(ctx, "abort", cm, func(conn *pgx.Conn, c committable) error {
		if c.mode != Fenced {
			return m.asOwner(ctx, conn, func() error { return rollbackPrepared(ctx, conn, gid(m.key, c.subtask, c.checkpoint, c.tag)) })
		}
		staging := stagingName(m.key, int64(c.id))
		err := m.inOwnerTx(ctx, conn, func(tx pgx.Tx) error {
			_, err := tx.Exec(ctx, "DROP TABLE IF EXISTS "+m.c.staging(staging))
			return err
		})
		if err == nil {
			m.log.Info("postgres: aborted a transaction: dropped its staging table", "table", m.c.table, "staging", staging,
				"checkpoint", c.checkpoint, "subtask", c.subtask, "owner", m.owner.String())
		}
		return err
	})
}

func rollbackPrepared(ctx context.Context, conn *pgx.Conn, g string) error {
	if _, err := conn.Exec(ctx, "ROLLBACK PREPARED "+literal(g)); err != nil && !isUndefinedObject(err) {
		return err
	}
	return nil
}

// AbortLingering rolls back every prepared transaction of the sink in the
// current database and drops every staging table of the sink (of any
// subtask), whichever mode is configured, as owner.
func (m *committer) AbortLingering(ctx context.Context, id checkpoint.ID) error {
	conn, err := m.connection(ctx)
	if err == nil {
		err = m.abortLingering(ctx, conn)
	}
	if err != nil {
		m.drop()
		return m.c.describe(err, m.who, fmt.Sprintf("abort lingering transactions after restoring checkpoint %d", id))
	}
	return nil
}

func (m *committer) abortLingering(ctx context.Context, conn *pgx.Conn) error {
	rows, err := conn.Query(ctx, "SELECT gid FROM pg_prepared_xacts WHERE database = current_database() AND starts_with(gid, $1)", gidPrefix+m.key+":")
	if err != nil {
		return err
	}
	gids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return err
	}
	if len(gids) > 0 {
		err := m.asOwner(ctx, conn, func() error {
			for _, g := range gids {
				if err := rollbackPrepared(ctx, conn, g); err != nil {
					return fmt.Errorf("rollback prepared transaction %q: %w", g, err)
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	var tables []string
	err = m.inOwnerTx(ctx, conn, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, "SELECT relname::text FROM pg_class WHERE relnamespace = to_regnamespace($1) AND relkind = 'r' AND starts_with(relname, $2)",
			m.c.opts.Schema, stagingPrefix+m.key+"_")
		if err != nil {
			return err
		}
		if tables, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
			return err
		}
		for _, t := range tables {
			if _, err := tx.Exec(ctx, "DROP TABLE IF EXISTS "+m.c.staging(t)); err != nil {
				return fmt.Errorf("drop staging table %s: %w", t, err)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	if len(gids) > 0 || len(tables) > 0 {
		// The names, so that a staging table found missing later can be
		// traced to the run that dropped it.
		m.log.Info("postgres: removed what earlier attempts left behind", "table", m.c.table, "prepared_transactions", len(gids), "staging_tables", len(tables),
			"dropped", strings.Join(tables, ","), "owner", m.owner.String())
	}
	return nil
}

// Close closes the connection.
func (m *committer) Close() error {
	if m.conn == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), defaultConnectTimeout)
	defer cancel()
	err := m.conn.Close(ctx)
	m.conn = nil
	if err != nil {
		return fmt.Errorf("postgres: %s: close: %w", m.who, err)
	}
	return nil
}
