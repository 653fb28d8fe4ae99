package postgres

import (
	"crypto/tls"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"
)

// CommitMode chooses how a sink makes a checkpoint's rows durable and invisible.
type CommitMode int

const (
	// Fenced, the default, stages each checkpoint's rows in a staging
	// table of their own and moves them into the target table at commit,
	// dropping the staging table and recording the checkpoint in a progress
	// table in the same transaction. It needs no server settings
	// and supports both write modes; it writes every row twice.
	Fenced CommitMode = iota
	// Prepared writes rows into the target table inside a transaction that
	// is prepared (PREPARE TRANSACTION) at the checkpoint and committed
	// (COMMIT PREPARED) when the checkpoint completes. It writes every row
	// once but needs max_prepared_transactions > 0 on the server, keeps
	// locks until the commit, and supports only [Append].
	Prepared
)

// String returns "fenced" or "prepared".
func (m CommitMode) String() string {
	switch m {
	case Fenced:
		return "fenced"
	case Prepared:
		return "prepared"
	}
	return fmt.Sprintf("CommitMode(%d)", int(m))
}

// WriteMode chooses how rows reach the target table.
type WriteMode int

const (
	// Append, the default, inserts every record as a new row.
	Append WriteMode = iota
	// Upsert inserts a row or, when a row with the same [Options.Key]
	// exists, updates its other columns (INSERT ... ON CONFLICT DO UPDATE).
	// The last record of a key in a checkpoint wins. The target table needs
	// a unique index or primary key on exactly the Key columns.
	Upsert
)

// String returns "append" or "upsert".
func (m WriteMode) String() string {
	switch m {
	case Append:
		return "append"
	case Upsert:
		return "upsert"
	}
	return fmt.Sprintf("WriteMode(%d)", int(m))
}

// DefaultFlushRows is the default of [Options.FlushRows].
const DefaultFlushRows = 10000

// DefaultLockTimeout is the default of [Options.LockTimeout].
const DefaultLockTimeout = 30 * time.Second

// Column is one column of the target table.
type Column struct {
	// Name is the column's name, any PostgreSQL identifier (it is quoted).
	Name string
	// Type is the column's PostgreSQL type, e.g. "bigint", "text",
	// "numeric(12, 2)", "timestamp with time zone". It is needed only when
	// Options.CreateTable creates the table; otherwise the table's own types
	// are used.
	Type string
}

// Options configures a PostgreSQL [Sink].
type Options struct {
	// DSN is the connection string, as a URL
	// (postgres://user:password@host:port/db?sslmode=verify-full) or in
	// key=value form; libpq's environment variables (PGHOST, PGPASSWORD,
	// ...) fill in what it omits. TLS is configured here with sslmode,
	// sslrootcert, sslcert and sslkey. The password never appears in
	// errors or logs.
	DSN string
	// TLS, when set, replaces the TLS configuration derived from the DSN
	// (and disables the DSN's plaintext fallback). Leave it nil to use the
	// DSN's ssl* parameters.
	TLS *tls.Config
	// Schema holds the target table, the staging tables and the progress
	// table. Default "public".
	Schema string
	// Table is the target table. It must not start with "_exactly_", the
	// prefix of the sink's own tables.
	Table string
	// Columns are the target columns that records fill, in the order the
	// sink's toRow function appends their values. At least one. The table
	// may have more columns (with defaults).
	Columns []Column
	// CreateTable creates the target table from Columns (every Type set)
	// when it is missing, with a primary key on Key in Upsert mode. Leave it
	// false for tables managed by migrations: the sink then fails at start,
	// naming the table, when it is missing.
	CreateTable bool
	// Mode is the commit mode. Default [Fenced].
	Mode CommitMode
	// Write is the write mode. Default [Append].
	Write WriteMode
	// Key lists the columns that identify a row in Upsert mode; each must
	// be one of Columns. Must be empty in Append mode.
	Key []string
	// FlushRows is how many rows a writer buffers before it sends them to
	// the server (with COPY), inside the checkpoint's open transaction.
	// 0 means DefaultFlushRows. Larger values use more memory; smaller ones
	// send smaller COPY batches.
	FlushRows int
	// LockTimeout bounds every wait for a lock in the sink's sessions
	// (the server's lock_timeout, set on each connection; it overrides one
	// in the DSN). A wait that lasts longer fails the statement with a
	// retryable error, so the job fails over instead of hanging: in
	// Prepared mode a write that conflicts on a unique key with the
	// previous checkpoint's still-prepared transaction would otherwise wait
	// for ever, since the commit that releases it runs on the same task;
	// recovery commits that transaction. 0 means DefaultLockTimeout (30s).
	// Keep it above the longest a commit of one checkpoint takes (a second
	// committer of the same transaction waits for the first), and above
	// the longest DDL that other sessions run on the table.
	LockTimeout time.Duration
}

// typeRE accepts type names such as "bigint", "double precision",
// "numeric(12, 2)", "text[]" and nothing that could alter the DDL.
var typeRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_ ]*( ?\( ?[0-9]+ ?(, ?[0-9]+ ?)?\))?( ?\[\])*$`)

// validate checks o and fills in defaults. Every error names the field, the
// value and the fix.
func (o *Options) validate() error {
	if o.Schema == "" {
		o.Schema = "public"
	}
	if o.FlushRows == 0 {
		o.FlushRows = DefaultFlushRows
	}
	if o.LockTimeout == 0 {
		o.LockTimeout = DefaultLockTimeout
	}
	type check struct {
		bad   bool
		field string
		value any
		fix   string
	}
	checks := []check{
		{o.DSN == "", "DSN", `""`, "set a connection string such as postgres://user@host:5432/db (put the password in PGPASSWORD or ~/.pgpass if it must stay out of configuration)"},
		{!validIdent(o.Schema), "Schema", quoted(o.Schema), "use a non-empty name of at most 63 bytes without NUL"},
		{!validIdent(o.Table) || strings.HasPrefix(o.Table, reservedPrefix), "Table", quoted(o.Table),
			fmt.Sprintf("use a non-empty name of at most 63 bytes that does not start with %q", reservedPrefix)},
		{len(o.Columns) == 0, "Columns", "[]", "list at least one column of the target table"},
		{o.Mode != Fenced && o.Mode != Prepared, "Mode", o.Mode, "use postgres.Fenced or postgres.Prepared"},
		{o.Write != Append && o.Write != Upsert, "Write", o.Write, "use postgres.Append or postgres.Upsert"},
		{o.Mode == Prepared && o.Write == Upsert, "Write", o.Write,
			"use Mode Fenced for upserts: a prepared transaction keeps its row locks until COMMIT PREPARED, which runs after the next checkpoint's writes may need the same rows, so the writer would wait for itself"},
		{o.Write == Upsert && len(o.Key) == 0, "Key", "[]", "list the columns of the target table's primary key or unique index for Upsert"},
		{o.Write == Append && len(o.Key) > 0, "Key", o.Key, "leave Key empty in Append mode, or set Write to Upsert"},
		{o.FlushRows < 0, "FlushRows", o.FlushRows, fmt.Sprintf("use a positive number of rows, or 0 for the default %d", DefaultFlushRows)},
		{o.LockTimeout < time.Millisecond, "LockTimeout", o.LockTimeout,
			fmt.Sprintf("use a duration of at least 1ms (the server counts milliseconds), or 0 for the default %s", DefaultLockTimeout)},
	}
	seen := map[string]int{}
	for i, c := range o.Columns {
		field := fmt.Sprintf("Columns[%d]", i)
		j, dup := seen[c.Name]
		checks = append(checks,
			check{!validIdent(c.Name) || strings.HasPrefix(c.Name, reservedPrefix), field + ".Name", quoted(c.Name),
				fmt.Sprintf("use a non-empty name of at most 63 bytes that does not start with %q", reservedPrefix)},
			check{dup, field + ".Name", quoted(c.Name), fmt.Sprintf("remove it: Columns[%d] has the same name", j)},
			check{c.Type != "" && !typeRE.MatchString(c.Type), field + ".Type", quoted(c.Type), `use a PostgreSQL type name such as "bigint", "text" or "numeric(12, 2)"`},
			check{o.CreateTable && c.Type == "", field + ".Type", `""`, "set the column's type, which CreateTable needs to create the table"},
		)
		seen[c.Name] = i
	}
	for i, k := range o.Key {
		_, ok := seen[k]
		checks = append(checks, check{!ok || slices.Index(o.Key, k) != i, fmt.Sprintf("Key[%d]", i), quoted(k), "name each column once, and only columns listed in Columns"})
	}
	for _, c := range checks {
		if c.bad {
			return fmt.Errorf("postgres: option %s = %v is invalid: %s", c.field, c.value, c.fix)
		}
	}
	return nil
}

// validIdent reports whether s can be used as a quoted identifier without
// being truncated by the server.
func validIdent(s string) bool {
	return s != "" && len(s) <= 63 && !strings.ContainsRune(s, 0)
}

func quoted(s string) string { return fmt.Sprintf("%q", s) }
