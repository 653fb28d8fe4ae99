#!/usr/bin/env bash
# s3.sh runs versitygw, an S3-compatible server, with its posix backend on a
# loopback port, for the object-storage tests (checkpoint/store) and the
# torture suite. No containers and no downloaded binaries: the server is
# built from its Go module with `go install` (about 3 minutes the first time)
# and cached in S3_DIR/bin.
#
#   scripts/s3.sh start    install versitygw v1.7.0 if missing, start it, wait
#                          until it answers, create the test bucket; the last
#                          line printed is EXACTLY_S3=<endpoint>
#   scripts/s3.sh stop     stop it (SIGTERM, then SIGKILL); the data stays
#   scripts/s3.sh kill     SIGKILL it (a crash, for the torture suite)
#   scripts/s3.sh status   print the endpoint if it runs
#
# The credentials are fixed test ones, exported to the tests as the standard
# AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY by scripts/test.sh; the server's
# data is S3_DIR/data (one directory per bucket).
#
# Environment: S3_PORT (default 27070), S3_DIR (default <repo>/.tmp/s3),
# S3_BUCKET (default exactly-test), S3_BIN (the versitygw binary, default
# S3_DIR/bin/versitygw: a second server can share the first one's). start
# is idempotent.
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
version=v1.7.0
port=${S3_PORT:-27070}
dir=${S3_DIR:-$repo/.tmp/s3}
bucket=${S3_BUCKET:-exactly-test}
bin=${S3_BIN:-$dir/bin/versitygw}
pidfile=$dir/versitygw.pid
log=$dir/versitygw.log
data=$dir/data
access=exactly-test-access
secret=exactly-test-secret-key

log() { echo "s3.sh: $*" >&2; }

running() { [[ -f $pidfile ]] && kill -0 "$(cat "$pidfile")" 2>/dev/null; }

# answers reports whether something accepts connections on the port, within 2 s.
answers() { timeout 2 bash -c "exec 3<>/dev/tcp/127.0.0.1/$port" 2>/dev/null; }

install() {
	[[ -x $bin ]] && return
	log "installing versitygw $version with go install (a few minutes the first time)"
	mkdir -p "$(dirname "$bin")"
	GOBIN=$(dirname "$bin") GOFLAGS=-mod=mod go install "github.com/versity/versitygw/cmd/versitygw@$version" >&2
}

start() {
	mkdir -p "$dir" "$data/$bucket"
	if running; then
		log "already running (pid $(cat "$pidfile"))"
		echo "EXACTLY_S3=http://127.0.0.1:$port"
		return
	fi
	if answers; then
		log "port $port is in use by another process: set S3_PORT to a free port"
		return 1
	fi
	install
	# A bucket is a directory of the posix backend; creating it here needs no
	# client. --nometa is not used: ETags (for conditional writes) live in
	# extended attributes.
	ROOT_ACCESS_KEY_ID=$access ROOT_SECRET_ACCESS_KEY=$secret \
		setsid "$bin" --port "127.0.0.1:$port" posix "$data" </dev/null >>"$log" 2>&1 &
	echo $! >"$pidfile"
	for _ in $(seq 1 100); do
		if answers; then
			log "versitygw $version ready on 127.0.0.1:$port (pid $(cat "$pidfile"), data $data, bucket $bucket)"
			echo "EXACTLY_S3=http://127.0.0.1:$port"
			return
		fi
		running || break
		sleep 0.1
	done
	log "versitygw did not start; see $log"
	tail -n 20 "$log" >&2
	return 1
}

stop() {
	running || { rm -f "$pidfile"; return 0; }
	local pid
	pid=$(cat "$pidfile")
	kill -"${1:-TERM}" "$pid" 2>/dev/null || true
	for _ in $(seq 1 50); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
	kill -0 "$pid" 2>/dev/null && kill -KILL "$pid" 2>/dev/null
	rm -f "$pidfile"
}

case ${1:-} in
start) start ;;
stop) stop TERM ;;
kill) stop KILL ;;
status)
	running && echo "EXACTLY_S3=http://127.0.0.1:$port" || { echo "not running" >&2; exit 1; }
	;;
*)
	echo "usage: $0 start|stop|kill|status" >&2
	exit 2
	;;
esac
