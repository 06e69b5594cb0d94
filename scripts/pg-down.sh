#!/usr/bin/env bash
# pg-down.sh stops the throwaway cluster that scripts/pg-up.sh started and
# deletes it: its data directory, its socket directory and .tmp/pg.
# Doing nothing is fine: without a recorded cluster it only says so.
# PG_STATE names another cluster's directory under .tmp (default pg), as
# for pg-up.sh.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
pg_state=${PG_STATE:-pg}
case "$pg_state" in
"" | *[!A-Za-z0-9_-]*) printf 'pg-down: error: PG_STATE is "%s": a directory name under .tmp\n' "$pg_state" >&2; exit 1 ;;
esac
state="$repo/.tmp/$pg_state"

log() { printf 'pg-down: %s\n' "$*" >&2; }

if [ ! -d "$state" ]; then
	log "no cluster recorded in $state"
	exit 0
fi

exec 9>"$state/lock"
if command -v flock >/dev/null 2>&1; then
	flock -w 600 9 || { log "error: timed out waiting for pg-up.sh ($state/lock)"; exit 1; }
fi

if [ -r "$state/env" ]; then
	# shellcheck disable=SC1091
	. "$state/env"
	if [ -f "$PGDATA/postmaster.pid" ]; then
		log "stopping the server of $PGDATA"
		stop=("$PGBIN/pg_ctl" -D "$PGDATA" -m fast -w -t 60 stop)
		if [ "$(id -u)" -ne 0 ] || [ "$PGOSUSER" = root ]; then
			as=()
		elif command -v runuser >/dev/null 2>&1; then
			as=(runuser -u "$PGOSUSER" --)
		else
			as=(su "$PGOSUSER" -s /bin/sh -c "$(printf '%q ' "${stop[@]}")")
			stop=()
		fi
		(cd / && "${as[@]}" "${stop[@]}") >&2 ||
			log "pg_ctl stop failed; deleting the cluster anyway"
	fi
	# The data directory lives in .tmp/pg/cluster or in /tmp; its parent is
	# ours either way (see pg-up.sh).
	cluster=$(dirname "$PGDATA")
	case "$cluster" in
	"$state"/* | /tmp/kafka2pg-pg-*) rm -rf "$cluster" ;;
	*) log "not deleting $cluster: pg-up.sh does not put clusters there" ;;
	esac
	case "$PGSOCKDIR" in
	/tmp/kafka2pg-sock-*) rm -rf "$PGSOCKDIR" ;;
	esac
else
	log "no cluster recorded in $state/env"
fi

rm -rf "$state"
log "done"
