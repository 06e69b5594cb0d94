package ingest

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/kafka2pg/kafka2pg/decode"
	"github.com/kafka2pg/kafka2pg/pgcopy"
	"github.com/kafka2pg/kafka2pg/schema"
	"github.com/kafka2pg/kafka2pg/stream"
)

// Change sinks (Sink.Changes, format debezium). Each record decodes into
// a change of the sink's table (stream.Change), applied in the batch's one
// fenced transaction, so the table moves with the offsets, exactly once:
//
//   - the fast path TRUNCATEs the table when the batch holds a truncate,
//     voiding the batch's changes before the last one, then encodes the
//     changes after it as a changeSet (changeset.go: the last operation of
//     each key by offset; an update that changed the key is a delete of
//     the old key, then an upsert) and applies it as the upsert path does
//     (applyChanges). A table without a key takes its rows by COPY (the
//     decoder refuses updates and deletes of such a table).
//   - the change-by-change path applies each change in offset order under
//     a savepoint: when Postgres refused a row of the fast path (the
//     refused changes become dead letters, or stop the partition with
//     OnError "stop"), and for a batch with an unavailable value (an
//     unchanged TOASTed column Debezium left out), whose update must keep
//     the stored value: INSERT ... ON CONFLICT DO UPDATE of the available
//     columns only.
//
// The table is created once the first event has told its columns and key
// (the decoder returns decode.ErrTableChanged, and writeChanging evolves
// the table as for a TableMapper).

// keyedChange is one record's change, in offset order.
type keyedChange struct {
	rec *stream.Record
	ch  stream.Change
}

// decodeChanges decodes the batch's records; the records that are no
// change (tombstones, messages) are left out, bad ones set aside. An error
// not about a record aborts the batch: decode.ErrTableChanged when a
// record changed the table, or when another partition's did since sink
// was read.
func (w *Writer) decodeChanges(records []stream.Record, sink Sink) ([]keyedChange, []badRecord, error) {
	out := make([]keyedChange, 0, len(records))
	bad, err := decodeRecords(records, w.cfg.MaxRecordBytes, func(r *stream.Record, _ int) error {
		out = append(out, keyedChange{rec: r})
		c := &out[len(out)-1]
		if err := sink.Changes.Decode(r, &c.ch); err != nil || c.ch.Op == stream.OpNone {
			out = out[:len(out)-1]
			return err
		}
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	if !hasColumns(sink.Changes, sink.Table) {
		return nil, nil, fmt.Errorf("the table of topic %s changed: %w", sink.Table.QualifiedName(), decode.ErrTableChanged)
	}
	return out, bad, nil
}

// changesAttempt writes a change sink's batch one way: the fast path,
// unless the attempt or the batch asks for change by change.
func (w *Writer) changesAttempt(ctx context.Context, b *stream.Batch, sink Sink, a attempt, kids mappedChildren) (outcome, error) {
	changes, bad, err := w.decodeChanges(b.Records, sink)
	if err != nil {
		return outcome{}, err
	}
	var stage stageFunc
	if sink.Transactions != nil {
		changes, stage = w.stageTransactions(b, sink, changes)
	}
	if sink.Changes.KeyColumns() == nil || len(changes) == 0 && stage != nil {
		// No event has told the table yet, so there is none: the batch
		// holds nothing but tombstones, messages, truncates and bad
		// records. Only the offsets move (and the dead letters).
		spec := txSpec{batches: []*stream.Batch{b}, sink: sink, stage: stage}
		return w.inBatchTx(ctx, spec, func(ctx context.Context, tx *batchTx) (outcome, error) {
			return w.applyEach(ctx, tx, b, nil, bad, "")
		})
	}
	oneByOne := a == attemptIsolated || (len(bad) > 0 && w.cfg.OnError == OnErrorStop) ||
		slices.ContainsFunc(changes, func(c keyedChange) bool { return len(c.ch.Unavailable) > 0 })
	if oneByOne {
		return w.changesOneByOne(ctx, b, sink, changes, bad, stage)
	}
	return w.changesFast(ctx, b, sink, changes, bad, stage, kids)
}

// changesFast applies the batch's changes by key in one statement
// (applyChanges), after the TRUNCATE of its last truncate. It asks for
// attemptIsolated when Postgres refused a row.
func (w *Writer) changesFast(ctx context.Context, b *stream.Batch, sink Sink, changes []keyedChange, bad []badRecord, stage stageFunc, kids mappedChildren) (outcome, error) {
	t := sink.Table
	key := t.PrimaryKey
	spec := txSpec{batches: []*stream.Batch{b}, sink: sink, describe: true, stage: stage, kids: kids}
	return w.inBatchTx(ctx, spec, func(ctx context.Context, tx *batchTx) (outcome, error) {
		res := outcome{bad: bad}
		start := time.Now()
		if i := lastTruncate(changes); i >= 0 {
			if _, err := tx.Exec(ctx, truncateSQL(t)); err != nil {
				return outcome{}, fmt.Errorf("truncate %s: %w", t.QualifiedName(), err)
			}
			changes = changes[i+1:]
			res.rows++
		}
		res.rows += len(changes)
		if len(key) == 0 {
			rows := make([][]any, len(changes))
			for i, c := range changes {
				rows[i] = c.ch.Row
			}
			if _, err := pgcopy.CopyTyped(ctx, tx, t.Ident(), t.ColumnNames(), tx.oids, pgx.CopyFromRows(rows)); err != nil {
				if rowError(err) {
					return outcome{redo: attemptIsolated}, nil
				}
				return outcome{}, fmt.Errorf("copy into %s: %w", t.QualifiedName(), err)
			}
			res.copyDuration = time.Since(start)
			return res, nil
		}
		st := w.upsertStateOf(t.QualifiedName())
		encode := func(oids []uint32) (*changeSet, []badRecord, error) {
			return encodeChanges(changes, st, tx.Conn().TypeMap(), oids, keyIndexes(t, key), guardOf(sink))
		}
		cs, more, err := encode(tx.oids)
		if err != nil {
			return outcome{}, err
		}
		defer func() { st.done(cs) }()
		if len(more) > 0 {
			return outcome{redo: attemptIsolated}, nil // a value the column type does not take: find it change by change
		}
		if res.redo, err = w.applyChanges(ctx, tx, t, key, st, &cs, encode); err != nil || res.redo != 0 {
			return outcome{redo: res.redo}, err
		}
		res.copyDuration = time.Since(start)
		res.stale = cs.stale
		return res, nil
	})
}

// encodeChanges encodes changes (upserts and deletes, no truncate) as a
// changeSet of rows of the column types oids, keyed by the columns
// keyIdx, with the sink's soft deletes and version g. A change whose
// values do not encode is set aside.
func encodeChanges(changes []keyedChange, st *upsertState, m *pgtype.Map, oids []uint32, keyIdx []int, g guard) (*changeSet, []badRecord, error) {
	size := 0
	for _, c := range changes {
		size += len(c.rec.Value)/2 + 8*len(oids)
	}
	cs := st.changeSet(m, oids, keyIdx, len(changes)+len(changes)/8, size)
	cs.g = g
	del := func(c keyedChange, seq int64, key []any) error {
		if g.del >= 0 {
			return cs.softDelete(c.rec, seq, key, c.ch.Version)
		}
		return cs.appendDelete(c.rec, seq, key)
	}
	var bad []badRecord
	seq := int64(0)
	for _, c := range changes {
		var err error
		switch {
		case c.ch.Op == stream.OpDelete:
			err = del(c, seq, c.ch.Key)
		case c.ch.OldKey != nil:
			if err = del(c, seq, c.ch.OldKey); err == nil {
				seq++
				err = cs.appendValues(c.rec, seq, c.ch.Row)
			}
		default:
			err = cs.appendValues(c.rec, seq, c.ch.Row)
		}
		seq++
		if err != nil {
			bad = append(bad, badRecord{rec: c.rec, kind: decode.KindInvalidValue, err: err})
		}
	}
	cs.finish()
	return cs, bad, nil
}

// lastTruncate is the index of the last truncate of changes, or -1.
func lastTruncate(changes []keyedChange) int {
	for i := len(changes) - 1; i >= 0; i-- {
		if changes[i].ch.Op == stream.OpTruncate {
			return i
		}
	}
	return -1
}

func truncateSQL(t schema.Table) string { return "TRUNCATE " + t.QualifiedName() }

// changesOneByOne applies the changes in offset order, each under a
// savepoint (applyEach): the ones Postgres refuses become dead letters,
// or stop the partition.
func (w *Writer) changesOneByOne(ctx context.Context, b *stream.Batch, sink Sink, changes []keyedChange, bad []badRecord, stage stageFunc) (outcome, error) {
	t := sink.Table
	key := t.PrimaryKey
	stmts := changeStatements{t: t, key: key, g: guardOf(sink), upserts: map[string]string{}}
	ops := make([]oneOp, len(changes))
	for i := range changes {
		c := &changes[i]
		ops[i] = oneOp{rec: c.rec, apply: func(ctx context.Context, tx pgx.Tx) error {
			skipped := stmts.stale
			if err := stmts.apply(ctx, tx, c.rec, &c.ch); err != nil || stmts.stale != skipped {
				return err // a change the version guard skips leaves the children as they are
			}
			return applyChildOps(ctx, tx, sink, changeChildOps(c.rec, &c.ch))
		}}
	}
	spec := txSpec{batches: []*stream.Batch{b}, sink: sink, isolating: true, stage: stage}
	return w.inBatchTx(ctx, spec, func(ctx context.Context, tx *batchTx) (outcome, error) {
		stmts.stale = 0
		res, err := w.applyEach(ctx, tx, b, ops, bad, "apply changes to "+t.QualifiedName())
		res.stale = stmts.stale
		return res, err
	})
}

// changeStatements are the statements that apply one change to t.
type changeStatements struct {
	t       schema.Table
	key     []string
	g       guard // the sink's soft deletes and version
	del     string
	upserts map[string]string // by the unavailable columns
	stale   int               // the changes the version guard skipped
}

// apply runs the statements of one change of rec in tx. The change's
// values are package pgvalue's: pgcopy.PgxValues hands them to pgx as the
// pgtype values pgx sends in binary.
func (s *changeStatements) apply(ctx context.Context, tx pgx.Tx, rec *stream.Record, ch *stream.Change) error {
	var err error
	var tag pgconn.CommandTag
	switch {
	case ch.Op == stream.OpTruncate:
		_, err = tx.Exec(ctx, truncateSQL(s.t))
		return err
	case ch.Op == stream.OpDelete:
		tag, err = tx.Exec(ctx, s.deleteSQL(), pgcopy.PgxValues(s.g.deleteArgs(rec, ch.Key, ch.Version))...)
	case ch.Op == stream.OpUpsert:
		if ch.OldKey != nil {
			if _, err = tx.Exec(ctx, s.deleteSQL(), pgcopy.PgxValues(s.g.deleteArgs(rec, ch.OldKey, ch.Version))...); err != nil {
				return err
			}
		}
		tag, err = tx.Exec(ctx, s.upsertSQL(ch.Unavailable), pgcopy.PgxValues(ch.Row)...)
	}
	if err == nil && s.g.ver >= 0 && tag.RowsAffected() == 0 {
		s.stale++
	}
	return err
}

// queue adds the statements of one change of rec to q, in the order they
// run: a source transaction's apply (txset.go) sends many changes in one
// round trip. The upsert or delete the version guard skips counts in
// s.stale once q's results are read.
func (s *changeStatements) queue(q *pgx.Batch, rec *stream.Record, ch *stream.Change) {
	count := func(tag pgconn.CommandTag) error {
		if s.g.ver >= 0 && tag.RowsAffected() == 0 {
			s.stale++
		}
		return nil
	}
	switch {
	case ch.Op == stream.OpTruncate:
		q.Queue(truncateSQL(s.t))
	case ch.Op == stream.OpDelete:
		q.Queue(s.deleteSQL(), pgcopy.PgxValues(s.g.deleteArgs(rec, ch.Key, ch.Version))...).Exec(count)
	case ch.Op == stream.OpUpsert:
		if ch.OldKey != nil {
			q.Queue(s.deleteSQL(), pgcopy.PgxValues(s.g.deleteArgs(rec, ch.OldKey, ch.Version))...)
		}
		q.Queue(s.upsertSQL(ch.Unavailable), pgcopy.PgxValues(ch.Row)...).Exec(count)
	}
}

func (s *changeStatements) deleteSQL() string {
	if s.del == "" {
		_, s.del = upsertOneSQL(s.t, s.key)
		if s.g.active() {
			_, s.del = guardedOneSQL(s.t, s.key, nil, s.g)
		}
	}
	return s.del
}

// upsertSQL inserts a row of every column, updating the row of its key
// when there is one, but for the unavailable columns (indexes in the row),
// which keep their stored value. Without a key it only inserts.
func (s *changeStatements) upsertSQL(unavailable []int) string {
	var id strings.Builder
	for _, i := range unavailable {
		id.WriteString(strconv.Itoa(i))
		id.WriteByte(',')
	}
	if q, ok := s.upserts[id.String()]; ok {
		return q
	}
	cols := s.t.ColumnNames()
	params := make([]string, len(cols))
	for i := range cols {
		params[i] = "$" + strconv.Itoa(i+1)
	}
	q := fmt.Sprintf("INSERT INTO %s AS t (%s) VALUES (%s)", s.t.QualifiedName(), schema.QuoteIdentList(cols), strings.Join(params, ", "))
	if len(s.key) > 0 {
		var keep []string
		for _, i := range unavailable {
			keep = append(keep, cols[i])
		}
		q += fmt.Sprintf(" ON CONFLICT (%s) %s", schema.QuoteIdentList(s.key), guardedUpdate(s.t, s.key, keep, s.g))
	}
	s.upserts[id.String()] = q
	return q
}
