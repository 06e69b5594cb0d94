# kafka2pg: make demo, make test. GNU make.
#
# Each recipe runs as one bash script (.ONESHELL) that stops at the first
# failing command. Postgres comes from scripts/pg-url.sh: the URL in the
# environment when one is set, else the throwaway cluster of scripts/pg-up.sh.

SHELL := bash
.SHELLFLAGS := -euo pipefail -c
.ONESHELL:
.DEFAULT_GOAL := build

GO ?= go
BIN := bin/kafka2pg
# A sub-make that `make -n test` does not run: recipes naming $(MAKE) itself
# run even under -n, and with .ONESHELL that would be the whole test recipe.
SUBMAKE := $(MAKE) --no-print-directory

.PHONY: build pg-up pg-down lint test demo clean kafka-up kafka-down

build:
	$(GO) build -o $(BIN) ./cmd/kafka2pg

pg-up:
	@scripts/pg-up.sh

pg-down:
	@scripts/pg-down.sh

lint:
	@echo "==> gofmt -l ."
	unformatted=$$(gofmt -l .)
	if [ -n "$$unformatted" ]; then
		echo "gofmt would change these files:"
		echo "$$unformatted"
		exit 1
	fi
	echo "==> $(GO) vet ./..."
	$(GO) vet ./...

# test runs every step even when one fails, then prints a summary and fails
# if any step did.
test: build
	@KAFKA2PG_TEST_PG_URL=$$(scripts/pg-url.sh KAFKA2PG_TEST_PG_URL)
	export KAFKA2PG_TEST_PG_URL
	export KAFKA2PG_BIN="$(CURDIR)/$(BIN)"
	mkdir -p .tmp
	log=.tmp/test.log
	: >"$$log"
	failed=0
	step() { # step NAME COMMAND...: runs COMMAND, records NAME ok or FAILED
		local name=$$1; shift
		echo "==> $$*"
		if "$$@" 2>&1 | tee -a "$$log"; then
			results+=("ok      $$name")
		else
			results+=("FAILED  $$name")
			failed=1
		fi
	}
	results=()
	echo "Postgres: $$KAFKA2PG_TEST_PG_URL"
	step "go test ./..." $(GO) test -count=1 -timeout 30m ./...
	step "go test -race (reader, ingest)" $(GO) test -count=1 -race -timeout 20m ./reader/... ./ingest/...
	step "lint (gofmt, go vet)" $(SUBMAKE) lint
	echo
	echo "== summary"
	printf '%s\n' "$${results[@]}"
	passed=$$(grep -c '^ok ' "$$log" || true)
	broken=$$(grep -c $$'^FAIL\t' "$$log" || true)
	echo "packages: $$passed passed, $$broken failed"
	exit $$failed

demo: build
	@url=$$(scripts/pg-url.sh KAFKA2PG_PG_URL DATABASE_URL)
	./$(BIN) demo --pg-url "$$url"

clean:
	rm -rf bin
	scripts/pg-down.sh

# A real Apache Kafka cluster on 127.0.0.1 (jars from Maven Central, cached in
# ~/.m2 and .tmp/kafka/libs): prints its bootstrap list, also written to
# .tmp/kafka/brokers. `make kafka-up BROKERS=3` makes three nodes for
# failover tests; scripts/kafka-node.sh stops and starts one of them.
kafka-up:
	@scripts/kafka-up.sh $(BROKERS)

kafka-down:
	@scripts/kafka-down.sh
