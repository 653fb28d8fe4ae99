package postgres

import (
	"context"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/exactlyonce/exactly/connectors/generator"
	"github.com/exactlyonce/exactly/internal/crashtest"
	"github.com/exactlyonce/exactly/internal/crashtest/crashtesting"
	"github.com/exactlyonce/exactly/internal/testenv"
	"github.com/exactlyonce/exactly/state"
	"github.com/exactlyonce/exactly/stream"
	"github.com/jackc/pgx/v5"
)

const (
	crashEvents = 3000 // generated values 0 ... crashEvents-1
	crashKeys   = 7    // key of value v: v % crashKeys
	crashRate   = 400  // events per second, so that a run spans many kills
	// envCrashDir passes the checkpoint directory to the child processes.
	envCrashDir = "EXACTLY_PG_CRASH_DIR"
	// envCrashDSN passes the sinks' connection string to the child processes.
	envCrashDSN = "EXACTLY_PG_CRASH_DSN"
	// pgRestartEvery is the pause between two immediate server restarts.
	pgRestartEvery = 1500 * time.Millisecond
	minPGRestarts  = 3
)

// total is the running total of a key after one event.
type total struct {
	Key, Value, Sum, N int64
}

func totalRow(v total, row []any) []any    { return append(row, v.Key, v.Value, v.Sum, v.N) }
func keyTotalRow(v total, row []any) []any { return append(row, v.Key, v.Sum, v.N) }

// crashJob reads generated values, keeps a running total and count per key,
// and writes every event's total to the table <name>_events (append) and,
// in fenced mode, each key's latest total to <name>_totals (upsert).
func crashJob(t testing.TB, name string, mode CommitMode, dsn string) *stream.Job {
	src, err := generator.New(generator.Options{Count: crashEvents, Splits: 4, Rate: crashRate}, func(i uint64) int64 { return int64(i) })
	if err != nil {
		t.Fatal(err)
	}
	j := stream.New(name)
	nums := stream.Source(j, "numbers", src, stream.Parallelism(2))
	keyed := stream.KeyBy(nums, func(v int64) int64 { return v % crashKeys }, state.Int64Codec{})
	totals := stream.Process(keyed, "totals", func(ctx *stream.Context[int64]) (stream.ProcessFunc[int64, int64, total], error) {
		sum, err := state.NewValueState(ctx.State(), "sum", state.Int64Codec{})
		if err != nil {
			return stream.ProcessFunc[int64, int64, total]{}, err
		}
		n, err := state.NewValueState(ctx.State(), "n", state.Int64Codec{})
		return stream.ProcessFunc[int64, int64, total]{
			Process: func(ctx *stream.Context[int64], v int64, o *stream.Output[total]) error {
				s, _ := sum.Value()
				c, _ := n.Value()
				sum.Update(s + v)
				n.Update(c + 1)
				o.Emit(total{Key: ctx.Key(), Value: v, Sum: s + v, N: c + 1})
				return nil
			},
		}, err
	}, stream.Parallelism(2))
	events, err := NewSink(Options{
		DSN: dsn, Table: name + "_events", Mode: mode, CreateTable: true,
		Columns: []Column{{"key", "bigint"}, {"value", "bigint"}, {"sum", "bigint"}, {"n", "bigint"}},
	}, totalRow)
	if err != nil {
		t.Fatal(err)
	}
	stream.SinkTo(totals, "events", events)
	if mode == Fenced {
		latest, err := NewSink(Options{
			DSN: dsn, Table: name + "_totals", Mode: mode, CreateTable: true, Write: Upsert, Key: []string{"key"},
			Columns: []Column{{"key", "bigint"}, {"sum", "bigint"}, {"n", "bigint"}},
		}, keyTotalRow)
		if err != nil {
			t.Fatal(err)
		}
		stream.SinkTo(totals, "latest", latest)
	}
	return j
}

func TestCrashFenced(t *testing.T)   { crashTest(t, "pgcrash_fenced", Fenced, testenv.Postgres) }
func TestCrashPrepared(t *testing.T) { crashTest(t, "pgcrash_prepared", Prepared, testenv.Postgres) }

// TestCrashFencedTLS is TestCrashFenced over TLS: the sinks log in as the
// test server's TLS-only role with sslmode=verify-full.
func TestCrashFencedTLS(t *testing.T) { crashTest(t, "pgcrash_fenced_tls", Fenced, verifyFullDSN) }

// verifyFullDSN returns the DSN of the test server's TLS-only role with
// sslmode=verify-full and the server's CA.
func verifyFullDSN(t testing.TB) string {
	ca := testenv.PostgresTLSCA(t)
	u, err := url.Parse(testenv.Postgres(t))
	if err != nil {
		t.Fatal(err)
	}
	return "postgres://exactly_tls:exactly@localhost:" + u.Port() + "/" + strings.TrimPrefix(u.Path, "/") + "?sslmode=verify-full&sslrootcert=" + url.QueryEscape(ca)
}

// crashTest runs crashJob, its sinks connecting with the DSN dsn returns,
// in child processes that are SIGKILLed at least 20 times, while
// PostgreSQL is shut down immediately and restarted every pgRestartEvery
// (the test has the server to itself: testenv.Exclusive), then checks the
// tables against the expected totals.
func crashTest(t *testing.T, name string, mode CommitMode, dsn func(testing.TB) string) {
	if crashtest.IsChild() {
		opts := stream.Options{
			CheckpointDir:      os.Getenv(envCrashDir),
			CheckpointInterval: 50 * time.Millisecond,
			CommitRetries:      6,
			// Ride over server restarts: many attempts, short backoff.
			Restart: stream.RestartStrategy{MaxAttempts: 1000, InitialBackoff: 20 * time.Millisecond, MaxBackoff: 500 * time.Millisecond},
			Probe:   crashtest.Probe(),
		}
		if err := crashJob(t, name, mode, os.Getenv(envCrashDSN)).Run(context.Background(), opts); err != nil {
			t.Fatal(err)
		}
		return
	}
	testenv.Exclusive(t, testenv.PostgresService)
	conn := db(t)
	dropTables(t, conn, append(sinkKeys(name+"_events", name, "events"), sinkKeys(name+"_totals", name, "latest")...), name+"_events", name+"_totals")
	// Every run is a new incarnation of the job: forget the last run's.
	forgetSinks(t, conn, "public", name+"_events", name, "events")
	forgetSinks(t, conn, "public", name+"_totals", name, "latest")
	stopRestarts := testenv.RestartEvery(t, testenv.PostgresService, pgRestartEvery, "restart-immediate")
	rep := crashtesting.Run(t, crashtest.Options{Kills: crashtesting.Sized(20, 60), Env: []string{envCrashDir + "=" + t.TempDir(), envCrashDSN + "=" + dsn(t)}})
	restarts := stopRestarts()
	t.Log(rep)
	t.Logf("PostgreSQL immediate shutdowns and restarts during the run: %d", restarts)
	if restarts < minPGRestarts {
		t.Errorf("only %d PostgreSQL restarts happened during the run, want at least %d", restarts, minPGRestarts)
	}

	conn = db(t) // the old connection died with the server
	checkCrashTables(t, conn, name, mode)
}

// checkCrashTables compares the tables with the totals of a failure-free
// run, and checks that nothing is left in staging or prepared.
func checkCrashTables(t *testing.T, conn *pgx.Conn, name string, mode CommitMode) {
	events := quoteIdent(name + "_events")
	if got := ints(t, conn, "SELECT count(*) FROM "+events)[0]; got != crashEvents {
		t.Errorf("%s has %d rows, want %d", events, got, crashEvents)
	}
	if dups := ints(t, conn, "SELECT value FROM "+events+" GROUP BY value HAVING count(*) > 1 ORDER BY value LIMIT 10"); len(dups) > 0 {
		t.Errorf("values written more than once: %v", dups)
	}
	if bad := ints(t, conn, "SELECT v FROM generate_series(0, $1::bigint - 1) v WHERE NOT EXISTS (SELECT 1 FROM "+events+" e WHERE e.value = v) LIMIT 10", crashEvents); len(bad) > 0 {
		t.Errorf("values missing: %v", bad)
	}
	// Each key's events carry the counts 1..n once each, and the row with
	// count n carries the key's full sum.
	wantSum := map[int64]int64{}
	wantN := map[int64]int64{}
	for v := range int64(crashEvents) {
		wantSum[v%crashKeys] += v
		wantN[v%crashKeys]++
	}
	rows, err := conn.Query(context.Background(),
		"SELECT key, count(DISTINCT n), max(n), (array_agg(sum ORDER BY n DESC))[1] FROM "+events+" GROUP BY key ORDER BY key")
	if err != nil {
		t.Fatal(err)
	}
	type keyStat struct{ Key, Distinct, MaxN, Final int64 }
	stats, err := pgx.CollectRows(rows, pgx.RowToStructByPos[keyStat])
	if err != nil {
		t.Fatal(err)
	}
	if len(stats) != crashKeys {
		t.Errorf("%d keys in %s, want %d", len(stats), events, crashKeys)
	}
	for _, s := range stats {
		if s.Distinct != wantN[s.Key] || s.MaxN != wantN[s.Key] || s.Final != wantSum[s.Key] {
			t.Errorf("key %d: %d distinct counts up to %d, final sum %d; want %d counts, final sum %d", s.Key, s.Distinct, s.MaxN, s.Final, wantN[s.Key], wantSum[s.Key])
		}
	}
	sinks := map[string]string{"events": name + "_events"}
	if mode == Fenced {
		sinks["latest"] = name + "_totals"
		rows, err := conn.Query(context.Background(), "SELECT key, sum, n FROM "+quoteIdent(name+"_totals")+" ORDER BY key")
		if err != nil {
			t.Fatal(err)
		}
		type keyTotal struct{ Key, Sum, N int64 }
		got, err := pgx.CollectRows(rows, pgx.RowToStructByPos[keyTotal])
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != crashKeys {
			t.Errorf("%d keys in the totals table, want %d", len(got), crashKeys)
		}
		for _, g := range got {
			if g.Sum != wantSum[g.Key] || g.N != wantN[g.Key] {
				t.Errorf("totals of key %d: sum %d n %d, want sum %d n %d", g.Key, g.Sum, g.N, wantSum[g.Key], wantN[g.Key])
			}
		}
	}
	for sinkName, table := range sinks {
		if staged, prepared := leftovers(t, conn, name, table, sinkName); staged != 0 || prepared != 0 {
			t.Errorf("sink %s left %d staged rows and %d prepared transactions behind", sinkName, staged, prepared)
		}
	}
}
