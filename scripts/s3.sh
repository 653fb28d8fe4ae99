#!/usr/bin/env bash
# s3.sh runs versitygw, an S3-compatible server, with its posix backend on a
# loopback port, for the object-storage tests (checkpoint/store) and the
# torture suite. No containers and no downloaded binaries: the server is
# built from its Go module with `go install` (about 3 minutes the first time)
# and cached in S3_DIR/bin.
#
#   scripts/s3.sh start    install versitygw v1.7.0 if missing, start it, wait
#                          until it answers, create the test bucket; prints
#                          EXACTLY_S3_TLS=<https endpoint>, EXACTLY_S3_TLS_CA=<CA
#                          certificate> and, as the last line,
#                          EXACTLY_S3=<endpoint>
#   scripts/s3.sh stop     stop it (SIGTERM, then SIGKILL); the data stays
#   scripts/s3.sh kill     SIGKILL it (a crash, for the torture suite)
#   scripts/s3.sh status   print the endpoint if it runs
#
# Besides the plain HTTP server, a second versitygw serves the same data
# over HTTPS on S3_TLS_PORT (default S3_PORT+1; "off": none), with a
# throwaway CA and a certificate for localhost and 127.0.0.1 that the
# script generates with openssl into S3_DIR/tls (valid 30 days, nothing
# checked in): the tests of checkpoints on S3 over TLS.
#
# The credentials are fixed test ones, exported to the tests as the standard
# AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY by scripts/test.sh; the server's
# data is S3_DIR/data (one directory per bucket).
#
# Environment: S3_PORT (default 27070), S3_DIR (default <repo>/.tmp/s3),
# S3_BUCKET (default exactly-test), S3_BIN (the versitygw binary, default
# S3_DIR/bin/versitygw: a second server can share the first one's),
# S3_TLS_PORT (above). start is idempotent.
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
version=v1.7.0
port=${S3_PORT:-27070}
dir=${S3_DIR:-$repo/.tmp/s3}
bucket=${S3_BUCKET:-exactly-test}
bin=${S3_BIN:-$dir/bin/versitygw}
tls_port=${S3_TLS_PORT:-$((port + 1))}
[[ $tls_port == off ]] && tls_port=
pidfile=$dir/versitygw.pid
tls_pidfile=$dir/versitygw-tls.pid
log=$dir/versitygw.log
tls=$dir/tls
data=$dir/data
access=exactly-test-access
secret=exactly-test-secret-key

log() { echo "s3.sh: $*" >&2; }

# running [PIDFILE] reports whether the server of PIDFILE (default: the
# plain one) runs.
running() {
	local f=${1:-$pidfile}
	[[ -f $f ]] && kill -0 "$(cat "$f")" 2>/dev/null
}

# answers [PORT] reports whether something accepts connections on PORT
# (default: the plain server's), within 2 s.
answers() { timeout 2 bash -c "exec 3<>/dev/tcp/127.0.0.1/${1:-$port}" 2>/dev/null; }

install() {
	[[ -x $bin ]] && return
	log "installing versitygw $version with go install (a few minutes the first time)"
	mkdir -p "$(dirname "$bin")"
	GOBIN=$(dirname "$bin") GOFLAGS=-mod=mod go install "github.com/versity/versitygw/cmd/versitygw@$version" >&2
}

# make_tls generates, once, the throwaway CA and the HTTPS server's
# certificate (see the top).
make_tls() {
	[[ -f $tls/server.crt ]] && return
	mkdir -p "$tls"
	local key=(-newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes)
	openssl req -x509 "${key[@]}" -days 30 -subj "/CN=exactly s3 test CA" \
		-keyout "$tls/ca.key" -out "$tls/ca.crt" 2>/dev/null
	openssl req "${key[@]}" -subj "/CN=localhost" -keyout "$tls/server.key" -out "$tls/server.csr" 2>/dev/null
	printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n' >"$tls/server.ext"
	openssl x509 -req -in "$tls/server.csr" -CA "$tls/ca.crt" -CAkey "$tls/ca.key" -CAcreateserial \
		-days 30 -extfile "$tls/server.ext" -out "$tls/server.crt" 2>/dev/null
	chmod 600 "$tls/server.key"
}

# serve PIDFILE PORT [ARGS...] starts a versitygw on PORT over the data
# directory, with ARGS before the backend, unless it runs; it waits until
# the port answers.
serve() {
	local pf=$1 p=$2
	shift 2
	running "$pf" && return
	if answers "$p"; then
		log "port $p is in use by another process: set S3_PORT (or S3_TLS_PORT) to a free port"
		return 1
	fi
	# A bucket is a directory of the posix backend; creating it here needs no
	# client. --nometa is not used: ETags (for conditional writes) live in
	# extended attributes.
	ROOT_ACCESS_KEY_ID=$access ROOT_SECRET_ACCESS_KEY=$secret \
		setsid "$bin" --port "127.0.0.1:$p" "$@" posix "$data" </dev/null >>"$log" 2>&1 &
	echo $! >"$pf"
	for _ in $(seq 1 100); do
		answers "$p" && return
		running "$pf" || break
		sleep 0.1
	done
	log "versitygw did not start on port $p; see $log"
	tail -n 20 "$log" >&2
	return 1
}

start() {
	mkdir -p "$dir" "$data/$bucket"
	install
	serve "$pidfile" "$port"
	if [[ -n $tls_port ]]; then
		make_tls
		serve "$tls_pidfile" "$tls_port" --cert "$tls/server.crt" --key "$tls/server.key"
		echo "EXACTLY_S3_TLS=https://127.0.0.1:$tls_port"
		echo "EXACTLY_S3_TLS_CA=$tls/ca.crt"
	fi
	log "versitygw $version ready on 127.0.0.1:$port (pid $(cat "$pidfile"), data $data, bucket $bucket${tls_port:+; HTTPS on $tls_port})"
	echo "EXACTLY_S3=http://127.0.0.1:$port"
}

# stop_one PIDFILE SIGNAL stops the server of PIDFILE with SIGNAL, then
# SIGKILL after 5 s.
stop_one() {
	local pf=$1
	running "$pf" || { rm -f "$pf"; return 0; }
	local pid
	pid=$(cat "$pf")
	kill -"$2" "$pid" 2>/dev/null || true
	for _ in $(seq 1 50); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
	kill -0 "$pid" 2>/dev/null && kill -KILL "$pid" 2>/dev/null
	rm -f "$pf"
}

stop() {
	stop_one "$pidfile" "$1"
	stop_one "$tls_pidfile" "$1"
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
