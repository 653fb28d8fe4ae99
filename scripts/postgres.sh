#!/usr/bin/env bash
# postgres.sh runs a throwaway PostgreSQL server (Debian's package) for tests.
#
#   scripts/postgres.sh start              install the server package if initdb/pg_ctl
#                                          are missing, initdb once, start the server,
#                                          wait until it answers, create the database
#                                          and role "exactly"; prints
#                                          EXACTLY_POSTGRES_DATA=<data dir>,
#                                          EXACTLY_POSTGRES_TLS_CA=<CA certificate> and, as the
#                                          LAST line, EXACTLY_POSTGRES_DSN=postgres://...
#   scripts/postgres.sh stop               fast shutdown (pg_ctl stop -m fast)
#   scripts/postgres.sh kill               immediate shutdown (pg_ctl stop -m immediate):
#                                          no checkpoint, crash recovery at the next start
#   scripts/postgres.sh restart-immediate  kill, then start again on the same data
#   scripts/postgres.sh status             print the DSN if the server runs
#   scripts/postgres.sh clean              stop the server and delete its data
#
# The server listens on 127.0.0.1 only, with scram-sha-256 password
# authentication (user exactly, password exactly: a test-only server), fsync on
# and max_prepared_transactions=64; TLS is on with a throwaway CA generated at
# the first start (<data>.tls: see make_tls), the role exactly_tls (same
# password) may connect over TLS only, and the role exactly_cert over TLS
# with a client certificate only (signed by a second CA: see make_client_ca).
# Server commands run as the "postgres" user
# when the script runs as root (initdb refuses root).
#
# Environment: POSTGRES_PORT (default 25432, the next free port if taken by
# something else), EXACTLY_POSTGRES_DATA (data directory, default
# <repo>/.tmp/postgres; tests that restart the server use the same default).
# start is idempotent: a running server is reused.
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
data=${EXACTLY_POSTGRES_DATA:-$repo/.tmp/postgres}
port=${POSTGRES_PORT:-25432}
log=$data.log
tls=$data.tls
user=exactly
password=exactly
database=exactly
# tls_user may connect over TLS only (hostssl; hostnossl rejects it).
tls_user=exactly_tls
# cert_user may connect over TLS only, authenticated by a client
# certificate whose CN is its name, signed by the client CA (pg_hba
# "cert"; no password).
cert_user=exactly_cert

log() { echo "postgres.sh: $*" >&2; }

find_bin() {
	local d
	for d in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V -r); do
		if [[ -x $d/initdb && -x $d/pg_ctl ]]; then
			echo "$d"
			return
		fi
	done
}

bin=$(find_bin)

install_server() {
	[[ -n $bin ]] && return
	log "installing Debian's postgresql package"
	local sudo=()
	[[ $(id -u) -eq 0 ]] || sudo=(sudo)
	"${sudo[@]}" apt-get update -q >&2
	DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -q postgresql >&2
	bin=$(find_bin)
	[[ -n $bin ]] || { log "no initdb/pg_ctl under /usr/lib/postgresql/*/bin after installing"; exit 1; }
}

# as_server runs a command as the server's owner: "postgres" when we are root.
as_server() {
	if [[ $(id -u) -eq 0 ]]; then
		runuser -u postgres -- "$@"
	else
		"$@"
	fi
}

pg_ctl() { as_server "$bin/pg_ctl" -D "$data" "$@"; }

running() { [[ -n $bin && -f $data/PG_VERSION ]] && pg_ctl status >/dev/null 2>&1; }

port_busy() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# current_port reads the port the data directory was configured with.
current_port() { sed -n "s/^port = \([0-9]*\).*/\1/p" "$data/postgresql.auto.conf" "$data/postgresql.conf" 2>/dev/null | tail -n 1; }

dsn() { echo "postgres://$user:$password@127.0.0.1:$(current_port)/$database?sslmode=disable"; }

print_address() {
	echo "EXACTLY_POSTGRES_DATA=$data"
	echo "EXACTLY_POSTGRES_TLS_CA=$tls/ca.crt"
	echo "EXACTLY_POSTGRES_DSN=$(dsn)"
}

# make_tls generates, once, a throwaway CA and a server certificate it
# signs for the name "localhost" only (not 127.0.0.1, so that a client
# connecting by address sees a hostname mismatch), valid 30 days. Nothing
# of it is checked in; the tests read the CA at $tls/ca.crt (and its key,
# to sign certificates of their own).
make_tls() {
	[[ -f $tls/server.crt ]] && return
	mkdir -p "$tls"
	openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 30 \
		-subj "/CN=exactly test CA" -keyout "$tls/ca.key" -out "$tls/ca.crt" 2>/dev/null
	openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
		-subj "/CN=localhost" -keyout "$tls/server.key" -out "$tls/server.csr" 2>/dev/null
	printf 'subjectAltName=DNS:localhost\nextendedKeyUsage=serverAuth\n' >"$tls/server.ext"
	openssl x509 -req -in "$tls/server.csr" -CA "$tls/ca.crt" -CAkey "$tls/ca.key" -CAcreateserial \
		-days 30 -extfile "$tls/server.ext" -out "$tls/server.crt" 2>/dev/null
	chmod 600 "$tls/server.key"
	if [[ $(id -u) -eq 0 ]]; then chown -R postgres: "$tls"; fi
	chmod 644 "$tls/ca.crt" "$tls/ca.key"
}

# make_client_ca generates, once, a second throwaway CA, for the client
# certificates the server accepts (ssl_ca_file), in $tls/client-ca.crt and
# .key: the tests sign their client certificates with it. A CA of its own,
# not the server's: with the server's CA in ssl_ca_file, the server would
# send it along with its certificate, and a client's own CA file would
# no longer be the only root it checks (TestTLS's expired CA).
make_client_ca() {
	[[ -f $tls/client-ca.crt ]] && return
	openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 30 \
		-subj "/CN=exactly test client CA" -keyout "$tls/client-ca.key" -out "$tls/client-ca.crt" 2>/dev/null
	if [[ $(id -u) -eq 0 ]]; then chown postgres: "$tls/client-ca.crt" "$tls/client-ca.key"; fi
	chmod 644 "$tls/client-ca.crt" "$tls/client-ca.key"
}

# write_hba writes the server's pg_hba.conf: the local socket for the
# script, TLS only for $tls_user, TLS with a client certificate only for
# $cert_user, passwords over loopback TCP for the rest.
write_hba() {
	printf '%s\n' \
		'# scripts/postgres.sh: local socket for the script, TLS only for the TLS user, passwords over loopback TCP' \
		'local     all all          trust' \
		"hostssl   all $tls_user 127.0.0.1/32 scram-sha-256" \
		"hostnossl all $tls_user 127.0.0.1/32 reject" \
		"hostssl   all $cert_user 127.0.0.1/32 cert" \
		"hostnossl all $cert_user 127.0.0.1/32 reject" \
		'host      all all          127.0.0.1/32 scram-sha-256' >"$data/pg_hba.conf"
	if [[ $(id -u) -eq 0 ]]; then chown postgres: "$data/pg_hba.conf"; fi
}

init_data() {
	[[ -f $data/PG_VERSION ]] && return
	while port_busy "$port"; do
		port=$((port + 1))
	done
	log "initdb into $data (port $port)"
	mkdir -p "$data"
	# Only the data directory becomes the server's: its parent may be a
	# user's own directory, which must keep its owner.
	[[ $(id -u) -eq 0 ]] && chown postgres: "$data"
	if ! as_server test -x "$data"; then
		log "the server's user cannot enter $data: give EXACTLY_POSTGRES_DATA a directory whose parents every user may enter (chmod o+x)"
		exit 1
	fi
	chmod 700 "$data"
	local pwfile
	pwfile=$(mktemp)
	echo "$password" >"$pwfile"
	[[ $(id -u) -eq 0 ]] && chown postgres: "$pwfile"
	as_server "$bin/initdb" -D "$data" -U postgres --auth-local=trust --auth-host=scram-sha-256 \
		--pwfile="$pwfile" -E UTF8 --locale=C.UTF-8 >&2
	rm -f "$pwfile"
	cat >>"$data/postgresql.conf" <<EOF
# scripts/postgres.sh
listen_addresses = '127.0.0.1'
port = $port
unix_socket_directories = '$data'
max_prepared_transactions = 64
max_connections = 200
fsync = on
synchronous_commit = on
EOF
	write_hba
}

start_server() {
	touch "$log"
	[[ $(id -u) -eq 0 ]] && chown postgres: "$log"
	pg_ctl -l "$log" -w -t 60 start >&2 || { tail -n 30 "$log" >&2; exit 1; }
	local i
	for i in $(seq 1 60); do
		as_server "$bin/pg_isready" -q -h 127.0.0.1 -p "$(current_port)" && return
		sleep 0.5
	done
	log "the server did not become ready; see $log"
	exit 1
}

psql_admin() { as_server "$bin/psql" -X -q -v ON_ERROR_STOP=1 -h "$data" -p "$(current_port)" -U postgres -d postgres "$@"; }

create_database() {
	if [[ -z $(psql_admin -tAc "SELECT 1 FROM pg_roles WHERE rolname = '$user'") ]]; then
		psql_admin -c "CREATE ROLE $user LOGIN PASSWORD '$password'" >&2
	fi
	# The tests create throwaway roles with passwords of their own
	# (internal/secretscan scans logs for them).
	psql_admin -c "ALTER ROLE $user CREATEROLE" >&2
	if [[ -z $(psql_admin -tAc "SELECT 1 FROM pg_database WHERE datname = '$database'") ]]; then
		psql_admin -c "CREATE DATABASE $database OWNER $user" >&2
	fi
}

# enable_tls turns TLS on with the generated certificate (see make_tls),
# creates the TLS-only role and reloads the server's configuration;
# idempotent.
enable_tls() {
	make_tls
	make_client_ca
	write_hba
	if [[ -z $(psql_admin -tAc "SELECT 1 FROM pg_roles WHERE rolname = '$cert_user'") ]]; then
		psql_admin -c "CREATE ROLE $cert_user LOGIN" >&2
	fi
	# Once, when the TLS role is created: the two roles share the public
	# schema's tables (the sinks' progress and owner tables among them)
	# whichever creates them, and the plain role may drop the TLS role's
	# tables (it is a member). Not at every start: a restart under a
	# running job (the torture suite's) met "tuple concurrently deleted"
	# in GRANT … ON ALL TABLES while the job dropped a staging table.
	if [[ -z $(psql_admin -tAc "SELECT 1 FROM pg_roles WHERE rolname = '$tls_user'") ]]; then
		psql_admin -c "CREATE ROLE $tls_user LOGIN PASSWORD '$password'" >&2
		psql_admin -d "$database" -c "GRANT ALL ON SCHEMA public TO $tls_user" \
			-c "GRANT CREATE ON DATABASE $database TO $tls_user" -c "GRANT $tls_user TO $user" \
			-c "GRANT ALL ON ALL TABLES IN SCHEMA public TO $tls_user" \
			-c "ALTER DEFAULT PRIVILEGES FOR ROLE $user IN SCHEMA public GRANT ALL ON TABLES TO $tls_user" \
			-c "ALTER DEFAULT PRIVILEGES FOR ROLE $tls_user IN SCHEMA public GRANT ALL ON TABLES TO $user" >&2
	fi
	psql_admin -c "ALTER SYSTEM SET ssl = on" -c "ALTER SYSTEM SET ssl_cert_file = '$tls/server.crt'" \
		-c "ALTER SYSTEM SET ssl_key_file = '$tls/server.key'" -c "ALTER SYSTEM SET ssl_ca_file = '$tls/client-ca.crt'" \
		-c "SELECT pg_reload_conf()" >/dev/null
}

case ${1:-} in
start)
	install_server
	if ! running; then
		init_data
		start_server
	fi
	create_database
	enable_tls
	print_address
	;;
stop)
	running && pg_ctl stop -m fast -w >&2
	;;
kill)
	running && pg_ctl stop -m immediate -w >&2
	;;
restart-immediate)
	[[ -f $data/PG_VERSION ]] || { log "no data directory at $data: run start first"; exit 1; }
	running && pg_ctl stop -m immediate -w >&2
	start_server
	print_address
	;;
status)
	running && print_address
	;;
clean)
	running && pg_ctl stop -m fast -w >&2
	rm -rf "$data" "$log" "$tls"
	;;
*)
	echo "usage: $0 start|stop|kill|restart-immediate|status|clean" >&2
	exit 2
	;;
esac
