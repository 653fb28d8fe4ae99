package secretscan_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"net"
	"net/url"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/exactlyonce/exactly/connectors/generator"
	"github.com/exactlyonce/exactly/connectors/kafka"
	"github.com/exactlyonce/exactly/connectors/postgres"
	"github.com/exactlyonce/exactly/internal/testenv"
	"github.com/exactlyonce/exactly/internal/testlog"
	"github.com/exactlyonce/exactly/stream"
)

// TestNoSecretInLogsOrErrors runs four failing jobs and scans what they
// said: a job whose Kafka source authenticates with SASL against the
// plaintext test broker (refused at Start), one whose PostgreSQL role's
// password is wrong (refused at Start), one that logs in with a valid
// password and fails at commit on a CHECK constraint, and one whose
// database cannot be reached while it runs, restarted until its budget
// is spent.
func TestNoSecretInLogsOrErrors(t *testing.T) {
	brokers := testenv.Kafka(t)
	adminDSN := testenv.Postgres(t)
	saslSecret, pgSecret, wrongSecret := "sasl-"+random(t), "pg-"+random(t), "wrong-"+random(t)
	role, table := "scan_"+random(t)[:8], "scan_"+random(t)[:8]

	newRole(t, adminDSN, role, pgSecret, table, "v bigint CONSTRAINT v_small CHECK (v < 5)")
	dsnAs := func(password string) string {
		u, err := url.Parse(adminDSN)
		if err != nil {
			t.Fatal(err)
		}
		u.User = url.UserPassword(role, password)
		return u.String()
	}

	var logs testlog.Buffer
	logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	var said []string // every error the runs returned

	// 1. SASL credentials against a plaintext listener: refused at Start.
	src, err := kafka.NewSource(kafka.SourceOptions{
		Conn:   kafka.Conn{Brokers: []string{brokers}, SASL: kafka.SASL{Mechanism: kafka.SASLScramSHA512, User: "scanner", Password: saslSecret}},
		Topics: []string{"secretscan-any"},
	}, kafka.String())
	if err != nil {
		t.Fatal(err)
	}
	j := stream.New("scan-sasl")
	stream.SinkTo(stream.Map(stream.Source(j, "in", src), func(r kafka.Record[string]) int64 { return int64(len(r.Value)) }), "out", pgSink(t, dsnAs(pgSecret), role, table))
	said = append(said, run(t, j, logger, 1))

	// 2. A wrong database password: refused at Start.
	said = append(said, run(t, numbersJob(t, "scan-wrong-password", pgSink(t, dsnAs(wrongSecret), role, table)), logger, 1))

	// 3. A valid password and a commit the table's CHECK rejects.
	said = append(said, run(t, numbersJob(t, "scan-check", pgSink(t, dsnAs(pgSecret), role, table)), logger, 3))

	// 4. The database unreachable while the job runs (the start checks
	// skipped): every attempt fails to connect and is logged, then restarted.
	u, err := url.Parse(dsnAs(pgSecret))
	if err != nil {
		t.Fatal(err)
	}
	u.Host = unusedAddress(t)
	said = append(said, runWith(t, numbersJob(t, "scan-unreachable", pgSink(t, u.String(), role, table)),
		stream.Options{CheckpointDir: t.TempDir(), Logger: logger, CheckTimeout: -1, Restart: stream.RestartStrategy{MaxAttempts: 3}}))

	all := logs.String() + "\n" + strings.Join(said, "\n")
	for name, secret := range map[string]string{"SASL password": saslSecret, "database password": pgSecret, "wrong database password": wrongSecret} {
		if i := strings.Index(all, secret); i >= 0 {
			t.Errorf("the %s appears in the logs or errors: ...%s...", name, all[max(0, i-200):min(len(all), i+len(secret)+50)])
		}
	}
	// The scan saw what a user would: the failures, named.
	for _, want := range []string{`operator "in" cannot start`, "password authentication failed", "v_small", "connect to " + u.Host, "level=WARN"} {
		if !strings.Contains(all, want) {
			t.Errorf("the runs never said %q; the scan did not see the failure it is meant to", want)
		}
	}
	t.Logf("scanned %d log lines and %d errors for 3 secrets", strings.Count(logs.String(), "\n"), len(said))
}

// newRole creates, on the server of adminDSN, a role that logs in with
// password, a schema of its name and in it a table of the given columns
// that the role may write; all are dropped when the test ends.
func newRole(t *testing.T, adminDSN, role, password, table, columns string) {
	t.Helper()
	ctx := context.Background()
	admin, err := pgx.Connect(ctx, adminDSN)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { admin.Close(context.Background()) })
	for _, q := range []string{
		"CREATE ROLE " + role + " LOGIN PASSWORD '" + password + "'",
		"CREATE SCHEMA " + role,
		"GRANT ALL ON SCHEMA " + role + " TO " + role,
		"CREATE TABLE " + role + "." + table + " (" + columns + ")",
		"GRANT ALL ON " + role + "." + table + " TO " + role,
	} {
		if _, err := admin.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	t.Cleanup(func() {
		for _, q := range []string{"DROP SCHEMA IF EXISTS " + role + " CASCADE", "DROP ROLE IF EXISTS " + role} {
			if _, err := admin.Exec(context.Background(), q); err != nil {
				t.Logf("%s: %v", q, err)
			}
		}
	})
}

// run runs j until it ends and returns its error, which must not be nil.
func run(t *testing.T, j *stream.Job, logger *slog.Logger, attempts int) string {
	t.Helper()
	return runWith(t, j, stream.Options{CheckpointDir: t.TempDir(), Logger: logger, CommitRetries: 1,
		Restart: stream.RestartStrategy{MaxAttempts: attempts}})
}

// runWith runs j with opts until it ends and returns its error, which
// must not be nil.
func runWith(t *testing.T, j *stream.Job, opts stream.Options) string {
	t.Helper()
	err := j.Run(context.Background(), opts)
	if err == nil {
		t.Fatalf("job %s succeeded; it is meant to fail", j.Name())
	}
	return err.Error()
}

// numbersJob writes 0..9 to snk.
func numbersJob(t *testing.T, name string, snk *postgres.Sink[int64]) *stream.Job {
	t.Helper()
	gen, err := generator.New(generator.Options{Count: 10}, func(i uint64) int64 { return int64(i) })
	if err != nil {
		t.Fatal(err)
	}
	j := stream.New(name)
	stream.SinkTo(stream.Source(j, "numbers", gen), "out", snk)
	return j
}

func pgSink(t *testing.T, dsn, schema, table string) *postgres.Sink[int64] {
	t.Helper()
	snk, err := postgres.NewSink(postgres.Options{DSN: dsn, Schema: schema, Table: table, Columns: []postgres.Column{{Name: "v", Type: "bigint"}}},
		func(v int64, row []any) []any { return append(row, v) })
	if err != nil {
		t.Fatal(err)
	}
	return snk
}

// unusedAddress returns a loopback address nothing listens on.
func unusedAddress(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func random(t *testing.T) string {
	b := make([]byte, 12)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}
