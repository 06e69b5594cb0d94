#!/usr/bin/env bash
# pg-source-down.sh stops and deletes the source cluster of
# scripts/pg-source-up.sh (scripts/pg-down.sh with PG_STATE=pg-source).
set -euo pipefail
export PG_STATE=pg-source
exec "$(dirname "${BASH_SOURCE[0]}")/pg-down.sh" "$@"
