// Package deadletters owns kafka2pg.dead_letters, the table of the records
// that could not be written: their coordinates, key, value and headers,
// the table they were written for, and why they were refused. Every
// statement on the table is in this package; package ingest decides what
// becomes a dead letter and calls it.
//
// # Invariants
//
// A letter is written only in the transaction that writes its batch's rows
// and advances the partition's next_offset past it ([Insert] takes the
// caller's pgx.Tx): every offset below a partition's next_offset is a row,
// a letter or a record deliberately skipped, and a letter is never there
// for a batch that did not commit. The letters of one record are filed
// once: a rewind that moves next_offset back before them deletes them in
// the same transaction ([DeleteFrom], beside offsets.Reset), since the
// records read again file them again.
//
// A replay takes letters out the same way: [Oldest] locks a page of them
// in the transaction that writes their rows again, and [Settle] deletes
// those written and stores the new reason of those refused again, so a
// replay killed at any point and run again replays each letter exactly
// once. ingest.Writer.Replay drives it; [Report] is what it returns.
//
// Text the database's encoding cannot hold (a database that is not UTF-8)
// is stored in ASCII, so a letter never fails the way its row did.
//
// # Using it
//
//	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
//		// ... the offsets advance and the batch's good rows, then:
//		return deadletters.Insert(ctx, tx, []deadletters.Letter{{Group: "orders-sink",
//			Record: rec, Table: `"public"."orders"`, Kind: "check_violation", Message: msg}})
//	})
//	recent, err := deadletters.List(ctx, pool, deadletters.Filter{Topics: []string{"orders"}}, 50)
//
// The functions are safe for concurrent use; the package owns no
// goroutines. It imports stream, decode (the headers' JSON), pgcopy and
// pgx.
package deadletters
