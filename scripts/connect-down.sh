#!/usr/bin/env bash
# connect-down.sh stops the throwaway Kafka Connect worker of
# scripts/connect-up.sh (CONNECT_INSTANCE, default "worker"; --all: every
# worker of this checkout) and deletes its state: SIGTERM (the worker
# stops its connectors and leaves its group), SIGKILL after
# $CONNECT_STOP_TIMEOUT seconds (30). The jars stay in .tmp/connect. Its
# topics stay on the broker (scripts/kafka-down.sh removes them with it); a
# new worker uses new ones. Doing nothing is fine: without a recorded
# worker it only says so.
set -euo pipefail

prog=connect-down
# shellcheck source=connect/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/../connect/lib.sh"

if [ ! -d "$connect_root" ]; then
	log "no worker recorded in $connect_root"
	exit 0
fi
connect_lock 900

# our_workers prints the pids of the running workers of instance $1 ("*":
# any), recorded or not (a lost pid file).
our_workers() {
	local cmd pid
	for cmd in /proc/[0-9]*/cmdline; do
		pid=${cmd#/proc/}
		pid=${pid%/cmdline}
		# shellcheck disable=SC2254 # $1 is a pattern
		tr '\0' '\n' 2>/dev/null <"$cmd" | grep -q "^$connect_root/$1/worker.properties\$" || continue
		tr '\0' '\n' 2>/dev/null <"$cmd" | grep -qxF org.apache.kafka.connect.cli.ConnectDistributed || continue
		pid_alive "$pid" && echo "$pid"
	done
}

which="$instance"
dirs=("$inst")
if [ "${1:-}" = --all ]; then
	which='[^/]*'
	dirs=()
	for d in "$connect_root"/*/; do
		d=${d%/}
		case "${d##*/}" in runtime | plugins | jars.tmp.*) continue ;; esac
		dirs+=("$d")
	done
fi
# shellcheck disable=SC2207
pids=($(our_workers "$which"))
if [ "${#pids[@]}" -gt 0 ]; then
	log "stopping ${#pids[@]} worker(s): pid ${pids[*]}"
	started=$SECONDS
	stop_pids "${CONNECT_STOP_TIMEOUT:-30}" "${pids[@]}"
	log "stopped in $((SECONDS - started))s"
else
	log "no worker running"
fi
for d in "${dirs[@]}"; do
	[ -d "$d" ] && rm -rf "$d"
done
log "done (kept the jars in $connect_runtime and $connect_plugins)"
