#!/usr/bin/env bash
# kafka-up-sasl.sh up CERT_DIR | down | status
#
# A second throwaway Apache Kafka, for the security tests: one combined
# broker + KRaft controller on 127.0.0.1 with these listeners (free ports):
#
#   PLAINTEXT  no TLS, no auth (admin: creating topics; inter-broker)
#   SSL        TLS, no client certificate ("TLS only")
#   MTLS       TLS, client certificate required (mutual TLS)
#   SASL_SSL   TLS + SASL: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER
#              (Kafka's unsecured JWT validator: for tests only)
#
# ACLs are enforced (KRaft's StandardAuthorizer) on the topics and groups
# that have some: the tests of denied ACLs put them on their own; the
# others have none and stay open to everyone. Super users: User:ANONYMOUS
# (the PLAINTEXT and CONTROLLER listeners: the broker, the controller and
# the tests' admin client) and the SASL user below.
#
# `up` needs, in CERT_DIR (the tests make them with Go's crypto/x509):
#   ca.pem      the CA that signs the server and the client certificates
#   server.pem  the broker's PKCS #8 key, then its certificate (a PEM keystore)
# and in the environment KAFKA_SASL_USER and KAFKA_SASL_PASSWORD
# ([A-Za-z0-9_.-]): the user of PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512
# (SCRAM credentials are written at format time: kafka-storage --add-scram).
# It replaces any broker it started before, and prints the listeners on
# stdout, one NAME=127.0.0.1:PORT a line (also in .tmp/kafka-sasl/listeners);
# messages go to stderr.
#
# `down` stops the broker and deletes .tmp/kafka-sasl. `status` prints the
# listeners when the broker runs, and fails when it does not.
#
# It uses the jars of scripts/kafka-up.sh (.tmp/kafka/libs, fetched with
# Maven when missing) and never touches that script's cluster.
# Environment: KAFKA_HEAP_OPTS (default -Xms256m -Xmx768m),
# KAFKA_START_TIMEOUT (seconds, default 120).
set -euo pipefail

prog=kafka-up-sasl
# shellcheck source=kafka/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/../kafka/lib.sh"

usage() {
	sed -n '2,36s/^# \{0,1\}//p' "${BASH_SOURCE[0]}" >&2
	exit 2
}

[ "$#" -ge 1 ] || usage
cmd=$1
shift

# The jars are shared with scripts/kafka-up.sh: fetch them under its lock,
# then work in our own state directory with our own lock.
main_state=$state
state="$repo/.tmp/kafka-sasl"
export KAFKA_HEAP_OPTS=${KAFKA_HEAP_OPTS:--Xms256m -Xmx768m}

ensure_shared_libs() {
	libs_complete && return 0
	local saved=$state
	state=$main_state
	take_lock 900
	ensure_libs
	exec 9>&-
	state=$saved
}

stop_ours() {
	local pids=() pid
	if pid=$(node_pid 1); then pids+=("$pid"); fi
	for pid in $(stray_pids); do
		case " ${pids[*]} " in *" $pid "*) ;; *) pids+=("$pid") ;; esac
	done
	[ "${#pids[@]}" -eq 0 ] || stop_pids 20 "${pids[@]}"
}

print_listeners() {
	[ -r "$state/listeners" ] || return 1
	cat "$state/listeners"
}

write_config() {
	local certs=$1 user=$2 pass=$3 config
	config=$(node_config 1)
	mkdir -p "$(node_dir 1)"
	(
		umask 077
		cat >"$config" <<EOF
# Written by scripts/kafka-up-sasl.sh: a throwaway broker for security tests.
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:${ports[4]}
listeners=PLAINTEXT://127.0.0.1:${ports[0]},SSL://127.0.0.1:${ports[1]},MTLS://127.0.0.1:${ports[2]},SASL_SSL://127.0.0.1:${ports[3]},CONTROLLER://127.0.0.1:${ports[4]}
advertised.listeners=PLAINTEXT://127.0.0.1:${ports[0]},SSL://127.0.0.1:${ports[1]},MTLS://127.0.0.1:${ports[2]},SASL_SSL://127.0.0.1:${ports[3]},CONTROLLER://127.0.0.1:${ports[4]}
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SSL:SSL,MTLS:SSL,SASL_SSL:SASL_SSL
log.dirs=$(node_dir 1)/data

ssl.keystore.type=PEM
ssl.keystore.location=$certs/server.pem
ssl.truststore.type=PEM
ssl.truststore.location=$certs/ca.pem
ssl.client.auth=none
listener.name.mtls.ssl.client.auth=required

sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512,OAUTHBEARER
listener.name.sasl_ssl.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required user_$user="$pass";
listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;
listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;
listener.name.sasl_ssl.oauthbearer.sasl.jaas.config=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;

authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer
super.users=User:ANONYMOUS;User:$user
allow.everyone.if.no.acl.found=true

default.replication.factor=1
min.insync.replicas=1
offsets.topic.replication.factor=1
offsets.topic.num.partitions=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
transaction.state.log.num.partitions=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
group.initial.rebalance.delay.ms=0
group.min.session.timeout.ms=2000
auto.create.topics.enable=false
num.partitions=1
num.network.threads=2
num.io.threads=2
num.replica.fetchers=1
EOF
	)
}

case "$cmd" in
up)
	[ "$#" -eq 1 ] || usage
	certs=$(cd "$1" && pwd -P) || die "no directory $1"
	[ -r "$certs/ca.pem" ] && [ -r "$certs/server.pem" ] || die "$certs needs ca.pem and server.pem"
	user=${KAFKA_SASL_USER:-}
	pass=${KAFKA_SASL_PASSWORD:-}
	[[ "$user" =~ ^[A-Za-z0-9_.-]+$ ]] || die "set KAFKA_SASL_USER ([A-Za-z0-9_.-])"
	[[ "$pass" =~ ^[A-Za-z0-9_.-]+$ ]] || die "set KAFKA_SASL_PASSWORD ([A-Za-z0-9_.-])"
	check_java
	ensure_shared_libs
	take_lock 900
	stop_ours
	find "$state" -mindepth 1 -maxdepth 1 ! -name lock -exec rm -rf {} +
	started=$SECONDS
	for _ in 1 2 3; do
		pick_ports 5
		write_config "$certs" "$user" "$pass"
		"$java_bin" -Xmx256m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 \
			"-Dlog4j2.configurationFile=$kafka_src/tools-log4j2.properties" -cp "$libs/*" \
			kafka.tools.StorageTool format -t "$(cluster_id)" \
			-c "$(node_config 1)" \
			--add-scram "SCRAM-SHA-256=[name=\"$user\",password=\"$pass\"]" \
			--add-scram "SCRAM-SHA-512=[name=\"$user\",password=\"$pass\"]" \
			</dev/null >"$(node_dir 1)/format.log" 2>&1 ||
			{
				cat "$(node_dir 1)/format.log" >&2
				die "could not format the KRaft storage"
			}
		log "starting Kafka $(kafka_version) with SSL, MTLS and SASL_SSL listeners (log: $(node_log 1))"
		launch_node 1
		if wait_brokers 1 "${KAFKA_START_TIMEOUT:-120}"; then
			{
				echo "PLAINTEXT=127.0.0.1:${ports[0]}"
				echo "SSL=127.0.0.1:${ports[1]}"
				echo "MTLS=127.0.0.1:${ports[2]}"
				echo "SASL_SSL=127.0.0.1:${ports[3]}"
			} >"$state/listeners"
			log "up in $((SECONDS - started))s"
			print_listeners
			exit 0
		fi
		grep -qs 'Address already in use' "$(node_log 1)" || {
			stop_ours
			die "the broker did not start; see $(node_log 1)"
		}
		log "a port was taken meanwhile; trying again with other ports"
		stop_ours
		find "$state" -mindepth 1 -maxdepth 1 ! -name lock -exec rm -rf {} +
	done
	die "the broker did not start after 3 tries"
	;;
down)
	[ -d "$state" ] || {
		log "nothing recorded in $state"
		exit 0
	}
	take_lock 900
	stop_ours
	find "$state" -mindepth 1 -maxdepth 1 ! -name lock -exec rm -rf {} +
	log "stopped and removed $state"
	;;
status)
	node_pid 1 >/dev/null || die "not running"
	print_listeners
	;;
*)
	usage
	;;
esac
