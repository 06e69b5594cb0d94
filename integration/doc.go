// Package integration holds kafka2pg's end-to-end tests (package
// integration_test); this file only documents them.
//
// The tests treat the bridge as a black box: they run the real kafka2pg
// binary as a subprocess, against a real PostgreSQL database and a Kafka
// cluster, and judge it only by what it leaves behind: the rows of the target
// table, kafka2pg.offsets, the consumer group's committed offsets and its exit
// status. Each scenario attacks the exactly-once promise from one side:
//
//   - TestEightPartitionsLandExactlyOnce: a 200,000-record backfill with
//     --until-caught-up; also logs the throughput.
//   - TestCrashLoopKeepsExactlyOnce: SIGKILL at random moments while a
//     producer keeps writing, many times over.
//   - TestZombieIsFenced: an instance frozen with SIGSTOP while its open
//     transaction holds kafka2pg.offsets row locks loses its partitions (its
//     successor's claim must terminate that transaction), then wakes up with
//     stale state while its successor writes.
//   - TestRebalanceKeepsExactlyOnce: members leave and join a live group.
//   - TestPostgresIsTheSourceOfTruth: the group's Kafka offsets are rewound
//     behind the bridge's back, and must be ignored.
//   - TestCheckerCatchesGapsDuplicatesAndWrongRows: the checks below, run on
//     tables spoiled by hand, so a passing scenario means something.
//
// Beyond the core: poison records of eleven kinds among good ones, alone and
// under a crash loop (poison_test.go); metrics against what was written
// (metrics_test.go); status and offsets reset under a running bridge
// (operations_test.go); typed sinks from a YAML config (typed_test.go);
// TLS, SASL, redaction and least privilege (security_test.go; the
// real-broker matrix needs KAFKA2PG_TEST_SASL=1, see make test-security);
// the deployment files (deploy_test.go); the fault matrix
// (faults_*_test.go; KAFKA2PG_FAULTS=1 for the full run, see make faults);
// Avro, Protobuf and JSON Schema records through an in-process registry,
// under a crash loop and as upsert keys (registry_test.go;
// KAFKA2PG_TEST_SCHEMA_REGISTRY_URL for a real registry, see make
// test-registry); and scale-out (scale*_test.go, helpers in scalekit_test.go:
// instances killed and added over many partitions with the write gaps, one
// process over hundreds of partitions with its memory, a pg_partman parent;
// KAFKA2PG_SCALE=1 for the full sizes and the throughput matrix, see make
// scale, which writes docs/SCALING.md).
//
// Every scenario ends the same way: one last `run --until-caught-up`, then a
// check that each (topic, partition, offset) from 0 to the partition's end
// offset is in the table exactly once and holds the record the test produced
// there (id, key, and for a sample the whole value and timestamp), that
// kafka2pg.offsets holds the end offsets, and that the group's Kafka offsets
// mirror them.
//
// # Running
//
//	KAFKA2PG_TEST_PG_URL=$(cat .tmp/pg/url) go test ./integration/ -count=1 -v
//
// Environment:
//   - KAFKA2PG_TEST_PG_URL: the Postgres server; each test gets a fresh
//     database from internal/pgtest (which skips without it, and fails when
//     CI=true).
//   - KAFKA2PG_BIN: the bridge binary (relative paths are taken from the
//     repository root). Unset, the tests build ./cmd/kafka2pg once per run.
//   - KAFKA2PG_TEST_BROKERS: a real Kafka broker (host:port, comma-separated);
//     unset, each test starts an in-process kfake cluster (internal/kafkatest)
//     that the subprocesses reach over 127.0.0.1. TestReadmeQuickstart (the
//     README's quick start, run with Kafka's own tools) needs it, and skips
//     without it.
//   - KAFKA2PG_TEST_LOG_LEVEL: the bridges' --log-level (default info).
//
// Each subprocess writes stdout and stderr to its own log file in the test's
// temporary directory; when a test fails, the last lines of every log are
// printed with the test output.
//
// Timing: the scenarios wait on Kafka's session timeout (6s, kfake's minimum)
// whenever a member dies without leaving, so most of the time the package
// takes is waiting, not CPU. Every wait polls with a deadline.
//
// # Parallel tests
//
// A test that owns all it touches (its database, its topics and group, its
// bridges and ports) calls parallel(t) first thing and runs beside the
// others; make test runs the package with -parallel 4, since the tests
// mostly wait on their child processes. A test stays serial when it bounds
// how soon something happens (readiness lost within seconds, exit soon
// after SIGTERM, the write gaps of a rebalance, the re-claim after a
// rewind), measures a bridge's peak memory, or points kafkatest at a broker
// of its own through t.Setenv. Go runs the serial tests first, one at a
// time with nothing else of this package running, then the parallel ones.
// With KAFKA2PG_FAULTS=1 every test is serial: the fault matrix stops and
// reconfigures the servers the others would use. A bridge's config file
// that expands ${VAR} gets VAR through that child's environment
// (startBridgeEnv), never the test process's.
package integration
