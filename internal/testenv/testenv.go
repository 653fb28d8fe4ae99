// Package testenv gives tests the addresses of the real services started by
// scripts/services.sh (PostgreSQL, Kafka).
//
// A test that needs a service calls [Postgres] or [Kafka]. When the service's
// environment variable is unset the test is skipped — unless
// EXACTLY_REQUIRE_SERVICES=1, which the README's test command and CI set, and
// which turns the skip into a failure so that CI can never pass without the
// services.
package testenv

import (
	"os"
	"testing"
)

// Postgres returns the connection string of the test PostgreSQL server
// (EXACTLY_POSTGRES_DSN).
func Postgres(t testing.TB) string { return need(t, "EXACTLY_POSTGRES_DSN", "PostgreSQL") }

// Kafka returns the bootstrap address of the test Kafka broker
// (EXACTLY_KAFKA_BROKERS).
func Kafka(t testing.TB) string { return need(t, "EXACTLY_KAFKA_BROKERS", "Kafka") }

func need(t testing.TB, env, service string) string {
	t.Helper()
	if v := os.Getenv(env); v != "" {
		return v
	}
	msg := service + " is not running: start it with scripts/services.sh start (it sets " + env + ")"
	if os.Getenv("EXACTLY_REQUIRE_SERVICES") == "1" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}
