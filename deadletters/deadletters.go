package deadletters

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/kafka2pg/kafka2pg/decode"
	"github.com/kafka2pg/kafka2pg/pgcopy"
	"github.com/kafka2pg/kafka2pg/stream"
)

// Letter is one row of kafka2pg.dead_letters: a record that could not be
// written, and why.
type Letter struct {
	ID     int64 // assigned by Postgres; Insert ignores it
	Group  string
	Record stream.Record // Unreadable and TimestampType are not stored
	// Table is the table the record was written for, quoted and qualified
	// as schema.Table.QualifiedName gives it ("public"."orders"); "" when
	// the letter records none.
	Table     string
	Kind      string    // error_kind: a decode.Kind* or a SQLSTATE condition name
	Message   string    // error_message
	CreatedAt time.Time // set by Postgres; Insert ignores it
}

// Querier is what the reads need: a pgx.Tx or a *pgxpool.Pool.
type Querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

var (
	table   = pgx.Identifier{"kafka2pg", "dead_letters"}
	columns = []string{"consumer_group", "topic", "partition", "kafka_offset", "kafka_timestamp",
		"key", "value", "headers", "target_table", "error_kind", "error_message"}
)

// Insert files letters in tx, the transaction that writes the rows of
// their batch and advances its offsets: the letters are durable exactly
// when the batch is. Text the database's encoding cannot hold (it is not
// UTF-8) is stored in ASCII: the message with escapes, the headers with
// key_base64 and value_base64.
func Insert(ctx context.Context, tx pgx.Tx, letters []Letter) error {
	if len(letters) == 0 {
		return nil
	}
	text := textFor(tx.Conn().PgConn())
	rows := make([][]any, len(letters))
	for i, l := range letters {
		r := &l.Record
		rows[i] = []any{l.Group, r.Topic, r.Partition, r.Offset, r.Timestamp, r.Key, r.Value, text.headers(r.Headers),
			l.Table, l.Kind, text.message(l.Message)}
	}
	if _, err := pgcopy.CopyFrom(ctx, tx, table, columns, pgx.CopyFromRows(rows)); err != nil {
		return fmt.Errorf("copy into kafka2pg.dead_letters: %w", err)
	}
	return nil
}

// Filter selects letters. A zero field selects every value.
type Filter struct {
	Group  string
	Topics []string
	// Table is a target table as letters record it (Letter.Table).
	Table string
	IDs   []int64
	Kinds []string
	Since time.Time // created at or after
}

// where is Filter's condition, on the arguments $1 to $6 (args).
const where = `($1 = '' OR consumer_group = $1)
  AND (coalesce(cardinality($2::text[]), 0) = 0 OR topic = ANY($2))
  AND ($3 = '' OR target_table = $3)
  AND (coalesce(cardinality($4::bigint[]), 0) = 0 OR id = ANY($4))
  AND (coalesce(cardinality($5::text[]), 0) = 0 OR error_kind = ANY($5))
  AND created_at >= $6`

func (f Filter) args(more ...any) []any {
	return append([]any{f.Group, f.Topics, f.Table, f.IDs, f.Kinds, f.Since}, more...)
}

// defaultListLimit is List's limit when the caller gives none.
const defaultListLimit = 100

// List returns up to limit letters f selects, newest first; limit 0
// means 100.
func List(ctx context.Context, q Querier, f Filter, limit int) ([]Letter, error) {
	if limit <= 0 {
		limit = defaultListLimit
	}
	rows, err := q.Query(ctx, selectSQL+`
		WHERE `+where+`
		ORDER BY id DESC LIMIT $7`, f.args(limit)...)
	if err != nil {
		return nil, fmt.Errorf("list dead letters: %w", err)
	}
	out, err := collect(rows)
	if err != nil {
		return nil, fmt.Errorf("list dead letters: %w", err)
	}
	return out, nil
}

// selectSQL reads whole letters, as collect scans them.
const selectSQL = `
SELECT id, consumer_group, topic, partition, kafka_offset, coalesce(kafka_timestamp, 'epoch'), key, value, headers,
       coalesce(target_table, ''), error_kind, error_message, created_at
FROM kafka2pg.dead_letters`

// collect scans the rows of selectSQL.
func collect(rows pgx.Rows) ([]Letter, error) {
	var out []Letter
	var l Letter
	var headers []byte
	_, err := pgx.ForEachRow(rows, []any{&l.ID, &l.Group, &l.Record.Topic, &l.Record.Partition, &l.Record.Offset, &l.Record.Timestamp,
		&l.Record.Key, &l.Record.Value, &headers, &l.Table, &l.Kind, &l.Message, &l.CreatedAt}, func() error {
		hs, err := decode.ParseHeadersJSON(headers)
		if err != nil {
			return fmt.Errorf("dead letter %d: %w", l.ID, err)
		}
		l.Record.Headers = hs
		out = append(out, l)
		l = Letter{} // ForEachRow scans into the same fields every row
		return nil
	})
	return out, err
}

// Tables returns the target tables of the letters f selects, by topic
// ("" for letters that record none), so that a replay prepares the sinks
// of those tables alone.
func Tables(ctx context.Context, q Querier, f Filter) (map[string][]string, error) {
	rows, err := q.Query(ctx, `SELECT DISTINCT topic, coalesce(target_table, '') FROM kafka2pg.dead_letters
		WHERE `+where, f.args()...)
	if err != nil {
		return nil, fmt.Errorf("list the dead letters' tables: %w", err)
	}
	out := map[string][]string{}
	var topic, table string
	_, err = pgx.ForEachRow(rows, []any{&topic, &table}, func() error {
		out[topic] = append(out[topic], table)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list the dead letters' tables: %w", err)
	}
	return out, nil
}

// The letters a rewind to offset files a second time, when the records
// from it on are read again.
const (
	countFromSQL = `SELECT count(*) FROM kafka2pg.dead_letters
WHERE consumer_group = $1 AND topic = $2 AND partition = $3 AND kafka_offset >= $4`
	deleteFromSQL = `DELETE FROM kafka2pg.dead_letters
WHERE consumer_group = $1 AND topic = $2 AND partition = $3 AND kafka_offset >= $4`
)

// CountFrom counts group's letters of the records of topic's partition at
// or past offset: those DeleteFrom deletes.
func CountFrom(ctx context.Context, q Querier, group, topic string, partition int32, offset int64) (int64, error) {
	var n int64
	if err := q.QueryRow(ctx, countFromSQL, group, topic, partition, offset).Scan(&n); err != nil {
		return 0, fmt.Errorf("count the dead letters of %s/%d at or past offset %d: %w", topic, partition, offset, err)
	}
	return n, nil
}

// DeleteFrom deletes group's letters of the records of topic's partition
// at or past offset, in tx, the transaction that moves the partition's
// next_offset back to offset (offsets.Reset): the records read again file
// their letters again, and a letter must not be there twice. It returns
// how many it deleted.
func DeleteFrom(ctx context.Context, tx pgx.Tx, group, topic string, partition int32, offset int64) (int64, error) {
	tag, err := tx.Exec(ctx, deleteFromSQL, group, topic, partition, offset)
	if err != nil {
		return 0, fmt.Errorf("delete the dead letters of %s/%d at or past offset %d: %w", topic, partition, offset, err)
	}
	return tag.RowsAffected(), nil
}
