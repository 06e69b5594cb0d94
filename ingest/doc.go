// Package ingest writes batches of Kafka records into Postgres, exactly once.
// Its Writer is the reader's Store: Claim (through package offsets) and
// Write.
//
// # One Write, one transaction
//
// Every write transaction goes through one helper (inBatchTx), which
// runs, under the transaction's deadline:
//
//  1. BEGIN, on a connection of the pool;
//  2. the fence (offsets.Store.Advance): move the partition's
//     kafka2pg.offsets row to the batch's next offset, only if the epoch is
//     still the writer's and the stored next_offset is exactly the one the
//     writer left (the batch's PrevOffset; offsets that skip pass, a
//     position Postgres moved back does not). It must touch exactly one
//     row, or the transaction rolls back and Write returns a
//     *stream.FencedError (stream.ErrPositionMoved when no newer epoch
//     refused it). It runs first, so the
//     row lock serializes writers of a partition and a fenced writer copies
//     nothing. The fast path pipelines it with the describe of the table
//     its COPY needs: one round trip;
//  3. the body: what differs between the ways of writing a batch. The fast
//     path streams a binary COPY of the rows (package pgcopy: pgx's
//     protocol with an encoder chosen per column), built lazily from the
//     records: a mapper that is a RowAppender writes each record's row
//     straight into the COPY stream, others return values that the column
//     encoders write. A mapper that is an UncheckedAppender leaves to
//     Postgres the checks its column types make anyway (jsonb's), until
//     Postgres refuses a row. The isolating path finds the rows Postgres
//     refuses (SQLSTATE 22, 23, 54000) under savepoints; upserts keep the
//     last operation of each key, sorted by key, then COPY a batch of new
//     keys into the table, or apply the batch through the session's
//     staging table in one statement, or one operation at a time; with a
//     Sink.Version they keep the newest version of each key instead, and
//     the statements skip what is not newer than the stored row, with
//     Sink.Deleted a delete marks the row (guard.go); several
//     partitions' batches may share one transaction;
//  4. COPY of the dead letters: the records the mapping or Postgres
//     refused, through package deadletters (deadletters.Insert), which
//     owns kafka2pg.dead_letters;
//  5. NOTIFY, with Config.Notify;
//  6. COMMIT. Only then are the rows and the new next_offset durable.
//
// Any error rolls the transaction back. A body that meets what it cannot
// write asks for another attempt instead of failing: Write tries the fast
// path, then (a row of an unchecked COPY refused) the fast path with the
// mapping's checks, then (rows refused) the isolating path, each in a
// transaction of its own, and only the last one commits. With
// Config.OnError OnErrorStop, a bad record makes Write commit the records before
// it, move next_offset back to it (offsets.Store.Rewind) and return a
// *stream.StopError.
//
// A failed COMMIT is ambiguous (it may have committed). Write never retries:
// the caller claims again, which re-reads the durable position.
//
// # Source transactions
//
// A change sink with Transactions stages the changes that carry a source
// transaction (kafka2pg.cdc_staged) instead of applying them, in the
// batch's fenced transaction (txSpec.stage), and a Boundaries sink stages
// the END records of the source's transaction topic
// (kafka2pg.cdc_tx_ends) the same way: staging is exactly once per
// partition. An Applier (txapply.go) applies each source transaction
// whose events are all staged in one Postgres transaction, in the order of
// the END records, fenced by its epoch in kafka2pg.cdc_appliers;
// RunLeased (txlease.go) runs it on the member whose session holds the
// source's advisory lock. It owns no goroutine but the one RunLeased
// starts to watch that session, and joins it.
//
// # Filters
//
// A sink's Filter runs on a batch's records before any path writes them.
// The records it drops leave the batch but not its span: their offsets
// are committed with the batch's, and BatchTrace.Filtered counts them. A
// record it cannot evaluate stays in the batch marked as such, and every
// path's prologue makes it a bad record (kind filter), as it does an
// unreadable one.
//
// # Routing by content
//
// A sink's Router names each record's table (route.go). The writer keeps,
// per Router, the set of tables its records have named since it started,
// capped by Config.MaxTablesPerSink; a table joins the set, and is
// prepared under the DDL advisory lock, on the first batch that routes a
// record to it. The batch's records are then written into their tables in
// the batch's one fenced transaction. Records that name no table are bad
// records of kind route, and those past the cap of kind route_limit.
//
// # Children
//
// A sink's Children map an array of each record to rows of child tables,
// written by the body's transaction after the parent's rows (children.go):
// a record and its children commit together. A record whose children do
// not fit is marked before the body runs, as one its filter cannot
// evaluate, and becomes a bad record whole.
//
// # Tables
//
// A sink's table is planned once, for two callers: PlanTable reads it
// through ReadCatalog (its columns and unique indexes, the only catalog
// queries) and returns a TablePlan without changing anything. EnsureTables
// (and a topic that a pattern resolves, or a schema that changes) applies
// it under a DDL advisory lock, then refuses to start on what
// TablePlan.Err names; package admin reports the same plan in a READ ONLY
// transaction, as `kafka2pg check` prints it.
//
// A table may be partitioned (partitions.go). ReadCatalog reads its
// partition key too, and TablePlan.Err refuses an upsert key that lacks
// it (PartitionKeyError). A sink whose Table has a Partition has its
// table created PARTITION BY RANGE with the partitions ahead of now
// (TablePlan.Partitions, run at every start); when Postgres refuses
// rows of a batch into it, Write creates the partitions the batch's rows
// fall into that are missing, in a transaction of its own under the same
// DDL lock, and writes the batch again before it isolates anything.
//
// # Deadlines
//
// A Postgres that stops answering without closing the connection (a hung
// pooler, a load balancer that lost its state, a frozen server) must not
// hold a partition for ever, and a slow one (a thin or distant pipe, a big
// batch) must not be cut. Each write transaction has a ceiling:
// Config.WriteTimeout (default 2 minutes) for a batch of up to
// Config.WriteTimeoutRows rows, proportionally more for more rows (a
// combined transaction), twice that when it isolates bad rows. Within it,
// each step has a deadline of its own, from what that step took in the
// writes that succeeded before, the way TCP derives its retransmission
// timeout (RFC 6298):
//
//   - BEGIN, the fence and COMMIT, each a round trip: SRTT + 4·RTTVAR of
//     that step's latency (SRTT, RTTVAR smoothed with gains 1/8 and 1/4);
//   - the body (COPY, an upsert's statements), by table: the fence's RTO
//     plus the batch's key and value bytes times the RTO of the body's
//     time per byte past a round trip, and at least 3 times the smoothed
//     rate (bodyMargin): a COPY of 1 GB after batches of 10 MB at 100 MB/s
//     gets 30 s;
//   - every deadline at least DeadlineFloor (5 s) and at most the
//     ceiling; a step not measured yet, and an isolating body, have the
//     ceiling only;
//   - a step cut at its deadline doubles its next deadlines (up to 2^8
//     times, and once for the partitions one stall cut together), until it
//     succeeds again: a database that turned slow is cut once or twice,
//     then measured, never cut in a loop. A cut step gives no sample.
//
// A write on a path that stops answering is then cut within seconds of its
// step's start once the database answered fast, and a pause of the
// database (a checkpoint, a lock held for a moment) under the floor is
// waited out. The pool's Acquire is bounded by the ceiling only: waiting
// for a connection that other partitions use is no sign of a slow
// database. Writer.Estimates returns what the deadlines rest on, for
// metrics.
//
// A transaction past a deadline is cancelled and its connection closed,
// never returned to the pool (pgx closes a connection whose statement it
// cancels; the helper's rollback, under the expired deadline, closes one
// that was between statements), the pool's idle connections are closed
// too (they share the path that stopped answering), and Write returns a
// *DeadlineError naming the step it waited on (StepBegin, StepFence,
// StepCopy, StepDeadLetters, StepNotify, StepCommit), logged at WARN. The
// caller claims again, as after any failed write. A claim has a deadline
// too: its lock waits and WriteTimeout. Writer.InFlight lists the writes
// in progress with their current deadlines and steps, for readiness
// checks.
//
// Postgres' own timeouts must not end a statement before the deadline
// would: the sessions of the pool should run with statement_timeout (and
// lock_timeout) at least Config.StatementTimeout, as cmd/kafka2pg sets them
// when a connection starts.
//
// # Observing writes
//
// Write returns only an error. What it stored (rows, dead letters and their
// kinds, the COPY's and the COMMIT's durations, whether the batch was
// isolated, rechecked or combined) goes to Config.Tracer, for metrics and
// progress.
//
// The package owns no goroutines; Writer is safe for concurrent use by many
// partition goroutines (each Write takes its own pooled connection). It
// imports stream, offsets, deadletters, schema and pgx, never reader.
package ingest
