#!/usr/bin/env bash
# pg-source-up.sh starts a second throwaway PostgreSQL cluster, the source
# database of change-data-capture tests (Debezium's PostgreSQL connector),
# and prints its admin URL on stdout: scripts/pg-up.sh with its state in
# .tmp/pg-source and logical decoding on (wal_level = logical; the pgoutput
# plugin is built in, no extension needed). The connector may log in as
# postgres, a superuser, which may create the publication and the slot.
# scripts/pg-source-down.sh stops and deletes it. Idempotent like pg-up.sh.
set -euo pipefail

export PG_STATE=pg-source
export PG_EXTRA_CONF="# Logical decoding, for Debezium's PostgreSQL connector (pgoutput).
wal_level = logical
max_replication_slots = 10
max_wal_senders = 10"
exec "$(dirname "${BASH_SOURCE[0]}")/pg-up.sh" "$@"
