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
# A count, not a duration: with a duration, Go 1.26's fuzz coordinator can
# report its own deadline as a failure ("context deadline exceeded", no failing
# input; go.dev/issue/75804, fixed in Go 1.27). A count has no deadline to race.
# 10000 executions take 3-17 s per target here.
FUZZTIME ?= 10000x
BIN := bin/kafka2pg
# The version `kafka2pg version` reports: the git description of the
# checkout (a tag, else the commit, "-dirty" with uncommitted changes).
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
# A sub-make that `make -n test` does not run: recipes naming $(MAKE) itself
# run even under -n, and with .ONESHELL that would be the whole test recipe.
SUBMAKE := $(MAKE) --no-print-directory

.PHONY: help docs build image install-check pg-up pg-down lint test demo clean clean-all kafka-up kafka-down connect-up connect-down bench-peers bench-peers-smoke bench-peers-flink-smoke bench-peers-xa test-real-kafka test-cdc test-cdc-tx test-cdc-tx-large test-security faults chart bench scale

## help            list the targets (the "## " lines of this Makefile)
help:
	@echo "make TARGET, where TARGET is one of:"
	sed -n 's/^## /  /p' $(MAKEFILE_LIST)

## build           compile bin/kafka2pg, stamped with the git version
build:
	$(GO) build -ldflags "-X main.version=$(VERSION)" -o $(BIN) ./cmd/kafka2pg

## docs            regenerate docs/CONFIGURATION.md and docs/METRICS.md from the flags and metrics
docs:
	$(GO) test -count=1 -run '^TestReferencePagesAreCurrent$$' ./cmd/kafka2pg -args -write-docs

# image builds the container image of the Dockerfile, stamped with the same
# git version as make build, tagged IMAGE. It needs a Docker engine with
# BuildKit (the buildx plugin; Docker 23 or newer has both), or
# DOCKER=podman; the Go toolchain runs in the build stage, so nothing else
# is needed. To build for several platforms and push:
# docker buildx build --platform linux/amd64,linux/arm64 --build-arg VERSION=... -t NAME --push .
IMAGE ?= kafka2pg:$(VERSION)
DOCKER ?= docker
## image           build the container image (IMAGE=kafka2pg:<git version>; needs Docker with buildx, or DOCKER=podman)
image:
	@fail() { echo "make image: $$*" >&2; exit 1; }
	command -v $(DOCKER) >/dev/null 2>&1 ||
		fail "$(DOCKER) is not installed: install Docker (23 or newer) or Podman (make image DOCKER=podman)"
	# The Dockerfile's RUN --mount caches need BuildKit, which docker runs
	# through the buildx plugin; podman has it built in.
	if [ "$$(basename $(DOCKER))" = docker ] && ! $(DOCKER) buildx version >/dev/null 2>&1; then
		fail "docker buildx is missing, and the Dockerfile needs BuildKit: install the buildx plugin (Debian and Ubuntu: docker-buildx-plugin or docker-buildx)"
	fi
	$(DOCKER) info >/dev/null 2>&1 ||
		fail "no engine answers '$(DOCKER) info': start the Docker daemon (or Podman's service), or build elsewhere with: docker build --build-arg VERSION=$(VERSION) -t $(IMAGE) ."
	DOCKER_BUILDKIT=1 $(DOCKER) build --build-arg VERSION=$(VERSION) -t $(IMAGE) .
	echo "built $(IMAGE): docker run --rm $(IMAGE) version prints kafka2pg $(VERSION)"

# install-check serves the committed tree as a module version through a
# file-based GOPROXY and installs it with go install ...@version into an
# empty module cache (dependencies from the Go proxy), as a user's go
# install of a tag would; then it builds ./cmd/kafka2pg from an empty cache
# with GOFLAGS=-mod=mod. A few minutes; not part of make test.
## install-check   check that go install github.com/kafka2pg/kafka2pg/cmd/kafka2pg@<tag> works (needs the Go proxy)
install-check:
	@scripts/go-install-check.sh

## pg-up           start the throwaway Postgres of the tests and the demo; print its URL
pg-up:
	@scripts/pg-up.sh

## pg-down         stop and delete that Postgres
pg-down:
	@scripts/pg-down.sh

## lint            gofmt and go vet
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
	echo "==> $(GO) -C deploy/kubernetes vet ./..."
	$(GO) -C deploy/kubernetes vet ./...
	echo "==> $(GO) -C tools vet ./..."
	$(GO) -C tools vet ./...

# test runs every step even when one fails, then prints a summary and fails
# if any step did.
## test            every test, fuzz target (briefly), the bench smoke and lint
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
	# -parallel 4: the parallel tests of integration/ mostly wait on their
	# bridge processes (session timeouts, kill loops), so four at a time
	# keep two cores busy where GOMAXPROCS' default of two leaves them idle.
	step "go test ./..." $(GO) test -count=1 -parallel 4 -timeout 30m ./...
	# deploy/kubernetes is a module of its own (the Kubernetes API types stay
	# out of kafka2pg's go.mod), so ./... above does not reach it.
	step "go test (deploy/kubernetes)" $(GO) -C deploy/kubernetes test -count=1 ./...
	step "go test -race (reader, ingest, bridge)" $(GO) test -count=1 -race -p 1 -timeout 20m ./reader/... ./ingest/... ./bridge/...
	# Every fuzz target, briefly (FUZZTIME each); the seeds run in go test above.
	for target in FuzzRawMapper FuzzHeaders FuzzJSONMapperRow FuzzParsePath FuzzScanMatchesDecode FuzzPathMatchesDecode FuzzRegistryMapperRow FuzzCheckJSONMatchesTheSlowPath FuzzAppendJSONStringMatchesMarshal FuzzAppendRowMatchesRow FuzzQuickTimestamp FuzzChildRows FuzzChildScanMatchesEncodingJSON; do
		step "fuzz $$target ($(FUZZTIME))" $(GO) test -run '^$$' -fuzz "^$$target$$" -fuzztime $(FUZZTIME) ./decode/
	done
	step "fuzz FuzzQuoteIdentMatchesSanitize ($(FUZZTIME))" $(GO) test -run '^$$' -fuzz '^FuzzQuoteIdentMatchesSanitize$$' -fuzztime $(FUZZTIME) ./schema/
	for target in FuzzDecode FuzzDecodeWire FuzzReaderMatchesEncodingJSON FuzzParseIntMatchesStrconv; do
		step "fuzz cdc $$target ($(FUZZTIME))" $(GO) test -run '^$$' -fuzz "^$$target$$" -fuzztime $(FUZZTIME) ./cdc/
	done
	step "bench smoke (2 reps, tiny sizes)" env KAFKA2PG_BENCH_SMOKE=1 $(GO) -C tools test -count=1 -run '^TestBenchSmoke$$' -timeout 10m ./bench/
	# The tools module; its bench-peers smoke skips without KAFKA2PG_TEST_BROKERS.
	step "go test ./... in tools/ (bench-peers smoke on KAFKA2PG_TEST_BROKERS)" $(GO) -C tools test -count=1 -timeout 10m ./...
	step "lint (gofmt, go vet)" $(SUBMAKE) lint
	echo
	echo "== summary"
	printf '%s\n' "$${results[@]}"
	passed=$$(grep -c '^ok ' "$$log" || true)
	broken=$$(grep -c $$'^FAIL\t' "$$log" || true)
	echo "packages: $$passed passed, $$broken failed"
	exit $$failed

## demo            the bridge on an in-process Kafka with sample events, then SQL that checks it
demo: build
	@url=$$(scripts/pg-url.sh KAFKA2PG_PG_URL DATABASE_URL)
	./$(BIN) demo --pg-url "$$url"

## clean           remove bin/ (the test database stays: see clean-all)
clean:
	rm -rf bin

## clean-all       clean, and stop and delete the throwaway Postgres and Kafka
clean-all: clean
	scripts/connect-down.sh --all || true
	scripts/kafka-down.sh || true
	scripts/pg-source-down.sh || true
	scripts/pg-down.sh

# A real Apache Kafka cluster on 127.0.0.1 (jars from Maven Central, cached in
# ~/.m2 and .tmp/kafka/libs): prints its bootstrap list, also written to
# .tmp/kafka/brokers. `make kafka-up BROKERS=3` makes three nodes for
# failover tests; scripts/kafka-node.sh stops and starts one of them.
## kafka-up        start a real Apache Kafka on 127.0.0.1 (BROKERS=3 for three nodes); print its brokers
kafka-up:
	@scripts/kafka-up.sh $(BROKERS)

## kafka-down      stop that Kafka
kafka-down:
	@scripts/kafka-down.sh

# A Kafka Connect worker (distributed mode, REST on a free loopback port)
# with the Debezium JDBC sink and the Debezium PostgreSQL source connector,
# against the cluster of kafka-up (started when not running): jars from
# Maven Central, cached in ~/.m2 and .tmp/connect. Prints its REST URL.
# scripts/pg-source-up.sh starts a second Postgres with wal_level=logical,
# the source database of a Debezium PostgreSQL connector.
## connect-up      start a Kafka Connect worker with the Debezium connectors; print its REST URL
connect-up:
	@scripts/connect-up.sh

## connect-down    stop that worker
connect-down:
	@scripts/connect-down.sh

# test-real-kafka runs the end-to-end suite (integration/) again, against a
# real Apache Kafka: KAFKA2PG_TEST_BROKERS when set, else the cluster of
# scripts/kafka-up.sh (started when it is not running; `make kafka-down`
# stops it).
## test-real-kafka the end-to-end suite against a real Apache Kafka
test-real-kafka: build
	@KAFKA2PG_TEST_PG_URL=$$(scripts/pg-url.sh KAFKA2PG_TEST_PG_URL)
	KAFKA2PG_TEST_BROKERS=$${KAFKA2PG_TEST_BROKERS:-$$(scripts/kafka-up.sh)}
	export KAFKA2PG_TEST_PG_URL KAFKA2PG_TEST_BROKERS
	export KAFKA2PG_BIN="$(CURDIR)/$(BIN)"
	echo "Postgres: $$KAFKA2PG_TEST_PG_URL"
	echo "Kafka:    $$KAFKA2PG_TEST_BROKERS"
	started=$$SECONDS
	status=0
	$(GO) test -count=1 -timeout 30m -v ./integration/ 2>&1 | tee .tmp/test-real-kafka.log | grep --line-buffered -E '^(=== RUN|--- |ok|FAIL|PASS|panic)' || status=$$?
	echo "integration suite on the real broker: $$(grep -c '^--- PASS' .tmp/test-real-kafka.log || true) passed, $$(grep -c '^--- FAIL' .tmp/test-real-kafka.log || true) failed, $$(grep -c '^--- SKIP' .tmp/test-real-kafka.log || true) skipped in $$((SECONDS - started))s (log: .tmp/test-real-kafka.log)"
	exit $$status

# test-cdc runs the end-to-end replication of a database
# (TestDebeziumReplicatesASourceDatabase): Debezium's PostgreSQL connector on
# a Kafka Connect worker (scripts/connect-up.sh, jars from Maven Central)
# captures a second Postgres (scripts/pg-source-up.sh, wal_level=logical)
# into the broker of scripts/kafka-up.sh (or KAFKA2PG_TEST_BROKERS), and
# kafka2pg replicates it into the test database under 5 kill -9; then every
# table is compared with its replica with SQL. It starts what is not
# running and leaves it running (connect-down.sh, pg-source-down.sh,
# kafka-down.sh stop them).
## test-cdc        Debezium -> Kafka -> kafka2pg, compared row by row with the source (real broker, Connect)
test-cdc: build
	@KAFKA2PG_TEST_PG_URL=$$(scripts/pg-url.sh KAFKA2PG_TEST_PG_URL)
	KAFKA2PG_TEST_BROKERS=$${KAFKA2PG_TEST_BROKERS:-$$(scripts/kafka-up.sh)}
	KAFKA2PG_TEST_SOURCE_PG_URL=$$(scripts/pg-source-up.sh)
	KAFKA2PG_TEST_CONNECT_URL=$$(scripts/connect-up.sh "$$KAFKA2PG_TEST_BROKERS")
	export KAFKA2PG_TEST_PG_URL KAFKA2PG_TEST_BROKERS KAFKA2PG_TEST_SOURCE_PG_URL KAFKA2PG_TEST_CONNECT_URL
	export KAFKA2PG_TEST_CDC=1 KAFKA2PG_BIN="$(CURDIR)/$(BIN)"
	echo "Kafka:   $$KAFKA2PG_TEST_BROKERS"
	echo "Connect: $$KAFKA2PG_TEST_CONNECT_URL"
	echo "Source:  $$KAFKA2PG_TEST_SOURCE_PG_URL"
	echo "Target:  $$KAFKA2PG_TEST_PG_URL"
	mkdir -p .tmp
	$(GO) test -count=1 -timeout 10m -v -run '^TestDebeziumReplicatesASourceDatabase$$' ./integration/ 2>&1 | tee .tmp/test-cdc.log |
		grep --line-buffered -E '^(=== RUN|\s*--- |ok|FAIL|PASS|panic)|cdc_debezium_test.go'

# test-cdc-tx runs the bank test (TestDebeziumBankTransactionsStayWhole) on
# test-cdc's stack: transfers between accounts of two tables and a log
# table, each a source transaction, captured by Debezium with
# provide.transaction.metadata into topics of 3 partitions, replicated by
# kafka2pg with transactions: true under 5 kill -9 and then 2 instances,
# while a checker polls the replica in REPEATABLE READ snapshots.
## test-cdc-tx     the bank test: source transactions stay whole through Debezium, kill -9 and a rebalance
test-cdc-tx: build
	@KAFKA2PG_TEST_PG_URL=$$(scripts/pg-url.sh KAFKA2PG_TEST_PG_URL)
	KAFKA2PG_TEST_BROKERS=$${KAFKA2PG_TEST_BROKERS:-$$(scripts/kafka-up.sh)}
	KAFKA2PG_TEST_SOURCE_PG_URL=$$(scripts/pg-source-up.sh)
	KAFKA2PG_TEST_CONNECT_URL=$$(scripts/connect-up.sh "$$KAFKA2PG_TEST_BROKERS")
	export KAFKA2PG_TEST_PG_URL KAFKA2PG_TEST_BROKERS KAFKA2PG_TEST_SOURCE_PG_URL KAFKA2PG_TEST_CONNECT_URL
	export KAFKA2PG_TEST_CDC=1 KAFKA2PG_BIN="$(CURDIR)/$(BIN)"
	mkdir -p .tmp
	$(GO) test -count=1 -timeout 10m -v -run '^TestDebeziumBankTransactionsStayWhole$$' ./integration/ 2>&1 | tee .tmp/test-cdc-tx.log |
		grep --line-buffered -E '^(=== RUN|\s*--- |ok|FAIL|PASS|panic)|cdc_tx_debezium_test.go'

# test-cdc-tx-large applies one source transaction of 200,000 change events
# (KAFKA2PG_TEST_TX_EVENTS) staged by a transactions: true sink, and fails
# when a reader sees part of it or the heap passes its bound while it
# applies; then it replicates a bank of 20,000 source transactions
# (KAFKA2PG_TEST_TX_COST_TRANSFERS) change by change and with transactions,
# and logs what each costs (docs/CDC.md quotes it). make test runs both
# with 20,000 events and 300 transactions.
## test-cdc-tx-large one source transaction of 200,000 events applied whole, heap bounded; costs
test-cdc-tx-large:
	@KAFKA2PG_TEST_PG_URL=$$(scripts/pg-url.sh KAFKA2PG_TEST_PG_URL)
	export KAFKA2PG_TEST_PG_URL KAFKA2PG_TEST_TX_EVENTS=$${KAFKA2PG_TEST_TX_EVENTS:-200000}
	export KAFKA2PG_TEST_TX_COST_TRANSFERS=$${KAFKA2PG_TEST_TX_COST_TRANSFERS:-20000}
	$(GO) test -count=1 -p 1 -timeout 20m -v -run '^TestTransactions(LargeTransactionAppliesWholeWithBoundedHeap|CostComparedWithChangeByChange)$$' ./ingest/

# test-registry runs the Schema Registry suite: the Avro and Protobuf
# mappers, the registry client, the registry sinks of run, check and infer,
# the end-to-end crash loop and upsert with Avro records, and the decoder
# fuzz target (FUZZTIME). The registry is franz-go's srfake served over HTTP,
# or the real one named by KAFKA2PG_TEST_SCHEMA_REGISTRY_URL (a
# Confluent-compatible API); Kafka is kfake, or KAFKA2PG_TEST_BROKERS.
## test-registry   the Schema Registry suite (Avro, Protobuf, JSON Schema)
test-registry: build
	@KAFKA2PG_TEST_PG_URL=$$(scripts/pg-url.sh KAFKA2PG_TEST_PG_URL)
	export KAFKA2PG_TEST_PG_URL KAFKA2PG_BIN="$(CURDIR)/$(BIN)"
	echo "Postgres: $$KAFKA2PG_TEST_PG_URL"
	echo "Kafka:    $${KAFKA2PG_TEST_BROKERS:-kfake}"
	echo "Registry: $${KAFKA2PG_TEST_SCHEMA_REGISTRY_URL:-srfake}"
	$(GO) test -count=1 ./registry/
	$(GO) test -count=1 -timeout 20m ./decode/ ./cmd/kafka2pg/ ./integration/ -run 'Avro|Protobuf|JSONSchema|Registry|Wire'
	$(GO) test -run '^$$' -fuzz '^FuzzRegistryMapperRow$$' -fuzztime $(FUZZTIME) ./decode/

# test-security runs the TLS/SASL matrix and the denied ACLs against a
# real broker with PLAINTEXT, SSL, mTLS and SASL_SSL listeners and an
# authorizer (scripts/kafka-up-sasl.sh, its own state under
# .tmp/kafka-sasl; certificates generated by the test).
## test-security   TLS, mTLS, SASL and ACLs against a real broker with those listeners
test-security: build
	@export KAFKA2PG_TEST_PG_URL=$$(scripts/pg-url.sh KAFKA2PG_TEST_PG_URL)
	export KAFKA2PG_TEST_SASL=1 KAFKA2PG_BIN="$(CURDIR)/$(BIN)"
	trap 'scripts/kafka-up-sasl.sh down >/dev/null 2>&1 || true' EXIT
	$(GO) test -count=1 -timeout 15m -v -run '^(TestKafkaSecurityOnARealBroker|TestDeniedACLsOnARealBroker)$$' ./integration/ 2>&1 | tee .tmp/test-security.log | grep --line-buffered -E '^(=== RUN|\s*--- |ok|FAIL|PASS|panic)'

# faults runs the fault matrix of integration/faults_*_test.go
# (KAFKA2PG_FAULTS=1) with exclusive use of a throwaway Postgres and real
# Kafka clusters: every case on one node (cases 23-24, a lossy Postgres
# failover and a restored base backup, start Postgres servers of their
# own from the installed binaries), then leader failover and an unclean
# leader election on three nodes, then the cases of their own tests
# (decompression bombs and an unanswered leave on kfake, denied ACLs on
# scripts/kafka-up-sasl.sh's broker); then it renders docs/RELIABILITY.md
# from the cases' results (FAULTS_REPORT, JSON lines) with tools/report.
# It stops the Kafka cluster at the end, and fails if any case failed.
FAULTS_REPORT ?= .tmp/faults/results.jsonl
## faults          the full fault matrix; renders docs/RELIABILITY.md
faults: build
	@KAFKA2PG_TEST_PG_URL=$$(scripts/pg-url.sh KAFKA2PG_TEST_PG_URL)
	export KAFKA2PG_TEST_PG_URL KAFKA2PG_FAULTS=1 KAFKA2PG_BIN="$(CURDIR)/$(BIN)"
	mkdir -p "$$(dirname "$(FAULTS_REPORT)")"
	export KAFKA2PG_FAULTS_REPORT="$(abspath $(FAULTS_REPORT))"
	: >"$$KAFKA2PG_FAULTS_REPORT"
	trap 'scripts/kafka-down.sh >/dev/null 2>&1 || true; scripts/kafka-up-sasl.sh down >/dev/null 2>&1 || true' EXIT
	logs=$$(dirname "$$KAFKA2PG_FAULTS_REPORT")
	failed=0
	started=$$SECONDS
	faults() { # faults LOG GO-TEST-ARGS...: one go test run of fault cases
		local log=$$1; shift
		$(GO) test -p 1 -count=1 -timeout 40m -v "$$@" ./integration/ 2>&1 | tee "$$log" |
			grep --line-buffered -E '^(=== RUN|--- |ok|FAIL|PASS|panic)|note:|exactly-once count' || failed=1
	}
	echo "==> fault cases 1-19, 23-24 and 26 on a one-node Kafka"
	brokers=$$(scripts/kafka-up.sh 1)
	KAFKA2PG_TEST_BROKERS=$$brokers faults "$$logs/one-node.log" -run '^TestFault' -skip '^(TestFault04bLeaderFailover|TestFault25UncleanLeaderElection)$$'
	scripts/kafka-down.sh
	echo "==> fault cases 4b (leader failover) and 25 (unclean leader election) on a three-node Kafka"
	brokers=$$(scripts/kafka-up.sh 3)
	KAFKA2PG_TEST_BROKERS=$$brokers faults "$$logs/three-nodes.log" -run '^(TestFault04bLeaderFailover|TestFault25UncleanLeaderElection)$$'
	. .tmp/kafka/env
	kafka_version=$$KAFKA_VERSION
	scripts/kafka-down.sh
	echo "==> cases 20-22: decompression bombs, on one partition and on many at once, and an unanswered leave (kfake), denied ACLs (scripts/kafka-up-sasl.sh)"
	KAFKA2PG_TEST_SASL=1 faults "$$logs/more.log" \
		-run '^(TestADecompressionBombBecomesDeadLettersWithinTheMemoryBudget|TestBombsOnManyPartitionsAtOnceAllBecomeDeadLetters|TestAnAbandonedLeaveExitsZeroWithOneWarning|TestDeniedACLsOnARealBroker)$$'
	scripts/kafka-up-sasl.sh down >/dev/null 2>&1 || true
	pg_version=$$(psql "$$KAFKA2PG_TEST_PG_URL" -Atc 'SHOW server_version' 2>/dev/null || echo unknown)
	echo "==> docs/RELIABILITY.md"
	$(GO) -C tools run ./report faults -in "$$KAFKA2PG_FAULTS_REPORT" -out "$(CURDIR)/docs/RELIABILITY.md" \
		-setup "Apache Kafka $$kafka_version (scripts/kafka-up.sh: KRaft, one node for cases 1-19, 23-24 and 26, three nodes for 4b and 25; scripts/kafka-up-sasl.sh, one node with an authorizer, for 22); kfake for 20-21" \
		-setup "PostgreSQL $$pg_version (scripts/pg-up.sh), $$($(GO) env GOVERSION), $$(nproc) CPUs, $$(uname -sm)" \
		-setup "whole run: $$((SECONDS - started)) s" || failed=1
	exit $$failed

# chart redraws docs/img/metrics.svg from a live bridge's /metrics (an
# in-process Kafka, a backlog, a steady producer and a burst; about 25 s).
## chart           redraw docs/img/metrics.svg from a live bridge
chart: build
	@url=$$(scripts/pg-url.sh KAFKA2PG_PG_URL DATABASE_URL)
	$(GO) -C tools run ./metricschart -bin "$(CURDIR)/$(BIN)" -pg-url "$$url" -out "$(CURDIR)/docs/img/metrics.svg"

# bench measures kafka2pg against the binary COPY ceiling and two INSERT
# baselines on both tables, REPS times interleaved (default 3), then the
# latency at half the measured rate and the peak RSS draining a backlog of
# BACKLOG records (default 5000000; 0 skips it), in one run against one
# Postgres, and writes bench/results.md and bench/results.svg (tools/bench;
# about 8-9 minutes on an idle 2-core box).
## bench           throughput against raw COPY and INSERT baselines, latency, memory; bench/results.md
bench: build
	@url=$$(scripts/pg-url.sh KAFKA2PG_PG_URL DATABASE_URL)
	$(GO) -C tools run ./bench -pg-url "$$url" -reps $(or $(REPS),3) -backlog $(or $(BACKLOG),5000000) \
		-bin "$(CURDIR)/$(BIN)" -out "$(CURDIR)/bench/results.md" -chart "$(CURDIR)/bench/results.svg"

# bench-peers measures kafka2pg against the Debezium JDBC sink on Kafka
# Connect (tools/benchpeers; the worker and the connectors' jars come from
# Maven Central through scripts/connect-up.sh) on one broker
# (KAFKA2PG_TEST_BROKERS, else the cluster of kafka-up, started when not
# running) and one Postgres: the same RECORDS Kafka Connect JSON records
# (default 150000 per topic), REPS interleaved repetitions (default 3) of
# append with the sink's defaults, append batched, upsert with new keys,
# upsert with 90% updates and RECORDS/2 Debezium change events (kafka2pg's
# format debezium sink against the JDBC sink's native mode), the same
# events in source transactions (kafka2pg alone, with and without
# transactions: true), then two
# kill -9 of each system and the duplicates counted with SQL. Writes bench/peers.md and bench/peers.svg.
# About 10 minutes on an idle 2-core box, most of it the JDBC sink's (it
# takes both cores: run it alone; bench/peers.md says how long its run took
# and the load beside it); RECORDS=1000000 for a million records, about 30
# minutes idle.
# Flink's exactly-once JDBC sink (XA) runs beside them at each parallelism
# of FLINK_PARALLELISM (default 2,4; empty leaves it out), checkpointing
# every FLINK_CHECKPOINT (default 1s): a job of tools/benchpeers/flink built
# once by Maven from Maven Central (kept in .tmp/flink), in a local
# MiniCluster; then the latency of every system at half the slowest one's
# append rate, and Flink's kill -9 probe restarted from its retained
# checkpoint and plainly. Postgres needs max_prepared_transactions > 0
# (scripts/pg-up.sh sets 64).
# Last, the lossy failover (tools/benchpeers/failover.go): each sink writes
# through a TCP forwarder to a primary of the harness's own (initdb as the
# postgres OS user) that streams to an asynchronous standby; the standby's
# walreceiver is stopped until the primary holds commits it never sent and
# the sink's Kafka offsets are past them, the primary is killed with -9,
# the standby promoted, and the forwarder moved to it (no sink is
# reconfigured); SQL on the new primary counts the records lost for good
# and the duplicates. kafka2pg runs the FAILOVER variants (default
# flowing,killed,idle: records flowing, kafka2pg killed with the primary,
# partitions idle at the failover) and must show 0 and 0, or the run
# fails; the peers run FAILOVER_PEERS (default flowing).
FLINK_PARALLELISM ?= 2,4
FLINK_CHECKPOINT ?= 1s
FAILOVER ?= flowing,killed,idle
FAILOVER_PEERS ?= flowing
## bench-peers     kafka2pg against the Debezium JDBC sink (Kafka Connect) and Flink's XA sink; bench/peers.md
bench-peers: build
	@url=$$(scripts/pg-url.sh KAFKA2PG_PG_URL DATABASE_URL)
	$(GO) -C tools run ./benchpeers -pg-url "$$url" -records $(or $(RECORDS),150000) -reps $(or $(REPS),3) \
		-flink-parallelism "$(FLINK_PARALLELISM)" -flink-checkpoint "$(FLINK_CHECKPOINT)" \
		-failover "$(FAILOVER)" -failover-peers "$(FAILOVER_PEERS)" \
		-bin "$(CURDIR)/$(BIN)" -out "$(CURDIR)/bench/peers.md" -chart "$(CURDIR)/bench/peers.svg"

# bench-peers-xa measures kafka2pg against Flink's exactly-once XA sink
# alone on a large backlog: RECORDS Kafka Connect JSON records (default
# 5000000) in one topic, the batched append scenario, REPS repetitions
# (default 1), Flink at each parallelism of FLINK_PARALLELISM, no Debezium
# sink, no kill -9 probe and no latency runs (make bench-peers has them).
# Writes bench/peers-xa.md and bench/peers-xa.svg; about 4 minutes for 5M
# records on an idle 2-core box.
## bench-peers-xa  kafka2pg against Flink's XA sink on a 5M-record backlog; bench/peers-xa.md
bench-peers-xa: build
	@url=$$(scripts/pg-url.sh KAFKA2PG_PG_URL DATABASE_URL)
	$(GO) -C tools run ./benchpeers -pg-url "$$url" -records $(or $(RECORDS),5000000) -reps $(or $(REPS),1) \
		-scenarios append-batch -debezium=false -probe=false -latency-rate -1 \
		-flink-parallelism "$(FLINK_PARALLELISM)" -flink-checkpoint "$(FLINK_CHECKPOINT)" \
		-bin "$(CURDIR)/$(BIN)" -out "$(CURDIR)/bench/peers-xa.md" -chart "$(CURDIR)/bench/peers-xa.svg"

# bench-peers-smoke checks that the harness runs both systems on 2,000
# records (TestPeersSmoke): on KAFKA2PG_TEST_BROKERS, else the cluster of
# kafka-up (started when not running). About 60 s with the jars cached;
# the first fetch of the Connect jars from Maven Central adds about 40 s.
# Then kafka2pg's lossy failover, records flowing (TestPeersSmokeFailover,
# on Postgres servers of its own).
## bench-peers-smoke the bench-peers harness on a few records, on a real broker
bench-peers-smoke: build
	@export KAFKA2PG_TEST_PG_URL=$$(scripts/pg-url.sh KAFKA2PG_TEST_PG_URL)
	export KAFKA2PG_TEST_BROKERS=$${KAFKA2PG_TEST_BROKERS:-$$(scripts/kafka-up.sh)}
	export KAFKA2PG_BIN="$(CURDIR)/$(BIN)"
	$(GO) -C tools test -count=1 -timeout 10m -run '^TestPeersSmoke(Failover)?$$' -v ./benchpeers/

# bench-peers-flink-smoke checks that the harness runs kafka2pg and Flink's
# XA sink on 2,000 records, with a short latency run of each
# (TestPeersSmokeFlink, KAFKA2PG_TEST_FLINK=1), on the same broker and
# Postgres as bench-peers-smoke. The first Maven build of the job takes
# about 45 s (then .tmp/flink keeps the jar); Flink's start-up makes each
# of its runs about 15 s.
## bench-peers-flink-smoke the Flink XA peer of bench-peers on a few records, on a real broker
bench-peers-flink-smoke: build
	@export KAFKA2PG_TEST_PG_URL=$$(scripts/pg-url.sh KAFKA2PG_TEST_PG_URL)
	export KAFKA2PG_TEST_BROKERS=$${KAFKA2PG_TEST_BROKERS:-$$(scripts/kafka-up.sh)}
	export KAFKA2PG_BIN="$(CURDIR)/$(BIN)" KAFKA2PG_TEST_FLINK=1
	$(GO) -C tools test -count=1 -timeout 10m -run '^TestPeersSmokeFlink$$' -v ./benchpeers/

# scale runs the scale suite of integration/scale*_test.go at full size
# (KAFKA2PG_SCALE=1): the 1,000-partition run on kfake, then the
# rebalance write gaps, the throughput matrix, the recovery times and
# pg_partman on a real Kafka (KAFKA2PG_TEST_BROKERS, else the cluster of
# scripts/kafka-up.sh, started when not running and left running); then it
# renders docs/SCALING.md and docs/img/scaling-*.svg from what the tests
# measured (SCALE_REPORT, JSON lines) with tools/report, and fails if a
# test failed. The matrix compares the default with --table-writers 2; SCALE_VARIANTS adds
# columns: make scale SCALE_VARIANTS='big=--batch-max-rows 20000;one-conn=--pg-max-conns 1'.
# About 6-10 minutes on an idle 2-core box.
SCALE_REPORT ?= .tmp/scale/results.jsonl
## scale           the scale suite at full size; renders docs/SCALING.md
scale: build
	@KAFKA2PG_TEST_PG_URL=$$(scripts/pg-url.sh KAFKA2PG_TEST_PG_URL)
	export KAFKA2PG_TEST_PG_URL KAFKA2PG_SCALE=1 KAFKA2PG_BIN="$(CURDIR)/$(BIN)"
	export KAFKA2PG_SCALE_VARIANTS="$(SCALE_VARIANTS)"
	mkdir -p "$$(dirname "$(SCALE_REPORT)")"
	export KAFKA2PG_SCALE_REPORT="$(abspath $(SCALE_REPORT))"
	: >"$$KAFKA2PG_SCALE_REPORT"
	logs=$$(dirname "$$KAFKA2PG_SCALE_REPORT")
	failed=0
	started=$$SECONDS
	scale() { # scale LOG GO-TEST-ARGS...: one go test run of scale tests
		local log=$$1; shift
		$(GO) test -p 1 -count=1 -timeout 30m -v "$$@" ./integration/ 2>&1 | tee "$$log" |
			grep --line-buffered -E '^(=== RUN|\s*--- |ok|FAIL|PASS|panic)|scale_.*_test.go:[0-9]+: (drained|fairness|steady|kill|add|.*rows/s|.*wrote again|peak)' || failed=1
	}
	echo "==> the many-partitions run on kfake"
	KAFKA2PG_TEST_BROKERS= scale "$$logs/kfake.log" -run '^TestScaleManyPartitions'
	brokers=$${KAFKA2PG_TEST_BROKERS:-$$(scripts/kafka-up.sh)}
	echo "==> rebalances, throughput, recovery and pg_partman on Apache Kafka ($$brokers)"
	KAFKA2PG_TEST_BROKERS=$$brokers scale "$$logs/kafka.log" -run '^(TestScaleRebalanceWriteGaps|TestScaleThroughputMatrix|TestScaleRecoveryAfterInstanceLoss|TestPgPartmanManagedParent)$$'
	kafka_version=$$(. .tmp/kafka/env 2>/dev/null && echo "$$KAFKA_VERSION" || echo unknown)
	pg_version=$$(psql "$$KAFKA2PG_TEST_PG_URL" -Atc 'SHOW server_version' 2>/dev/null || echo unknown)
	echo "==> docs/SCALING.md"
	$(GO) -C tools run ./report scale -in "$$KAFKA2PG_SCALE_REPORT" -out "$(CURDIR)/docs/SCALING.md" \
		-throughput-svg "$(CURDIR)/docs/img/scaling-throughput.svg" -lag-svg "$(CURDIR)/docs/img/scaling-lag.svg" \
		-setup "Apache Kafka $$kafka_version (scripts/kafka-up.sh, one node) for the multi-instance runs; kfake (franz-go's in-process Kafka, in the test process) for the many-partitions run" \
		-setup "PostgreSQL $$pg_version (scripts/pg-up.sh), $$($(GO) env GOVERSION), $$(nproc) CPUs, $$(uname -sm), one machine for everything" \
		-setup "whole run: $$((SECONDS - started)) s; load average at the end: $$(cut -d' ' -f1-3 /proc/loadavg)" || failed=1
	exit $$failed
