// Package bridge materializes Kafka topics into PostgreSQL tables, exactly
// once. It is what `kafka2pg run` runs, as a library: a program may embed
// a bridge beside its own work, with its own logger and metrics registry.
//
// # What it is
//
// A Bridge joins a Kafka consumer group (package reader), and writes every
// record it reads into its topic's table (package ingest) in a Postgres
// transaction that also advances the partition's offset in
// kafka2pg.offsets, fenced by an epoch (package offsets). Postgres, not
// Kafka, holds the positions: after a crash, a restart or a rebalance the
// bridge resumes from them, so each record lands once. The durable offsets
// are then mirrored to the Kafka group, for the lag tools.
//
//	b, err := bridge.New(bridge.Config{
//		Kafka:       reader.Config{Brokers: []string{"localhost:9092"}, Group: "orders-pg", Topics: []string{"orders"}},
//		Writer:      ingest.Config{Sinks: map[string]ingest.Sink{"orders": sink}},
//		PostgresURL: "postgres://app@localhost:5432/app",
//	}, logger, registry)
//	...
//	err = b.Run(ctx)
//
// A zero field of Config is its default, the value DefaultConfig holds and
// the kafka2pg command shows in its --help; a field says when a negative
// value turns its feature off.
//
// # Lifecycle
//
// New checks the configuration and touches nothing. Run starts, in this
// order: it checks the brokers (TLS and SASL first) and that the topics
// exist, migrates the kafka2pg schema, opens the pool, checks that the
// database's encoding holds the names it will write, prepares the tables
// (creates or evolves them), and only then joins the group. A step that
// fails for connection or server trouble is retried, with backoff, until
// ctx ends; any other failure ends Run. Ready says which step is under way,
// and, once running, whether the bridge writes: a readiness probe asks it.
// Stats says what was read and written.
//
// A Bridge runs once: Run after Run, Shutdown or Close returns an error.
//
// # Goroutines
//
// Run runs on its caller's goroutine and joins everything it starts
// before it returns: the reader's poll loop, its commit and fence-check
// loops, one goroutine per owned partition (started on assignment, joined
// on revocation), the UntilCaughtUp watch and the progress log. The
// Kafka client and pgx start their own, which the reader's Close and the
// pool's Close end. Ready, Stats, Shutdown and Close may be called from
// any goroutine.
//
// # Shutdown
//
// There are three ways to stop, as net/http's Server and benthos' streams
// have them:
//
//   - ctx given to Run ends: a graceful stop within Kafka.FlushTimeout
//     (default 30s), counted from then.
//   - Shutdown(ctx): a graceful stop within ctx. Each partition writes
//     what it has queued, the durable offsets are committed to the group,
//     and the member leaves it. Writes still in flight when ctx ends are
//     abandoned: their transactions roll back, and the next owner of the
//     partition reads those records again.
//   - Close: at once. Writes in flight roll back, nothing queued is
//     written.
//
// None of them can half-write a batch: a batch and its offsets commit in
// one transaction, or not at all. Run returns nil after a graceful stop.
//
// # Reconfiguring
//
// Reconfigure replaces the sinks of a running bridge: sinks added,
// removed and changed, without a restart (kafka2pg run calls it on SIGHUP).
// The writer loads its sinks from an atomic snapshot once per batch, so
// partitions of unchanged sinks go on untouched, and a changed sink takes
// over at a batch boundary, from the durable next_offset its predecessor
// committed. Added topics join the subscription, removed ones leave it
// (reader.Reader.AddTopics, RemoveTopics). A set that cannot run is
// refused and the running one stays; ConfigStatus says the generation and
// the last refusal, as do kafka2pg_config_generation and
// kafka2pg_config_reloads_total.
//
// # Metrics
//
// New registers the bridge's metrics on the prometheus.Registerer it is
// given (never the default registry): kafka2pg_ingest_* (rows, batches,
// dead letters and failed writes by table and cause, COPY and COMMIT
// durations), kafka2pg_reader_* (records, lag, queues and durable offsets
// per partition), kafka2pg_kafka_* (franz-go's client metrics),
// kafka2pg_pg_pool_* and kafka2pg_end_to_end_latency_seconds. Serve them
// with promhttp.HandlerFor. Give each bridge a registry of its own, or wrap
// one with a label per bridge (prometheus.WrapRegistererWith). The
// metrics are described in docs/METRICS.md.
package bridge
