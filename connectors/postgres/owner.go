package postgres

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/exactlyonce/exactly/checkpoint"
	"github.com/exactlyonce/exactly/sink"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Ownership. The owner table holds one row per sink key: the incarnation
// and epoch of the owner ([sink.Owner]) that fenced the sink last. Two
// locks make "the owner is still mine" true while a committer makes data
// visible or removes prepared data:
//
//   - In fenced mode everything a committer does (commit, abort, drop
//     what earlier attempts left) runs in one transaction, which reads the
//     owner row FOR SHARE before it moves or drops anything (inOwnerTx).
//     Fence updates the row, so it waits until those in flight end, and one
//     that starts after Fence sees the new owner.
//   - COMMIT PREPARED and ROLLBACK PREPARED cannot run inside a
//     transaction block, so a row lock cannot cover them. Instead the
//     committer holds the sink's owner lock, a session-level advisory lock
//     in shared mode, from before it reads the owner row until after the
//     statement (asOwner); Fence takes the same lock in exclusive mode (for
//     its transaction) before it reads and writes the row. So Fence waits
//     for every check-then-act in flight, and every later check sees its
//     write.
//
// If the committer's session dies while it holds either, the server
// releases it; if the committer's process is paused while holding it, the
// server ends its session once it has been idle for half of
// Options.LockTimeout (see committer.connection), and Fence, which waits up
// to LockTimeout, goes on.
//
// The owner lock's keys are the two halves of the sink key, in the
// two-integer key space of advisory locks, apart from the one-bigint space
// of the setup lock.

// querier is what reads the owner row: a connection or a transaction.
type querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// ownerLockKeys returns the keys of the sink's owner lock.
func (m *committer) ownerLockKeys() (int32, int32) {
	v, _ := strconv.ParseUint(m.key, 16, 64) // the sink key is 16 hex digits
	return int32(v >> 32), int32(v)
}

// Fence makes the committer's owner the sink's owner; see the comment
// above and [sink.Committer.Fence]. In its own transaction first, it
// creates the schema's shared tables, which a committer may need before
// any writer of the sink ran.
func (m *committer) Fence(ctx context.Context, id checkpoint.ID) error {
	conn, err := m.connection(ctx)
	if err == nil {
		err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error { return m.c.sinkTables(ctx, tx) })
	}
	if err == nil {
		err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error { return m.fence(ctx, tx, id) })
	}
	if err != nil {
		m.drop()
		return m.c.describe(err, m.who, fmt.Sprintf("fence earlier owners as owner %s (restored checkpoint %d)", m.owner, id))
	}
	return nil
}

func (m *committer) fence(ctx context.Context, tx pgx.Tx, restored checkpoint.ID) error {
	k1, k2 := m.ownerLockKeys()
	if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1, $2)", k1, k2); err != nil {
		if isLockTimeout(err) {
			return fmt.Errorf("waited longer than Options.LockTimeout (%s) for the sink's owner lock, which a committer holds while it commits or aborts "+
				"(perhaps a paused process of an earlier owner, whose session the server ends after %s idle): the job retries; if it recurs, find the session holding the advisory lock (%d, %d) in pg_locks: %w",
				m.c.opts.LockTimeout, idleLimit(m.c.opts.LockTimeout), k1, k2, err)
		}
		return fmt.Errorf("take the owner lock: %w", err)
	}
	cur, found, err := m.readOwner(ctx, tx, " FOR UPDATE")
	if isLockTimeout(err) {
		return fmt.Errorf("waited longer than Options.LockTimeout (%s) for the sink's owner row, which a committer reads FOR SHARE while it commits or aborts "+
			"(perhaps a paused process of an earlier owner, whose session the server ends after %s idle): the job retries: %w",
			m.c.opts.LockTimeout, idleLimit(m.c.opts.LockTimeout), err)
	}
	if err != nil {
		return err
	}
	switch sink.DecideFence(cur, found, m.owner, restored, m.takeOver) {
	case sink.FenceDone:
		return nil
	case sink.FenceRefuse:
		return m.fencedError(cur)
	case sink.FenceCheckForeign:
		var (
			inc  string
			mark int64
		)
		err := tx.QueryRow(ctx, "SELECT incarnation, checkpoint FROM "+m.c.progress+" WHERE sink = $1 AND incarnation <> $2 ORDER BY checkpoint DESC LIMIT 1",
			m.key, m.owner.Incarnation).Scan(&inc, &mark)
		if err == nil {
			return fmt.Errorf("the table holds the committed progress of incarnation %s of the job, up to checkpoint %d, and this run, incarnation %s, starts without a checkpoint, so its checkpoint ids restart at 1: "+
				"to continue that run, restore the job's checkpoint directory (or start from one of its savepoints); to rerun the job into the same table on purpose (the rows already there stay), take the output over: %w",
				incarnationText(inc), mark, incarnationText(m.owner.Incarnation), sink.ErrForeignProgress)
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
	}
	if _, err := tx.Exec(ctx, "INSERT INTO "+m.c.owners+" AS o (sink, incarnation, epoch) VALUES ($1, $2, $3) "+
		"ON CONFLICT (sink) DO UPDATE SET incarnation = EXCLUDED.incarnation, epoch = EXCLUDED.epoch",
		m.key, m.owner.Incarnation, int64(m.owner.Epoch)); err != nil {
		return fmt.Errorf("record the owner: %w", err)
	}
	if found && cur != m.owner {
		m.log.Info("postgres: fenced the sink's earlier owner", "table", m.c.table, "earlier_owner", cur.String(), "owner", m.owner.String())
	}
	return nil
}

// asOwner runs f holding the owner lock in shared mode, after checking
// that the committer's owner owns the sink. The caller drops the
// connection when asOwner fails, which releases the lock if the unlock did
// not run.
func (m *committer) asOwner(ctx context.Context, conn *pgx.Conn, f func() error) error {
	if err := m.lockOwner(ctx, conn); err != nil {
		return err
	}
	err := m.checkOwner(ctx, conn, "")
	if err == nil {
		err = f()
	}
	if uerr := m.unlockOwner(ctx, conn); uerr != nil && err == nil {
		err = uerr
	}
	return err
}

// lockOwner takes the owner lock in shared mode and, in the same round
// trip, makes the server end the session if it stays idle for idleLimit
// while it holds the lock (a paused process; see committer.connection).
// The lock's keys are numbers, so they go into the text: a statement with
// arguments cannot share a round trip.
func (m *committer) lockOwner(ctx context.Context, conn *pgx.Conn) error {
	k1, k2 := m.ownerLockKeys()
	sql := fmt.Sprintf("SELECT pg_advisory_lock_shared(%d, %d)", k1, k2)
	if hasIdleSessionTimeout(conn) {
		sql = fmt.Sprintf("SET idle_session_timeout = %d; ", idleLimit(m.c.opts.LockTimeout).Milliseconds()) + sql
	}
	if _, err := conn.Exec(ctx, sql); err != nil {
		return fmt.Errorf("take the owner lock: %w", err)
	}
	return nil
}

// unlockOwner releases the owner lock and the idle limit of lockOwner.
func (m *committer) unlockOwner(ctx context.Context, conn *pgx.Conn) error {
	k1, k2 := m.ownerLockKeys()
	sql := fmt.Sprintf("SELECT pg_advisory_unlock_shared(%d, %d)", k1, k2)
	if hasIdleSessionTimeout(conn) {
		sql += "; SET idle_session_timeout = 0"
	}
	if _, err := conn.Exec(ctx, sql); err != nil {
		return fmt.Errorf("release the owner lock: %w", err)
	}
	return nil
}

// hasIdleSessionTimeout reports whether the server has
// idle_session_timeout (PostgreSQL 14 and later). Prepared mode refuses an
// older server at setup, but a job restored from a checkpoint of that mode,
// or one cleaning up after it, still commits or rolls back its prepared
// transactions there, without the limit.
func hasIdleSessionTimeout(conn *pgx.Conn) bool {
	major, _, _ := strings.Cut(conn.PgConn().ParameterStatus("server_version"), ".")
	n, err := strconv.Atoi(major)
	return err == nil && n >= 14
}

// inOwnerTx runs f in a transaction that first reads the sink's owner row
// FOR SHARE and checks that the committer's owner owns the sink: Fence,
// which updates the row, waits for it, and it sees a Fence before it.
func (m *committer) inOwnerTx(ctx context.Context, conn *pgx.Conn, f func(pgx.Tx) error) error {
	return pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		if err := m.checkOwner(ctx, tx, " FOR SHARE"); err != nil {
			return err
		}
		return f(tx)
	})
}

// checkOwner fails unless the sink's owner row records the committer's
// owner. lock is appended to the query (" FOR SHARE" inside a commit
// transaction).
func (m *committer) checkOwner(ctx context.Context, q querier, lock string) error {
	cur, found, err := m.readOwner(ctx, q, lock)
	switch {
	case err != nil:
		return err
	case !found:
		return sink.Permanent(fmt.Errorf("the sink records no owner, and this committer's owner is %s: Fence must run before Commit, Abort and AbortLingering (or someone deleted the sink's row of %s)",
			m.owner, m.c.owners))
	case cur != m.owner:
		return m.fencedError(cur)
	}
	return nil
}

// readOwner reads the sink's owner row.
func (m *committer) readOwner(ctx context.Context, q querier, lock string) (sink.Owner, bool, error) {
	var (
		o     sink.Owner
		epoch int64
	)
	err := q.QueryRow(ctx, m.c.ownerOf+lock, m.key).Scan(&o.Incarnation, &epoch)
	if errors.Is(err, pgx.ErrNoRows) {
		return o, false, nil
	}
	if err != nil {
		return o, false, fmt.Errorf("read the sink's owner: %w", err)
	}
	if epoch < 0 {
		return o, false, sink.Permanent(fmt.Errorf("the sink's owner row in %s has epoch %d, which is out of range", m.c.owners, epoch))
	}
	o.Epoch = uint64(epoch)
	return o, true, nil
}

// fencedError reports that owner cur, not the committer's, owns the sink.
func (m *committer) fencedError(cur sink.Owner) error {
	return fmt.Errorf("the sink's owner (incarnation/epoch) is %s, not this committer's %s: another process took the job over, and this one must stop: %w",
		cur, m.owner, sink.ErrFenced)
}

// incarnationText names an incarnation in messages.
func incarnationText(inc string) string {
	if inc == "" {
		return `"" (written before incarnations existed)`
	}
	return strconv.Quote(inc)
}

// isLockTimeout reports "canceling statement due to lock timeout".
func isLockTimeout(err error) bool {
	var pg *pgconn.PgError
	return errors.As(err, &pg) && pg.Code == "55P03"
}
