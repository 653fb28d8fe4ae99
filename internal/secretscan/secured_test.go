package secretscan_test

import (
	"context"
	"crypto/tls"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/exactlyonce/exactly/connectors/kafka"
	"github.com/exactlyonce/exactly/internal/kafkatest"
	"github.com/exactlyonce/exactly/internal/s3test"
	"github.com/exactlyonce/exactly/internal/testenv"
	"github.com/exactlyonce/exactly/internal/testlog"
	"github.com/exactlyonce/exactly/metrics"
	"github.com/exactlyonce/exactly/stream"
)

// TestNoSecretInSecuredRuns runs a job over every secured connection at
// once: its Kafka source reads over SASL_SSL as a SCRAM user, its
// PostgreSQL sink logs in with a password over sslmode=verify-full, its
// checkpoints go to the S3 server's HTTPS endpoint, and its control API,
// metrics and web page are served. While it runs, every answer of the
// control server is fetched (the web page shows what the API answers);
// then the job is stopped, and three more are refused at start: a wrong
// SCRAM password, a wrong database password, a wrong S3 secret key. Every
// log line, error and answer is scanned for every secret used.
func TestNoSecretInSecuredRuns(t *testing.T) {
	brokers := testenv.Kafka(t)
	adminDSN := testenv.Postgres(t)
	pgCA := testenv.PostgresTLSCA(t)
	location := s3test.LocationTLS(t, "secretscan")
	ctx := context.Background()
	adm := kafkatest.Admin(t, brokers)
	name := kafkatest.UniqueName("scan")
	sec := kafkatest.NewSecured(t, adm, name)
	topic := name + "-in"
	kafkatest.CreateTopic(t, adm, topic, 2)
	const records = 20
	produce(t, brokers, topic, records)

	pgSecret, role := "pg-"+random(t), "scan_"+random(t)[:8]
	table := role
	newRole(t, adminDSN, role, pgSecret, table, "v bigint")
	admin, err := pgx.Connect(ctx, adminDSN)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { admin.Close(context.Background()) })
	u, err := url.Parse(adminDSN)
	if err != nil {
		t.Fatal(err)
	}
	dsnAs := func(password string) string {
		return "postgres://" + role + ":" + password + "@localhost:" + u.Port() + u.Path + "?sslmode=verify-full&sslrootcert=" + url.QueryEscape(pgCA)
	}
	s3Secret := os.Getenv("AWS_SECRET_ACCESS_KEY")
	if len(s3Secret) < 8 {
		t.Fatalf("AWS_SECRET_ACCESS_KEY %q is too short to look for", s3Secret)
	}
	wrongSASL, wrongPG, wrongS3 := "wrong-sasl-"+random(t), "wrong-pg-"+random(t), "wrong-s3-"+random(t)
	secrets := map[string]string{"the SCRAM password": sec.Password, "the database password": pgSecret, "the S3 secret key": s3Secret,
		"the wrong SCRAM password": wrongSASL, "the wrong database password": wrongPG, "the wrong S3 secret key": wrongS3}

	var logs testlog.Buffer
	logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	var said []string // every error and every answer
	job := func(jobName, saslPassword, pgPassword string) *stream.Job {
		conn := kafka.Conn{Brokers: []string{sec.SASLSSL}, TLS: &tls.Config{RootCAs: sec.CA},
			SASL: kafka.SASL{Mechanism: kafka.SASLScramSHA512, User: sec.User, Password: saslPassword}}
		src, err := kafka.NewSource(kafka.SourceOptions{Conn: conn, Topics: []string{topic}}, kafka.String())
		if err != nil {
			t.Fatal(err)
		}
		j := stream.New(jobName)
		values := stream.Map(stream.Source(j, "in", src), func(r kafka.Record[string]) int64 {
			v, _ := strconv.ParseInt(r.Value, 10, 64)
			return v
		})
		stream.SinkTo(values, "out", pgSink(t, dsnAs(pgPassword), role, table))
		return j
	}

	// 1. Everything right, the control server on: fetch every answer while
	// the job runs.
	runCtx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	r, err := job(name, sec.Password, pgSecret).Start(runCtx, stream.Options{CheckpointDir: location, CheckpointInterval: 100 * time.Millisecond,
		Logger: logger, Control: stream.ControlOptions{Addr: "127.0.0.1:0", Metrics: metrics.Handler}})
	if err != nil {
		t.Fatal(err)
	}
	kafkatest.WaitFor(t, time.Minute, "the job's rows committed", func() bool {
		var n int
		return admin.QueryRow(ctx, "SELECT count(*) FROM "+role+"."+table).Scan(&n) == nil && n == records
	})
	base := "http://" + r.ControlAddr()
	for _, p := range []string{"/", "/web/app.js", "/web/style.css", "/api/v1/job", "/api/v1/graph", "/api/v1/operators", "/api/v1/checkpoints",
		"/api/v1/restarts", "/api/v1/lag", "/api/v1/throughput", "/api/v1/configuration", "/api/v1/cluster", "/metrics"} {
		said = append(said, "GET "+p+": "+get(t, base+p))
	}
	r.Stop()
	if err := r.Wait(); err != nil {
		t.Fatalf("the secured job, stopped: %v", err)
	}

	// 2.–4. Each secret wrong: refused at start.
	said = append(said, run(t, job(name+"-wrong-sasl", wrongSASL, pgSecret), logger, 1))
	said = append(said, run(t, job(name+"-wrong-pg", sec.Password, wrongPG), logger, 1))
	t.Setenv("AWS_SECRET_ACCESS_KEY", wrongS3)
	said = append(said, runWith(t, job(name+"-wrong-s3", sec.Password, pgSecret), stream.Options{CheckpointDir: location, Logger: logger}))

	all := logs.String() + "\n" + strings.Join(said, "\n")
	for what, secret := range secrets {
		if i := strings.Index(all, secret); i >= 0 {
			t.Errorf("%s appears in the logs, errors or answers: ...%s...", what, all[max(0, i-200):min(len(all), i+len(secret)+50)])
		}
	}
	// The scan saw what a user would: the runs, their failures, named.
	for _, want := range []string{`"job": "` + name + `"`, "exactly_checkpoints_completed_total", "SASL_AUTHENTICATION_FAILED",
		"password authentication failed", "SignatureDoesNotMatch", "user \"" + sec.User + "\""} {
		if !strings.Contains(all, want) {
			t.Errorf("the runs never said %q; the scan did not see what it is meant to", want)
		}
	}
	t.Logf("scanned %d log lines, %d errors and answers, for %d secrets", strings.Count(logs.String(), "\n"), len(said), len(secrets))
}

// produce writes the numbers 0..n-1 to topic.
func produce(t *testing.T, brokers, topic string, n int) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var recs []*kgo.Record
	for i := range n {
		recs = append(recs, &kgo.Record{Topic: topic, Value: []byte(strconv.Itoa(i))})
	}
	if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// get returns the body of GET at, which must answer 200.
func get(t *testing.T, at string) string {
	t.Helper()
	resp, err := http.Get(at)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s %s", at, resp.Status, b)
	}
	return string(b)
}
