#!/usr/bin/env bash
# toxiproxy.sh runs Shopify's toxiproxy, a TCP fault proxy, for the torture
# suite (cmd/exactly/internal/torture), which controls it through its HTTP API.
#
#   scripts/toxiproxy.sh start    install toxiproxy v2.5.0 with `go install`
#                                 (cached in TOXIPROXY_DIR/bin) if missing, start
#                                 it, wait until its API answers; the last line
#                                 printed is EXACTLY_TOXIPROXY=127.0.0.1:<port>
#   scripts/toxiproxy.sh stop     stop it (SIGTERM, then SIGKILL)
#   scripts/toxiproxy.sh status   print the API address if it runs
#
# The module's server command is github.com/Shopify/toxiproxy/v2/cmd/server
# (the binary is named "server"; toxiproxy-server is its release name).
#
# Environment: TOXIPROXY_PORT (API port, default 28474), TOXIPROXY_DIR
# (default <repo>/.tmp/toxiproxy). start is idempotent.
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
version=v2.5.0
port=${TOXIPROXY_PORT:-28474}
dir=${TOXIPROXY_DIR:-$repo/.tmp/toxiproxy}
bin=$dir/bin/server
pidfile=$dir/toxiproxy.pid
log=$dir/toxiproxy.log

log() { echo "toxiproxy.sh: $*" >&2; }

running() { [[ -f $pidfile ]] && kill -0 "$(cat "$pidfile")" 2>/dev/null; }

answers() { (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; }

install() {
	[[ -x $bin ]] && return
	log "installing toxiproxy $version with go install"
	mkdir -p "$dir/bin"
	GOBIN=$dir/bin GOFLAGS=-mod=mod go install "github.com/Shopify/toxiproxy/v2/cmd/server@$version" >&2
}

start() {
	mkdir -p "$dir"
	if running; then
		log "already running (pid $(cat "$pidfile"))"
		echo "EXACTLY_TOXIPROXY=127.0.0.1:$port"
		return
	fi
	if answers; then
		log "port $port is in use by another process: set TOXIPROXY_PORT to a free port"
		return 1
	fi
	install
	setsid "$bin" -host 127.0.0.1 -port "$port" </dev/null >"$log" 2>&1 &
	echo $! >"$pidfile"
	for _ in $(seq 1 100); do
		if answers; then
			log "toxiproxy $version ready on 127.0.0.1:$port (pid $(cat "$pidfile"))"
			echo "EXACTLY_TOXIPROXY=127.0.0.1:$port"
			return
		fi
		running || break
		sleep 0.1
	done
	log "toxiproxy did not start; see $log"
	tail -n 20 "$log" >&2
	return 1
}

stop() {
	running || { rm -f "$pidfile"; return 0; }
	local pid
	pid=$(cat "$pidfile")
	kill -TERM "$pid" 2>/dev/null || true
	for _ in $(seq 1 50); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
	kill -0 "$pid" 2>/dev/null && kill -KILL "$pid" 2>/dev/null
	rm -f "$pidfile"
}

case ${1:-} in
start) start ;;
stop) stop ;;
status)
	running && echo "EXACTLY_TOXIPROXY=127.0.0.1:$port" || { echo "not running" >&2; exit 1; }
	;;
*)
	echo "usage: $0 start|stop|status" >&2
	exit 2
	;;
esac
