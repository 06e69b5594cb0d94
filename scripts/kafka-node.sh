#!/usr/bin/env bash
# kafka-node.sh COMMAND [N]: fault injection on one node of the cluster that
# scripts/kafka-up.sh started (node ids are 1..KAFKA_NODES of .tmp/kafka/env).
#
#   stop N      SIGTERM (controlled shutdown: leadership moves away first),
#               SIGKILL after $KAFKA_STOP_TIMEOUT seconds (20); waits until gone
#   kill N      SIGKILL (a crash: the controller fences the node after
#               broker.session.timeout.ms, 9 s, then moves its leaders)
#   start N     starts a stopped node with its config and data, and waits
#               (up to $KAFKA_START_TIMEOUT, 90 s) until it is a live broker
#   restart N   stop, then start
#   pause N     SIGSTOP (a hung node: connections stay open, nothing answers)
#   resume N    SIGCONT
#   pid N       prints the pid of node N (fails when it is not running)
#   status      one line per node: id, broker address, pid or "stopped"
#   leader TOPIC PARTITION
#               prints the node id that leads the partition now (-1: none)
#
# Messages go to stderr; only pid, status and leader print on stdout.
set -euo pipefail

prog=kafka-node
# shellcheck source=kafka/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/../kafka/lib.sh"

usage() {
	sed -n '2,20s/^# \{0,1\}//p' "${BASH_SOURCE[0]}" >&2
	exit 2
}

[ "$#" -ge 1 ] || usage
cmd=$1
shift

load_env

# node_arg checks that $1 is a node id of the recorded cluster.
node_arg() {
	[ -n "${1:-}" ] || usage
	case " $KAFKA_NODES " in
	*" $1 "*) ;;
	*) die "no node '$1' in this cluster (nodes: $KAFKA_NODES)" ;;
	esac
}

do_stop() {
	local pid
	if ! pid=$(node_pid "$1"); then
		log "node $1 is not running"
		return 0
	fi
	log "stopping node $1 (pid $pid)"
	local started=$SECONDS
	stop_pids "${KAFKA_STOP_TIMEOUT:-20}" "$pid"
	log "node $1 stopped in $((SECONDS - started))s"
}

do_start() {
	if node_pid "$1" >/dev/null; then
		log "node $1 is already running"
	else
		check_java
		ensure_libs
		log "starting node $1"
		launch_node "$1"
	fi
	local started=$SECONDS
	wait_brokers "$1" "${KAFKA_START_TIMEOUT:-90}" ||
		die "node $1 did not come back"
	log "node $1 is a live broker again after $((SECONDS - started))s"
}

case "$cmd" in
stop)
	node_arg "${1:-}"
	take_lock 900
	do_stop "$1"
	;;
kill)
	node_arg "${1:-}"
	take_lock 900
	if pid=$(node_pid "$1"); then
		log "killing node $1 (pid $pid)"
		survivors=$(signal_and_wait KILL 10 "$pid")
		[ -z "$survivors" ] || die "node $1 (pid $pid) survived SIGKILL"
	else
		log "node $1 is not running"
	fi
	;;
start)
	node_arg "${1:-}"
	take_lock 900
	do_start "$1"
	;;
restart)
	node_arg "${1:-}"
	take_lock 900
	do_stop "$1"
	do_start "$1"
	;;
pause | resume)
	node_arg "${1:-}"
	pid=$(node_pid "$1") || die "node $1 is not running"
	if [ "$cmd" = pause ]; then
		kill -STOP "$pid"
	else
		kill -CONT "$pid"
	fi
	log "node $1 (pid $pid): ${cmd}d"
	;;
pid)
	node_arg "${1:-}"
	node_pid "$1" || die "node $1 is not running"
	;;
status)
	for n in $KAFKA_NODES; do
		var="KAFKA_NODE_${n}_BROKER"
		if pid=$(node_pid "$n"); then
			st="running pid $pid"
			if grep -q '^State:.*stopped' "/proc/$pid/status" 2>/dev/null; then
				st="paused pid $pid"
			fi
		else
			st=stopped
		fi
		echo "node $n ${!var} $st"
	done
	;;
leader)
	[ "$#" -eq 2 ] || usage
	topic=$1 partition=$2
	if [ "$(probe_kind)" = kcat ]; then
		out=$(kcat -L -b "$KAFKA_BROKERS" -t "$topic" -m 5 2>/dev/null) ||
			die "no metadata for topic $topic from $KAFKA_BROKERS"
		leader=$(printf '%s\n' "$out" | sed -n "s/^ *partition $partition, leader \\(-\\{0,1\\}[0-9]*\\),.*/\\1/p")
	else
		out=$("$repo/scripts/kafka-tool.sh" TopicCommand --bootstrap-server "$KAFKA_BROKERS" \
			--describe --topic "$topic") || die "could not describe topic $topic"
		leader=$(printf '%s\n' "$out" | awk -v p="$partition" '
			{ for (i = 1; i < NF; i++) { if ($i == "Partition:") part = $(i+1); if ($i == "Leader:") lead = $(i+1) } }
			part == p && lead != "" { print (lead == "none" ? -1 : lead); exit }')
	fi
	[ -n "$leader" ] || die "topic $topic has no partition $partition"
	echo "$leader"
	;;
*)
	usage
	;;
esac
