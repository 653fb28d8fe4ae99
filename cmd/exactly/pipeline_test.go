package main

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestValidateReportsAValidPipeline(t *testing.T) {
	var out strings.Builder
	if err := runValidate([]string{"../../examples/orders-sqlite.yaml"}, &out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"orders-sqlite.yaml: valid", `pipeline "orders-per-minute": generator source`,
		"→ sqlite sink, records key (string), window_start (time), window_end (time), orders (int), total (int)"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("validate output lacks %q:\n%s", want, out.String())
		}
	}
}

func TestValidateNamesLineAndColumn(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bad.yaml")
	bad := "name: x\nsource: {kind: generator, count: 1, fields: {a: index}}\ntransforms:\n  - filter: a > b\nsink: {kind: sqlite, path: x.db, table: t}\n"
	if err := os.WriteFile(path, []byte(bad), 0o644); err != nil {
		t.Fatal(err)
	}
	err := runValidate([]string{path}, new(strings.Builder))
	want := path + ":4:17: transforms[0].filter: unknown name b: the record's fields are a (int) (see https://expr-lang.org/docs/language-definition)"
	if err == nil || err.Error() != want {
		t.Errorf("error %v, want %s", err, want)
	}
}

// exampleCopy copies examples/name into a new directory, which becomes the
// working directory, and returns the copy's path: a pipeline writes its
// output beside its file.
func exampleCopy(t *testing.T, name string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "examples", name))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	t.Setenv("XDG_CONFIG_HOME", filepath.Join(dir, "config")) // exactly run's local tokens
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Chdir(dir)
	return path
}

func TestRunRunsAPipeline(t *testing.T) {
	example := exampleCopy(t, "orders-sqlite.yaml")
	var out strings.Builder
	if err := runPipeline(context.Background(), []string{example, "--log-level", "warn", "--control-addr", "127.0.0.1:0"}, &out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`pipeline "orders-per-minute": finished, output committed`, "control API and web page: http://127.0.0.1:"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("run output does not say %q:\n%s", want, out.String())
		}
	}
	if _, err := os.Stat("orders.db"); err != nil {
		t.Errorf("no output database: %v", err)
	}
}

func TestPipelineCommandErrorsAreOneLine(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{}, "run: the pipeline file is missing: exactly run pipeline.yaml"},
		{[]string{"--log-level", "warn", "--control-addr", "127.0.0.1:0"}, "run: the pipeline file is missing: exactly run pipeline.yaml"},
		{[]string{"p.yaml", "--log-level", "loud"}, `run: --log-level is "loud": use debug, info, warn or error, such as --log-level warn`},
		{[]string{"p.yaml", "--log-format", "xml"}, `run: --log-format is "xml": use text or json, such as --log-format json`},
		{[]string{"p.yaml", "--nope"}, "run: flag provided but not defined: -nope (run 'exactly run --help' for its flags)"},
		{[]string{"missing.yaml"}, "pipeline: open missing.yaml: no such file or directory: give the path of a pipeline YAML file"},
	} {
		err := runPipeline(context.Background(), tc.args, new(strings.Builder))
		if err == nil || err.Error() != tc.want {
			t.Errorf("run %q: error %v, want %s", tc.args, err, tc.want)
		}
	}
}

func TestRunInterruptedSaysItResumes(t *testing.T) {
	example := exampleCopy(t, "orders-sqlite.yaml")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := runPipeline(ctx, []string{example, "--log-level", "error", "--control-addr", "127.0.0.1:0"}, new(strings.Builder))
	want := `run: pipeline "orders-per-minute" interrupted: run it again to resume from its last checkpoint`
	if err == nil || err.Error() != want {
		t.Errorf("error %v, want %s", err, want)
	}
}

// TestRunFrom: --from starts a pipeline from a checkpoint outside its own
// checkpoint storage (a savepoint, or storage moved aside). The first run
// finished its input; its storage is then moved away, so the pipeline's
// own is empty. From the first run's last checkpoint, which holds the
// generator's end, the second run reads nothing and adds no row; a
// --from that is not a checkpoint fails and names itself.
func TestRunFrom(t *testing.T) {
	example := exampleCopy(t, "orders-sqlite.yaml")
	args := []string{example, "--log-level", "error", "--control-addr", "127.0.0.1:0"}
	dir := filepath.Dir(example)
	if err := runPipeline(context.Background(), args, new(strings.Builder)); err != nil {
		t.Fatal(err)
	}
	rows := sqliteRows(t, "orders.db", "orders_per_minute")
	if rows == 0 {
		t.Fatal("the first run committed no row")
	}
	if err := os.Rename("orders-per-minute-checkpoints", "moved-aside"); err != nil {
		t.Fatal(err)
	}
	checkpoints, err := filepath.Glob(filepath.Join(dir, "moved-aside", "chk-*"))
	if err != nil || len(checkpoints) == 0 {
		t.Fatalf("the first run left no checkpoint: %v", err)
	}
	last := checkpoints[len(checkpoints)-1]
	if err := runPipeline(context.Background(), append(args, "--from", last), new(strings.Builder)); err != nil {
		t.Fatal(err)
	}
	if n := sqliteRows(t, "orders.db", "orders_per_minute"); n != rows {
		t.Errorf("after the run from the finished run's checkpoint the table has %d rows, want the first run's %d", n, rows)
	}
	if _, err := os.Stat("orders-per-minute-checkpoints"); err != nil {
		t.Errorf("the run from --from kept no checkpoint storage of its own: %v", err)
	}
	missing := filepath.Join(dir, "no-such-checkpoint")
	if err := os.RemoveAll("orders-per-minute-checkpoints"); err != nil {
		t.Fatal(err)
	}
	err = runPipeline(context.Background(), append(args, "--from", missing), new(strings.Builder))
	if err == nil || !strings.Contains(err.Error(), missing) {
		t.Errorf("--from a missing directory: %v, want an error naming it", err)
	}
}

// sqliteRows counts the rows of table in the SQLite database at path; a
// missing database or table has none.
func sqliteRows(t *testing.T, path, table string) int {
	t.Helper()
	if _, err := os.Stat(path); os.IsNotExist(err) {
		return 0
	}
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var exists int
	if err := db.QueryRow(`SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = ?`, table).Scan(&exists); err != nil {
		t.Fatal(err)
	}
	if exists == 0 {
		return 0
	}
	var n int
	if err := db.QueryRow(`SELECT count(*) FROM ` + table).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestErrorLineSaysExactlyOnce: the command prefixes its errors with
// "exactly: ", and the engine's errors start with it too; printed, a
// failed pipeline said "exactly: pipeline "x": exactly: job "x" failed".
func TestErrorLineSaysExactlyOnce(t *testing.T) {
	for err, want := range map[error]string{
		errors.New(`exactly: job "x" failed (restarts are disabled): boom`): `exactly: job "x" failed (restarts are disabled): boom`,
		errors.New(`run: --log-level is "loud"`):                            `exactly: run: --log-level is "loud"`,
	} {
		if got := errorLine(err); got != want {
			t.Errorf("errorLine(%q) = %q, want %q", err, got, want)
		}
	}
}

// TestRunOnAClusterRefusesAGenerator: a pipeline whose source cannot be
// split into tasks by partition is refused by run --cluster at once, with
// the source's position in the file and the fix.
func TestRunOnAClusterRefusesAGenerator(t *testing.T) {
	example := exampleCopy(t, "orders-sqlite.yaml")
	err := runPipeline(context.Background(), []string{example, "--cluster", "--log-level", "error"}, new(strings.Builder))
	if err == nil || !strings.Contains(err.Error(), "orders-sqlite.yaml:") || !strings.Contains(err.Error(), "source: a generator source cannot run on a cluster") || !strings.Contains(err.Error(), "run the pipeline without --cluster") {
		t.Errorf("run --cluster of a generator source: %v", err)
	}
}

// TestValidateNeverPrintsASecret validates a pipeline whose Kafka SASL
// password and database DSN come from the environment: neither what
// validate prints for a valid file nor its error for a DSN it cannot use
// holds the secrets.
func TestValidateNeverPrintsASecret(t *testing.T) {
	path := filepath.Join(t.TempDir(), "secured.yaml")
	yaml := `name: secured
source:
  kind: kafka
  brokers: ["kafka-1:9093"]
  topics: [orders]
  sasl: {mechanism: SCRAM-SHA-512, user: orders-job, password: "${KAFKA_PASSWORD}"}
decode:
  format: json
  fields: {customer: string, amount: int}
sink:
  kind: postgres
  dsn: ${DATABASE_URL}
  table: orders
checkpoint:
  storage: s3://bucket/orders?endpoint=https://s3.example:443
`
	if err := os.WriteFile(path, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	const kafkaSecret, dbSecret = "kafka-secret-5f2e9a", "db-secret-81c4d7"
	t.Setenv("KAFKA_PASSWORD", kafkaSecret)
	for _, c := range []struct{ name, dsn string }{
		{"valid", "postgres://orders:" + dbSecret + "@db:5432/shop?sslmode=require"},
		{"a CA file that does not exist", "postgres://orders:" + dbSecret + "@db:5432/shop?sslmode=verify-full&sslrootcert=/missing/ca.crt"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv("DATABASE_URL", c.dsn)
			var out strings.Builder
			err := runValidate([]string{path}, &out)
			said := out.String()
			if err != nil {
				said += err.Error()
			}
			t.Log(said)
			if (err == nil) != (c.name == "valid") {
				t.Fatalf("validate: %v", err)
			}
			for _, secret := range []string{kafkaSecret, dbSecret} {
				if strings.Contains(said, secret) {
					t.Errorf("validate printed the secret %q", secret)
				}
			}
		})
	}
}
