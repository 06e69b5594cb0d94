// Package offsets owns kafka2pg.offsets, the table that makes kafka2pg
// exactly once: one row per consumer group, topic and partition, holding the
// partition's durable next offset and its fencing epoch. Every statement on
// the table is in this package.
//
// # The protocol
//
// An owner starts on a partition with [Store.Claim]: one statement bumps
// the partition's epoch (creating the row when missing) and returns its
// durable position. Bumping the epoch fences every earlier owner at once.
//
// Every batch is then written in one transaction that begins with
// [Store.Advance]: it moves next_offset to the batch's NextOffset only if
// the epoch is still the writer's and the stored next_offset is exactly
// the one the writer left (the batch's PrevOffset: what its claim returned
// or its last commit stored). Offsets may legitimately skip (compaction,
// transaction markers), and the comparison is with the stored position,
// not with the batch's first offset, so a gap is accepted. A rewrite of
// offsets already stored is not, and neither is a position that moved
// back under the writer's own epoch: Postgres lost commits the writer saw
// succeed (a lossy failover, a restored backup), and writing on would lose
// the rows in between without a word. The statement must touch exactly
// one row, or the transaction is rolled back: Advance returns a
// [*stream.FencedError] saying what the row holds, which matches
// [stream.ErrPositionMoved] when no newer epoch refused it; the writer
// then reads the stored position again and goes on from there. It runs first in the transaction, so its row
// lock serializes the writers of a partition and a fenced writer writes
// nothing. Only after COMMIT are the rows and the new next_offset durable,
// together.
//
// A write that stops at a bad record moves next_offset back to it with
// [Store.Rewind], in the same transaction. An operator moves partitions
// with [Reset], which bumps their epochs too, so running owners are fenced
// and claim the new position. [List] and [Store.Positions] read the table.
//
// # Zombies
//
// A claim waits for the row lock of an open transaction at most
// Config.ClaimLockTimeout, then terminates that backend: a writer still
// holding the row after the group gave the partition away is a zombie
// (frozen, or cut off from Kafka), and ending its transaction is what lets
// the new owner proceed.
//
// # Using it
//
//	st, err := offsets.New(pool, offsets.Config{Group: "orders-sink"})
//	pos, err := st.Claim(ctx, "orders", []int32{0})
//	// ... read from pos[0].NextOffset, then for each batch:
//	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
//		if err := st.Advance(ctx, tx, b); err != nil {
//			return err // errors.Is(err, stream.ErrFenced): claim again
//		}
//		// ... the batch's rows, in the same transaction
//		return nil
//	})
//
// A Store is safe for concurrent use; the package owns no goroutines. It
// imports stream and pgx.
package offsets
