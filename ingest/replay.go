package ingest

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/kafka2pg/kafka2pg/deadletters"
	"github.com/kafka2pg/kafka2pg/stream"
)

// Replay runs dead letters through the sinks that wrote them, after the
// user fixed the table or the configuration. A dead letter records its
// target table; it is replayed only through the sink of its topic that
// writes that very table, never into another one (a typed sink's letter
// into the topic's zero-config table, say): a letter whose table no sink of
// the configuration writes is kept as it is, and counted as Kept, as is a
// letter of kind batch_too_large, which holds no record to write. A
// routed sink's letter replays into the table its record routes to now,
// within the table cap: the way back for letters of kind route_limit once
// the cap is raised.
//
// One transaction per batch of letters: the rows that go in now and the
// removal of their letters commit together, so a replay killed at any point
// and run again replays each letter exactly once. A letter refused again
// stays, with its new reason. Offsets are not touched: these records are
// accounted for already. Letters another replay holds are skipped (FOR
// UPDATE SKIP LOCKED).

// ReplayOptions says how to replay.
type ReplayOptions struct {
	// BatchSize is the number of letters per transaction. Default 1000.
	BatchSize int
	// Limit is how many letters to replay at most, oldest first; 0: all.
	Limit int
	// DryRun changes nothing: letters are read without locks and only
	// mapped; Replayed counts those the mapping takes now (Postgres may
	// still refuse some) and StillBad those it refuses.
	DryRun bool
	// Letters is how many per-letter outcomes to keep in the report.
	Letters int
}

// Replay replays the dead letters f selects (see the comment above).
func (w *Writer) Replay(ctx context.Context, f deadletters.Filter, o ReplayOptions) (deadletters.Report, error) {
	if o.BatchSize <= 0 {
		o.BatchSize = 1000
	}
	tables := map[string]*deadletters.TableReport{}
	var res deadletters.Report
	lastID := int64(0)
	for o.Limit <= 0 || res.Replayed+res.StillBad+res.Kept < o.Limit {
		n := o.BatchSize
		if o.Limit > 0 {
			n = min(n, o.Limit-(res.Replayed+res.StillBad+res.Kept))
		}
		letters, err := w.replayBatch(ctx, f, o.DryRun, lastID, n)
		if err != nil {
			return res, err
		}
		for _, l := range letters {
			t := tables[l.Letter.Table]
			if t == nil {
				t = &deadletters.TableReport{Table: l.Letter.Table, Sink: l.Result != deadletters.Kept, Kinds: map[string]int{}}
				tables[l.Letter.Table] = t
			}
			if topic := l.Letter.Record.Topic; !slices.Contains(t.Topics, topic) {
				t.Topics = append(t.Topics, topic)
			}
			switch l.Result {
			case deadletters.Replayed:
				res.Replayed++
				t.Replayed++
			case deadletters.StillBad:
				res.StillBad++
				t.StillBad++
				t.Kinds[l.Kind]++
			case deadletters.Kept:
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
		lastID = letters[len(letters)-1].Letter.ID
	}
	for _, name := range slices.Sorted(maps.Keys(tables)) {
		t := tables[name]
		slices.Sort(t.Topics)
		res.Tables = append(res.Tables, *t)
	}
	return res, nil
}

// letter is a dead letter being replayed.
type letter struct {
	deadletters.Outcome
	rec stream.Record // the letter's record, which the mapping may keep a pointer to
}

// replayBatch replays up to limit letters after afterID in one
// transaction, and returns their outcomes, by id.
func (w *Writer) replayBatch(ctx context.Context, f deadletters.Filter, dryRun bool, afterID int64, limit int) ([]deadletters.Outcome, error) {
	var out []deadletters.Outcome
	opts := pgx.TxOptions{}
	if dryRun {
		opts.AccessMode = pgx.ReadOnly
	}
	// The transaction helper's, with a deadline as for a batch that
	// isolates its rows: the letters are copied so.
	spec := txSpec{rows: limit, isolating: true, opts: opts}
	_, err := w.inBatchTx(ctx, spec, func(ctx context.Context, tx *batchTx) (outcome, error) {
		read, err := deadletters.Oldest(ctx, tx, f, afterID, limit, !dryRun)
		if err != nil {
			return outcome{}, err
		}
		letters := make([]*letter, len(read))
		for i, l := range read {
			letters[i] = &letter{Outcome: deadletters.Outcome{Letter: l}, rec: l.Record}
		}
		// The letters of each sink, in id order.
		bySink := map[string][]*letter{}
		sinks := map[string]Sink{}
		for _, l := range letters {
			if l.Letter.Kind == KindBatchTooLarge {
				l.Result = deadletters.Kept // never read: no value to write; read it again from Kafka
				continue
			}
			sink, ok, err := w.replaySink(ctx, &l.rec, l.Letter.Table)
			if err != nil {
				return outcome{}, err
			}
			if !ok {
				l.Result = deadletters.Kept
				continue
			}
			table := sink.Table.QualifiedName() // the letter's, or the table a routed record names now
			bySink[table] = append(bySink[table], l)
			sinks[table] = sink
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
			out = append(out, l.Outcome)
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

// replaySink is the sink a letter of rec, filed for table, replays
// through: the topic's sink when it writes that table; false otherwise.
// The letter of a routed sink, filed for one of its tables or for the
// sink itself (a record it could not route), replays into the table its
// record routes to now (replayRouted).
func (w *Writer) replaySink(ctx context.Context, rec *stream.Record, table string) (Sink, bool, error) {
	topic := rec.Topic
	rt := w.routes.Load()
	sink, ok := rt.fixed[topic]
	if !ok && rt.resolve != nil {
		var err error
		if sink, ok, err = rt.resolve(ctx, topic); err != nil {
			return Sink{}, false, fmt.Errorf("the sink of topic %q: %w", topic, err)
		}
	}
	if ok && sink.Router != nil {
		return w.replayRouted(ctx, sink, rec, table)
	}
	if !ok || table == "" || sink.Table.QualifiedName() != table {
		return Sink{}, false, nil
	}
	if sink.Boundaries != nil {
		return Sink{}, false, fmt.Errorf("%w: the letter of transaction topic %q is an END or BEGIN record, not a row; fix the cause, then rewind the partition to the letter's offset (kafka2pg rewind)", ErrChangeReplay, topic)
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
	switch {
	case len(sink.Children) > 0:
		// Each record with its children, or neither.
		for i := range records {
			_, reason, err := childrenOf(&records[i], sink)
			if err != nil {
				return err
			}
			records[i].Unreadable = reason
		}
		ops, refused, err := w.childrenOps(records, sink)
		if err != nil {
			return err
		}
		bad = refused
		if !dryRun {
			more, err := applyOneByOne(ctx, tx, ops)
			if err != nil {
				return err
			}
			bad = append(bad, more...)
		}
	case sink.Upsert != nil:
		ops, refused, err := w.upsertOps(records, sink)
		if err != nil {
			return err
		}
		bad = refused
		if !dryRun {
			more, err := applyOneByOne(ctx, tx, upsertOneByOne(sink, ops, nil, nil))
			if err != nil {
				return err
			}
			bad = append(bad, more...)
		}
	default:
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
		l.Result = deadletters.Replayed
	}
	for _, b := range bad {
		l := byRec[b.rec]
		l.Result, l.Kind, l.Reason = deadletters.StillBad, b.kind, b.err.Error()
	}
	return nil
}

// upsertOneByOne are the upsert operations ops as operations of their
// own statement each (upsertSinkSQL's), for applyOneByOne and applyEach.
// stale, when not nil, counts the operations the version guard skipped;
// then, when not nil, runs after each operation, in its savepoint (a
// record's children).
func upsertOneByOne(sink Sink, ops []upsertOp, stale *int, then func(ctx context.Context, tx pgx.Tx, rec *stream.Record) error) []oneOp {
	g := guardOf(sink)
	insert, del := upsertSinkSQL(sink)
	out := make([]oneOp, len(ops))
	for i, op := range ops {
		q := insert
		if op.del {
			q = del
		}
		out[i] = oneOp{rec: op.rec, apply: func(ctx context.Context, tx pgx.Tx) error {
			tag, err := tx.Exec(ctx, q, op.values...)
			if err != nil {
				return err
			}
			if stale != nil && g.ver >= 0 && tag.RowsAffected() == 0 {
				*stale++
			}
			if then != nil {
				return then(ctx, tx, op.rec)
			}
			return nil
		}}
	}
	return out
}

// applyOneByOne applies operations in order, each under a savepoint, and
// returns those Postgres refused.
func applyOneByOne(ctx context.Context, tx pgx.Tx, ops []oneOp) ([]badRecord, error) {
	var bad []badRecord
	for _, op := range ops {
		if _, err := tx.Exec(ctx, "SAVEPOINT kafka2pg_op"); err != nil {
			return nil, err
		}
		opErr := op.apply(ctx, tx)
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
	var replayed []int64
	var refused []deadletters.Letter
	for _, l := range letters {
		switch l.Result {
		case deadletters.Replayed:
			replayed = append(replayed, l.Letter.ID)
		case deadletters.StillBad:
			refused = append(refused, deadletters.Letter{ID: l.Letter.ID, Kind: l.Kind, Message: l.Reason})
		}
	}
	return deadletters.Settle(ctx, tx, replayed, refused)
}
