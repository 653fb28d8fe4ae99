#!/usr/bin/env bash
# Runs every check and test of the project against real services.
#
# It starts the services the tests need (PostgreSQL, Kafka, toxiproxy and
# an S3 server, through scripts/postgres.sh, scripts/kafka.sh,
# scripts/toxiproxy.sh and scripts/s3.sh, which install what is missing;
# scripts/chromium.sh installs the browser of the web page's test),
# exports their addresses, runs gofmt, go vet and `go test -race ./...`
# with EXACTLY_REQUIRE_SERVICES=1 (a test that needs a missing service fails
# instead of skipping), and stops the services at the end.
#
# Extra arguments go to `go test`, e.g. scripts/test.sh -run Crash -v
set -euo pipefail
cd "$(dirname "$0")/.."

started=()
cleanup() {
	for s in "${started[@]}"; do
		"scripts/$s.sh" stop >/dev/null 2>&1 || true
	done
}
trap cleanup EXIT

# start_service NAME: runs scripts/NAME.sh start and exports every
# EXACTLY_*=value line it prints; the last line must be one (the address).
start_service() {
	local out line last
	out=$("scripts/$1.sh" start)
	last=$(tail -n 1 <<<"$out")
	case "$last" in
	EXACTLY_*=*) ;;
	*) echo "scripts/$1.sh start did not print its address (got: $last)" >&2; exit 1 ;;
	esac
	while IFS= read -r line; do
		case "$line" in
		EXACTLY_*=*) export "${line?}" ;;
		esac
	done <<<"$out"
	started+=("$1")
	echo "started $1: $last"
}

# The broker gets its proxy listener from the start (KAFKA_PORT+2, advertised
# as KAFKA_PORT+3, where the torture suite puts toxiproxy), so that suite
# never restarts it under the Kafka tests that run beside it.
export KAFKA_PROXY_PORT=${KAFKA_PROXY_PORT:-$((${KAFKA_PORT:-29092} + 3))}
for service in postgres kafka toxiproxy s3 chromium; do
	if [[ -x "scripts/$service.sh" ]]; then
		start_service "$service"
	fi
done
export EXACTLY_REQUIRE_SERVICES=1
# The fixed credentials of the test S3 server (scripts/s3.sh), in the
# standard variables every S3 client reads.
export AWS_ACCESS_KEY_ID=exactly-test-access AWS_SECRET_ACCESS_KEY=exactly-test-secret-key

unformatted=$(gofmt -l .)
if [[ -n "$unformatted" ]]; then
	echo "gofmt: these files need formatting:" >&2
	echo "$unformatted" >&2
	exit 1
fi
go vet ./...
go test -race -timeout 25m "$@" ./...
