package postgres

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/exactlyonce/exactly/checkpoint"
	"github.com/exactlyonce/exactly/sink"
	"github.com/jackc/pgx/v5"
)

// benchRows is the number of rows per checkpoint (per transaction).
const benchRows = 100_000

// BenchmarkSink measures rows/s into PostgreSQL: each iteration writes
// benchRows rows in batches of 1000 and makes them visible, through the
// sink in each commit mode (Write, Prepare, Commit) and, as at-least-once
// baselines, through plain COPYs or multi-row INSERTs of 1000 rows in one
// transaction.
func BenchmarkSink(b *testing.B) {
	batch := recs(0, 1000)
	insert := "INSERT INTO bench_plain (id, name) VALUES "
	for i := range len(batch) {
		if i > 0 {
			insert += ", "
		}
		insert += fmt.Sprintf("($%d, $%d)", 2*i+1, 2*i+2)
	}
	// Each baseline writes chunk converted records at a time into the open
	// transaction: COPY in chunks of the sink's DefaultFlushRows, INSERT in
	// chunks of one batch (the protocol's limit is 65535 parameters).
	baselines := map[string]struct {
		chunk int
		write func(ctx context.Context, tx pgx.Tx, rows [][]any) error
	}{
		"plain-copy": {DefaultFlushRows, func(ctx context.Context, tx pgx.Tx, rows [][]any) error {
			_, err := tx.CopyFrom(ctx, pgx.Identifier{"bench_plain"}, []string{"id", "name"}, pgx.CopyFromRows(rows))
			return err
		}},
		"plain-insert": {len(batch), func(ctx context.Context, tx pgx.Tx, rows [][]any) error {
			_, err := tx.Exec(ctx, insert, slices.Concat(rows...)...)
			return err
		}},
	}
	for name, base := range baselines {
		b.Run(name, func(b *testing.B) {
			ctx := context.Background()
			conn := db(b)
			freshTable(b, conn, "bench_plain", Fenced)
			if _, err := conn.Exec(ctx, "CREATE TABLE bench_plain (id bigint, name text)"); err != nil {
				b.Fatal(err)
			}
			rows := make([][]any, 0, base.chunk)
			for b.Loop() {
				err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
					for range benchRows / base.chunk {
						// Convert the records every time, as a writer must.
						rows = rows[:0]
						for range base.chunk / len(batch) {
							for _, r := range batch {
								rows = append(rows, recRow(r, nil))
							}
						}
						if err := base.write(ctx, tx, rows); err != nil {
							return err
						}
					}
					return nil
				})
				if err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(benchRows*b.N)/b.Elapsed().Seconds(), "rows/s")
		})
	}
	for _, mode := range modes {
		b.Run(mode.String(), func(b *testing.B) {
			ctx := context.Background()
			s := newTestSink(b, freshTable(b, db(b), "bench_"+mode.String(), mode))
			w := newWriter(b, s, "bench", 0)
			c := newCommitter(b, s, "bench")
			cp := checkpoint.ID(0)
			for b.Loop() {
				for range benchRows / len(batch) {
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
			b.ReportMetric(float64(benchRows*b.N)/b.Elapsed().Seconds(), "rows/s")
		})
	}
}
