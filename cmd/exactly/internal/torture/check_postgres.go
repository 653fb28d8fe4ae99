package torture

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
)

// CheckPostgres checks a table written by the PostgreSQL sink named
// sinkName of the job named job, in schema public: its rows in insertion
// order (the table's pos column, a bigserial) form one ordered stream. The
// sink's staging tables (fenced mode) and prepared transactions (prepared
// mode) left after the job ended count as lingering.
func CheckPostgres(ctx context.Context, x *Expected, name, dsn, table string, jobs []string, sinkName string) (SinkResult, error) {
	res := SinkResult{Sink: name}
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return res, err
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, "SELECT id, key, seq, amount, total, gaps FROM "+pgx.Identifier{table}.Sanitize()+" ORDER BY pos")
	if err != nil {
		return res, err
	}
	var stream []Out
	for rows.Next() {
		var o Out
		if err := rows.Scan(&o.ID, &o.Key, &o.Seq, &o.Amount, &o.Total, &o.Gaps); err != nil {
			return res, err
		}
		stream = append(stream, o)
	}
	if err := rows.Err(); err != nil {
		return res, err
	}
	// The sink tags what it leaves behind with its key (connectors/postgres).
	for _, job := range jobs {
		key := sinkKey(job, sinkName, table)
		var staging, prepared int
		err = conn.QueryRow(ctx, `SELECT
		(SELECT count(*) FROM pg_tables WHERE schemaname = 'public' AND starts_with(tablename, '_exactly_stage_' || $1 || '_')),
		(SELECT count(*) FROM pg_prepared_xacts WHERE starts_with(gid, 'exactly:' || $1 || ':'))`, key).Scan(&staging, &prepared)
		if err != nil {
			return res, err
		}
		if staging+prepared > 0 {
			res.Lingering += staging + prepared
			res.example("job %s: %d staging tables and %d prepared transactions left", job, staging, prepared)
		}
	}
	return x.Check(res, [][]Out{stream}), nil
}

// sinkKey returns the key the PostgreSQL sink named sinkName of job tags
// its staging tables, prepared transactions and rows with, for table
// (connectors/postgres).
func sinkKey(job, sinkName, table string) string {
	sum := sha256.Sum256([]byte(job + "\n" + sinkName + "\npublic." + table))
	return hex.EncodeToString(sum[:8])
}

// createTable creates the table the PostgreSQL sinks write to: the
// columns of Out and pos, a bigserial giving the insertion order.
func createTable(ctx context.Context, dsn, table string) error {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, fmt.Sprintf("CREATE TABLE %s (id bigint, key text, seq bigint, amount bigint, total bigint, gaps bigint, pos bigserial)", pgx.Identifier{table}.Sanitize()))
	return err
}

// dropTables drops the run's tables and deletes the rows its sinks left in
// the shared progress and owner tables (connectors/postgres), when they
// exist.
func dropTables(ctx context.Context, dsn string, jobs []string, tables ...string) error {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	var keys []string
	for _, t := range tables {
		for _, s := range []string{sinkFenced, sinkPrepared} {
			for _, job := range jobs {
				keys = append(keys, sinkKey(job, s, t))
			}
		}
	}
	// After a failed run, the sinks may have left prepared transactions
	// (which hold locks on the tables) and staging tables: remove them first.
	if _, err := conn.Exec(ctx, "SET lock_timeout = '10s'"); err != nil {
		return err
	}
	rows, err := conn.Query(ctx, `SELECT gid FROM pg_prepared_xacts WHERE split_part(gid, ':', 2) = ANY($1) AND starts_with(gid, 'exactly:')
		UNION ALL SELECT 'table:' || tablename FROM pg_tables WHERE schemaname = 'public' AND split_part(tablename, '_', 4) = ANY($1) AND starts_with(tablename, '_exactly_stage_')`, keys)
	if err != nil {
		return err
	}
	leftovers, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return err
	}
	for _, l := range leftovers {
		stmt := "ROLLBACK PREPARED '" + l + "'"
		if t, ok := strings.CutPrefix(l, "table:"); ok {
			stmt = "DROP TABLE IF EXISTS " + pgx.Identifier{t}.Sanitize()
		}
		if _, err := conn.Exec(ctx, stmt); err != nil {
			return fmt.Errorf("%s: %w", stmt, err)
		}
	}
	for _, t := range tables {
		if _, err := conn.Exec(ctx, "DROP TABLE IF EXISTS "+pgx.Identifier{t}.Sanitize()); err != nil {
			return err
		}
	}
	for _, shared := range []string{"_exactly_progress", "_exactly_owners"} {
		var exists bool
		if err := conn.QueryRow(ctx, "SELECT to_regclass($1) IS NOT NULL", "public."+shared).Scan(&exists); err != nil {
			return err
		}
		if exists {
			if _, err := conn.Exec(ctx, "DELETE FROM "+pgx.Identifier{shared}.Sanitize()+" WHERE sink = ANY($1)", keys); err != nil {
				return fmt.Errorf("delete the run's rows from %s: %w", shared, err)
			}
		}
	}
	return nil
}
