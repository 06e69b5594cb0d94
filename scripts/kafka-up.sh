#!/usr/bin/env bash
# kafka-up.sh [NODES] starts a throwaway Apache Kafka cluster for tests and
# prints its bootstrap addresses (host:port,host:port...) on stdout;
# everything else goes to stderr.
#
# NODES is 1 (the default) to 5: that many combined broker + KRaft controller
# nodes on 127.0.0.1, on free ports, forming one static quorum
# (controller.quorum.voters). Topics are replicated once per node, with
# min.insync.replicas=2 from 3 nodes on, so with 3 (`make kafka-up
# BROKERS=3`) acks=all writes go on while one node is down.
#
# Environment:
#   KAFKA_VERSION        any 4.x on Maven Central (default: kafka.version of
#                        kafka/pom.xml); the jars are copied by Maven into
#                        .tmp/kafka/libs once per version (cached in ~/.m2)
#   KAFKA_HEAP_OPTS      broker heap (default -Xms512m -Xmx1g)
#   KAFKA_START_TIMEOUT  seconds to wait for the brokers (default 90)
#   KAFKA_PROBE=java     check readiness with the Kafka tools even when kcat
#                        is installed (kcat is much faster: no JVM per check)
#   KAFKA_MVN_ARGS       extra Maven flags, e.g. -o (offline)
# Needs Java 17+ and Maven (for the first fetch); kcat is optional.
#
# State, in .tmp/kafka of the repository:
#   brokers          the bootstrap list printed on stdout
#   env              shell-sourceable: KAFKA_VERSION, KAFKA_LIBS,
#                    KAFKA_CLASSPATH, KAFKA_JAVA_OPTS, KAFKA_BROKERS,
#                    KAFKA_NODES ("1 2 3"), KAFKA_CLUSTER_ID and per node N
#                    KAFKA_NODE_N_CONFIG, _BROKER, _CONTROLLER, _PIDFILE,
#                    _LOG, _DIR
#   nodeN/           server.properties, pid, data/ of node N
#   logs/nodeN.log   the broker's console (log4j config kafka/log4j2.properties)
#   libs/            the jars (kept by kafka-down.sh)
#
# Stopping and restarting one node (fault tests): scripts/kafka-node.sh
#   stop N | kill N | start N | restart N | pause N | resume N | status | leader TOPIC PARTITION
# By hand, a node is
#   . .tmp/kafka/env
#   java $KAFKA_JAVA_OPTS -cp "$KAFKA_CLASSPATH" kafka.Kafka "$KAFKA_NODE_2_CONFIG" \
#       </dev/null >>"$KAFKA_NODE_2_LOG" 2>&1 &
#   echo $! >"$KAFKA_NODE_2_PIDFILE"
# (the same classpath and options as the other nodes; the pid file is how
# the scripts find it) and it keeps its ports, data and identity across
# restarts. A node that was killed registers again only once the
# controller has fenced its old incarnation (broker.session.timeout.ms, 6 s).
#
# Idempotent: when the recorded cluster answers, its addresses are printed
# again; when some of its nodes are stopped, they are started again with
# their data. Asking for another number of nodes than the recorded cluster
# has fails: scripts/kafka-down.sh first. Without NODES, any recorded
# cluster is fine.
set -euo pipefail

prog=kafka-up
# shellcheck source=kafka/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/../kafka/lib.sh"

wait_secs=${KAFKA_START_TIMEOUT:-90}

want_nodes=${1:-}
case "$want_nodes" in
"" | [1-5]) ;;
*) die "usage: kafka-up.sh [1-5] (number of nodes, not '$want_nodes')" ;;
esac

# write_configs writes nodeN/server.properties for nodes 1..$1 from
# kafka/server.properties.in, with broker port ports[2(N-1)] and controller
# port ports[2(N-1)+1].
write_configs() {
	local count=$1 n voters="" replication min_isr
	replication=$count
	min_isr=1
	[ "$count" -lt 3 ] || min_isr=2
	for n in $(seq 1 "$count"); do
		voters+="${voters:+,}$n@127.0.0.1:${ports[$((2 * (n - 1) + 1))]}"
	done
	for n in $(seq 1 "$count"); do
		mkdir -p "$(node_dir "$n")"
		sed -e "s|@NODE_ID@|$n|g" \
			-e "s|@VOTERS@|$voters|g" \
			-e "s|@BROKER_PORT@|${ports[$((2 * (n - 1)))]}|g" \
			-e "s|@CONTROLLER_PORT@|${ports[$((2 * (n - 1) + 1))]}|g" \
			-e "s|@DATA_DIR@|$(node_dir "$n")/data|g" \
			-e "s|@REPLICATION@|$replication|g" \
			-e "s|@MIN_ISR@|$min_isr|g" \
			"$kafka_src/server.properties.in" >"$(node_config "$n")"
		if grep -v '^#' "$(node_config "$n")" | grep -q '@[A-Z_]*@'; then
			die "unreplaced @NAME@ left in $(node_config "$n")"
		fi
	done
}

# format_nodes formats the KRaft storage of nodes 1..$1 with cluster id $2,
# all at once (one JVM each).
format_nodes() {
	local count=$1 cid=$2 n pids=() failed=0
	for n in $(seq 1 "$count"); do
		"$java_bin" -Xmx256m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 \
			"-Dlog4j2.configurationFile=$kafka_src/tools-log4j2.properties" -cp "$libs/*" \
			kafka.tools.StorageTool format -t "$cid" -c "$(node_config "$n")" \
			</dev/null >"$(node_dir "$n")/format.log" 2>&1 &
		pids+=($!)
	done
	for n in $(seq 1 "$count"); do
		if ! wait "${pids[$((n - 1))]}"; then
			log "formatting node $n failed:"
			cat "$(node_dir "$n")/format.log" >&2
			failed=1
		fi
	done
	[ "$failed" -eq 0 ] || die "could not format the KRaft storage"
}

# record writes the env and brokers files of the running cluster, then
# prints the bootstrap list.
record() {
	local count=$1 n brokers=""
	for n in $(seq 1 "$count"); do
		brokers+="${brokers:+,}$(node_addr "$n")"
	done
	broker_java_opts
	{
		echo "# Written by scripts/kafka-up.sh: the throwaway test cluster."
		echo "# A node by hand: java \$KAFKA_JAVA_OPTS -cp \"\$KAFKA_CLASSPATH\" kafka.Kafka \"\$KAFKA_NODE_1_CONFIG\""
		echo "# (or scripts/kafka-node.sh start|stop|kill|restart N)."
		echo "KAFKA_VERSION=$(quote "$(kafka_version)")"
		echo "KAFKA_LIBS=$(quote "$libs")"
		echo "KAFKA_CLASSPATH=$(quote "$libs/*")"
		echo "KAFKA_HEAP_OPTS=$(quote "${KAFKA_HEAP_OPTS:--Xms512m -Xmx1g}")"
		echo "KAFKA_JAVA_OPTS=$(quote "${java_opts[*]}")"
		echo "KAFKA_BROKERS=$(quote "$brokers")"
		echo "KAFKA_NODES=$(quote "$(seq -s ' ' 1 "$count")")"
		echo "KAFKA_CLUSTER_ID=$(quote "$(sed -n 's/^cluster.id=//p' "$(node_dir 1)/data/meta.properties")")"
		for n in $(seq 1 "$count"); do
			echo "KAFKA_NODE_${n}_DIR=$(quote "$(node_dir "$n")")"
			echo "KAFKA_NODE_${n}_CONFIG=$(quote "$(node_config "$n")")"
			echo "KAFKA_NODE_${n}_BROKER=$(quote "$(node_addr "$n")")"
			echo "KAFKA_NODE_${n}_CONTROLLER=$(quote "127.0.0.1:$(config_port "$n" CONTROLLER)")"
			echo "KAFKA_NODE_${n}_PIDFILE=$(quote "$(node_pidfile "$n")")"
			echo "KAFKA_NODE_${n}_LOG=$(quote "$(node_log "$n")")"
		done
	} >"$state/env.new"
	mv "$state/env.new" "$state/env"
	echo "$brokers" >"$state/brokers.new"
	mv "$state/brokers.new" "$state/brokers"
	echo "$brokers"
}

# config_port prints the port of listener $2 in node $1's server.properties.
config_port() {
	sed -n "s/^listeners=.*$2:\/\/127\.0\.0\.1:\([0-9]*\).*/\1/p" "$(node_config "$1")"
}

# stop_all stops every node of ours that runs, recorded or not.
stop_all() {
	local pids=() dir pid
	for dir in "$state"/node[0-9]*; do
		[ -d "$dir" ] || continue
		pid=$(node_pid "${dir##*/node}") && pids+=("$pid")
	done
	for pid in $(stray_pids); do
		case " ${pids[*]} " in *" $pid "*) ;; *) pids+=("$pid") ;; esac
	done
	[ "${#pids[@]}" -eq 0 ] || stop_pids 20 "${pids[@]}"
}

# wipe deletes the state of any earlier cluster, keeping the jars.
wipe() {
	stop_all
	find "$state" -mindepth 1 -maxdepth 1 ! -name libs ! -name lock -exec rm -rf {} +
}

take_lock 900

# A cluster recorded by an earlier run: print its addresses, or start its
# stopped nodes again (with the version and heap it was made with).
if [ -r "$state/env" ]; then
	user_version=${KAFKA_VERSION-} user_heap=${KAFKA_HEAP_OPTS-}
	load_env
	count=$(echo "$KAFKA_NODES" | wc -w)
	if [ -n "$want_nodes" ] && [ "$want_nodes" != "$count" ]; then
		die "a $count-node cluster is recorded in $state (brokers $KAFKA_BROKERS); run scripts/kafka-down.sh (make kafka-down) first"
	fi
	down=()
	for n in $KAFKA_NODES; do
		node_pid "$n" >/dev/null || down+=("$n")
	done
	if [ "${#down[@]}" -eq 0 ] && wait_brokers "$KAFKA_NODES" 10 2>/dev/null; then
		log "cluster already running: $count node(s), Kafka $KAFKA_VERSION"
		record "$count"
		exit 0
	fi
	# Start the stopped nodes with their data, unless another process took
	# one of their ports.
	restartable=1
	for n in "${down[@]}"; do
		for port in $(config_port "$n" PLAINTEXT) $(config_port "$n" CONTROLLER); do
			if ! port_is_free "$port"; then
				log "port $port of stopped node $n is taken by another process"
				restartable=0
			fi
		done
	done
	if [ "$restartable" -eq 1 ]; then
		check_java
		ensure_libs
		[ "${#down[@]}" -eq 0 ] || log "starting stopped node(s) ${down[*]} of the recorded cluster again"
		for n in "${down[@]}"; do
			launch_node "$n"
		done
		if wait_brokers "$KAFKA_NODES" "$wait_secs"; then
			record "$count"
			exit 0
		fi
	fi
	log "the recorded cluster cannot be brought back; making a new one"
	want_nodes=${want_nodes:-$count}
	KAFKA_VERSION=$user_version KAFKA_HEAP_OPTS=$user_heap
	[ -n "$KAFKA_VERSION" ] || unset KAFKA_VERSION
	[ -n "$KAFKA_HEAP_OPTS" ] || unset KAFKA_HEAP_OPTS
fi
want_nodes=${want_nodes:-1}

check_java
wipe
ensure_libs

started=$SECONDS
cid=$(cluster_id)
for _ in 1 2 3; do
	pick_ports $((2 * want_nodes))
	write_configs "$want_nodes"
	format_nodes "$want_nodes" "$cid"
	nodes=$(seq -s ' ' 1 "$want_nodes")
	bootstrap=""
	for n in $nodes; do
		bootstrap+="${bootstrap:+,}$(node_addr "$n")"
	done
	log "starting Kafka $(kafka_version): $want_nodes node(s), brokers $bootstrap (logs in $state/logs)"
	for n in $nodes; do
		launch_node "$n"
	done
	if wait_brokers "$nodes" "$wait_secs"; then
		log "up in $((SECONDS - started))s"
		record "$want_nodes"
		exit 0
	fi
	# A port taken between the pick and the bind is worth another try;
	# anything else is not.
	if ! grep -qs 'Address already in use' "$state"/logs/node*.log; then
		stop_all
		die "the cluster did not start; see $state/logs"
	fi
	log "a port was taken meanwhile; trying again with other ports"
	wipe
done
die "the cluster did not start after 3 tries; see $state/logs"
