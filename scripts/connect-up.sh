#!/usr/bin/env bash
# connect-up.sh [BROKERS] starts a throwaway Kafka Connect worker (distributed
# mode, one worker) with the Debezium JDBC sink and the Debezium PostgreSQL
# source connector installed, and prints its REST URL on stdout; everything
# else goes to stderr.
#
# BROKERS is a bootstrap list (host:port,...); default $CONNECT_BROKERS, else
# the cluster of scripts/kafka-up.sh (started when it is not running).
# Connectors are then created through the REST API, e.g.
#   url=$(scripts/connect-up.sh)
#   curl -s -X PUT -H 'Content-Type: application/json' "$url/connectors/pg-sink/config" -d @sink.json
#   curl -s "$url/connectors/pg-sink/status"
# Their configurations live in the worker's Kafka topics, so a worker killed
# and started again (this script, again) resumes them. The worker's
# defaults: JsonConverter with schemas for keys and values, offsets
# committed every 60 s, any consumer.override.* allowed.
# `connect-up.sh --fetch` only fetches the jars (exit 1 when Maven cannot).
#
# Environment:
#   CONNECT_INSTANCE         the worker's name (default "worker"): several
#                            workers of one checkout each have a directory
#   CONNECT_BROKERS          the bootstrap list when none is given
#   CONNECT_HEAP_OPTS        the heap (default -Xms256m -Xmx2g, as Kafka's
#                            connect-distributed.sh)
#   CONNECT_OFFSET_FLUSH_MS  offset.flush.interval.ms (default 60000)
#   CONNECT_WORKER_PROPS     more worker settings, one key=value a line,
#                            e.g. consumer.session.timeout.ms=10000
#   CONNECT_START_TIMEOUT    seconds to wait for the REST API (default 120)
#   CONNECT_MVN_ARGS         extra Maven flags, e.g. -o (offline)
# Needs Java 17+, curl, and Maven for the first fetch of the jars (about
# 100 jars, 80 MB, from Maven Central, cached in ~/.m2; see connect/pom.xml
# for the versions).
#
# State, in .tmp/connect of the repository:
#   runtime/, plugins/       the jars (kept by connect-down.sh)
#   <instance>/url           the REST URL printed on stdout
#   <instance>/env           shell-sourceable: CONNECT_URL, CONNECT_PID_FILE,
#                            CONNECT_LOG, CONNECT_CONFIG, CONNECT_BROKERS,
#                            CONNECT_GROUP, CONNECT_VERSION, DEBEZIUM_VERSION,
#                            CONNECT_PLUGINS, CONNECT_CLASSPATH, CONNECT_JAVA_OPTS
#   <instance>/worker.properties, pid, connect.log (appended at every start)
#
# Idempotent: when the recorded worker answers, its URL is printed again;
# when it is recorded but stopped (killed), it is started again with the
# same group and topics, and resumes its connectors. A worker recorded
# against other brokers is stopped and replaced by a new one.
set -euo pipefail

prog=connect-up
# shellcheck source=connect/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/../connect/lib.sh"

if [ "${1:-}" = --fetch ]; then
	check_java
	connect_lock 900
	ensure_jars
	log "jars in $connect_runtime and $connect_plugins"
	exit 0
fi

wait_secs=${CONNECT_START_TIMEOUT:-120}
flush_ms=${CONNECT_OFFSET_FLUSH_MS:-60000}
case "$flush_ms" in
'' | *[!0-9]*) die "CONNECT_OFFSET_FLUSH_MS is '$flush_ms': give milliseconds, e.g. 60000" ;;
esac

brokers=${1:-${CONNECT_BROKERS:-}}
if [ -z "$brokers" ]; then
	log "no brokers given: using the cluster of scripts/kafka-up.sh"
	brokers=$("$repo/scripts/kafka-up.sh")
fi
case "$brokers" in
*[!A-Za-z0-9.:,_[\]-]*) die "BROKERS is '$brokers': give host:port,host:port" ;;
esac

command -v curl >/dev/null 2>&1 || die "no curl on PATH: it checks the worker's REST API (Debian: apt-get install -y curl)"
check_java
connect_lock 900
ensure_jars

# write_config writes the instance's worker.properties for group $1 and
# REST port $2.
write_config() {
	mkdir -p "$inst"
	sed -e "s|@BROKERS@|$brokers|g" \
		-e "s|@GROUP@|$1|g" \
		-e "s|@PORT@|$2|g" \
		-e "s|@PLUGINS@|$connect_plugins|g" \
		-e "s|@OFFSET_FLUSH_MS@|$flush_ms|g" \
		"$connect_src/worker.properties.in" >"$inst_config.new"
	if grep -v '^#' "$inst_config.new" | grep -q '@[A-Z_]*@'; then
		die "unreplaced @NAME@ left in $inst_config.new"
	fi
	if [ -n "${CONNECT_WORKER_PROPS:-}" ]; then
		printf '\n# CONNECT_WORKER_PROPS\n%s\n' "$CONNECT_WORKER_PROPS" >>"$inst_config.new"
	fi
	mv "$inst_config.new" "$inst_config"
}

# record writes the env and url files of the running worker and prints the
# URL.
record() {
	local url
	url=$(worker_url)
	worker_java_opts
	{
		echo "# Written by scripts/connect-up.sh: a throwaway Kafka Connect worker."
		echo "CONNECT_URL=$(quote "$url")"
		echo "CONNECT_PID_FILE=$(quote "$inst_pidfile")"
		echo "CONNECT_LOG=$(quote "$inst_log")"
		echo "CONNECT_CONFIG=$(quote "$inst_config")"
		echo "CONNECT_BROKERS=$(quote "$(config_value bootstrap.servers)")"
		echo "CONNECT_GROUP=$(quote "$(config_value group.id)")"
		echo "CONNECT_VERSION=$(quote "$(pom_property kafka.version)")"
		echo "DEBEZIUM_VERSION=$(quote "$(pom_property debezium.version)")"
		echo "CONNECT_PLUGINS=$(quote "$connect_plugins")"
		echo "CONNECT_CLASSPATH=$(quote "$connect_runtime/*")"
		echo "CONNECT_JAVA_OPTS=$(quote "${java_opts[*]}")"
	} >"$inst/env.new"
	mv "$inst/env.new" "$inst/env"
	echo "$url" >"$inst/url.new"
	mv "$inst/url.new" "$inst/url"
	echo "$url"
}

# start_recorded starts the recorded, stopped worker again (another REST
# port when its own was taken meanwhile).
start_recorded() {
	local port
	port=$(config_value rest.advertised.port)
	if ! port_is_free "$port"; then
		pick_ports 1
		log "REST port $port is taken; the worker moves to ${ports[0]}"
		write_config "$(config_value group.id)" "${ports[0]}"
	fi
	launch_worker
	wait_worker "$wait_secs"
}

if [ -f "$inst_config" ]; then
	if [ "$(config_value bootstrap.servers)" != "$brokers" ]; then
		log "the recorded worker ran against $(config_value bootstrap.servers), not $brokers: replacing it"
		if pid=$(worker_pid); then stop_pids 30 "$pid"; fi
		rm -rf "$inst"
	elif pid=$(worker_pid); then
		if wait_worker "$wait_secs"; then
			log "worker already running: pid $pid, group $(config_value group.id)"
			record
			exit 0
		fi
		die "the recorded worker (pid $pid) does not answer; scripts/connect-down.sh, then try again"
	else
		log "the recorded worker is not running; starting it again (group $(config_value group.id))"
		started=$SECONDS
		start_recorded || die "the worker did not start again; see $inst_log"
		log "up in $((SECONDS - started))s"
		record
		exit 0
	fi
fi

# A new worker. The group and its topics are new too (a random suffix), so
# no connector of an earlier worker on the same brokers comes back.
rm -rf "$inst"
mkdir -p "$inst"
group="kafka2pg-connect-$instance-$(head -c 4 /dev/urandom | od -An -tx1 | tr -d ' \n')"
started=$SECONDS
for _ in 1 2 3; do
	pick_ports 1
	write_config "$group" "${ports[0]}"
	log "starting Kafka Connect $(pom_property kafka.version) (Debezium $(pom_property debezium.version)) against $brokers, REST on 127.0.0.1:${ports[0]} (log $inst_log)"
	launch_worker
	if wait_worker "$wait_secs"; then
		log "up in $((SECONDS - started))s"
		record
		exit 0
	fi
	if pid=$(worker_pid); then stop_pids 30 "$pid"; fi
	grep -qs 'Address already in use' "$inst_log" || die "the worker did not start; see $inst_log"
	log "the port was taken meanwhile; trying another"
done
die "the worker did not start after 3 tries; see $inst_log"
