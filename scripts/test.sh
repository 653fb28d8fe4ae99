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

# The brokers' JVMs compile with C1 only and size their thread pools for one
# core: a broker start then takes about 5 CPU seconds instead of 8.6, and an
# idle broker 2 CPU seconds a minute instead of 3.1 (measured on this
# 2-core machine, docs/testing.md). The tests restart brokers dozens of
# times and the three brokers idle for most of the run; their throughput
# is not what the tests measure (benchmarks start their broker without it).
export KAFKA_JAVA_OPTS="-XX:TieredStopAtLevel=1 -XX:ActiveProcessorCount=1"
# Builds without the checkout's path in them, so that every clone of the
# repository on this machine shares the build cache: a clean clone at a new
# path otherwise recompiled every package of the module, for go vet, the
# race-enabled tests and the crash tests' children (about 270 CPU seconds;
# docs/testing.md). Tests find the repository from their working directory.
export GOFLAGS="${GOFLAGS:+$GOFLAGS }-trimpath"

started=()
cleanup() {
	local entry
	for entry in "${started[@]}"; do
		# entry: "service" or "service VAR=value..." (a faults instance)
		read -r -a words <<<"$entry"
		env "${words[@]:1}" "scripts/${words[0]}.sh" stop >/dev/null 2>&1 || true
	done
}
trap cleanup EXIT

# start_service NAME [PREFIX VAR=value...]: runs scripts/NAME.sh start (with
# the VAR=value settings in its environment) and exports every
# EXACTLY_*=value line it prints, renamed EXACTLY_<PREFIX>_*=value when a
# PREFIX is given; the last line must be one (the address). With a PREFIX it
# exports the settings too, as EXACTLY_<PREFIX>_<NAME>_ENV, so that the
# tests can run the script on the same instance (internal/testenv).
start_service() {
	local name=$1 prefix=${2:-} out line last
	shift $(($# > 1 ? 2 : 1))
	out=$(env "$@" "scripts/$name.sh" start)
	last=$(tail -n 1 <<<"$out")
	case "$last" in
	EXACTLY_*=*) ;;
	*) echo "scripts/$name.sh start did not print its address (got: $last)" >&2; exit 1 ;;
	esac
	while IFS= read -r line; do
		case "$line" in
		EXACTLY_*=*)
			if [[ -n $prefix ]]; then
				line="EXACTLY_${prefix}_${line#EXACTLY_}"
			fi
			export "${line?}"
			;;
		esac
	done <<<"$out"
	if [[ -n $prefix ]]; then
		local upper=${name^^}
		export "EXACTLY_${prefix}_${upper}_ENV=$*"
	fi
	started+=("$name $*")
	echo "started $name${prefix:+ ($prefix)}: $last"
}

for service in postgres kafka toxiproxy s3 chromium; do
	if [[ -x "scripts/$service.sh" ]]; then
		start_service "$service"
	fi
done

# The faults instances: two more brokers, databases and S3 servers for the
# tests that kill or restart a service (the torture suite, the broker
# restart tests, the crash tests that restart PostgreSQL or the S3 server).
# Each such test takes a free one exclusively (testenv.Exclusive) while
# every other test goes on against the first ones, which nothing restarts;
# with two, the torture suite's long tests do not hold up the other
# packages' restart tests. A broker gets its proxy listener from the start
# (port+2, advertised as port+3, where the torture suite puts toxiproxy).
# Paths must not hold spaces.
# start_faults PREFIX OFFSET: the instances on the first ones' ports + OFFSET.
start_faults() {
	local prefix=$1 offset=$2 dir
	dir=$PWD/.tmp/$(tr '[:upper:]' '[:lower:]' <<<"$prefix")
	start_service kafka "$prefix" KAFKA_PORT=$((29092 + offset)) KAFKA_DIR="$dir/kafka" \
		KAFKA_PROXY_PORT=$((29095 + offset)) \
		KAFKA_JARS="${KAFKA_DIR:-$PWD/.tmp/kafka}/jars-${KAFKA_VERSION:-4.1.1}"
	start_service postgres "$prefix" POSTGRES_PORT=$((25432 + offset)) EXACTLY_POSTGRES_DATA="$dir/postgres"
	start_service s3 "$prefix" S3_PORT=$((27070 + offset)) S3_DIR="$dir/s3" S3_TLS_PORT=off \
		S3_BIN="${S3_DIR:-$PWD/.tmp/s3}/bin/versitygw"
}
start_faults FAULTS 100
start_faults FAULTS2 200
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
# The slowest packages first, so that the cores are busy to the end rather
# than waiting for one long package that started last, and three test
# binaries at a time: the service tests spend most of their time waiting
# for a broker, a database or a restart, and run beside the CPU-bound
# packages (four made the load average reach 18; docs/testing.md).
slowest=(./state/ ./stream/ ./connectors/kafka/ ./cmd/exactly/internal/torture/ ./cluster/ ./connectors/postgres/)
go test -race -p 3 -timeout 25m "$@" "${slowest[@]}" ./...
