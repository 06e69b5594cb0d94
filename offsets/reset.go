package offsets

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Move is one partition's new durable next offset, for Reset.
type Move struct {
	Topic      string
	Partition  int32
	NextOffset int64
}

// Reset sets the next_offset of every partition in moves, inside tx, and
// bumps their epochs, so that whoever owns them now is fenced and claims
// the new position. A missing row is created at epoch 1. The leader epoch
// becomes unknown (-1): the moved position may be in another epoch.
func Reset(ctx context.Context, tx pgx.Tx, group string, moves []Move) error {
	for _, m := range moves {
		if _, err := tx.Exec(ctx, `
			INSERT INTO kafka2pg.offsets AS o (consumer_group, topic, partition, next_offset, epoch)
			VALUES ($1, $2, $3, $4, 1)
			ON CONFLICT (consumer_group, topic, partition)
			DO UPDATE SET next_offset = EXCLUDED.next_offset, epoch = o.epoch + 1, leader_epoch = -1, updated_at = now()`,
			group, m.Topic, m.Partition, m.NextOffset); err != nil {
			return fmt.Errorf("reset %s/%d to %d: %w", m.Topic, m.Partition, m.NextOffset, err)
		}
	}
	return nil
}

// Filter selects rows for List; an empty field selects every value.
type Filter struct {
	Group      string
	Topics     []string
	Partitions []int32
}

// Row is one partition's row of kafka2pg.offsets.
type Row struct {
	Group     string
	Topic     string
	Partition int32
	// NextOffset is the durable next offset; -1 when the partition was
	// claimed but nothing has been written yet.
	NextOffset int64
	Epoch      int64
	// CommittedAt is the time of the partition's last data transaction;
	// zero when there was none.
	CommittedAt time.Time
}

// List returns the rows f selects, ordered by group, topic and partition.
func List(ctx context.Context, pool *pgxpool.Pool, f Filter) ([]Row, error) {
	rows, err := pool.Query(ctx, `SELECT consumer_group, topic, partition, coalesce(next_offset, -1), epoch, committed_at
		FROM kafka2pg.offsets
		WHERE ($1 = '' OR consumer_group = $1)
		  AND (coalesce(cardinality($2::text[]), 0) = 0 OR topic = ANY($2))
		  AND (coalesce(cardinality($3::integer[]), 0) = 0 OR partition = ANY($3))
		ORDER BY 1, 2, 3`, f.Group, f.Topics, f.Partitions)
	if err != nil {
		return nil, fmt.Errorf("read kafka2pg.offsets: %w", err)
	}
	var out []Row
	var r Row
	var committed *time.Time
	_, err = pgx.ForEachRow(rows, []any{&r.Group, &r.Topic, &r.Partition, &r.NextOffset, &r.Epoch, &committed}, func() error {
		r.CommittedAt = time.Time{}
		if committed != nil {
			r.CommittedAt = *committed
		}
		out = append(out, r)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read kafka2pg.offsets: %w", err)
	}
	return out, nil
}
