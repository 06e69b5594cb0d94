package offsets

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/kafka2pg/kafka2pg/stream"
)

// advanceSQL is the fence: the one checked statement of a write
// transaction. It also stores the log end offset the reader last saw, for
// kafka2pg.partition_status.
const advanceSQL = `
UPDATE kafka2pg.offsets
SET next_offset = $5, leader_epoch = $6, updated_at = now(), committed_at = now(),
    log_end_offset = CASE WHEN $8::bigint >= 0 THEN greatest($8::bigint, $5) ELSE log_end_offset END,
    log_end_offset_at = CASE WHEN $8::bigint >= 0 THEN now() ELSE log_end_offset_at END
WHERE consumer_group = $1 AND topic = $2 AND partition = $3
  AND epoch = $4 AND next_offset IS NOT DISTINCT FROM nullif($7::bigint, -1)`

// advanceName is the name the advance is prepared under on a connection.
const advanceName = "kafka2pg_advance"

// Advance moves the next_offset of b's partition to b.NextOffset inside tx,
// only if the stored epoch is b.Epoch and the stored next_offset is
// exactly b.PrevOffset, the position this owner left (NULL for -1). The
// comparison is with the stored position, not with b.FirstOffset - 1, so
// offsets that legitimately skip (compaction, transaction markers) pass,
// while a position Postgres moved back (a lossy failover, a restore) does
// not: accepting it would lose the rows in between silently. When the
// statement touches no row, Advance returns a *stream.FencedError saying
// what the row holds (matching stream.ErrPositionMoved when no newer epoch
// refused it), and the caller must roll tx back. Run it first in the
// batch's transaction: its row lock then serializes the partition's
// writers.
func (s *Store) Advance(ctx context.Context, tx pgx.Tx, b *stream.Batch) error {
	st := s.AdvanceStatement(b)
	tag, err := tx.Exec(ctx, st.SQL, st.Args...)
	if err != nil {
		return fmt.Errorf("advance next_offset: %w", err)
	}
	return s.CheckAdvance(ctx, tx, b, tag)
}

// Statement is a statement for a caller that sends it itself, for example
// in a pipeline with statements of its own: prepare SQL under Name once
// per connection (pgx keeps prepared statements by name), then bind Args.
type Statement struct {
	Name string
	SQL  string
	Args []any
}

// AdvanceStatement is Advance's statement for b, for a caller that
// pipelines it with other statements of the transaction. The caller must
// pass the command tag it returns to CheckAdvance.
func (s *Store) AdvanceStatement(b *stream.Batch) Statement {
	return Statement{Name: advanceName, SQL: advanceSQL,
		Args: []any{s.cfg.Group, b.Topic, b.Partition, b.Epoch, b.NextOffset, b.LeaderEpoch, b.PrevOffset, b.LogEndOffset}}
}

// CheckAdvance is the check of the fence: tag, what AdvanceStatement
// returned in tx, must say one row. Otherwise it returns a
// *stream.FencedError with what the row holds (read in tx), and the caller
// must roll tx back.
func (s *Store) CheckAdvance(ctx context.Context, tx pgx.Tx, b *stream.Batch, tag pgconn.CommandTag) error {
	if tag.RowsAffected() == 1 {
		return nil
	}
	return s.fenced(ctx, tx, b)
}

// fenced reads what the offsets row holds, for a message that says why.
func (s *Store) fenced(ctx context.Context, tx pgx.Tx, b *stream.Batch) error {
	fe := &stream.FencedError{Topic: b.Topic, Partition: b.Partition, Epoch: b.Epoch, FirstOffset: b.FirstOffset, PrevOffset: b.PrevOffset,
		StoredEpoch: -1, StoredOffset: -1}
	_ = tx.QueryRow(ctx, `SELECT epoch, coalesce(next_offset, -1) FROM kafka2pg.offsets
		WHERE consumer_group = $1 AND topic = $2 AND partition = $3`, s.cfg.Group, b.Topic, b.Partition).
		Scan(&fe.StoredEpoch, &fe.StoredOffset)
	return fe
}

// Rewind moves the next_offset of b's partition back to nextOffset, inside
// the transaction tx whose Advance moved it to b.NextOffset (and so holds
// the row lock): a write that stops at a bad record commits nothing past
// it. Like Advance, it is fenced by b.Epoch and returns a
// *stream.FencedError when it touches no row.
func (s *Store) Rewind(ctx context.Context, tx pgx.Tx, b *stream.Batch, nextOffset int64) error {
	tag, err := tx.Exec(ctx, `UPDATE kafka2pg.offsets SET next_offset = $5, updated_at = now()
		WHERE consumer_group = $1 AND topic = $2 AND partition = $3 AND epoch = $4`,
		s.cfg.Group, b.Topic, b.Partition, b.Epoch, nextOffset)
	if err != nil {
		return fmt.Errorf("rewind next_offset to %d: %w", nextOffset, err)
	}
	if tag.RowsAffected() != 1 {
		return s.fenced(ctx, tx, b)
	}
	return nil
}
