// Package postgres writes records into a PostgreSQL table exactly once,
// through pgx (github.com/jackc/pgx/v5).
//
// # Identity
//
// Everything a sink leaves in the database is tagged with its sink key: the
// first 16 hex digits of the SHA-256 of the job name, the sink name and
// schema.table, separated by newlines. Job and sink names must therefore
// stay stable across restarts.
//
// # Owners
//
// The table _exactly_owners of Options.Schema holds each sink's owner
// ([sink.Owner]: incarnation and epoch). Fence, in one transaction holding
// the sink's owner lock exclusively, reads the row and fails with
// [sink.ErrFenced] if it records the same incarnation with a higher epoch,
// or with [sink.ErrForeignProgress] if it records another incarnation (or
// none) while the progress table holds another incarnation's marks, the
// job starts without a checkpoint and CommitterInfo.TakeOver is not set;
// otherwise it records the committer's owner. Commit, Abort and
// AbortLingering check, in both modes, that the row still records their
// owner, and fail with [sink.ErrFenced] without changing anything if not:
// for staging tables inside the transaction that moves or drops them (the
// row read FOR SHARE), for prepared transactions holding the owner lock (a
// session-level advisory lock) in shared mode around the check and the
// statement, because COMMIT PREPARED cannot run in a transaction block.
// The server ends a committer's session that stays idle while it holds
// either (a paused process) after half of Options.LockTimeout (at least
// 5s), so that a
// successor's Fence is not blocked by it. owner.go explains the locking.
//
// # Fenced mode (the default)
//
// Each writer subtask keeps one PostgreSQL transaction open per checkpoint
// interval. The transaction draws a random 63-bit id, creates a staging table
// of its own, _exactly_stage_<sink key>_<id as 16 hex digits>, with the
// target's column types (and, in Upsert mode, a sequence number column
// _exactly_seq), and COPYs the buffered records into it every
// Options.FlushRows rows and at the barrier. Prepare COMMITs that
// transaction: the table and its rows are then durable (it is an ordinary,
// WAL-logged table) and invisible to readers of the target table. The
// committable records the subtask, the checkpoint and the transaction id,
// which names the table. (The table is named by a transaction id rather than
// the checkpoint id because rows flushed before the barrier are written
// before the checkpoint id is known.) Staging tables have no index and
// autovacuum disabled: they are written once, read once and dropped.
//
// Commit runs one transaction: it checks the owner, locks the staging
// table, inserts its rows into the target table with INSERT ... SELECT (in
// Upsert mode only the last row of each key, by sequence number, with
// INSERT ... ON CONFLICT DO UPDATE), drops the staging table and records
// the subtask's high-water mark in _exactly_progress: the checkpoint and
// the incarnation that prepared it ([sink.Committable].Incarnation). A
// staging table therefore exists exactly as long as its rows are
// uncommitted, so a repeated Commit finds no table and a mark of the same
// incarnation at or above its checkpoint, and does nothing. Checkpoint ids
// restart at 1 with every incarnation, so a mark of another incarnation
// proves nothing: no table and such a mark, or no table and a lower mark,
// means the prepared data may be gone, and Commit fails with a permanent
// error rather than lose it silently. Rows of a progress table written
// before incarnations existed get the incarnation "", which is the
// incarnation of the committables of checkpoints of that time. Abort drops
// one transaction's staging table; AbortLingering drops every staging table
// whose name starts with _exactly_stage_<sink key>_, of every subtask.
//
// # Prepared mode
//
// Each writer subtask COPYs its rows straight into the target table inside
// an open transaction, and Prepare runs PREPARE TRANSACTION with the global
// id exactly:<sink key>:<subtask>:<checkpoint>:<owner tag> (the owner tag,
// 8 hex digits of the SHA-256 of the incarnation, ".", the epoch, keeps the
// ids of a zombie and its successor apart); the committable records it and
// the transaction's id (pg_current_xact_id). Commit runs COMMIT PREPARED;
// when the prepared transaction no longer exists it asks the server
// (pg_xact_status) whether that transaction committed, which makes Commit
// idempotent, and fails permanently if it was rolled back. It then records
// the high-water mark, which in this mode only serves Fence's check for
// another incarnation's progress. Abort runs ROLLBACK PREPARED.
// AbortLingering rolls back every prepared transaction whose global id
// starts with exactly:<sink key>: in the current database: by the time the
// engine calls it, the engine has committed those the restored checkpoint
// covers. The server needs max_prepared_transactions > 0; the sink checks
// it when it connects. Every session sets lock_timeout to
// Options.LockTimeout, so a write that waits for the row lock of the
// previous checkpoint's prepared transaction fails with a retryable error
// naming it, instead of waiting for ever.
//
// In both modes AbortLingering cleans up after both modes, so a job may
// switch modes across a restart; pending committables record their mode.
//
// # Errors
//
// Errors name the sink, the subtask, the table, the checkpoint and, when
// the server or the encoder tells which, the column and constraint. Server
// errors are classed by SQLSTATE class: connection (08), transaction state
// (25), transaction rollback (40), insufficient resources (53), object not
// in prerequisite state such as a lock timeout (55), operator intervention
// (57), system (58) and snapshot (72) errors are retried; every other class
// (a missing schema, table, column or privilege, a value of the wrong
// type, a constraint violation, wrong credentials, ...) is marked
// [sink.Permanent], so the job stops instead of restarting in a loop.
// Errors that are not server errors (a refused or reset connection) are
// retried. Where the DSN itself appears in an error, its password is
// replaced by xxxxx (pgx removes passwords from its own messages).
package postgres

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/exactlyonce/exactly/checkpoint"
	"github.com/exactlyonce/exactly/sink"
	"github.com/jackc/pgx/v5"
)

const (
	// reservedPrefix starts the names of the package's own tables and columns.
	reservedPrefix = "_exactly_"
	// stagingPrefix starts the name of every staging table, which goes on
	// with the sink key, "_" and the transaction id in 16 hex digits.
	stagingPrefix = reservedPrefix + "stage_"
	// seqColumn numbers the staged rows of a transaction in Upsert mode,
	// where the last row of a key wins.
	seqColumn = reservedPrefix + "seq"
	// progressTable holds each (sink, subtask)'s committed high-water mark.
	progressTable = reservedPrefix + "progress"
	// ownerTable holds each sink's owner: incarnation and epoch.
	ownerTable = reservedPrefix + "owners"
	// gidPrefix starts the global id of every prepared transaction.
	gidPrefix = "exactly:"
	// committableVersion is the first byte of every committable written;
	// version 1 (without the owner tag) is still read.
	committableVersion = 2
	// maxTagLen bounds an owner tag in a committable.
	maxTagLen = 32
	// defaultConnectTimeout bounds a connection attempt when the DSN sets none.
	defaultConnectTimeout = 10 * time.Second
)

// Sink writes records into a PostgreSQL table exactly once. It implements
// [sink.Sink]; see the package documentation for the protocol.
type Sink[T any] struct {
	core  *core
	toRow func(v T, row []any) []any
}

var _ sink.Sink[int] = (*Sink[int])(nil)

// NewSink returns a sink into opts.Table. toRow appends the values of v's
// columns, in Options.Columns order, to row and returns it; the values must
// be of Go types pgx can encode into the columns' types (int64 for bigint,
// string for text, time.Time for timestamptz, ...). The DSN is parsed now;
// the server is contacted by the first writer or committer.
func NewSink[T any](opts Options, toRow func(v T, row []any) []any) (*Sink[T], error) {
	if err := opts.validate(); err != nil {
		return nil, err
	}
	if toRow == nil {
		return nil, errors.New("postgres: NewSink: toRow is nil: pass a function that appends a record's column values to row")
	}
	c, err := newCore(opts)
	if err != nil {
		return nil, err
	}
	return &Sink[T]{core: c, toRow: toRow}, nil
}

// core is what writers and committers of one sink share: the connection
// configuration and the SQL text, built once.
type core struct {
	opts         Options
	cfg          *pgx.ConnConfig // a writer's sessions
	committerCfg *pgx.ConnConfig // a committer's: cfg with an idle limit
	server       string          // host:port/database as user, for messages
	// redactedDSN is Options.DSN without its password, for scrub.
	redactedDSN string
	target      string // quoted schema.table
	progress    string // quoted schema.progress table
	owners      string // quoted schema.owner table
	table       string // schema.table, unquoted, for messages
	names       []string
	// SQL; the commit statement is moveHead + staging table + moveTail.
	moveHead, moveTail, advance, markOf, ownerOf string
}

func newCore(opts Options) (*core, error) {
	cfg, err := pgx.ParseConfig(opts.DSN)
	if err != nil {
		// pgx redacts the password in its message.
		return nil, fmt.Errorf("postgres: option DSN cannot be parsed: %w", err)
	}
	if opts.TLS != nil {
		cfg.TLSConfig = opts.TLS.Clone()
		cfg.Fallbacks = nil
	}
	if cfg.ConnectTimeout == 0 {
		cfg.ConnectTimeout = defaultConnectTimeout
	}
	cfg.RuntimeParams["lock_timeout"] = fmt.Sprintf("%dms", opts.LockTimeout.Milliseconds())
	// A committer's sessions end on the server when they stay idle inside
	// a transaction for half of LockTimeout, at least 5s (idleLimit).
	committerCfg := cfg.Copy()
	committerCfg.RuntimeParams["idle_in_transaction_session_timeout"] = fmt.Sprintf("%dms", idleLimit(opts.LockTimeout).Milliseconds())
	c := &core{
		opts:         opts,
		cfg:          cfg,
		committerCfg: committerCfg,
		server:       fmt.Sprintf("%s:%d/%s as %s", cfg.Host, cfg.Port, cfg.Database, cfg.User),
		redactedDSN:  redactDSN(opts.DSN),
		target:       pgx.Identifier{opts.Schema, opts.Table}.Sanitize(),
		progress:     pgx.Identifier{opts.Schema, progressTable}.Sanitize(),
		owners:       pgx.Identifier{opts.Schema, ownerTable}.Sanitize(),
		table:        opts.Schema + "." + opts.Table,
	}
	for _, col := range opts.Columns {
		c.names = append(c.names, col.Name)
	}
	cols := quoteAll(c.names)
	selected := cols
	if opts.Write == Upsert {
		keys := quoteAll(opts.Key)
		var set []string
		for _, n := range c.names {
			if !containsString(opts.Key, n) {
				set = append(set, quoteIdent(n)+" = EXCLUDED."+quoteIdent(n))
			}
		}
		if len(set) == 0 { // every column is a key: touch the row so that it counts
			for _, k := range opts.Key {
				set = append(set, quoteIdent(k)+" = EXCLUDED."+quoteIdent(k))
			}
		}
		selected = "DISTINCT ON (" + keys + ") " + cols
		c.moveTail = " ORDER BY " + keys + ", " + seqColumn + " DESC ON CONFLICT (" + keys + ") DO UPDATE SET " + strings.Join(set, ", ")
	}
	c.moveHead = "INSERT INTO " + c.target + " (" + cols + ") SELECT " + selected + " FROM "
	// The mark only rises within one incarnation; a commit of another
	// incarnation (the owner check passed: it took the sink over) replaces it.
	c.advance = "INSERT INTO " + c.progress + " AS p (sink, subtask, checkpoint, incarnation) VALUES ($1, $2, $3, $4) " +
		"ON CONFLICT (sink, subtask) DO UPDATE SET checkpoint = CASE WHEN p.incarnation = EXCLUDED.incarnation " +
		"THEN greatest(p.checkpoint, EXCLUDED.checkpoint) ELSE EXCLUDED.checkpoint END, incarnation = EXCLUDED.incarnation"
	c.markOf = "SELECT checkpoint, incarnation FROM " + c.progress + " WHERE sink = $1 AND subtask = $2"
	c.ownerOf = "SELECT incarnation, epoch FROM " + c.owners + " WHERE sink = $1"
	return c, nil
}

// sinkKey returns the key that tags everything the sink (job, name) leaves
// in the database for this table.
func (c *core) sinkKey(job, name string) string {
	sum := sha256.Sum256([]byte(job + "\n" + name + "\n" + c.table))
	return hex.EncodeToString(sum[:8])
}

// gid returns the global id of a prepared transaction; tag is the owner
// tag of the writer that prepared it, "" in committables of version 1.
func gid(key string, subtask int, id checkpoint.ID, tag string) string {
	g := fmt.Sprintf("%s%s:%d:%d", gidPrefix, key, subtask, id)
	if tag != "" {
		g += ":" + tag
	}
	return g
}

// ownerTag returns the tag that makes the global ids of one owner's
// prepared transactions differ from every other owner's: 8 hex digits of
// the SHA-256 of the incarnation, ".", the epoch. Without it a zombie and
// its successor (or two incarnations) preparing the same checkpoint id of
// one subtask would need the same global id, and the second PREPARE
// TRANSACTION would fail.
func ownerTag(o sink.Owner) string {
	sum := sha256.Sum256([]byte(o.Incarnation))
	return fmt.Sprintf("%s.%d", hex.EncodeToString(sum[:4]), o.Epoch)
}

// idleLimit is how long a committer's session may stay idle while it
// holds the sink's owner lock or the owner row (see committer.connection):
// half of lockTimeout, so that a successor waiting lockTimeout for those
// locks gets them from the server before its own wait ends — but at least
// minIdleLimit, so that a committer slowed down between two statements
// (a loaded machine) is not cut off. With a LockTimeout under twice
// minIdleLimit a successor's Fence may time out once or twice before the
// paused session is ended; the engine retries it.
func idleLimit(lockTimeout time.Duration) time.Duration {
	return max(lockTimeout/2, minIdleLimit)
}

// minIdleLimit is the least idleLimit.
const minIdleLimit = 5 * time.Second

// connect opens a connection for a writer; its errors never contain the
// password.
func (c *core) connect(ctx context.Context) (*pgx.Conn, error) {
	return c.connectWith(ctx, c.cfg)
}

// connectWith opens a connection with cfg (c.cfg or c.committerCfg).
func (c *core) connectWith(ctx context.Context, cfg *pgx.ConnConfig) (*pgx.Conn, error) {
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, c.scrub(markPermanent(fmt.Errorf("postgres: connect to %s%s: %w", c.server, tlsAdvice(err), err)))
	}
	return conn, nil
}

// setup creates the tables the sink needs, checks the target table's
// columns and, in prepared mode, the server's max_prepared_transactions and
// version. It
// returns the type OIDs of Options.Columns and, in fenced mode, the column
// definitions of staging tables. Subtasks run it concurrently: an advisory
// lock serializes the DDL (see sinkTables).
func (c *core) setup(ctx context.Context, conn *pgx.Conn) (oids []uint32, stagingCols string, err error) {
	if c.opts.Mode == Prepared {
		var n, version int
		if err := conn.QueryRow(ctx, "SELECT current_setting('max_prepared_transactions')::int, current_setting('server_version_num')::int").Scan(&n, &version); err != nil {
			return nil, "", fmt.Errorf("read max_prepared_transactions: %w", err)
		}
		if err := checkPreparedCapacity(n); err != nil {
			return nil, "", err
		}
		if version < 140000 {
			// The committer limits how long a paused process may hold the
			// owner lock with idle_session_timeout (see committer.connection).
			return nil, "", sink.Permanent(fmt.Errorf("commit mode prepared needs PostgreSQL 14 or later (for idle_session_timeout), and the server is version %d: upgrade it, or use commit mode fenced", version))
		}
	}
	err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		if err := c.sinkTables(ctx, tx); err != nil {
			return err
		}
		if c.opts.CreateTable {
			if _, err := tx.Exec(ctx, c.createTarget()); err != nil {
				return fmt.Errorf("create table %s: %w", c.table, err)
			}
		}
		types, err := c.columnTypes(ctx, tx, &oids)
		if err != nil {
			return err
		}
		if c.opts.Mode != Fenced {
			return nil
		}
		stagingCols = c.stagingColumns(types)
		return c.checkMove(ctx, tx, stagingCols)
	})
	if err != nil {
		return nil, "", err
	}
	return oids, stagingCols, nil
}

// sinkTables creates, in tx, what every sink of Options.Schema shares: the
// schema itself when Options.CreateTable is set, the progress table and
// the owner table; and it adds the incarnation column to a progress table
// of an earlier version. It first takes a transaction-level advisory lock
// named after the schema, so that the sinks and subtasks that start at once
// (on any table of the schema) run this DDL one after the other: CREATE
// ... IF NOT EXISTS alone is not safe against a concurrent CREATE of the
// same name, which fails with a unique violation in the catalog. The DDL
// that follows the lock in setup (the target table, the probe staging
// table) is serialized by the same lock.
func (c *core) sinkTables(ctx context.Context, tx pgx.Tx) error {
	if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock(hashtext($1))", reservedPrefix+"setup:"+c.opts.Schema); err != nil {
		return fmt.Errorf("take the setup lock of schema %q: %w", c.opts.Schema, err)
	}
	if c.opts.CreateTable {
		if _, err := tx.Exec(ctx, "CREATE SCHEMA IF NOT EXISTS "+quoteIdent(c.opts.Schema)); err != nil {
			return fmt.Errorf("create schema %q: %w", c.opts.Schema, err)
		}
	} else {
		var exists bool
		if err := tx.QueryRow(ctx, "SELECT to_regnamespace($1) IS NOT NULL", quoteIdent(c.opts.Schema)).Scan(&exists); err != nil {
			return err
		}
		if !exists {
			return sink.Permanent(fmt.Errorf("schema %q does not exist (Options.Schema): create it, or set Options.CreateTable to create it with the table", c.opts.Schema))
		}
	}
	if _, err := tx.Exec(ctx, "CREATE TABLE IF NOT EXISTS "+c.progress+
		" (sink text NOT NULL, subtask int NOT NULL, checkpoint bigint NOT NULL, incarnation text NOT NULL DEFAULT '', PRIMARY KEY (sink, subtask))"); err != nil {
		return fmt.Errorf("create the progress table: %w", err)
	}
	// A progress table of an earlier version lacks the incarnation: its
	// rows get '', the incarnation of checkpoints written before
	// incarnations existed. ALTER TABLE locks the table exclusively even
	// when the column exists, hence the look first.
	var migrated bool
	if err := tx.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = to_regclass($1) AND attname = 'incarnation' AND NOT attisdropped)",
		c.progress).Scan(&migrated); err != nil {
		return err
	}
	if !migrated {
		if _, err := tx.Exec(ctx, "ALTER TABLE "+c.progress+" ADD COLUMN IF NOT EXISTS incarnation text NOT NULL DEFAULT ''"); err != nil {
			return fmt.Errorf("add the incarnation column to the progress table: %w", err)
		}
	}
	if _, err := tx.Exec(ctx, "CREATE TABLE IF NOT EXISTS "+c.owners+
		" (sink text PRIMARY KEY, incarnation text NOT NULL, epoch bigint NOT NULL)"); err != nil {
		return fmt.Errorf("create the owner table: %w", err)
	}
	return nil
}

// checkMove creates a staging table in a savepoint and plans the commit
// statement on it, moving nothing, then rolls both back. This reports a
// missing CREATE privilege on the schema, a type mismatch between staging
// and target, or an upsert Key without a unique index now rather than at the
// first Prepare or commit.
func (c *core) checkMove(ctx context.Context, tx pgx.Tx, stagingCols string) error {
	probe, err := tx.Begin(ctx) // a savepoint; on error setup rolls back everything
	if err != nil {
		return err
	}
	staging := c.staging(reservedPrefix + "check")
	if _, err := probe.Exec(ctx, createStaging(staging, stagingCols)); err != nil {
		return fmt.Errorf("create a staging table: %w", err)
	}
	if _, err := probe.Exec(ctx, c.move(staging)); err != nil {
		return fmt.Errorf("check the commit statement: %w", err)
	}
	return probe.Rollback(ctx)
}

// createTarget returns the CREATE TABLE IF NOT EXISTS of the target table.
func (c *core) createTarget() string {
	defs := make([]string, len(c.opts.Columns))
	for i, col := range c.opts.Columns {
		defs[i] = quoteIdent(col.Name) + " " + col.Type
	}
	if c.opts.Write == Upsert {
		defs = append(defs, "PRIMARY KEY ("+quoteAll(c.opts.Key)+")")
	}
	return "CREATE TABLE IF NOT EXISTS " + c.target + " (" + strings.Join(defs, ", ") + ")"
}

// columnTypes reads the target table's types of Options.Columns from the
// catalog, filling oids, and fails naming the table or column missing.
func (c *core) columnTypes(ctx context.Context, tx pgx.Tx, oids *[]uint32) ([]string, error) {
	rows, err := tx.Query(ctx, `SELECT a.attname, a.atttypid::int8, format_type(a.atttypid, a.atttypmod)
		FROM pg_attribute a WHERE a.attrelid = to_regclass($1) AND a.attnum > 0 AND NOT a.attisdropped`, c.target)
	if err != nil {
		return nil, err
	}
	type colType struct {
		oid uint32
		typ string
	}
	found := map[string]colType{}
	for rows.Next() {
		var (
			name, typ string
			oid       int64
		)
		if err := rows.Scan(&name, &oid, &typ); err != nil {
			return nil, err
		}
		found[name] = colType{uint32(oid), typ}
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if len(found) == 0 {
		return nil, sink.Permanent(fmt.Errorf("table %s does not exist: create it, or set Options.CreateTable and the column types", c.table))
	}
	types := make([]string, len(c.names))
	*oids = make([]uint32, len(c.names))
	for i, n := range c.names {
		ct, ok := found[n]
		if !ok {
			return nil, sink.Permanent(fmt.Errorf("table %s has no column %q (Options.Columns[%d]): add the column or fix the name (names are case-sensitive)", c.table, n, i))
		}
		types[i], (*oids)[i] = ct.typ, ct.oid
	}
	return types, nil
}

// stagingColumns returns the column definitions of a staging table: the
// target's column types, after the sequence number in Upsert mode. No
// constraints and no index: the rows are checked when they reach the target.
func (c *core) stagingColumns(types []string) string {
	var defs []string
	if c.opts.Write == Upsert {
		defs = append(defs, seqColumn+" bigint NOT NULL")
	}
	for i, n := range c.names {
		defs = append(defs, quoteIdent(n)+" "+types[i])
	}
	return strings.Join(defs, ", ")
}

// createStaging returns the CREATE TABLE of a staging table. Autovacuum is
// off: the table is written by one transaction, read once and dropped, and
// an autovacuum worker holding it would delay the commit's DROP.
func createStaging(staging, cols string) string {
	return "CREATE TABLE " + staging + " (" + cols + ") WITH (autovacuum_enabled = off, toast.autovacuum_enabled = off)"
}

// stagingName returns the name of the staging table of transaction txn of
// the sink with key.
func stagingName(key string, txn int64) string {
	return fmt.Sprintf("%s%s_%016x", stagingPrefix, key, txn)
}

// staging quotes schema.name of a staging table.
func (c *core) staging(name string) string {
	return pgx.Identifier{c.opts.Schema, name}.Sanitize()
}

// move returns the commit statement that inserts the rows of the quoted
// staging table into the target table.
func (c *core) move(staging string) string {
	return c.moveHead + staging + c.moveTail
}

// checkPreparedCapacity fails when the server cannot prepare transactions.
func checkPreparedCapacity(maxPrepared int) error {
	if maxPrepared > 0 {
		return nil
	}
	return sink.Permanent(errors.New("commit mode prepared needs prepared transactions, but the server has max_prepared_transactions = 0: " +
		"set it in postgresql.conf to at least twice the sink's parallelism (e.g. 64) and restart the server, or use Options.Mode = postgres.Fenced"))
}

// quoteIdent quotes one identifier.
func quoteIdent(s string) string { return pgx.Identifier{s}.Sanitize() }

// quoteAll quotes identifiers and joins them with commas.
func quoteAll(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = quoteIdent(n)
	}
	return strings.Join(q, ", ")
}

func containsString(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// committable is the decoded form of what Prepare returns.
type committable struct {
	mode       CommitMode
	subtask    int
	checkpoint checkpoint.ID
	id         uint64 // fenced: the staging transaction id; prepared: the server's transaction id
	tag        string // prepared: the owner tag in the global id ("" in version 1)
}

// encode returns version 2: the version, the mode, then subtask, checkpoint
// and id as uvarints, then the tag's length as a uvarint and the tag.
func (c committable) encode() []byte {
	b := append(make([]byte, 0, 2+4*binary.MaxVarintLen64+len(c.tag)), committableVersion, byte(c.mode))
	b = binary.AppendUvarint(b, uint64(c.subtask))
	b = binary.AppendUvarint(b, uint64(c.checkpoint))
	b = binary.AppendUvarint(b, c.id)
	b = binary.AppendUvarint(b, uint64(len(c.tag)))
	return append(b, c.tag...)
}

// decodeCommittable parses what committable.encode returned, or version 1,
// which ends after the id.
func decodeCommittable(data []byte) (committable, bool) {
	if len(data) < 2 || (data[0] != 1 && data[0] != committableVersion) || (CommitMode(data[1]) != Fenced && CommitMode(data[1]) != Prepared) {
		return committable{}, false
	}
	c := committable{mode: CommitMode(data[1])}
	rest := data[2:]
	n := 3
	if data[0] == committableVersion {
		n = 4
	}
	vals := make([]uint64, n)
	for i := range vals {
		v, n := binary.Uvarint(rest)
		if n <= 0 {
			return committable{}, false
		}
		vals[i], rest = v, rest[n:]
	}
	if vals[0] > math.MaxInt32 || vals[1] == 0 || vals[1] > math.MaxInt64 || vals[2] > math.MaxInt64 {
		return committable{}, false
	}
	if data[0] == committableVersion {
		if vals[3] > maxTagLen || uint64(len(rest)) != vals[3] || strings.ContainsAny(string(rest), "':") {
			return committable{}, false
		}
		c.tag, rest = string(rest), nil
	}
	if len(rest) != 0 {
		return committable{}, false
	}
	c.subtask, c.checkpoint, c.id = int(vals[0]), checkpoint.ID(vals[1]), vals[2]
	return c, true
}
