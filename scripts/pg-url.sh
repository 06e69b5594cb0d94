#!/usr/bin/env bash
# pg-url.sh prints the PostgreSQL URL to use: the value of the first of the
# named environment variables that is set and not empty, or else the URL of
# the throwaway cluster of scripts/pg-up.sh, which it starts when needed.
#
#   scripts/pg-url.sh KAFKA2PG_TEST_PG_URL          # make test
#   scripts/pg-url.sh KAFKA2PG_PG_URL DATABASE_URL  # make demo
set -euo pipefail

for name in "$@"; do
	if [ -n "${!name:-}" ]; then
		printf 'pg-url: using $%s\n' "$name" >&2
		printf '%s\n' "${!name}"
		exit 0
	fi
done

exec "$(dirname "${BASH_SOURCE[0]}")/pg-up.sh"
