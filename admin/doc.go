// Package admin holds the operator's actions on a bridge's database and
// brokers: checking a configuration before a run, moving a group's offsets
// (a rewind that stays exactly once), and reading its status. Its
// functions return data (a []Finding, a ResetPlan, a []PartitionState) and
// print nothing; the kafka2pg command prints them, asks for confirmation
// and maps them to exit codes.
//
// # Check
//
// [CheckKafka] connects as the reader does ([Kafka] carries the same
// reader.Security) and asks for the topics' metadata: no group is joined,
// no topic created. [CheckPostgres] reads, in one READ ONLY transaction
// that it rolls back, the database's encoding, the migration state
// (migrations.ReadState) and each fixed sink's table. The table half is
// ingest.PlanTable, the plan ingest.Writer.EnsureTables applies at start:
// check reports the DDL EnsureTables would run (Finding.DDL) and what it
// would refuse, and adds what would make rows fail once they come ([Fit]:
// a NOT NULL column the mapping does not write, a column too narrow for
// its values). Check writes nothing.
//
// # Reset and rewind
//
// [PlanReset] asks the brokers where the target offset is in each
// partition and reads kafka2pg.offsets; it writes nothing. Moving a
// partition back makes the bridge read its records again, and for that to
// stay exactly once the reset deletes what those records wrote: their rows,
// where the table says which record wrote a row (partition and offset
// columns, and a topic column where the table gathers topics), and their
// dead letters. An upsert table, or one with a unique index, needs no
// delete; any other table would get duplicates, and the plan marks it
// RewindRefused (ResetPlan.Refused). [ApplyReset] moves every partition in
// one transaction: offsets.Reset (which bumps the epochs, fencing running
// writers) first, then the deletes (the table's rows, and
// deadletters.DeleteFrom). [MirrorReset] then commits the offsets to the
// group in Kafka, which only mirrors Postgres.
//
// # Status
//
// [Status] reads kafka2pg.offsets (offsets.List) and, given brokers, adds
// each partition's end offset, lag, the group's Kafka offset and the
// member that owns it, over TLS and SASL as configured.
//
// # Inferring a sink
//
// [Sample] reads the first records of a topic's partitions, joining no
// group; [Infer] guesses a sinks.Sink for them: typed columns of JSON
// objects (package decode/infer), or the format and subject of values in
// the Schema Registry wire format. Given a pool it avoids a table the
// database holds with columns the sink cannot write (such as the topic's
// zero-config table), as check would report it. It returns the sink and
// the table run would create; the command prints them as a config.
//
// # Replaying dead letters
//
// [Replay] writes the letters of kafka2pg.dead_letters a
// deadletters.Filter selects into their tables again, through the sinks
// of a configuration (ingest.Writer.Replay), and returns the
// deadletters.Report of what it did; with DryRun it only maps them.
// [OpenReplayPool] opens the pool it needs: a bridge's sessions, with a
// statement_timeout that outlasts a replay batch's write deadline.
//
// # Using it
//
//	k := admin.Kafka{Brokers: []string{"kafka:9093"}, Security: reader.Security{SASLMechanism: "SCRAM-SHA-512", ...}}
//	states, err := admin.Status(ctx, pool, admin.Filter{Group: "orders-sink"}, k)
//	plan, err := admin.PlanReset(ctx, pool, k, admin.ResetRequest{Group: "orders-sink",
//		Topics: []string{"orders"}, To: admin.Target{Kind: admin.Earliest}, DeleteRows: true, Sinks: set})
//	if plan.Refused() == 0 {
//		deleted, err := admin.ApplyReset(ctx, pool, plan)
//	}
//
// The caller opens the pool (kafka2pg's session settings come with the
// command's pool); the functions are safe for concurrent use and start no
// goroutine. Package admin imports ingest (the table plan and catalog),
// offsets, deadletters, sinks, migrations, decode and decode/infer,
// registry, reader (Security), franz-go's kgo and kadm, pgx, and bridge
// for the database's encoding check (bridge.EncodingProblems, the check
// Run makes before it starts) and the sessions of a replay's pool.
package admin
