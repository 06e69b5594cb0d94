// Package ingest writes batches of Kafka records into Postgres, exactly once.
// Its Writer is the reader's Store: Claim (through package offsets) and
// Write.
//
// # One Write, one transaction
//
//  1. the fence (offsets.Store.Advance): move the partition's
//     kafka2pg.offsets row to the batch's next offset, only if the epoch is
//     still the writer's and the stored next_offset is not past the batch's
//     first offset. It must touch exactly one row, or the transaction rolls
//     back and Write returns a *stream.FencedError. It runs first, so the
//     row lock serializes writers of a partition and a fenced writer copies
//     nothing.
//  2. binary COPY of the rows (CopyFrom, copy.go: pgx's protocol with an
//     encoder chosen per column), built lazily from the records: a mapper
//     that is a RowAppender writes each record's row straight into the COPY
//     stream, others return values that the column encoders write. A mapper
//     that is an UncheckedAppender leaves to Postgres the checks its column
//     types make anyway (jsonb's), until Postgres refuses a row: then the
//     batch is written again with them (unchecked.go). A row Postgres
//     refuses (SQLSTATE 22, 23, 54000) sends the batch to the isolating
//     path (isolate.go), which finds the refused rows under savepoints;
//  3. COPY of the dead letters: records the mapping refused (on a
//     database whose encoding is not UTF-8, with their messages and
//     headers in ASCII, which any encoding holds: encoding.go, which also
//     answers whether a database can hold a name, Holds, for the checks
//     cmd/kafka2pg makes at start);
//  4. COMMIT. Only then are the rows and the new next_offset durable.
//
// With Config.OnError "stop", a bad record makes Write commit the records
// before it, move next_offset back to it (offsets.Store.Rewind) and return
// a *stream.StopError.
//
// A failed COMMIT is ambiguous (it may have committed). Write never retries:
// the caller claims again, which re-reads the durable position.
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
// imports stream, offsets, schema and pgx, never reader.
package ingest
