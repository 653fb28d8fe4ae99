// Package testenv gives tests the addresses of the real services started by
// scripts/postgres.sh and scripts/kafka.sh (scripts/test.sh runs both).
//
// A test that needs a service calls [Postgres], [Kafka] or [Toxiproxy]. When the service's
// environment variable is unset the test is skipped — unless
// EXACTLY_REQUIRE_SERVICES=1, which the README's test command and CI set, and
// which turns the skip into a failure so that CI can never pass without the
// services.
//
// The services are shared by the test binaries that `go test ./...` runs in
// parallel. A test that disrupts them (the torture suite restarts the broker
// and the database) calls [Exclusive] first: it waits until no other test
// uses a service and keeps the others waiting until it ends. The lock is a
// file lock, so it works across test processes: every test that asks for a
// service holds it shared until the test ends.
package testenv

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
)

// Postgres returns the connection string of the test PostgreSQL server
// (EXACTLY_POSTGRES_DSN).
func Postgres(t testing.TB) string { return need(t, "EXACTLY_POSTGRES_DSN", "PostgreSQL") }

// PostgresTLSCA returns the file of the CA certificate that signed the test
// PostgreSQL server's TLS certificate (EXACTLY_POSTGRES_TLS_CA, set by
// scripts/postgres.sh; the CA's key is beside it as ca.key). The server's
// certificate names "localhost" only, and the role exactly_tls (password
// exactly) may connect over TLS only.
func PostgresTLSCA(t testing.TB) string {
	return need(t, "EXACTLY_POSTGRES_TLS_CA", "PostgreSQL with TLS")
}

// Kafka returns the bootstrap address of the test Kafka broker
// (EXACTLY_KAFKA_BROKERS).
func Kafka(t testing.TB) string { return need(t, "EXACTLY_KAFKA_BROKERS", "Kafka") }

// Toxiproxy returns the API address of the test toxiproxy server
// (EXACTLY_TOXIPROXY, set by scripts/toxiproxy.sh).
func Toxiproxy(t testing.TB) string { return need(t, "EXACTLY_TOXIPROXY", "toxiproxy") }

// S3 returns the endpoint of the test S3 server (EXACTLY_S3, set by
// scripts/s3.sh, such as http://127.0.0.1:27070); scripts/test.sh exports
// its credentials as AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, and
// S3Bucket names its bucket.
func S3(t testing.TB) string { return need(t, "EXACTLY_S3", "the S3 server") }

// S3Bucket is the bucket scripts/s3.sh creates for the tests.
const S3Bucket = "exactly-test"

// Exclusive gives t the services to itself until it ends: it waits for
// every other test using a service (in any process) to end, and makes the
// others wait. Call it before [Postgres] and [Kafka].
func Exclusive(t testing.TB) { lock(t, syscall.LOCK_EX) }

// ParentHoldsLock is the environment entry a test that holds the services
// lock ([Exclusive]) passes to the child processes it runs (crash tests):
// they use the services under the parent's lock instead of waiting for it,
// which would wait forever.
const ParentHoldsLock = "EXACTLY_SERVICES_LOCK_HELD_BY_PARENT=1"

func need(t testing.TB, env, service string) string {
	t.Helper()
	if v := os.Getenv(env); v != "" {
		if k, v2, _ := strings.Cut(ParentHoldsLock, "="); os.Getenv(k) != v2 {
			lock(t, syscall.LOCK_SH)
		}
		return v
	}
	msg := service + " is not running: run the tests with scripts/test.sh, which starts it and sets " + env
	if os.Getenv("EXACTLY_REQUIRE_SERVICES") == "1" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}

// held records the tests holding the services lock, so that a test asking
// for two services locks once (a second lock on another descriptor of the
// same file would wait for the first).
var held sync.Map

// lock takes the services lock for t (how is LOCK_SH or LOCK_EX) until t
// ends, unless t holds it already.
func lock(t testing.TB, how int) {
	t.Helper()
	if _, ok := held.LoadOrStore(t, true); ok {
		return
	}
	f, err := os.OpenFile(filepath.Join(os.TempDir(), "exactly-services.lock"), os.O_CREATE|os.O_RDWR, 0o666)
	if err == nil {
		if err = syscall.Flock(int(f.Fd()), how); err != nil {
			_ = f.Close()
		}
	}
	if err != nil {
		held.Delete(t)
		t.Fatalf("testenv: services lock: %v", err)
	}
	t.Cleanup(func() {
		_ = f.Close()
		held.Delete(t)
	})
}
