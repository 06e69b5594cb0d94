# shellcheck shell=bash
# connect/lib.sh: what scripts/connect-up.sh and connect-down.sh share.
# Sourced, never run; the caller sets `prog` and runs under `set -euo
# pipefail`. It sources kafka/lib.sh for the process, port and Java helpers
# (pid_alive, stop_pids, pick_ports, close_fds, check_java, quote, log, die).
#
# Layout, all in .tmp/connect of the repository:
#   runtime/                   the worker's jars (Maven, cached in ~/.m2)
#   plugins/<connector>/       one directory of jars per connector
#   jars.complete              "<sha256 of connect/*.xml>" once both are whole
#   lock                       taken by every script that starts or stops a worker
#   <instance>/                one worker (CONNECT_INSTANCE, default "worker"):
#     worker.properties, pid, connect.log, env, url

# shellcheck source=kafka/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/../kafka/lib.sh"

connect_src="$repo/connect"
connect_root="$repo/.tmp/connect"
connect_runtime="$connect_root/runtime"
connect_plugins="$connect_root/plugins"

instance=${CONNECT_INSTANCE:-worker}
case "$instance" in
"" | *[!A-Za-z0-9_-]*) die "CONNECT_INSTANCE is '$instance': use letters, digits, '-' and '_'" ;;
runtime | plugins) die "CONNECT_INSTANCE cannot be '$instance' (a directory of jars)" ;;
esac
inst="$connect_root/$instance"
inst_pidfile="$inst/pid"
inst_config="$inst/worker.properties"
inst_log="$inst/connect.log"

# connect_lock waits for the lock of .tmp/connect on fd 8 (up to $1 s).
connect_lock() {
	mkdir -p "$connect_root"
	exec 8>>"$connect_root/lock"
	if command -v flock >/dev/null 2>&1; then
		flock -w "${1:-600}" 8 || die "timed out waiting for another connect script ($connect_root/lock)"
	fi
}

# pom_property prints property $1 of connect/pom.xml (kafka.version,
# debezium.version).
pom_property() {
	sed -n "s:.*<$1>\([^<]*\)</$1>.*:\1:p" "$connect_src/pom.xml" | head -n 1
}

jars_stamp() {
	cat "$connect_src/settings.xml" "$connect_src/pom.xml" "$connect_src"/*/pom.xml | sha256sum | cut -d' ' -f1
}

jars_complete() {
	[ -f "$connect_root/jars.complete" ] && [ "$(cat "$connect_root/jars.complete")" = "$(jars_stamp)" ]
}

# ensure_jars fetches the worker's and the connectors' jars with Maven
# (one run of the reactor in connect/) unless they are there already. After
# the first fetch Maven finds them in ~/.m2 and needs no network. The caller
# holds the lock.
ensure_jars() {
	jars_complete && return 0
	command -v mvn >/dev/null 2>&1 ||
		die "no mvn on PATH: Kafka Connect and Debezium come from Maven Central (Debian: apt-get install -y maven)"
	local tmp="$connect_root/jars.tmp.$$" started=$SECONDS
	log "fetching Kafka Connect $(pom_property kafka.version) and Debezium $(pom_property debezium.version) with Maven (cached in ~/.m2)"
	rm -rf "$tmp"
	mkdir -p "$tmp"
	# shellcheck disable=SC2086 # CONNECT_MVN_ARGS is a list of flags, e.g. -o
	if ! mvn -B -q -Dstyle.color=never ${CONNECT_MVN_ARGS:-} -s "$connect_src/settings.xml" \
		-f "$connect_src/pom.xml" dependency:copy-dependencies -Dconnect.out="$tmp" 2>&1 |
		sed -e 's/\x1b\[[0-9;]*m//g' -e '/^$/d' >&2; then
		rm -rf "$tmp"
		die "Maven could not fetch the Connect jars (see above); is Maven Central reachable?"
	fi
	local kv dv jar
	kv=$(pom_property kafka.version)
	dv=$(pom_property debezium.version)
	for jar in "runtime/connect-runtime-$kv.jar" "runtime/connect-json-$kv.jar" \
		"plugins/debezium-connector-jdbc/debezium-connector-jdbc-$dv.jar" \
		"plugins/debezium-connector-postgres/debezium-connector-postgres-$dv.jar"; do
		[ -f "$tmp/$jar" ] || {
			rm -rf "$tmp"
			die "Maven copied no $jar"
		}
	done
	rm -rf "$connect_runtime" "$connect_plugins"
	mv "$tmp/runtime" "$connect_runtime"
	mv "$tmp/plugins" "$connect_plugins"
	rm -rf "$tmp"
	jars_stamp >"$connect_root/jars.complete"
	local n
	n=$(find "$connect_runtime" "$connect_plugins" -name '*.jar' | wc -l)
	log "$n jars, $(du -sh "$connect_root" --exclude '*.log' | cut -f1) in $connect_root, fetched in $((SECONDS - started))s"
}

# worker_java_opts sets the array java_opts: the JVM options of a worker,
# those of Kafka's connect-distributed.sh (heap -Xms256M -Xmx2G unless
# CONNECT_HEAP_OPTS says otherwise).
worker_java_opts() {
	# shellcheck disable=SC2206 # a list of flags
	local heap=(${CONNECT_HEAP_OPTS:--Xms256m -Xmx2g})
	java_opts=(
		"${heap[@]}"
		-XX:+UseG1GC -XX:MaxGCPauseMillis=20 -XX:InitiatingHeapOccupancyPercent=35
		-XX:+ExplicitGCInvokesConcurrent -XX:+ExitOnOutOfMemoryError
		-Djava.awt.headless=true
		"-Dlog4j2.configurationFile=$connect_src/log4j2.properties"
	)
}

# worker_pid prints the pid of the instance's worker when it runs: the
# recorded pid, if that process is a ConnectDistributed of this config.
worker_pid() {
	local pid
	[ -r "$inst_pidfile" ] || return 1
	pid=$(cat "$inst_pidfile" 2>/dev/null) || return 1
	pid_alive "$pid" || return 1
	tr '\0' '\n' <"/proc/$pid/cmdline" 2>/dev/null | grep -qxF "$inst_config" || return 1
	echo "$pid"
}

# launch_worker starts the instance's worker in the background, in its own
# session, its console appended to connect.log, and records its pid.
launch_worker() {
	worker_java_opts
	rm -f "$inst_pidfile"
	printf '\n===== %s: starting the worker (%s)\n' "$(date '+%F %T')" "$inst_config" >>"$inst_log"
	(
		cd "$inst" || exit 1
		close_fds
		# shellcheck disable=SC2016 # $$ of the bash that execs java is the worker's pid
		exec setsid bash -c 'echo $$ >"$0"; exec "$@"' "$inst_pidfile" \
			"$java_bin" "${java_opts[@]}" -cp "$connect_runtime/*" \
			org.apache.kafka.connect.cli.ConnectDistributed "$inst_config"
	) </dev/null >>"$inst_log" 2>&1 &
	local _
	for _ in $(seq 1 100); do
		[ -s "$inst_pidfile" ] && return 0
		sleep 0.05
	done
	die "the worker did not record its pid in $inst_pidfile"
}

# config_value prints the value of key $1 in the instance's worker.properties.
config_value() {
	sed -n "s/^$1=//p" "$inst_config" | head -n 1
}

# worker_url prints the REST URL of the instance from its config.
worker_url() {
	echo "http://127.0.0.1:$(config_value rest.advertised.port)"
}

# worker_ready tells whether the worker's REST API answers GET /connectors
# with 200: it does so only once the worker has joined its group and read
# the config topic.
worker_ready() {
	local code
	code=$(curl -s -o /dev/null -m 5 -w '%{http_code}' "$(worker_url)/connectors" 2>/dev/null) || return 1
	[ "$code" = 200 ]
}

# wait_worker waits up to $1 seconds for worker_ready; it fails early when
# the worker exits.
wait_worker() {
	local deadline=$((SECONDS + $1))
	until worker_ready; do
		if ! worker_pid >/dev/null; then
			log "the worker exited while starting; last lines of $inst_log:"
			tail -n 30 "$inst_log" >&2 || true
			return 1
		fi
		if [ "$SECONDS" -ge "$deadline" ]; then
			log "the worker's REST API did not answer within $1s; last lines of $inst_log:"
			tail -n 30 "$inst_log" >&2 || true
			return 1
		fi
		sleep 0.3
	done
}
