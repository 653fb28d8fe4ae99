// Package testenv gives tests the addresses of the real services started by
// scripts/postgres.sh and scripts/kafka.sh (scripts/test.sh runs both).
//
// A test that needs a service calls [Postgres], [Kafka], [S3] or [Toxiproxy].
// Under -short it is skipped, with a line naming the service. When the
// service's environment variable is unset the test is skipped too — unless
// EXACTLY_REQUIRE_SERVICES=1, which the README's test command and CI set, and
// which turns the skip into a failure so that CI can never pass without the
// services.
//
// The services are shared by the test binaries that `go test ./...` runs in
// parallel, and by the parallel tests of each. A test that disrupts a
// service (kills or restarts the broker, the database or the S3 server)
// calls [Exclusive] with that service first, then restarts it with
// [Script] or [RestartEvery], which refuse a test that does not hold it
// exclusively: a restart under tests that did not ask for it is how a
// connection closes "at random" (CI saw a PostgreSQL sink's connection
// closed in a control test while a crash test of package postgres
// restarted the server under it). scripts/test.sh starts a second,
// "faults" instance of the broker, the database and the S3 server for
// these tests: [Exclusive] gives a test the faults instance, so the tests
// that restart a service wait only for each other, and every other test
// goes on against the first instances, which nothing restarts. The locks
// are file locks, one per service and instance, so they work across test
// processes: every test that asks for a service holds its lock shared
// until the test ends.
package testenv

import (
	"os"
	"strings"
	"syscall"
	"testing"
)

// Service is one of the real services the tests share, named as its
// script in scripts/ (scripts/<service>.sh).
type Service string

// The services.
const (
	PostgresService  Service = "postgres"
	KafkaService     Service = "kafka"
	S3Service        Service = "s3"
	ToxiproxyService Service = "toxiproxy"
)

// services are all the services, in the order their locks are taken:
// toxiproxy first, which has one instance and which only the torture suite
// takes (exclusively), so that a torture test waits for another without
// holding a faults instance of the other services meanwhile.
var services = []Service{ToxiproxyService, KafkaService, PostgresService, S3Service}

// Postgres returns the connection string of the test PostgreSQL server
// (EXACTLY_POSTGRES_DSN).
func Postgres(t testing.TB) string {
	return need(t, PostgresService, "EXACTLY_POSTGRES_DSN", "PostgreSQL")
}

// PostgresTLSCA returns the file of the CA certificate that signed the test
// PostgreSQL server's TLS certificate (EXACTLY_POSTGRES_TLS_CA, set by
// scripts/postgres.sh; the CA's key is beside it as ca.key). The server's
// certificate names "localhost" only, and the role exactly_tls (password
// exactly) may connect over TLS only.
func PostgresTLSCA(t testing.TB) string {
	return need(t, PostgresService, "EXACTLY_POSTGRES_TLS_CA", "PostgreSQL with TLS")
}

// Kafka returns the bootstrap address of the test Kafka broker
// (EXACTLY_KAFKA_BROKERS).
func Kafka(t testing.TB) string { return need(t, KafkaService, "EXACTLY_KAFKA_BROKERS", "Kafka") }

// KafkaSecured is what the test Kafka broker offers besides its plaintext
// listener (scripts/kafka.sh): a SASL_SSL listener (SCRAM-SHA-512) and an
// SSL listener that requires a client certificate, both with a throwaway
// CA, and ACLs enforced for their users.
type KafkaSecured struct {
	// SASLSSL and MTLS are the listeners' addresses.
	SASLSSL, MTLS string
	// TLSDir holds ca.crt (and ca.key), and client.crt and client.key of
	// the mTLS user exactly-mtls. The broker's certificate names
	// localhost and 127.0.0.1.
	TLSDir string
}

// KafkaTLS returns the secured listeners of the test Kafka broker
// (EXACTLY_KAFKA_SASL_SSL, EXACTLY_KAFKA_MTLS, EXACTLY_KAFKA_TLS_DIR).
func KafkaTLS(t testing.TB) KafkaSecured {
	return KafkaSecured{
		SASLSSL: need(t, KafkaService, "EXACTLY_KAFKA_SASL_SSL", "Kafka's SASL_SSL listener"),
		MTLS:    need(t, KafkaService, "EXACTLY_KAFKA_MTLS", "Kafka's mTLS listener"),
		TLSDir:  need(t, KafkaService, "EXACTLY_KAFKA_TLS_DIR", "Kafka's TLS files"),
	}
}

// Toxiproxy returns the API address of the test toxiproxy server
// (EXACTLY_TOXIPROXY, set by scripts/toxiproxy.sh).
func Toxiproxy(t testing.TB) string {
	return need(t, ToxiproxyService, "EXACTLY_TOXIPROXY", "toxiproxy")
}

// S3 returns the endpoint of the test S3 server (EXACTLY_S3, set by
// scripts/s3.sh, such as http://127.0.0.1:27070); scripts/test.sh exports
// its credentials as AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, and
// S3Bucket names its bucket.
func S3(t testing.TB) string { return need(t, S3Service, "EXACTLY_S3", "the S3 server") }

// S3Secured is the HTTPS server of the test S3 server's data.
type S3Secured struct {
	Endpoint string // https://127.0.0.1:port
	CAFile   string // the PEM file of the CA that signed its certificate
}

// S3TLS returns the test S3 server's HTTPS endpoint and the file of its CA
// (EXACTLY_S3_TLS, EXACTLY_S3_TLS_CA, set by scripts/s3.sh): the same
// data, credentials and bucket as [S3].
func S3TLS(t testing.TB) S3Secured {
	return S3Secured{
		Endpoint: need(t, S3Service, "EXACTLY_S3_TLS", "the S3 server's HTTPS endpoint"),
		CAFile:   need(t, S3Service, "EXACTLY_S3_TLS_CA", "the S3 server's CA"),
	}
}

// S3Bucket is the bucket scripts/s3.sh creates for the tests.
const S3Bucket = "exactly-test"

func need(t testing.TB, s Service, env, name string) string {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: needs " + name + " (scripts/test.sh runs the tests with the services)")
	}
	if v := os.Getenv(env); v != "" {
		lock(t, s, syscall.LOCK_SH)
		if inst := faultsInstance(t, s); inst != "" {
			faults := "EXACTLY_" + inst + "_" + strings.TrimPrefix(env, "EXACTLY_")
			if v = os.Getenv(faults); v == "" {
				t.Fatalf("testenv: the faults instance of %s has no %s", s, faults)
			}
		}
		return v
	}
	msg := name + " is not running: run the tests with scripts/test.sh, which starts it and sets " + env
	if os.Getenv("EXACTLY_REQUIRE_SERVICES") == "1" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}
