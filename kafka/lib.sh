# shellcheck shell=bash
# kafka/lib.sh: what scripts/kafka-up.sh, kafka-down.sh, kafka-node.sh and
# kafka-tool.sh share. Sourced, never run; the caller sets `prog` (the name
# its messages start with) and runs under `set -euo pipefail`.
#
# Layout, all in .tmp/kafka of the repository:
#   libs/            the jars, fetched by Maven (kept by kafka-down.sh)
#   libs/.complete   "<version> <sha256 of kafka/pom.xml>" once the copy is whole
#   nodeN/           server.properties, pid, data/ (log.dirs) of node N
#   logs/nodeN.log   the console of node N, appended to at every start
#   env, brokers     written by kafka-up.sh (see there)
#   lock             taken by every script that starts or stops something

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
kafka_src="$repo/kafka"
state="$repo/.tmp/kafka"
libs="$state/libs"
java_bin=${JAVA:-java}

prog=${prog:-kafka}
log() { printf '%s: %s\n' "$prog" "$*" >&2; }
die() {
	log "error: $*"
	exit 1
}

# quote prints $1 single-quoted for the shell.
quote() {
	local q="'\\''"
	printf "'%s'" "${1//\'/$q}"
}

# take_lock waits for the lock of .tmp/kafka on fd 9 (up to $1 seconds).
# Every process started while holding it must not inherit fd 9: see
# close_fds.
take_lock() {
	mkdir -p "$state"
	exec 9>>"$state/lock"
	if command -v flock >/dev/null 2>&1; then
		flock -w "${1:-600}" 9 || die "timed out waiting for another kafka script ($state/lock)"
	fi
}

# close_fds closes the current shell's file descriptors above 2, so a broker
# holds neither our lock nor a caller's pipe (a `$(kafka-up.sh)` would wait
# for the broker to exit to see end of file).
close_fds() {
	local path fd
	for path in "/proc/$BASHPID/fd"/*; do
		fd=${path##*/}
		if [ "$fd" -gt 2 ] 2>/dev/null; then
			eval "exec $fd>&-"
		fi
	done
}

# --- Java and the jars -------------------------------------------------------

# check_java fails unless $java_bin is a Java 17 or newer (Kafka 4 brokers
# and tools need 17).
check_java() {
	command -v "$java_bin" >/dev/null 2>&1 ||
		die "no java on PATH: Kafka 4 needs Java 17 or newer (Debian: apt-get install -y openjdk-17-jre-headless)"
	local v major
	v=$("$java_bin" -version 2>&1 | sed -n 's/.* version "\([^"]*\)".*/\1/p' | head -n 1)
	major=${v%%.*}
	if ! [ "$major" -ge 17 ] 2>/dev/null; then
		die "java $v is too old: Kafka 4 needs Java 17 or newer"
	fi
}

# kafka_version prints the Kafka version to run: $KAFKA_VERSION, else the
# kafka.version of kafka/pom.xml.
kafka_version() {
	if [ -n "${KAFKA_VERSION:-}" ]; then
		echo "$KAFKA_VERSION"
		return
	fi
	sed -n 's:.*<kafka\.version>\([^<]*\)</kafka\.version>.*:\1:p' "$kafka_src/pom.xml" | head -n 1
}

# libs_stamp prints what libs/.complete holds when libs/ has the jars of
# this version and this pom.xml.
libs_stamp() {
	printf '%s %s\n' "$(kafka_version)" "$(sha256sum "$kafka_src/pom.xml" | cut -d' ' -f1)"
}

libs_complete() {
	[ -f "$libs/.complete" ] && [ "$(cat "$libs/.complete")" = "$(libs_stamp)" ]
}

# ensure_libs fetches the jars into libs/ with Maven unless they are there
# already. Maven keeps its own cache in ~/.m2, so after the first fetch a
# new copy takes a few seconds and needs no network. The caller holds the
# lock (fetching twice at once would mix two copies).
ensure_libs() {
	libs_complete && return 0
	local version tmp
	version=$(kafka_version)
	[ -n "$version" ] || die "no <kafka.version> in $kafka_src/pom.xml"
	command -v mvn >/dev/null 2>&1 ||
		die "no mvn on PATH: the Kafka jars come from Maven Central (Debian: apt-get install -y maven)"
	log "fetching the jars of Kafka $version with Maven into $libs (cached in ~/.m2)"
	tmp="$state/libs.tmp.$$"
	rm -rf "$tmp"
	mkdir -p "$state"
	# shellcheck disable=SC2086 # KAFKA_MVN_ARGS is a list of flags, e.g. "-o"
	if ! mvn -B -q -Dstyle.color=never ${KAFKA_MVN_ARGS:-} -f "$kafka_src/pom.xml" \
		dependency:copy-dependencies -DincludeScope=runtime \
		-DoutputDirectory="$tmp" -Dkafka.version="$version" 2>&1 |
		sed -e 's/\x1b\[[0-9;]*m//g' -e '/^$/d' >&2; then
		rm -rf "$tmp"
		die "Maven could not fetch Kafka $version (see above); is Maven Central reachable?"
	fi
	local jar
	for jar in "kafka_2.13-$version.jar" "kafka-tools-$version.jar" "kafka-clients-$version.jar"; do
		[ -f "$tmp/$jar" ] || {
			rm -rf "$tmp"
			die "Maven copied no $jar"
		}
	done
	libs_stamp >"$tmp/.complete"
	rm -rf "$libs"
	mv "$tmp" "$libs"
	local jars=("$libs"/*.jar)
	log "${#jars[@]} jars, $(du -sh "$libs" | cut -f1) in $libs"
}

# broker_java_opts sets the array java_opts: the JVM options of a broker.
# KAFKA_HEAP_OPTS (as recorded in the env file) overrides the heap.
broker_java_opts() {
	# shellcheck disable=SC2206 # a list of flags
	local heap=(${KAFKA_HEAP_OPTS:--Xms512m -Xmx1g})
	java_opts=(
		"${heap[@]}"
		-XX:+UseG1GC -XX:MaxGCPauseMillis=20 -XX:InitiatingHeapOccupancyPercent=35
		-XX:+ExplicitGCInvokesConcurrent -XX:+ExitOnOutOfMemoryError
		-Djava.awt.headless=true
		"-Dlog4j2.configurationFile=$kafka_src/log4j2.properties"
		"-Dkafka.logs.dir=$state/logs"
	)
}

# --- nodes -------------------------------------------------------------------

node_dir() { echo "$state/node$1"; }
node_config() { echo "$state/node$1/server.properties"; }
node_pidfile() { echo "$state/node$1/pid"; }
node_log() { echo "$state/logs/node$1.log"; }

# pid_alive tells whether process $1 exists and is not a zombie (a broker
# this very script started and that died stays a zombie until we exit).
pid_alive() {
	local st
	[ -n "$1" ] && [ -r "/proc/$1/stat" ] || return 1
	st=$(sed 's/^.*) \(.\).*$/\1/' "/proc/$1/stat" 2>/dev/null) || return 1
	[ -n "$st" ] && [ "$st" != Z ] && [ "$st" != X ]
}

# node_pid prints the pid of node $1 when it runs: the recorded pid, if that
# process is a kafka.Kafka of this node's config (pids get reused).
node_pid() {
	local pidfile pid
	pidfile=$(node_pidfile "$1")
	[ -r "$pidfile" ] || return 1
	pid=$(cat "$pidfile" 2>/dev/null) || return 1
	pid_alive "$pid" || return 1
	tr '\0' '\n' <"/proc/$pid/cmdline" 2>/dev/null | grep -qxF "$(node_config "$1")" || return 1
	echo "$pid"
}

# stray_pids prints the pids of brokers that run a server.properties under
# .tmp/kafka but are not the recorded pid of their node (a lost pid file).
stray_pids() {
	local cmd pid
	for cmd in /proc/[0-9]*/cmdline; do
		pid=${cmd#/proc/}
		pid=${pid%/cmdline}
		tr '\0' '\n' <"$cmd" 2>/dev/null | grep -q "^$state/node[0-9]*/server.properties\$" || continue
		tr '\0' '\n' <"$cmd" 2>/dev/null | grep -qxF kafka.Kafka || continue
		pid_alive "$pid" && echo "$pid"
	done
}

# launch_node starts node $1 in the background, in its own session, with
# stdin from /dev/null and its console appended to logs/nodeN.log, and
# records its pid. It does not wait for the broker to answer.
launch_node() {
	local n=$1 config pidfile logfile
	config=$(node_config "$n")
	pidfile=$(node_pidfile "$n")
	logfile=$(node_log "$n")
	[ -f "$config" ] || die "node $n has no $config"
	broker_java_opts
	mkdir -p "$state/logs"
	rm -f "$pidfile"
	printf '\n===== %s: starting node %s (%s)\n' "$(date '+%F %T')" "$n" "$config" >>"$logfile"
	(
		cd "$state" || exit 1
		close_fds
		# $$ of the bash that execs java is the broker's pid.
		# shellcheck disable=SC2016
		if command -v setsid >/dev/null 2>&1; then
			exec setsid bash -c 'echo $$ >"$0"; exec "$@"' "$pidfile" \
				"$java_bin" "${java_opts[@]}" -cp "$libs/*" kafka.Kafka "$config"
		fi
		# shellcheck disable=SC2016
		exec bash -c 'echo $$ >"$0"; exec "$@"' "$pidfile" \
			"$java_bin" "${java_opts[@]}" -cp "$libs/*" kafka.Kafka "$config"
	) </dev/null >>"$logfile" 2>&1 &
	local _
	for _ in $(seq 1 100); do
		[ -s "$pidfile" ] && return 0
		sleep 0.05
	done
	die "node $n did not record its pid in $pidfile"
}

# signal_and_wait sends signal $1 to the pids that follow and waits up to
# $2 seconds for them to be gone. It prints the pids still alive.
signal_and_wait() {
	local sig=$1 secs=$2 pid left
	shift 2
	for pid in "$@"; do
		kill "-$sig" "$pid" 2>/dev/null || true
	done
	local deadline=$((SECONDS + secs))
	while :; do
		left=()
		for pid in "$@"; do
			pid_alive "$pid" && left+=("$pid")
		done
		if [ "${#left[@]}" -eq 0 ] || [ "$SECONDS" -ge "$deadline" ]; then
			break
		fi
		sleep 0.1
	done
	[ "${#left[@]}" -eq 0 ] || printf '%s\n' "${left[@]}"
}

# stop_pids stops brokers: SIGTERM (a controlled shutdown), then SIGKILL for
# those still running after $1 seconds.
stop_pids() {
	local secs=$1 left
	shift
	[ "$#" -gt 0 ] || return 0
	# shellcheck disable=SC2207
	left=($(signal_and_wait TERM "$secs" "$@"))
	if [ "${#left[@]}" -gt 0 ]; then
		log "still running after ${secs}s, killing: ${left[*]}"
		# shellcheck disable=SC2207
		left=($(signal_and_wait KILL 10 "${left[@]}"))
		[ "${#left[@]}" -eq 0 ] || die "could not kill ${left[*]}"
	fi
}

# show_log prints the end of node $1's log to stderr.
show_log() {
	local f
	f=$(node_log "$1")
	if [ -r "$f" ]; then
		log "last lines of $f:"
		tail -n 25 "$f" >&2 || true
	fi
}

# --- is the cluster up? ------------------------------------------------------

# probe_kind prints "kcat" when kcat can do the metadata checks, else
# "java". KAFKA_PROBE=java forces the fallback (to test it).
probe_kind() {
	if [ "${KAFKA_PROBE:-}" != java ] && command -v kcat >/dev/null 2>&1; then
		echo kcat
	else
		echo java
	fi
}

# tcp_open tells whether something accepts TCP connections on $1 (host:port).
tcp_open() {
	(exec 3<>"/dev/tcp/${1%:*}/${1##*:}") 2>/dev/null
}

# node_addr prints node $1's broker address (host:port) from its config.
node_addr() {
	sed -n 's/^listeners=.*PLAINTEXT:\/\/\(127\.0\.0\.1:[0-9]*\).*/\1/p' "$(node_config "$1")"
}

# node_answers tells whether node $1 answers a metadata request itself, as
# broker $1. A broker serves requests only once it has registered with the
# controller quorum, caught up with the metadata log and been unfenced. Asking
# the cluster whether broker N is listed is not enough: right after a crash
# the old registration of N stays listed until broker.session.timeout.ms.
node_answers() {
	local n=$1 addr
	addr=$(node_addr "$n")
	[ -n "$addr" ] || return 1
	if [ "$(probe_kind)" = kcat ]; then
		kcat -L -b "$addr" -m 2 2>/dev/null | grep -q "^Metadata for .*(from broker $n: "
		return
	fi
	# Without kcat: a JVM per try is slow, so first wait for a TCP listener
	# (bound early, long before requests are served), then ask with
	# BrokerApiVersionsCommand, which prints "host:port (id: N rack: ...
	# isFenced: false) -> (" for each broker that answered ApiVersions.
	tcp_open "$addr" || return 1
	printf '%s\n' request.timeout.ms=5000 default.api.timeout.ms=8000 >"$state/probe.properties"
	timeout 30 "$java_bin" -Xmx256m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 \
		"-Dlog4j2.configurationFile=$kafka_src/tools-log4j2.properties" -cp "$libs/*" \
		org.apache.kafka.tools.BrokerApiVersionsCommand --bootstrap-server "$addr" \
		--command-config "$state/probe.properties" 2>/dev/null </dev/null |
		grep -q "^$addr (id: $n .*isFenced: false) -> (\$"
}

# wait_brokers waits until every node in $1 (ids, space-separated) answers
# as a broker (node_answers), up to $2 seconds. It fails early when one of
# those nodes is not running any more.
wait_brokers() {
	local want=$1 secs=$2 n left=() pending
	local deadline=$((SECONDS + secs))
	for n in $want; do left+=("$n"); done
	while :; do
		pending=()
		for n in "${left[@]}"; do
			node_answers "$n" || pending+=("$n")
		done
		[ "${#pending[@]}" -eq 0 ] && return 0
		left=("${pending[@]}")
		for n in "${left[@]}"; do
			if ! node_pid "$n" >/dev/null; then
				log "node $n exited while starting"
				show_log "$n"
				return 1
			fi
		done
		if [ "$SECONDS" -ge "$deadline" ]; then
			log "node(s) ${left[*]} did not answer as brokers within ${secs}s"
			for n in "${left[@]}"; do show_log "$n"; done
			return 1
		fi
		sleep 0.3
	done
}

# load_env reads the env file that kafka-up.sh wrote, or fails.
load_env() {
	[ -r "$state/env" ] || die "no cluster recorded in $state/env: run make kafka-up first"
	# shellcheck disable=SC1091
	. "$state/env"
}

# port_is_free tells whether nothing is bound to 127.0.0.1:$1.
port_is_free() {
	if command -v python3 >/dev/null 2>&1; then
		python3 - "$1" >/dev/null 2>&1 <<'EOF'
import socket, sys
s = socket.socket()
# As the broker binds: a port whose old connections linger in TIME_WAIT
# (a node just killed) is free for it.
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1])))
EOF
	elif tcp_open "127.0.0.1:$1"; then
		return 1
	fi
}

# pick_ports sets the array ports to $1 distinct free ports, below the
# ephemeral range (32768+) so an outgoing connection cannot take one
# between a node's stop and its restart.
pick_ports() {
	local want=$1 port p taken _
	ports=()
	for _ in $(seq 1 200); do
		[ "${#ports[@]}" -lt "$want" ] || return 0
		port=$((15000 + RANDOM % 17000))
		taken=0
		for p in "${ports[@]}"; do
			[ "$p" != "$port" ] || taken=1
		done
		if [ "$taken" -eq 0 ] && port_is_free "$port"; then
			ports+=("$port")
		fi
	done
	die "found no $want free TCP ports on 127.0.0.1"
}

# cluster_id prints a new random cluster id: 16 bytes, URL-safe base64 with
# no padding (what `StorageTool random-uuid` prints, without a JVM). Like
# Kafka's own Uuid, it never starts with '-': the storage tool's argument
# parser would take such an id for an option (1 run in 64 failed so).
cluster_id() {
	local id
	while :; do
		id=$(head -c 16 /dev/urandom | base64 | tr '+/' '-_' | tr -d '=\n')
		[ "${id:0:1}" != "-" ] && break
	done
	printf '%s' "$id"
}
