#!/usr/bin/env bash
# record.sh records the change events of cdc/testdata/recorded from a real
# Debezium PostgreSQL connector (see README.md): it starts what it needs
# (scripts/kafka-up.sh, pg-source-up.sh, connect-up.sh, each reused when
# running), makes a fresh source database from source.sql, creates one
# connector per configuration of connectors.json, waits for their
# snapshots, runs workload.sql, waits for its last event, and writes
#   <connector>/<table>.jsonl      one record a line: {"offset": N,
#                                  "key": <key JSON>|null, "value": <value JSON>|null},
#                                  key and value byte for byte as Kafka has them
#   expected/<mode>/<table>.snapshot.jsonl, .final.jsonl
#                                  the source rows before and after the
#                                  workload, each column as normalize.sql
#                                  says the replica prints it
#   versions.txt                   what made them
# Then it deletes the connectors, their slots and the database. About a
# minute once the jars are cached. Run from anywhere:
#   cdc/testdata/recorded/record.sh
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../../.." && pwd)
log() { echo "record: $*" >&2; }
die() {
	log "$*"
	exit 1
}
command -v kcat >/dev/null || die "kcat is missing (Debian: apt-get install -y kcat)"
command -v jq >/dev/null || die "jq is missing (Debian: apt-get install -y jq)"

brokers=$("$repo/scripts/kafka-up.sh")
admin=$("$repo/scripts/pg-source-up.sh")
connect=$("$repo/scripts/connect-up.sh" "$brokers")
# shellcheck source=/dev/null
. "$repo/.tmp/pg-source/env"
db=recorded
src="postgres://postgres@$PGHOST:$PGPORT/$db?sslmode=disable"

connectors=$(jq -r '.[].name' "$here/connectors.json")
# The connectors' names are new each run: Kafka Connect keeps a source
# connector's offsets by its name, and a connector that finds offsets
# skips its snapshot. The topic prefixes are fixed (source.name).
run=$(date +%s)
tables="all_types toasty accounts order_lines done"

cleanup() {
	for c in $connectors; do
		curl -s -o /dev/null -X DELETE "$connect/connectors/rec_${c}_$run" || true
	done
	sleep 2
	for c in $connectors; do
		psql "$admin" -qAtc "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = 'rec_$c'" >/dev/null 2>&1 || true
	done
}
trap cleanup EXIT
cleanup

log "a fresh database $db"
psql "$admin" -qc "DROP DATABASE IF EXISTS $db" -c "CREATE DATABASE $db"
psql "$src" -v ON_ERROR_STOP=1 -qf "$here/source.sql" -f "$here/normalize.sql"

# The topics of an earlier recording go first: the prefixes are fixed, so
# that source.name in the events is too.
existing=$(kcat -L -b "$brokers" -J | jq -r '.topics[].topic')
for c in $connectors; do
	for t in $(grep "^rec_$c\." <<<"$existing" || true); do
		"$repo/scripts/kafka-tool.sh" TopicCommand --bootstrap-server "$brokers" --delete --topic "$t"
	done
done

# count TOPIC prints the number of records of a topic (0 when missing).
count() {
	kcat -C -b "$brokers" -t "$1" -o beginning -e -q -f 'x\n' 2>/dev/null | wc -l
}
# wait_count TOPIC N waits up to 120 s for N records.
wait_count() {
	local deadline=$((SECONDS + 120)) n
	while n=$(count "$1"); [ "$n" -lt "$2" ]; do
		[ $SECONDS -lt $deadline ] || die "$1 has $n records after 120 s, want $2; the connectors: $(curl -s "$connect/connectors?expand=status")"
		sleep 1
	done
}

for c in $connectors; do
	cfg=$(jq --arg c "$c" --arg port "$PGPORT" --arg db "$db" '.[] | select(.name == $c) | .config + {
		"connector.class": "io.debezium.connector.postgresql.PostgresConnector",
		"database.hostname": "127.0.0.1", "database.port": $port, "database.user": "postgres",
		"database.password": "", "database.dbname": $db, "plugin.name": "pgoutput",
		"topic.prefix": ("rec_" + $c), "slot.name": ("rec_" + $c), "publication.name": ("rec_" + $c),
		"publication.autocreate.mode": "filtered", "table.include.list": "public\\..*",
		"topic.creation.default.replication.factor": "-1", "topic.creation.default.partitions": "1"}' "$here/connectors.json")
	log "connector rec_${c}_$run"
	curl -sf -X PUT -H 'Content-Type: application/json' "$connect/connectors/rec_${c}_$run/config" -d "$cfg" >/dev/null ||
		die "creating rec_${c}_$run failed: $(curl -s -X PUT -H 'Content-Type: application/json' "$connect/connectors/rec_${c}_$run/config" -d "$cfg")"
done

log "waiting for the snapshots"
for c in $connectors; do
	wait_count "rec_$c.public.all_types" 8
	wait_count "rec_$c.public.toasty" 2
	wait_count "rec_$c.public.accounts" 2
	wait_count "rec_$c.public.order_lines" 2
done

# dump MODE WHEN writes the expected rows of every table.
dump() {
	local mode=$1 when=$2 t q
	mkdir -p "$here/expected/$mode"
	for t in all_types toasty accounts order_lines; do
		q=$(psql "$src" -qAtc "SELECT replica_select('$t', '$mode')")
		psql "$src" -v ON_ERROR_STOP=1 -qAtc "SET TimeZone = 'UTC'; SELECT row_to_json(x) FROM ($q) x ORDER BY row_to_json(x)::text" \
			>"$here/expected/$mode/$t.$when.jsonl"
	done
}
modes=$(jq -r '[.[].mode] | unique | .[]' "$here/connectors.json")
for m in $modes; do dump "$m" snapshot; done

log "the workload"
psql "$src" -v ON_ERROR_STOP=1 -qf "$here/workload.sql"
for c in $connectors; do
	wait_count "rec_$c.public.done" 1
done
# The marker's topic is not the others': wait until their counts settle.
prev=
while :; do
	now=$(for c in $connectors; do for t in $tables; do count "rec_$c.public.$t"; done; done | tr '\n' ' ')
	[ "$now" = "$prev" ] && break
	prev=$now
	sleep 3
done
for m in $modes; do dump "$m" final; done

for c in $connectors; do
	rm -rf "${here:?}/$c"
	mkdir -p "$here/$c"
	topics=$(kcat -L -b "$brokers" -J | jq -r '.topics[].topic' | grep "^rec_$c\." | sort)
	for topic in $topics; do
		name=${topic#rec_"$c".}
		name=${name#public.}
		# kcat prints a null key or value as NULL (-Z); JSON never is.
		kcat -C -b "$brokers" -t "$topic" -o beginning -e -q -Z -f '%o\t%k\t%s\n' |
			awk -F '\t' '{ k = $2 == "NULL" ? "null" : $2; v = $3 == "NULL" ? "null" : $3;
				printf "{\"offset\":%s,\"key\":%s,\"value\":%s}\n", $1, k, v }' >"$here/$c/$name.jsonl"
		jq -e . "$here/$c/$name.jsonl" >/dev/null || die "$here/$c/$name.jsonl is not JSON lines"
	done
done

# shellcheck source=/dev/null
. "$repo/.tmp/connect/${CONNECT_INSTANCE:-worker}/env"
{
	echo "Debezium PostgreSQL connector $DEBEZIUM_VERSION (io.debezium:debezium-connector-postgres, Maven Central)"
	echo "Kafka Connect $CONNECT_VERSION (connect-runtime, JsonConverter), Apache Kafka $(. "$repo/.tmp/kafka/env" && echo "$KAFKA_VERSION") (scripts/kafka-up.sh)"
	echo "PostgreSQL $(psql "$src" -qAtc 'SHOW server_version') (scripts/pg-source-up.sh: wal_level logical, plugin pgoutput)"
	echo "Java $(java -version 2>&1 | head -n 1)"
} >"$here/versions.txt"
log "recorded: $(cat "$here"/*/*.jsonl | wc -l) records in $(ls -d "$here"/*/ | grep -vc expected) recordings"
