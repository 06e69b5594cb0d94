package ingest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/kafka2pg/kafka2pg/schema"
)

// RowMapper builds the row of one record, appending to dst[:0]. A record that
// cannot become a row returns an error wrapping schema.ErrBadRecord; any other
// error aborts the batch.
type RowMapper interface {
	Row(r *schema.Record, dst []any) ([]any, error)
}

// Sink is where the records of one topic go.
type Sink struct {
	Table  schema.Table
	Mapper RowMapper
}

// Config configures a Writer. The zero value of each optional field means
// the default written next to it.
type Config struct {
	// Group is the consumer group the offsets rows belong to. Required.
	Group string
	// Sinks maps each topic to its table and mapping. Required.
	Sinks map[string]Sink
	// ClaimLockTimeout is how long a claim waits for a writer's open
	// transaction on the offsets row before terminating its backend.
	// Default 10s.
	ClaimLockTimeout time.Duration
	// Logger receives warnings about zombies and dead letters. Default: discard.
	Logger *slog.Logger
}

// Batch is a span of consecutive offsets of one partition, written in one
// transaction.
type Batch struct {
	Topic     string
	Partition int32
	// Epoch is the writer's epoch from Claim.
	Epoch int64
	// FirstOffset is the offset the span starts at (its first record, data or
	// control). NextOffset is the offset after its last record: the durable
	// next_offset after the commit.
	FirstOffset int64
	NextOffset  int64
	// LeaderEpoch is the Kafka leader epoch of the last record, -1 if unknown.
	LeaderEpoch int32
	// Records are the data records of the span in offset order; transaction
	// markers are not records here, they only widen the span.
	Records []schema.Record
}

// Result says what a committed Write stored.
type Result struct {
	Rows        int
	DeadLetters int
}

// Writer writes batches. Safe for concurrent use.
type Writer struct {
	pool *pgxpool.Pool
	cfg  Config
	log  *slog.Logger
}

// New returns a Writer on pool. It does not touch the database; call
// EnsureTables before the first Write.
func New(pool *pgxpool.Pool, cfg Config) (*Writer, error) {
	if cfg.Group == "" {
		return nil, errors.New("ingest: Config.Group is empty")
	}
	if len(cfg.Sinks) == 0 {
		return nil, errors.New("ingest: Config.Sinks is empty")
	}
	if cfg.ClaimLockTimeout <= 0 {
		cfg.ClaimLockTimeout = 10 * time.Second
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Writer{pool: pool, cfg: cfg, log: log}, nil
}

const advanceSQL = `
UPDATE kafka2pg.offsets
SET next_offset = $5, leader_epoch = $6, updated_at = now()
WHERE consumer_group = $1 AND topic = $2 AND partition = $3
  AND epoch = $4 AND (next_offset IS NULL OR next_offset <= $7)`

var deadLetterTable = pgx.Identifier{"kafka2pg", "dead_letters"}

var deadLetterColumns = []string{"consumer_group", "topic", "partition", "kafka_offset", "kafka_timestamp",
	"key", "value", "headers", "target_table", "error_kind", "error_message"}

// Write stores b in one transaction: the fenced offset advance, the rows, the
// dead letters. It returns a *FencedError (errors.Is ErrFenced) when another
// writer owns the partition; then nothing was written. Any other error leaves
// the outcome of the transaction unknown if it came from COMMIT: re-claim and
// resume from the durable position, never retry blindly.
func (w *Writer) Write(ctx context.Context, b *Batch) (Result, error) {
	sink, ok := w.cfg.Sinks[b.Topic]
	if !ok {
		return Result{}, fmt.Errorf("write %s/%d: no table is configured for topic %q", b.Topic, b.Partition, b.Topic)
	}
	if b.NextOffset <= b.FirstOffset {
		return Result{}, fmt.Errorf("write %s/%d: empty span [%d, %d)", b.Topic, b.Partition, b.FirstOffset, b.NextOffset)
	}
	tx, err := w.pool.Begin(ctx)
	if err != nil {
		return Result{}, fmt.Errorf("write %s/%d: begin: %w", b.Topic, b.Partition, err)
	}
	defer func() {
		// Rollback after Commit is a no-op; after a cancel it still must run.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = tx.Rollback(rctx)
	}()

	tag, err := tx.Exec(ctx, advanceSQL, w.cfg.Group, b.Topic, b.Partition, b.Epoch, b.NextOffset, b.LeaderEpoch, b.FirstOffset)
	if err != nil {
		return Result{}, fmt.Errorf("write %s/%d: advance next_offset: %w", b.Topic, b.Partition, err)
	}
	if tag.RowsAffected() != 1 {
		return Result{}, w.fenced(ctx, tx, b)
	}

	src := &rowSource{records: b.Records, mapper: sink.Mapper}
	var res Result
	if len(b.Records) > 0 {
		n, err := tx.CopyFrom(ctx, sink.Table.Ident(), sink.Table.ColumnNames(), src)
		if err != nil {
			return Result{}, fmt.Errorf("write %s/%d: copy into %s: %w", b.Topic, b.Partition, sink.Table.QualifiedName(), err)
		}
		res.Rows = int(n)
	}
	if len(src.bad) > 0 {
		rows := make([][]any, len(src.bad))
		for i, bad := range src.bad {
			r := bad.rec
			var headers any
			if len(r.Headers) > 0 {
				headers = schema.HeadersJSON(r.Headers)
			}
			rows[i] = []any{w.cfg.Group, r.Topic, r.Partition, r.Offset, r.Timestamp, r.Key, r.Value, headers,
				sink.Table.QualifiedName(), bad.kind, bad.err.Error()}
			w.log.Warn("dead letter", "topic", r.Topic, "partition", r.Partition, "offset", r.Offset,
				"table", sink.Table.QualifiedName(), "kind", bad.kind, "error", bad.err.Error())
		}
		if _, err := tx.CopyFrom(ctx, deadLetterTable, deadLetterColumns, pgx.CopyFromRows(rows)); err != nil {
			return Result{}, fmt.Errorf("write %s/%d: copy into kafka2pg.dead_letters: %w", b.Topic, b.Partition, err)
		}
		res.DeadLetters = len(rows)
	}
	if err := tx.Commit(ctx); err != nil {
		return Result{}, fmt.Errorf("write %s/%d: commit (outcome unknown, re-read the offsets): %w", b.Topic, b.Partition, err)
	}
	return res, nil
}

// fenced reads what the offsets row holds, for a message that says why.
func (w *Writer) fenced(ctx context.Context, tx pgx.Tx, b *Batch) error {
	fe := &FencedError{Topic: b.Topic, Partition: b.Partition, Epoch: b.Epoch, FirstOffset: b.FirstOffset, StoredEpoch: -1, StoredOffset: -1}
	_ = tx.QueryRow(ctx, `SELECT epoch, coalesce(next_offset, -1) FROM kafka2pg.offsets
		WHERE consumer_group = $1 AND topic = $2 AND partition = $3`, w.cfg.Group, b.Topic, b.Partition).
		Scan(&fe.StoredEpoch, &fe.StoredOffset)
	return fe
}

type badRecord struct {
	rec  *schema.Record
	kind string
	err  error
}

// rowSource feeds CopyFrom, mapping records as pgx asks for them; records the
// mapping refuses are set aside as dead letters.
type rowSource struct {
	records []schema.Record
	mapper  RowMapper
	i       int
	row     []any
	err     error
	bad     []badRecord
}

func (s *rowSource) Next() bool {
	for s.i < len(s.records) {
		r := &s.records[s.i]
		s.i++
		row, err := s.mapper.Row(r, s.row)
		if err == nil {
			s.row = row
			return true
		}
		if !errors.Is(err, schema.ErrBadRecord) {
			s.err = err
			return false
		}
		kind := schema.KindInvalidValue
		var de *schema.DecodeError
		if errors.As(err, &de) {
			kind = de.Kind
		}
		s.bad = append(s.bad, badRecord{rec: r, kind: kind, err: err})
	}
	return false
}

func (s *rowSource) Values() ([]any, error) { return s.row, nil }
func (s *rowSource) Err() error             { return s.err }
