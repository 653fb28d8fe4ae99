#!/usr/bin/env bash
# kafka.sh runs a single-node Apache Kafka broker (KRaft) for tests.
#
#   scripts/kafka.sh start     fetch the jars (mvn, cached in ~/.m2), format the
#                              storage once, start the broker, wait until it
#                              answers; the last line printed is
#                              EXACTLY_KAFKA_BROKERS=127.0.0.1:<port>
#   scripts/kafka.sh stop      stop the broker (SIGTERM, then SIGKILL)
#   scripts/kafka.sh kill      SIGKILL the broker (its data is kept)
#   scripts/kafka.sh restart   SIGKILL the broker and start it again on the same data
#   scripts/kafka.sh status    print the broker address if it runs
#   scripts/kafka.sh clean     stop the broker and delete its data
#
# Environment: KAFKA_VERSION (default 4.1.1), KAFKA_PORT (default 29092),
# KAFKA_CONTROLLER_PORT (default KAFKA_PORT+1), KAFKA_DIR (default
# <repo>/.tmp/kafka), KAFKA_TRANSACTION_VERSION (transaction.version feature
# written at format time, 2 = KIP-890 protocol, default: the release's default),
# KAFKA_PROXY_PORT (unset by default: no extra listener; when set, the broker
# gets a second listener PROXY on KAFKA_PROXY_LISTENER_PORT, default
# KAFKA_PORT+2, that advertises 127.0.0.1:KAFKA_PROXY_PORT, so a client that
# bootstraps through a TCP proxy listening there, forwarding to the PROXY
# listener, makes every broker connection through the proxy; the torture
# suite uses this with toxiproxy), KAFKA_READY_TIMEOUT (seconds a start waits
# for the broker to register, default 240: on a loaded 2-core machine a
# restart took over 90), KAFKA_JARS (the directory of the broker's jars,
# default KAFKA_DIR/jars-<version>: a second broker can share the first
# one's), KAFKA_JAVA_OPTS (more JVM options for the broker and its tools;
# scripts/test.sh sets options that halve the CPU a start takes, for the
# many restarts of the tests). The listeners are written at every start.
# start is idempotent: a running broker is reused.
#
# Secured listeners (issue 34): besides PLAINTEXT, the broker listens with
# SASL_SSL (SCRAM-SHA-512) on KAFKA_SASL_SSL_PORT (default KAFKA_PORT+5)
# and with SSL requiring a client certificate (mTLS) on KAFKA_MTLS_PORT
# (default KAFKA_PORT+6), both with a throwaway CA generated once per data
# directory (openssl, nothing checked in, valid 30 days): in
# KAFKA_DIR/tls, ca.crt (and ca.key, for tests that sign certificates of
# their own), the broker's certificate for localhost and 127.0.0.1, and
# client.crt/client.key for the user exactly-mtls (the certificate's CN is
# the principal). ACLs are enforced (StandardAuthorizer): the PLAINTEXT
# and controller listeners' ANONYMOUS principal is a super user, so tests
# on them need none; a SCRAM user (created by the tests through the admin
# API) or the mTLS user needs the ACLs granted to it. start and status
# print EXACTLY_KAFKA_SASL_SSL, EXACTLY_KAFKA_MTLS and EXACTLY_KAFKA_TLS_DIR
# before the EXACTLY_KAFKA_BROKERS line.
#
# The default ports lie below Linux's ephemeral range (32768-60999): there, a
# client connection's local port could hold a listener port when the broker
# restarts, and the start fails with "Address already in use" (seen in CI).
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
version=${KAFKA_VERSION:-4.1.1}
port=${KAFKA_PORT:-29092}
cport=${KAFKA_CONTROLLER_PORT:-$((port + 1))}
dir=${KAFKA_DIR:-$repo/.tmp/kafka}
proxy_port=${KAFKA_PROXY_PORT:-}
proxy_listener_port=${KAFKA_PROXY_LISTENER_PORT:-$((port + 2))}
sasl_port=${KAFKA_SASL_SSL_PORT:-$((port + 5))}
mtls_port=${KAFKA_MTLS_PORT:-$((port + 6))}
jars=${KAFKA_JARS:-$dir/jars-$version}
data=$dir/data
pidfile=$dir/broker.pid
log=$dir/broker.log
tls=$dir/tls

log() { echo "kafka.sh: $*" >&2; }

running() { [[ -f $pidfile ]] && kill -0 "$(cat "$pidfile")" 2>/dev/null; }

# A connect that the listener's full backlog leaves unanswered would hang
# for minutes (SYN retries): it is bounded to 2s and counts as not ready.
port_busy() { timeout 2 bash -c 'exec 3<>"/dev/tcp/127.0.0.1/$0"' "$1" 2>/dev/null; }

fetch_jars() {
	[[ -f $jars/.complete ]] && return
	log "fetching Apache Kafka $version jars from Maven Central (cached in ~/.m2)"
	mkdir -p "$dir/pom"
	cat >"$dir/pom/pom.xml" <<EOF
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>exactly.test</groupId>
  <artifactId>kafka-broker</artifactId>
  <version>1</version>
  <dependencies>
    <dependency>
      <groupId>org.apache.kafka</groupId>
      <artifactId>kafka_2.13</artifactId>
      <version>$version</version>
    </dependency>
    <dependency>
      <groupId>org.apache.logging.log4j</groupId>
      <artifactId>log4j-slf4j-impl</artifactId>
      <version>2.24.3</version>
    </dependency>
  </dependencies>
</project>
EOF
	rm -rf "$jars"
	mvn -q -B -f "$dir/pom/pom.xml" dependency:copy-dependencies \
		-DincludeScope=runtime -DoutputDirectory="$jars" >&2
	touch "$jars/.complete"
}

# make_tls generates, once, the throwaway CA and the broker's and the mTLS
# user's certificates, each signed by it and valid 30 days. The broker's
# key and certificate go into one PEM file (its keystore); its key is
# PKCS#8, as Kafka's PEM keystore wants it.
make_tls() {
	[[ -f $tls/broker.pem && -f $tls/client.crt ]] && return
	mkdir -p "$tls"
	local key=(-newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes)
	openssl req -x509 "${key[@]}" -days 30 -subj "/CN=exactly kafka test CA" \
		-keyout "$tls/ca.key" -out "$tls/ca.crt" 2>/dev/null
	sign() { # sign NAME SUBJECT EXTENSIONS
		openssl req "${key[@]}" -subj "$2" -keyout "$tls/$1.key" -out "$tls/$1.csr" 2>/dev/null
		printf '%b' "$3" >"$tls/$1.ext"
		openssl x509 -req -in "$tls/$1.csr" -CA "$tls/ca.crt" -CAkey "$tls/ca.key" -CAcreateserial \
			-days 30 -extfile "$tls/$1.ext" -out "$tls/$1.crt" 2>/dev/null
	}
	sign broker "/CN=localhost" 'subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth,clientAuth\n'
	sign client "/CN=exactly-mtls" 'extendedKeyUsage=clientAuth\n'
	cat "$tls/broker.key" "$tls/broker.crt" >"$tls/broker.pem"
	chmod 600 "$tls"/*.key "$tls/broker.pem"
}

write_config() {
	local listeners="PLAINTEXT://127.0.0.1:$port,CONTROLLER://127.0.0.1:$cport"
	local advertised="PLAINTEXT://127.0.0.1:$port"
	local protocols="PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT"
	listeners+=",SASL_SSL://127.0.0.1:$sasl_port,SSL://127.0.0.1:$mtls_port"
	advertised+=",SASL_SSL://127.0.0.1:$sasl_port,SSL://127.0.0.1:$mtls_port"
	protocols+=",SASL_SSL:SASL_SSL,SSL:SSL"
	if [[ -n $proxy_port ]]; then
		listeners+=",PROXY://127.0.0.1:$proxy_listener_port"
		advertised+=",PROXY://127.0.0.1:$proxy_port"
		protocols+=",PROXY:PLAINTEXT"
	fi
	cat >"$dir/server.properties" <<EOF
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:$cport
listeners=$listeners
advertised.listeners=$advertised
controller.listener.names=CONTROLLER
listener.security.protocol.map=$protocols
inter.broker.listener.name=PLAINTEXT
log.dirs=$data
num.partitions=1
default.replication.factor=1
offsets.topic.replication.factor=1
offsets.topic.num.partitions=4
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
transaction.state.log.num.partitions=4
min.insync.replicas=1
group.initial.rebalance.delay.ms=0
# KIP-848 consumer groups (kafka.GroupProtocolConsumer) take their session
# timeout and heartbeat interval from group configs, which the broker bounds
# (defaults 45s and 5s); the tests use sessions of a few seconds, as with the
# classic protocol (whose minimum, group.min.session.timeout.ms, is 6s).
group.consumer.min.session.timeout.ms=1000
group.consumer.min.heartbeat.interval.ms=200
auto.create.topics.enable=false
log.flush.interval.messages=9223372036854775807
# The secured listeners (see the top of scripts/kafka.sh).
ssl.keystore.type=PEM
ssl.keystore.location=$tls/broker.pem
ssl.truststore.type=PEM
ssl.truststore.location=$tls/ca.crt
listener.name.ssl.ssl.client.auth=required
ssl.principal.mapping.rules=RULE:^CN=([^,]+)\$/\$1/,DEFAULT
sasl.enabled.mechanisms=SCRAM-SHA-512
listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;
authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer
super.users=User:ANONYMOUS
EOF
	cat >"$dir/log4j2.yaml" <<EOF
Configuration:
  Appenders:
    Console:
      name: STDOUT
      PatternLayout:
        Pattern: "[%d] %p %m (%c)%n"
  Loggers:
    Root:
      level: WARN
      AppenderRef:
        - ref: STDOUT
    Logger:
      - name: kafka.server.KafkaRaftServer
        level: INFO
EOF
}

# java_args are the JVM options of the broker and its tools.
java_args() {
	local extra
	read -r -a extra <<<"${KAFKA_JAVA_OPTS:-}"
	printf '%s\n' -Xmx512m -Xms128m -XX:+UseSerialGC "${extra[@]}" \
		"-Dlog4j2.configurationFile=$dir/log4j2.yaml" -cp "$jars/*"
}

run_java() {
	local args
	mapfile -t args < <(java_args)
	java "${args[@]}" "$@"
}

format() {
	[[ -f $data/meta.properties ]] && return
	log "formatting KRaft storage in $data"
	local feature=()
	[[ -n ${KAFKA_TRANSACTION_VERSION:-} ]] && feature=(--feature "transaction.version=$KAFKA_TRANSACTION_VERSION")
	run_java kafka.tools.StorageTool format -t "$(cat /proc/sys/kernel/random/uuid)" \
		-c "$dir/server.properties" "${feature[@]}" >&2
}

wait_ready() {
	local deadline=$((SECONDS + ${KAFKA_READY_TIMEOUT:-240}))
	while ((SECONDS < deadline)); do
		if ! running; then
			log "broker exited; last log lines:"
			tail -n 30 "$log" >&2
			return 1
		fi
		# Ready when the broker has registered: the log says so.
		if port_busy "$port" && grep -q "Kafka Server started" "$log" 2>/dev/null; then
			return 0
		fi
		sleep 0.3
	done
	log "broker not ready after ${KAFKA_READY_TIMEOUT:-240}s (KAFKA_READY_TIMEOUT); see $log"
	return 1
}

start() {
	mkdir -p "$dir"
	if running; then
		log "broker already running (pid $(cat "$pidfile"))"
		print_env
		return
	fi
	if port_busy "$port"; then
		log "port $port is in use by another process: set KAFKA_PORT to a free port"
		return 1
	fi
	fetch_jars
	make_tls
	write_config
	format
	# log4j2.yaml keeps WARN and above, and KafkaRaftServer's "Kafka Server started".
	: >"$log"
	local args
	mapfile -t args < <(java_args)
	setsid java "${args[@]}" kafka.Kafka "$dir/server.properties" </dev/null >>"$log" 2>&1 &
	echo $! >"$pidfile"
	wait_ready
	log "broker $version ready on 127.0.0.1:$port (pid $(cat "$pidfile"), data $data; SASL_SSL on $sasl_port, mTLS on $mtls_port)"
	print_env
}

# print_env prints the broker's addresses; the last line is the plaintext one.
print_env() {
	echo "EXACTLY_KAFKA_SASL_SSL=127.0.0.1:$sasl_port"
	echo "EXACTLY_KAFKA_MTLS=127.0.0.1:$mtls_port"
	echo "EXACTLY_KAFKA_TLS_DIR=$tls"
	echo "EXACTLY_KAFKA_BROKERS=127.0.0.1:$port"
}

stop_with() {
	running || { rm -f "$pidfile"; return 0; }
	local pid
	pid=$(cat "$pidfile")
	kill "-$1" "$pid" 2>/dev/null || true
	for _ in $(seq 1 100); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.2
	done
	kill -0 "$pid" 2>/dev/null && kill -KILL "$pid" 2>/dev/null
	while kill -0 "$pid" 2>/dev/null; do sleep 0.1; done
	rm -f "$pidfile"
}

case ${1:-} in
start) start ;;
stop) stop_with TERM ;;
kill) stop_with KILL ;;
restart)
	stop_with KILL
	start
	;;
status)
	running && print_env || { echo "not running" >&2; exit 1; }
	;;
clean)
	stop_with TERM
	rm -rf "$data" "$dir/server.properties" "$tls"
	;;
*)
	echo "usage: $0 start|stop|kill|restart|status|clean" >&2
	exit 2
	;;
esac
