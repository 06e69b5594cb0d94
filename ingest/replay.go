package ingest

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/kafka2pg/kafka2pg/schema"
	"github.com/kafka2pg/kafka2pg/stream"
)

// ReplayFilter selects dead letters to replay. Zero fields select all.
type ReplayFilter struct {
	Group string
	Topic string
	IDs   []int64
}

// ReplayResult counts what a replay did.
type ReplayResult struct {
	Replayed int // written to their table and removed from dead_letters
	StillBad int // still refused; their error is updated
	Skipped  int // of topics with no configured sink
}

// DeadLetter is one row of kafka2pg.dead_letters.
type DeadLetter struct {
	ID           int64
	Group        string
	Record       stream.Record
	TargetTable  string
	ErrorKind    string
	ErrorMessage string
	CreatedAt    time.Time
}

// Replay runs dead letters through the current mapping (after the user fixed
// the table or the configuration): in one transaction per batch of up to
// batchSize rows it copies the records that now fit into their tables and
// deletes them from kafka2pg.dead_letters; those still refused stay, with
// their new error. Rows being replayed by another session are skipped
// (FOR UPDATE SKIP LOCKED). Offsets are not touched: these records are
// already accounted for.
func (w *Writer) Replay(ctx context.Context, f ReplayFilter, batchSize int) (ReplayResult, error) {
	if batchSize <= 0 {
		batchSize = 1000
	}
	var total ReplayResult
	lastID := int64(0)
	for {
		n, res, next, err := w.replayBatch(ctx, f, lastID, batchSize)
		if err != nil {
			return total, err
		}
		total.Replayed += res.Replayed
		total.StillBad += res.StillBad
		total.Skipped += res.Skipped
		if n < batchSize {
			return total, nil
		}
		lastID = next
	}
}

const selectDeadLettersSQL = `
SELECT id, consumer_group, topic, partition, kafka_offset, coalesce(kafka_timestamp, 'epoch'), key, value, headers
FROM kafka2pg.dead_letters
WHERE id > $1
  AND ($2 = '' OR consumer_group = $2)
  AND ($3 = '' OR topic = $3)
  AND (coalesce(cardinality($4::bigint[]), 0) = 0 OR id = ANY($4))
ORDER BY id
LIMIT $5
FOR UPDATE SKIP LOCKED`

func (w *Writer) replayBatch(ctx context.Context, f ReplayFilter, afterID int64, limit int) (n int, res ReplayResult, lastID int64, err error) {
	err = pgx.BeginFunc(ctx, w.pool, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, selectDeadLettersSQL, afterID, f.Group, f.Topic, f.IDs, limit)
		if err != nil {
			return err
		}
		type item struct {
			id  int64
			rec stream.Record
		}
		var items []item
		var headers []byte
		var it item
		_, err = pgx.ForEachRow(rows, []any{&it.id, new(string), &it.rec.Topic, &it.rec.Partition, &it.rec.Offset,
			&it.rec.Timestamp, &it.rec.Key, &it.rec.Value, &headers}, func() error {
			hs, err := schema.ParseHeadersJSON(headers)
			if err != nil {
				return fmt.Errorf("dead letter %d: %w", it.id, err)
			}
			it.rec.Headers = hs
			items = append(items, it)
			it = item{}
			return nil
		})
		if err != nil {
			return err
		}
		n = len(items)
		if n > 0 {
			lastID = items[n-1].id
		}
		byTopic := map[string][]mappedRow{}
		ids := map[*stream.Record]int64{}
		var bad []badRecord
		for i := range items {
			rec := &items[i].rec
			ids[rec] = items[i].id
			sink, ok := w.cfg.Sinks[rec.Topic]
			if !ok {
				res.Skipped++
				continue
			}
			values, b, err := mapRecord(rec, sink.Mapper, w.cfg.MaxRecordBytes, nil)
			switch {
			case err != nil:
				return err
			case b != nil:
				bad = append(bad, *b)
			default:
				byTopic[rec.Topic] = append(byTopic[rec.Topic], mappedRow{rec: rec, values: values})
			}
		}
		var done []int64
		for topic, rows := range byTopic {
			refused, _, err := copyIsolating(ctx, tx, w.cfg.Sinks[topic].Table, rows)
			if err != nil {
				return fmt.Errorf("replay into %s: %w", w.cfg.Sinks[topic].Table.QualifiedName(), err)
			}
			bad = append(bad, refused...)
			isBad := map[*stream.Record]bool{}
			for _, b := range refused {
				isBad[b.rec] = true
			}
			for _, r := range rows {
				if !isBad[r.rec] {
					done = append(done, ids[r.rec])
				}
			}
		}
		if _, err := tx.Exec(ctx, `DELETE FROM kafka2pg.dead_letters WHERE id = ANY($1)`, done); err != nil {
			return err
		}
		text := letterTextFor(tx.Conn().PgConn()) // as handleBad writes them
		for _, b := range bad {
			if _, err := tx.Exec(ctx, `UPDATE kafka2pg.dead_letters SET error_kind = $2, error_message = $3 WHERE id = $1`,
				ids[b.rec], b.kind, text.message(b.err.Error())); err != nil {
				return err
			}
		}
		res.Replayed, res.StillBad = len(done), len(bad)
		return nil
	})
	if err != nil {
		return 0, ReplayResult{}, 0, fmt.Errorf("replay dead letters: %w", err)
	}
	return n, res, lastID, nil
}

// ListFilter selects dead letters to list.
type ListFilter struct {
	Group string
	Topic string
	Since time.Time // zero: any time
	Limit int       // 0: 100
}

// ListDeadLetters returns dead letters, newest first.
func ListDeadLetters(ctx context.Context, q interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}, f ListFilter) ([]DeadLetter, error) {
	if f.Limit <= 0 {
		f.Limit = 100
	}
	rows, err := q.Query(ctx, `
		SELECT id, consumer_group, topic, partition, kafka_offset, coalesce(kafka_timestamp, 'epoch'), key, value,
		       coalesce(target_table, ''), error_kind, error_message, created_at
		FROM kafka2pg.dead_letters
		WHERE ($1 = '' OR consumer_group = $1) AND ($2 = '' OR topic = $2) AND created_at >= $3
		ORDER BY id DESC LIMIT $4`, f.Group, f.Topic, f.Since, f.Limit)
	if err != nil {
		return nil, fmt.Errorf("list dead letters: %w", err)
	}
	var out []DeadLetter
	var d DeadLetter
	_, err = pgx.ForEachRow(rows, []any{&d.ID, &d.Group, &d.Record.Topic, &d.Record.Partition, &d.Record.Offset,
		&d.Record.Timestamp, &d.Record.Key, &d.Record.Value, &d.TargetTable, &d.ErrorKind, &d.ErrorMessage, &d.CreatedAt}, func() error {
		out = append(out, d)
		d = DeadLetter{}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list dead letters: %w", err)
	}
	return out, nil
}
