#!/usr/bin/env bash
# kafka-down.sh stops the throwaway Kafka cluster of scripts/kafka-up.sh and
# deletes it: every node gets SIGTERM (a controlled shutdown), and SIGKILL
# if it still runs after $KAFKA_STOP_TIMEOUT seconds (20), or 6 s after it
# was left without a quorum majority; then .tmp/kafka is removed except
# libs/, the jar cache. Doing nothing is fine: without a recorded cluster it
# only says so.
set -euo pipefail

prog=kafka-down
# shellcheck source=kafka/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/../kafka/lib.sh"

if [ ! -d "$state" ]; then
	log "no cluster recorded in $state"
	exit 0
fi

take_lock 900

pids=()
for dir in "$state"/node[0-9]*; do
	[ -d "$dir" ] || continue
	n=${dir##*/node}
	if pid=$(node_pid "$n"); then
		pids+=("$pid")
	fi
done
# Brokers of ours whose pid file is gone (a test that lost track of one).
for pid in $(stray_pids); do
	case " ${pids[*]} " in *" $pid "*) ;; *) pids+=("$pid") ;; esac
done

# nodes_in_cluster prints how many nodes the cluster has (voters).
nodes_in_cluster() {
	local dirs=("$state"/node[0-9]*)
	[ -d "${dirs[0]}" ] && echo "${#dirs[@]}" || echo 0
}

if [ "${#pids[@]}" -gt 0 ]; then
	log "stopping ${#pids[@]} node(s): pid ${pids[*]}"
	started=$SECONDS
	timeout_secs=${KAFKA_STOP_TIMEOUT:-20}
	# All at once, so each broker's controlled shutdown is answered while the
	# controller quorum still stands. Nodes left without a quorum majority
	# cannot finish gracefully (the last voter waits for peers that are
	# gone): they get 6 s, a little more than the 5 s Raft shutdown timeout,
	# then SIGKILL, rather than the full timeout.
	for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
	total=$(nodes_in_cluster)
	majority=$((total / 2 + 1))
	orphaned_at=""
	while :; do
		alive=()
		for pid in "${pids[@]}"; do
			pid_alive "$pid" && alive+=("$pid")
		done
		[ "${#alive[@]}" -gt 0 ] || break
		if [ "$total" -ge 3 ] && [ "${#alive[@]}" -lt "$majority" ]; then
			orphaned_at=${orphaned_at:-$SECONDS}
		fi
		if [ "$((SECONDS - started))" -ge "$timeout_secs" ] ||
			{ [ -n "$orphaned_at" ] && [ "$((SECONDS - orphaned_at))" -ge 6 ]; }; then
			log "still running after $((SECONDS - started))s, killing: ${alive[*]}"
			survivors=$(signal_and_wait KILL 10 "${alive[@]}")
			[ -z "$survivors" ] || die "could not kill $(echo "$survivors" | tr '\n' ' ')"
			break
		fi
		sleep 0.2
	done
	log "stopped in $((SECONDS - started))s"
else
	log "no node running"
fi

find "$state" -mindepth 1 -maxdepth 1 ! -name libs ! -name lock -exec rm -rf {} +
log "done (kept the jars in $libs)"
