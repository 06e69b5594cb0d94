package ingest

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/kafka2pg/kafka2pg/decode"
	"github.com/kafka2pg/kafka2pg/stream"
)

// Replay runs dead letters through the sinks that wrote them, after the
// user fixed the table or the configuration. A dead letter records its
// target table; it is replayed only through the sink of its topic that
// writes that very table, never into another one (a typed sink's letter
// into the topic's zero-config table, say): a letter whose table no sink of
// the configuration writes is kept as it is, and counted as Kept, as is a
// letter of kind batch_too_large, which holds no record to write.
//
// One transaction per batch of letters: the rows that go in now and the
// removal of their letters commit together, so a replay killed at any point
// and run again replays each letter exactly once. A letter refused again
// stays, with its new reason. Offsets are not touched: these records are
// accounted for already. Letters another replay holds are skipped (FOR
// UPDATE SKIP LOCKED).

// ReplayFilter selects dead letters. Zero fields select all.
type ReplayFilter struct {
	Group  string
	Topics []string
	// Table is a target_table as the letters record it: the quoted,
	// qualified name ("public"."orders").
	Table string
	IDs   []int64
	Kinds []string  // error kinds
	Since time.Time // created at or after
	Limit int       // at most this many letters, oldest first; 0: all
}

// ReplayOptions says how to replay.
type ReplayOptions struct {
	// BatchSize is the number of letters per transaction. Default 1000.
	BatchSize int
	// DryRun changes nothing: letters are read without locks and only
	// mapped; Replayed counts those the mapping takes now (Postgres may
	// still refuse some) and StillBad those it refuses.
	DryRun bool
	// Letters is how many per-letter outcomes to keep in the result.
	Letters int
}

// ReplayResult counts what a replay did, or would do.
type ReplayResult struct {
	Replayed int // written to their table and removed from dead_letters
	StillBad int // refused again: kept, with their new reason
	Kept     int // no sink of the configuration writes their table: kept as they are
	// Tables has the counts by target table, in name order.
	Tables []ReplayTable
	// Letters has the first ReplayOptions.Letters outcomes, by id.
	Letters []ReplayLetter
}

// ReplayTable is what happened to the letters of one target table.
type ReplayTable struct {
	Table    string // "" when the letters recorded none
	Topics   []string
	Sink     bool // a sink of the configuration writes the table
	Replayed int
	StillBad int
	Kept     int
	Kinds    map[string]int // of StillBad
}

// ReplayLetter is the outcome of one letter.
type ReplayLetter struct {
	ID        int64
	Topic     string
	Partition int32
	Offset    int64
	Table     string
	WasKind   string // the kind it was filed under
	Outcome   string // ReplayedOutcome, StillBadOutcome or KeptOutcome
	Kind      string // with StillBadOutcome: the new kind
	Reason    string // with StillBadOutcome: the new reason
}

// The ReplayLetter outcomes.
const (
	ReplayedOutcome = "replayed"
	StillBadOutcome = "still_bad"
	KeptOutcome     = "kept"
)

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

// Replay replays the dead letters f selects (see the comment above).
func (w *Writer) Replay(ctx context.Context, f ReplayFilter, o ReplayOptions) (ReplayResult, error) {
	if o.BatchSize <= 0 {
		o.BatchSize = 1000
	}
	tables := map[string]*ReplayTable{}
	var res ReplayResult
	lastID := int64(0)
	for f.Limit <= 0 || res.Replayed+res.StillBad+res.Kept < f.Limit {
		n := o.BatchSize
		if f.Limit > 0 {
			n = min(n, f.Limit-(res.Replayed+res.StillBad+res.Kept))
		}
		letters, err := w.replayBatch(ctx, f, o.DryRun, lastID, n)
		if err != nil {
			return res, err
		}
		for _, l := range letters {
			t := tables[l.Table]
			if t == nil {
				t = &ReplayTable{Table: l.Table, Sink: l.Outcome != KeptOutcome, Kinds: map[string]int{}}
				tables[l.Table] = t
			}
			if !slices.Contains(t.Topics, l.Topic) {
				t.Topics = append(t.Topics, l.Topic)
			}
			switch l.Outcome {
			case ReplayedOutcome:
				res.Replayed++
				t.Replayed++
			case StillBadOutcome:
				res.StillBad++
				t.StillBad++
				t.Kinds[l.Kind]++
			case KeptOutcome:
				res.Kept++
				t.Kept++
			}
			if len(res.Letters) < o.Letters {
				res.Letters = append(res.Letters, l)
			}
		}
		if len(letters) < n {
			break
		}
		lastID = letters[len(letters)-1].ID
	}
	for _, name := range slices.Sorted(maps.Keys(tables)) {
		t := tables[name]
		slices.Sort(t.Topics)
		res.Tables = append(res.Tables, *t)
	}
	return res, nil
}

const selectLettersSQL = `
SELECT id, topic, partition, kafka_offset, coalesce(kafka_timestamp, 'epoch'), key, value, headers,
       coalesce(target_table, ''), error_kind
FROM kafka2pg.dead_letters
WHERE id > $1
  AND ($2 = '' OR consumer_group = $2)
  AND (coalesce(cardinality($3::text[]), 0) = 0 OR topic = ANY($3))
  AND ($4 = '' OR target_table = $4)
  AND (coalesce(cardinality($5::bigint[]), 0) = 0 OR id = ANY($5))
  AND (coalesce(cardinality($6::text[]), 0) = 0 OR error_kind = ANY($6))
  AND created_at >= $7
ORDER BY id
LIMIT $8`

// letter is a dead letter being replayed.
type letter struct {
	ReplayLetter
	rec stream.Record
}

// replayBatch replays up to limit letters after afterID in one
// transaction, and returns their outcomes, by id.
func (w *Writer) replayBatch(ctx context.Context, f ReplayFilter, dryRun bool, afterID int64, limit int) ([]ReplayLetter, error) {
	var out []ReplayLetter
	opts := pgx.TxOptions{}
	query := selectLettersSQL + "\nFOR UPDATE SKIP LOCKED"
	if dryRun {
		opts.AccessMode, query = pgx.ReadOnly, selectLettersSQL
	}
	// The transaction helper's, with a deadline as for a batch that
	// isolates its rows: the letters are copied so.
	spec := txSpec{rows: limit, isolating: true, opts: opts}
	_, err := w.inBatchTx(ctx, spec, func(ctx context.Context, tx *batchTx) (outcome, error) {
		rows, err := tx.Query(ctx, query, afterID, f.Group, f.Topics, f.Table, f.IDs, f.Kinds, f.Since, limit)
		if err != nil {
			return outcome{}, err
		}
		var letters []*letter
		var headers []byte
		var l letter // scanned into, then copied: ForEachRow scans into the same fields every row
		_, err = pgx.ForEachRow(rows, []any{&l.ID, &l.rec.Topic, &l.rec.Partition, &l.rec.Offset, &l.rec.Timestamp,
			&l.rec.Key, &l.rec.Value, &headers, &l.Table, &l.WasKind}, func() error {
			hs, err := decode.ParseHeadersJSON(headers)
			if err != nil {
				return fmt.Errorf("dead letter %d: %w", l.ID, err)
			}
			c := l
			c.rec.Headers = hs
			c.Topic, c.Partition, c.Offset = c.rec.Topic, c.rec.Partition, c.rec.Offset
			letters = append(letters, &c)
			l = letter{}
			return nil
		})
		if err != nil {
			return outcome{}, err
		}
		// The letters of each sink, in id order.
		bySink := map[string][]*letter{}
		sinks := map[string]Sink{}
		for _, l := range letters {
			if l.WasKind == KindBatchTooLarge {
				l.Outcome = KeptOutcome // never read: no value to write; read it again from Kafka
				continue
			}
			sink, ok, err := w.replaySink(ctx, l.Topic, l.Table)
			if err != nil {
				return outcome{}, err
			}
			if !ok {
				l.Outcome = KeptOutcome
				continue
			}
			bySink[l.Table] = append(bySink[l.Table], l)
			sinks[l.Table] = sink
		}
		for _, table := range slices.Sorted(maps.Keys(bySink)) {
			if err := w.replayInto(ctx, tx, sinks[table], bySink[table], dryRun); err != nil {
				return outcome{}, fmt.Errorf("replay into %s: %w", table, err)
			}
		}
		if !dryRun {
			if err := settleLetters(ctx, tx, letters); err != nil {
				return outcome{}, err
			}
		}
		for _, l := range letters {
			out = append(out, l.ReplayLetter)
		}
		return outcome{}, nil
	})
	if err != nil {
		return nil, fmt.Errorf("replay dead letters: %w", err)
	}
	return out, nil
}

// ErrChangeReplay is the refusal to replay the dead letter of a change
// sink (format debezium): a change event is only right in its place in
// the stream of its row's changes.
var ErrChangeReplay = errors.New("dead letters of change events are not replayed")

// replaySink is the sink a letter of topic, filed for table, replays
// through: the topic's sink when it writes that table; false otherwise.
func (w *Writer) replaySink(ctx context.Context, topic, table string) (Sink, bool, error) {
	sink, ok := w.cfg.Sinks[topic]
	if !ok && w.cfg.Resolve != nil {
		var err error
		if sink, ok, err = w.cfg.Resolve(ctx, topic); err != nil {
			return Sink{}, false, fmt.Errorf("the sink of topic %q: %w", topic, err)
		}
	}
	if !ok || table == "" || sink.Table.QualifiedName() != table {
		return Sink{}, false, nil
	}
	if sink.Changes != nil {
		return Sink{}, false, fmt.Errorf("%w: the letter of topic %q (offset order matters for format debezium: a change applied after the later changes of its row would undo them); fix the cause, then rewind the partition to the letter's offset (kafka2pg rewind), or apply the change by hand and delete the letter", ErrChangeReplay, topic)
	}
	if tm, ok := sink.Mapper.(TableMapper); ok {
		sink.Table = tm.Table() // a registry sink's columns as they are now
	}
	return sink, true, nil
}

// replayInto writes the letters of one sink in tx and sets their
// outcomes; with dryRun it only maps them.
func (w *Writer) replayInto(ctx context.Context, tx pgx.Tx, sink Sink, letters []*letter, dryRun bool) error {
	records := make([]stream.Record, len(letters))
	byRec := make(map[*stream.Record]*letter, len(letters))
	for i, l := range letters {
		records[i] = l.rec
		byRec[&records[i]] = l
	}
	if err := resolveSchemas(ctx, sink, records); err != nil {
		return err
	}
	var bad []badRecord
	if sink.Upsert != nil {
		ops, refused, err := w.upsertOps(records, sink)
		if err != nil {
			return err
		}
		bad = refused
		if !dryRun {
			more, err := applyOneByOne(ctx, tx, sink, ops)
			if err != nil {
				return err
			}
			bad = append(bad, more...)
		}
	} else {
		rows, refused, err := materialize(records, sink.Mapper, w.cfg.MaxRecordBytes)
		if err != nil {
			return err
		}
		bad = refused
		if !dryRun {
			more, _, err := copyIsolating(ctx, tx, sink.Table, rows)
			if err != nil {
				return err
			}
			bad = append(bad, more...)
		}
	}
	for _, l := range letters {
		l.Outcome = ReplayedOutcome
	}
	for _, b := range bad {
		l := byRec[b.rec]
		l.Outcome, l.Kind, l.Reason = StillBadOutcome, b.kind, b.err.Error()
	}
	return nil
}

// applyOneByOne applies upsert operations in order, each under a savepoint,
// and returns those Postgres refused.
func applyOneByOne(ctx context.Context, tx pgx.Tx, sink Sink, ops []upsertOp) ([]badRecord, error) {
	insert, del := upsertOneSQL(sink.Table, sink.Upsert.Key)
	var bad []badRecord
	for _, op := range ops {
		if _, err := tx.Exec(ctx, "SAVEPOINT kafka2pg_op"); err != nil {
			return nil, err
		}
		q := insert
		if op.del {
			q = del
		}
		_, opErr := tx.Exec(ctx, q, op.values...)
		switch {
		case opErr != nil && !rowError(opErr):
			return nil, opErr
		case opErr != nil:
			if _, err := tx.Exec(ctx, "ROLLBACK TO SAVEPOINT kafka2pg_op; RELEASE SAVEPOINT kafka2pg_op"); err != nil {
				return nil, err
			}
			bad = append(bad, badRecord{rec: op.rec, kind: sqlstateKind(opErr), err: opErr})
		default:
			if _, err := tx.Exec(ctx, "RELEASE SAVEPOINT kafka2pg_op"); err != nil {
				return nil, err
			}
		}
	}
	return bad, nil
}

// settleLetters deletes the letters replayed and stores the new reason of
// those refused again, in the replay's transaction.
func settleLetters(ctx context.Context, tx pgx.Tx, letters []*letter) error {
	var done []int64
	text := letterTextFor(tx.Conn().PgConn()) // as handleBad writes them
	for _, l := range letters {
		switch l.Outcome {
		case ReplayedOutcome:
			done = append(done, l.ID)
		case StillBadOutcome:
			if _, err := tx.Exec(ctx, `UPDATE kafka2pg.dead_letters SET error_kind = $2, error_message = $3 WHERE id = $1`,
				l.ID, l.Kind, text.message(l.Reason)); err != nil {
				return fmt.Errorf("keep dead letter %d: %w", l.ID, err)
			}
		}
	}
	tag, err := tx.Exec(ctx, `DELETE FROM kafka2pg.dead_letters WHERE id = ANY($1)`, done)
	if err != nil {
		return fmt.Errorf("delete the replayed dead letters: %w", err)
	}
	if int(tag.RowsAffected()) != len(done) {
		// Each was locked FOR UPDATE by this transaction.
		return errors.New("delete the replayed dead letters: some were gone (a bug)")
	}
	return nil
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
