#!/usr/bin/env bash
# pg-up.sh starts a throwaway PostgreSQL cluster for tests and the demo, and
# prints its admin URL on stdout (everything else goes to stderr).
#
# The cluster is made from the installed server binaries (as root, it installs
# Debian's postgresql package when none is found). It listens on 127.0.0.1
# only, on a free port, trusts every local connection and is meant to be thrown
# away: scripts/pg-down.sh stops it and deletes it.
#
# Environment:
#   PG_STATE       the directory under .tmp for the cluster's state (default
#                  pg): another name makes a second, separate cluster
#   PG_EXTRA_CONF  setting lines added to the server's configuration, e.g.
#                  "wal_level = logical" (scripts/pg-source-up.sh)
#
# State, in .tmp/pg (or .tmp/$PG_STATE) of the repository:
#   url      postgres://postgres@127.0.0.1:PORT/postgres?sslmode=disable
#   env      shell-sourceable PGDATA, PGBIN, PGPORT, PGHOST, PGLOG, PGOSUSER,
#            PGSOCKDIR: what fault tests need to stop and restart the server
#   cluster/ the data directory and server log, unless the postgres OS user
#            cannot reach the repository (say, a checkout under /root): then
#            they live in /tmp/kafka2pg-pg-<hash of the repository path>.
#
# Idempotent: when the recorded cluster answers, its URL is printed again;
# when it is recorded but stopped, it is started again with its data.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
pg_state=${PG_STATE:-pg}
case "$pg_state" in
"" | *[!A-Za-z0-9_-]*) printf 'pg-up: error: PG_STATE is "%s": a directory name under .tmp (letters, digits, - and _)\n' "$pg_state" >&2; exit 1 ;;
esac
state="$repo/.tmp/$pg_state"
# What names this cluster's directories under /tmp (when it needs them):
# the repository for the default cluster, the state directory for others.
tmp_key=$repo
[ "$pg_state" = pg ] || tmp_key=$state

log() { printf 'pg-up: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

# The server refuses to run as root, so as root it runs as "postgres".
if [ "$(id -u)" -eq 0 ]; then
	osuser=postgres
else
	osuser=$(id -un)
fi

# as_server runs a command as the OS user that owns the cluster, from / so a
# working directory it cannot enter does not matter, and with no file
# descriptor above 2: a server that inherited the lock (fd 9) or a caller's
# pipe would hold them for its whole life.
as_server() {
	if [ "$(id -u)" -ne 0 ]; then
		(cd / && close_fds && "$@")
	elif command -v runuser >/dev/null 2>&1; then
		(cd / && close_fds && runuser -u "$osuser" -- "$@")
	else
		(cd / && close_fds && su "$osuser" -s /bin/sh -c "$(printf '%q ' "$@")")
	fi
}

# close_fds closes the current shell's file descriptors above 2.
close_fds() {
	local fd
	for fd in $(ls "/proc/$BASHPID/fd" 2>/dev/null); do
		if [ "$fd" -gt 2 ]; then
			eval "exec $fd>&-"
		fi
	done
}

# has_server_bins tells whether a directory holds initdb, pg_ctl and postgres.
has_server_bins() {
	[ -n "$1" ] && [ -x "$1/initdb" ] && [ -x "$1/pg_ctl" ] && [ -x "$1/postgres" ]
}

# find_bindir prints the newest server bin directory, or nothing.
find_bindir() {
	local dir
	if [ -n "${PGBIN:-}" ] && has_server_bins "$PGBIN"; then
		echo "$PGBIN"
		return
	fi
	# Newest Debian-style install first: pg_config may belong to a libpq
	# newer than any installed server.
	for dir in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V -r); do
		if has_server_bins "$dir"; then
			echo "$dir"
			return
		fi
	done
	if command -v pg_config >/dev/null 2>&1; then
		dir=$(pg_config --bindir 2>/dev/null || true)
		if has_server_bins "$dir"; then
			echo "$dir"
			return
		fi
	fi
	if command -v initdb >/dev/null 2>&1; then
		dir=$(dirname "$(command -v initdb)")
		if has_server_bins "$dir"; then
			echo "$dir"
			return
		fi
	fi
}

# install_server installs Debian's server package and stops the "main"
# cluster Debian may create and start with it: we run our own.
install_server() {
	log "no PostgreSQL server binaries found; installing the postgresql package"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq >&2
	apt-get install -y -qq postgresql >&2
	if command -v pg_lsclusters >/dev/null 2>&1; then
		pg_lsclusters --no-header 2>/dev/null | while read -r version name _; do
			pg_ctlcluster "$version" "$name" stop >/dev/null 2>&1 || true
		done
	fi
}

# port_is_free tells whether nothing is bound to 127.0.0.1:$1.
port_is_free() {
	if command -v python3 >/dev/null 2>&1; then
		python3 - "$1" >/dev/null 2>&1 <<'EOF'
import socket, sys
s = socket.socket()
s.bind(("127.0.0.1", int(sys.argv[1])))
EOF
	else
		! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
	fi
}

# free_port prints a free port below the usual ephemeral range (32768+), so
# an outgoing connection cannot take it between a stop and a restart.
free_port() {
	local port try
	for try in $(seq 1 50); do
		port=$((15000 + RANDOM % 17000))
		if port_is_free "$port"; then
			echo "$port"
			return
		fi
	done
	die "found no free TCP port on 127.0.0.1 after 50 tries"
}

# quote prints $1 single-quoted for the shell.
quote() {
	local q="'\\''"
	printf "'%s'" "${1//\'/$q}"
}

# record writes the env and url files of the running cluster, then prints the
# URL.
record() {
	local url="postgres://postgres@127.0.0.1:$PGPORT/postgres?sslmode=disable"
	{
		echo "# Written by scripts/pg-up.sh: the throwaway test cluster."
		echo "PGDATA=$(quote "$PGDATA")"
		echo "PGBIN=$(quote "$PGBIN")"
		echo "PGPORT=$(quote "$PGPORT")"
		echo "PGHOST=$(quote 127.0.0.1)"
		echo "PGLOG=$(quote "$PGLOG")"
		echo "PGOSUSER=$(quote "$PGOSUSER")"
		echo "PGSOCKDIR=$(quote "$PGSOCKDIR")"
	} >"$state/env.new"
	mv "$state/env.new" "$state/env"
	echo "$url" >"$state/url.new"
	mv "$state/url.new" "$state/url"
	echo "$url"
}

# answers tells whether the server on $PGPORT accepts connections.
answers() {
	"$PGBIN/pg_isready" -q -h 127.0.0.1 -p "$PGPORT" -U postgres -d postgres -t 2
}

# write_conf points the cluster at $PGPORT and $PGSOCKDIR. The settings live
# in the data directory, so `pg_ctl start -D $PGDATA` alone brings the same
# server back after a fault test stopped it.
write_conf() {
	as_server tee "$PGDATA/kafka2pg.conf" >/dev/null <<EOF
# Written by scripts/pg-up.sh; included from postgresql.conf.
listen_addresses = '127.0.0.1'
port = $PGPORT
unix_socket_directories = '$PGSOCKDIR'
max_connections = 200
shared_buffers = 128MB
# An ingest server's setting, as docs/PERFORMANCE.md advises: at
# the bench's rates (about 50 MB of WAL a second) the default 1GB starts a
# checkpoint every ten seconds or so, and commits wait behind its I/O. This
# only spaces checkpoints (disk for WAL, crash-recovery time); durability
# is unchanged.
max_wal_size = 8GB
fsync = on
synchronous_commit = on
# Two-phase commit for bench-peers' Flink XA sink (one prepared
# transaction per sink subtask and checkpoint); 0 refuses PREPARE TRANSACTION.
max_prepared_transactions = 64
log_line_prefix = '%m [%p] %q%u@%d '
log_min_messages = warning
log_checkpoints = off
EOF
	if [ -n "${PG_EXTRA_CONF:-}" ]; then
		printf '# PG_EXTRA_CONF\n%s\n' "$PG_EXTRA_CONF" | as_server tee -a "$PGDATA/kafka2pg.conf" >/dev/null
	fi
}

# start starts the server and waits up to 30 s for it to answer. It returns
# non-zero when it did not.
start() {
	if ! as_server "$PGBIN/pg_ctl" -D "$PGDATA" -l "$PGLOG" -w -t 30 start >&2; then
		return 1
	fi
	local deadline=$((SECONDS + 30))
	until answers; do
		if [ "$SECONDS" -ge "$deadline" ]; then
			log "the server did not answer on 127.0.0.1:$PGPORT within 30 s"
			return 1
		fi
		sleep 0.2
	done
}

# show_log prints the end of the server log to stderr.
show_log() {
	if [ -r "$PGLOG" ]; then
		log "last lines of $PGLOG:"
		tail -n 20 "$PGLOG" >&2 || true
	fi
}

# stop_leftover stops a server of an unrecorded cluster of ours in $1, so
# its directory can be wiped.
stop_leftover() {
	if [ -f "$1/data/postmaster.pid" ]; then
		as_server "$PGBIN/pg_ctl" -D "$1/data" -m immediate stop >/dev/null 2>&1 || true
	fi
}

# cluster_dir prints the directory for the data directory and log, empty and
# owned by the server's OS user: .tmp/pg/cluster when that user can reach
# it, else a directory under /tmp named for the repository.
cluster_dir() {
	local dir="$state/cluster"
	stop_leftover "$dir"
	rm -rf "$dir"
	mkdir -m 0700 "$dir"
	if [ "$(id -u)" -eq 0 ]; then
		chown "$osuser:" "$dir"
		if ! as_server test -w "$dir" -a -x "$dir" 2>/dev/null; then
			rm -rf "$dir"
			dir="/tmp/kafka2pg-pg-$(printf '%s' "$tmp_key" | sha256sum | cut -c1-12)"
			log "user $osuser cannot reach $repo; the cluster lives in $dir"
			stop_leftover "$dir"
			rm -rf "$dir"
			mkdir -m 0700 "$dir"
			chown "$osuser:" "$dir"
		fi
	fi
	echo "$dir"
}

# socket_dir prints the directory for the Unix socket: the cluster directory,
# unless that path is too long for a socket address (108 bytes with the name).
socket_dir() {
	local dir=$1
	if [ "${#dir}" -gt 80 ]; then
		dir="/tmp/kafka2pg-sock-$(printf '%s' "$tmp_key" | sha256sum | cut -c1-12)"
		rm -rf "$dir"
		mkdir -m 0700 "$dir"
		[ "$(id -u)" -ne 0 ] || chown "$osuser:" "$dir"
	fi
	echo "$dir"
}

mkdir -p "$state"

# Two callers at once (say, two test binaries) must not both make a cluster.
exec 9>"$state/lock"
if command -v flock >/dev/null 2>&1; then
	flock -w 600 9 || die "timed out waiting for another pg-up.sh ($state/lock)"
fi

# A cluster recorded by an earlier run: print its URL, or start it again.
if [ -r "$state/env" ]; then
	# shellcheck disable=SC1091
	. "$state/env"
	if has_server_bins "$PGBIN" && [ -f "$PGDATA/PG_VERSION" ]; then
		if answers; then
			log "cluster already running: $PGDATA"
			record
			exit 0
		fi
		log "recorded cluster is not running; starting it again: $PGDATA"
		if ! port_is_free "$PGPORT"; then
			PGPORT=$(free_port)
			write_conf
		fi
		if start; then
			record
			exit 0
		fi
		show_log
		log "could not restart it; making a new cluster"
		as_server "$PGBIN/pg_ctl" -D "$PGDATA" -m immediate stop >/dev/null 2>&1 || true
	fi
	rm -f "$state/env" "$state/url"
fi

PGBIN=$(find_bindir)
if [ -z "$PGBIN" ]; then
	if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1; then
		install_server 9>&- # a server apt starts must not hold our lock
		PGBIN=$(find_bindir)
	fi
	[ -n "$PGBIN" ] || die "no PostgreSQL server binaries (initdb, pg_ctl, postgres) found; install the postgresql server package or set KAFKA2PG_TEST_PG_URL"
fi
if [ "$(id -u)" -eq 0 ] && ! id "$osuser" >/dev/null 2>&1; then
	die "running as root, but there is no '$osuser' OS user to run the server as"
fi

dir=$(cluster_dir)
PGDATA="$dir/data"
PGLOG="$dir/postgres.log"
PGOSUSER=$osuser
PGSOCKDIR=$(socket_dir "$dir")

locale=C
if locale -a 2>/dev/null | grep -qiE '^c\.utf-?8$'; then
	locale=C.UTF-8
fi

log "initdb $PGDATA ($PGBIN, locale $locale)"
if ! as_server "$PGBIN/initdb" -D "$PGDATA" --auth=trust -U postgres \
	--encoding=UTF8 --locale="$locale" >"$state/initdb.log" 2>&1; then
	cat "$state/initdb.log" >&2
	die "initdb failed"
fi
echo "include 'kafka2pg.conf'" | as_server tee -a "$PGDATA/postgresql.conf" >/dev/null

# The port was free when picked, but may be taken before the server binds it.
for try in 1 2 3; do
	PGPORT=$(free_port)
	write_conf
	log "starting the server on 127.0.0.1:$PGPORT (log $PGLOG)"
	if start; then
		record
		exit 0
	fi
	show_log
	as_server "$PGBIN/pg_ctl" -D "$PGDATA" -m immediate stop >/dev/null 2>&1 || true
done
die "the server did not start; see $PGLOG"
