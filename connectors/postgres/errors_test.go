package postgres

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/exactlyonce/exactly/connectors/generator"
	"github.com/exactlyonce/exactly/internal/testenv"
	"github.com/exactlyonce/exactly/sink"
	"github.com/exactlyonce/exactly/stream"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// freshSchema drops schema with everything in it, and creates it again
// unless create is false.
func freshSchema(t *testing.T, conn *pgx.Conn, schema string, create bool) {
	t.Helper()
	ctx := context.Background()
	if _, err := conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+quoteIdent(schema)+" CASCADE"); err != nil {
		t.Fatal(err)
	}
	if create {
		if _, err := conn.Exec(ctx, "CREATE SCHEMA "+quoteIdent(schema)); err != nil {
			t.Fatal(err)
		}
	}
}

// TestConcurrentSetupOnFreshSchema (issue 10, case 13): fenced sinks on
// different tables of an empty schema set up at once; all create the
// shared progress and owner tables.
func TestConcurrentSetupOnFreshSchema(t *testing.T) {
	ctx := context.Background()
	conn := db(t)
	const schema, sinks, rounds = "exactly_setup_race", 6, 3
	for round := range rounds {
		freshSchema(t, conn, schema, true)
		errs := make([]error, sinks)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range sinks {
			opts := Options{DSN: testenv.Postgres(t), Schema: schema, Table: fmt.Sprint("t", i), CreateTable: true,
				Columns: []Column{{"id", "bigint"}, {"name", "text"}}}
			s := newTestSink(t, opts)
			wg.Go(func() {
				<-start
				w, err := s.NewWriter(ctx, sink.WriterInfo{Job: "test", Sink: "out", Owner: testOwner})
				if err == nil {
					err = w.Close()
				}
				errs[i] = err
			})
		}
		close(start)
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			t.Fatalf("round %d: concurrent setup: %v", round, err)
		}
	}
	freshSchema(t, conn, schema, false)
}

// TestMissingSchema (issue 10, case 14): CreateTable creates a missing
// schema; without it, a missing schema is a permanent error that says so.
func TestMissingSchema(t *testing.T) {
	ctx := context.Background()
	conn := db(t)
	const schema = "exactly_missing_schema"
	for _, mode := range modes {
		t.Run(mode.String(), func(t *testing.T) {
			freshSchema(t, conn, schema, false)
			opts := Options{DSN: testenv.Postgres(t), Schema: schema, Table: "t", Mode: mode,
				Columns: []Column{{"id", "bigint"}, {"name", "text"}}}
			_, err := newTestSink(t, opts).NewWriter(ctx, sink.WriterInfo{Job: "test", Sink: "out", Owner: testOwner})
			t.Logf("NewWriter without CreateTable: %v", err)
			if !sink.IsPermanent(err) || !strings.Contains(err.Error(), `schema "`+schema+`" does not exist`) || !strings.Contains(err.Error(), "CreateTable") {
				t.Errorf("NewWriter without CreateTable = %v, want a permanent error naming the schema and Options.CreateTable", err)
			}
			opts.CreateTable = true
			s := newTestSink(t, opts)
			c := openCommitter(t, s, sink.CommitterInfo{Job: "test", Sink: "out", Owner: testOwner})
			if err := c.Fence(ctx, 0); err != nil { // the engine fences before the writers start
				t.Fatalf("Fence with CreateTable on a missing schema: %v", err)
			}
			w, err := s.NewWriter(ctx, sink.WriterInfo{Job: "test", Sink: "out", Owner: testOwner})
			if err != nil {
				t.Fatalf("NewWriter with CreateTable on a missing schema: %v", err)
			}
			defer w.Close()
			if err := c.Commit(ctx, writePrepare(t, w, 0, 1, recs(0, 2))); err != nil {
				t.Fatal(err)
			}
			if n := ints(t, conn, "SELECT count(*) FROM "+pgx.Identifier{schema, "t"}.Sanitize())[0]; n != 2 {
				t.Fatalf("%d rows in %s.t, want 2", n, schema)
			}
		})
	}
	freshSchema(t, conn, schema, false)
}

func TestErrorClasses(t *testing.T) {
	for code, permanent := range map[string]bool{
		"3F000": true,  // invalid schema name
		"3D000": true,  // no such database
		"42P01": true,  // undefined table
		"42501": true,  // insufficient privilege
		"22003": true,  // numeric value out of range
		"23505": true,  // unique violation
		"28P01": true,  // wrong password
		"0A000": true,  // feature not supported
		"XX001": true,  // data corrupted
		"08006": false, // connection failure
		"40001": false, // serialization failure
		"40P01": false, // deadlock
		"53100": false, // disk full
		"53300": false, // too many connections
		"55P03": false, // lock not available (lock_timeout)
		"57P01": false, // admin shutdown
		"57P03": false, // cannot connect now (starting up)
		"58030": false, // I/O error
		"25006": false, // read-only transaction (a standby during a failover)
	} {
		err := markPermanent(fmt.Errorf("wrapped: %w", &pgconn.PgError{Code: code}))
		if sink.IsPermanent(err) != permanent {
			t.Errorf("SQLSTATE %s: permanent = %v, want %v", code, sink.IsPermanent(err), permanent)
		}
	}
	if sink.IsPermanent(markPermanent(errors.New("read tcp: connection reset by peer"))) {
		t.Error("a network error is classed permanent")
	}
}

// TestRedactionKeepsMessagesReadable (issue 10, case 15): with a password
// equal to the user and database names, errors still name the server and
// the sink's tables; only the DSN's own secret is hidden where the DSN
// appears.
func TestRedactionKeepsMessagesReadable(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing listens there now
	dsn := "postgres://exactly:exactly@" + addr + "/exactly?sslmode=disable&connect_timeout=5"
	s := newTestSink(t, Options{DSN: dsn, Table: "t", Columns: []Column{{"id", "bigint"}}})
	_, err = s.NewWriter(context.Background(), sink.WriterInfo{Job: "test", Sink: "out", Owner: testOwner})
	t.Logf("connect: %v", err)
	if err == nil || !strings.Contains(err.Error(), "connect to "+addr+"/exactly as exactly") || strings.Contains(err.Error(), "xxxxx") {
		t.Errorf("connect error = %v, want it to name %s/exactly as exactly, unredacted", err, addr)
	}
	err = s.core.describe(errors.New("relation \"public._exactly_progress\" does not exist"), `sink "out"`, "commit")
	if !strings.Contains(err.Error(), "public._exactly_progress") {
		t.Errorf("describe garbled a table name: %v", err)
	}
	err = s.core.describe(fmt.Errorf("a driver that echoes its DSN: %s", dsn), `sink "out"`, "connect")
	u, _ := url.Parse(dsn)
	redacted := u.Redacted()
	if strings.Contains(err.Error(), ":exactly@") || !strings.Contains(err.Error(), redacted) {
		t.Errorf("an echoed DSN = %v, want it as %s", err, redacted)
	}
}

// TestPreparedConflictTimesOut (issue 10, case 11): in prepared mode a
// write that conflicts on a unique key with the previous checkpoint's
// still-prepared transaction waits for its row lock. The wait ends after
// Options.LockTimeout with a retryable error naming the prepared
// transaction; the failover's recovery commits it.
func TestPreparedConflictTimesOut(t *testing.T) {
	ctx := context.Background()
	conn := db(t)
	table := "conflict_prepared"
	opts := freshTable(t, conn, table, Prepared)
	if _, err := conn.Exec(ctx, "CREATE TABLE "+table+" (id bigint PRIMARY KEY, name text)"); err != nil {
		t.Fatal(err)
	}
	opts.LockTimeout = 300 * time.Millisecond
	s := newTestSink(t, opts)
	w := newWriter(t, s, "out", 0)
	cm := writePrepare(t, w, 0, 1, recs(0, 3))
	if err := w.Write(ctx, recs(2, 3)); err != nil { // id 2 again, in the next transaction
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	_, err := w.Prepare(wctx, 2)
	t.Logf("Prepare: %v", err)
	if err == nil || errors.Is(err, context.DeadlineExceeded) || sink.IsPermanent(err) ||
		!strings.Contains(err.Error(), gid((&core{table: "public." + table}).sinkKey("test", "out"), 0, 1, ownerTag(testOwner))) || !strings.Contains(err.Error(), "LockTimeout") {
		t.Fatalf("Prepare of a conflicting row = %v, want a retryable lock timeout naming the prepared transaction of checkpoint 1 and Options.LockTimeout", err)
	}
	w.Close() // the job fails over; recovery commits checkpoint 1
	if err := newCommitter(t, s, "out").Commit(ctx, cm); err != nil {
		t.Fatal(err)
	}
	if got := ids(t, conn, table); len(got) != 3 {
		t.Fatalf("after recovery: %v", got)
	}
}

// TestStartRefusesBadPostgresConfiguration checks that a wrong password and
// a missing table fail at Start, naming the sink and the fix, and that no
// error carries the password.
func TestStartRefusesBadPostgresConfiguration(t *testing.T) {
	dsn := testenv.Postgres(t)
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	const secret = "not-the-password-7f3a"
	u.User = url.UserPassword(u.User.Username(), secret)
	start := func(dsn, table string) error {
		snk, err := NewSink(Options{DSN: dsn, Table: table, Columns: []Column{{"v", "bigint"}}}, func(v int64, row []any) []any { return append(row, v) })
		if err != nil {
			t.Fatal(err)
		}
		gen, err := generator.New(generator.Options{Count: 10}, func(i uint64) int64 { return int64(i) })
		if err != nil {
			t.Fatal(err)
		}
		j := stream.New("refused")
		stream.SinkTo(stream.Source(j, "numbers", gen), "numbers-table", snk)
		_, err = j.Start(context.Background(), stream.Options{CheckpointDir: t.TempDir()})
		return err
	}
	err = start(u.String(), "start_check_numbers")
	wantErrorSays(t, err, `operator "numbers-table" cannot start`, "password authentication failed")
	if strings.Contains(err.Error(), secret) {
		t.Errorf("the error carries the password: %v", err)
	}
	err = start(dsn, "start_check_missing_table")
	wantErrorSays(t, err, `operator "numbers-table" cannot start`, "start_check_missing_table")
	t.Log(err)
}

// wantErrorSays fails unless err holds every one of parts.
func wantErrorSays(t *testing.T, err error, parts ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want one saying %q", parts)
	}
	for _, p := range parts {
		if !strings.Contains(err.Error(), p) {
			t.Errorf("error %q does not say %q", err, p)
		}
	}
}
