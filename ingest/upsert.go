package ingest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/kafka2pg/kafka2pg/pgcopy"
	"github.com/kafka2pg/kafka2pg/schema"
	"github.com/kafka2pg/kafka2pg/stream"
)

// Upsert mode. The fast path encodes the batch as a changeSet (changeset.go):
// the last operation of every key by offset, an upsert or a delete, sorted
// by key. Then, inside the fenced transaction:
//
//   - when the set has no delete and the table's recent batches brought
//     new keys only, it COPYs the rows into the table itself, under a
//     savepoint: a batch of new keys costs Postgres what an append into a
//     table with that unique index costs, where INSERT ... ON CONFLICT
//     inserts row by row and probes the index for each. A key that exists
//     already fails the COPY (unique_violation), which is rolled back to
//     the savepoint, and the next few batches of the table skip this step
//     (directBackoff);
//   - otherwise it COPYs the set into a staging table (staging.go), created
//     once per session, temporary (ON COMMIT DELETE ROWS empties it at every COMMIT),
//     and applies it with one statement: the deletes, then INSERT ... ON
//     CONFLICT DO UPDATE of the rest. When the key's binary form does not
//     tell keys apart exactly (exactKeyTypes), the statement keeps the last
//     operation of each key itself, as the set may hold two of one key.
//
// If Postgres refuses a row, the batch is redone operation by operation
// under savepoints, in offset order, so the refused ones become dead
// letters and the table ends as if the good ones had been applied one by
// one.
//
// Concurrent writers of one table (partitions written at once) take the
// rows' locks in key order within each statement. Two batches that both
// delete and upsert keys the other touches can still deadlock; Postgres
// then aborts one (40P01), whose Write fails and is retried by a claim,
// as any failed Write is: nothing of it was committed.

const (
	stagePrefix = "kafka2pg_stage_"
	stageSeqCol = "kafka2pg_seq"
	stageDelCol = "kafka2pg_delete"
)

// upsertOp is one record's effect: a row to upsert or a key to delete.
type upsertOp struct {
	rec    *stream.Record
	values []any // all columns, or only the key columns when del
	del    bool
}

func keyIndexes(t schema.Table, key []string) []int {
	names := t.ColumnNames()
	idx := make([]int, len(key))
	for i, k := range key {
		idx[i] = slices.Index(names, k)
	}
	return idx
}

// upsertOps maps the batch's records to operations; bad records are set
// aside. A tombstone without DeleteOnTombstone is passed to the mapper like
// any record (which decides whether it is a bad record).
func (w *Writer) upsertOps(records []stream.Record, sink Sink) ([]upsertOp, []badRecord, error) {
	km := sink.Mapper.(KeyMapper)
	g := guardOf(sink)
	ops := make([]upsertOp, 0, len(records))
	bad, err := decodeRecords(records, w.cfg.MaxRecordBytes, func(r *stream.Record, _ int) (err error) {
		op := upsertOp{rec: r}
		if op.del = sink.Upsert.DeleteOnTombstone && km.IsTombstone(r); op.del {
			if op.values, err = km.KeyRow(r); err == nil {
				op.values = g.deleteArgs(r, op.values, nil)
			}
		} else {
			op.values, err = sink.Mapper.Row(r, nil)
		}
		if err == nil {
			ops = append(ops, op)
		}
		return err
	})
	if err != nil {
		return nil, nil, err // not about the record: the batch is retried
	}
	return ops, bad, nil
}

// upsertState is what the writer has learnt about one upsert table. Its
// partitions' writes share it.
type upsertState struct {
	mu sync.Mutex
	// skip is how many batches write staged before one tries the direct
	// COPY again; backoff is the skip after its next failure.
	skip, backoff int
	// noDirect: Postgres refused a direct COPY into the table for a reason
	// other than its rows (COPY under row-level security).
	noDirect bool
	// exact says whether the key's binary form tells keys apart, for the
	// key column types keyOIDs (exactKeys).
	keyOIDs []uint32
	exact   bool
	// sets are changeSets to reuse (changeSet.reset).
	sets sync.Pool
}

// changeSet returns an empty changeSet (changeSet.reset); put it back with
// done once its COPY has returned.
func (s *upsertState) changeSet(m *pgtype.Map, oids []uint32, keyIdx []int, ops, sizeHint int) *changeSet {
	cs, _ := s.sets.Get().(*changeSet)
	if cs == nil {
		cs = &changeSet{}
	}
	cs.reset(m, oids, keyIdx, ops, sizeHint)
	return cs
}

func (s *upsertState) done(cs *changeSet) {
	cs.release()
	s.sets.Put(cs)
}

// directBackoff bounds how many batches of a table skip the direct COPY
// after it met an existing key: a failed try costs the rows COPYed before
// the first existing key, the skipped ones what the staging costs more.
const directBackoff = 16

func (s *upsertState) tryDirect() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.noDirect {
		return false
	}
	if s.skip > 0 {
		s.skip--
		return false
	}
	return true
}

// directDone notes a batch COPYed into the table; directFailed one that
// met an existing key, or with never, a table that refuses COPY.
func (s *upsertState) directDone() {
	s.mu.Lock()
	s.backoff = 0
	s.mu.Unlock()
}

func (s *upsertState) directFailed(never bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.noDirect = s.noDirect || never
	s.backoff = min(max(1, 2*s.backoff), directBackoff)
	s.skip = s.backoff
}

// upsertStateOf is the state of the upsert table named table.
func (w *Writer) upsertStateOf(table string) *upsertState {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.upserts == nil {
		w.upserts = map[string]*upsertState{}
	}
	st := w.upserts[table]
	if st == nil {
		st = &upsertState{}
		w.upserts[table] = st
	}
	return st
}

// changes encodes the batch's records as a changeSet of rows of the column
// types oids; bad records are set aside. A tombstone without
// DeleteOnTombstone is passed to the mapper like any record (which decides
// whether it is a bad record).
func (w *Writer) changes(records []stream.Record, sink Sink, st *upsertState, m *pgtype.Map, oids []uint32) (*changeSet, []badRecord, error) {
	km := sink.Mapper.(KeyMapper)
	size := 0
	for i := range records {
		size += len(records[i].Key) + len(records[i].Value) + 8*len(oids)
	}
	cs := st.changeSet(m, oids, keyIndexes(sink.Table, sink.Upsert.Key), len(records), size)
	cs.g = guardOf(sink)
	var appendRow appendFunc
	if a, ok := sink.Mapper.(RowAppender); ok {
		appendRow = appendFuncOf(a)
	}
	var row []any
	bad, err := decodeRecords(records, w.cfg.MaxRecordBytes, func(r *stream.Record, i int) (err error) {
		seq := int64(i)
		switch {
		case sink.Upsert.DeleteOnTombstone && km.IsTombstone(r):
			var key []any
			if key, err = km.KeyRow(r); err == nil && cs.g.del >= 0 {
				err = cs.softDelete(r, seq, key, nil)
			} else if err == nil {
				err = cs.appendDelete(r, seq, key)
			}
		case appendRow != nil:
			err = cs.appendRow(r, seq, appendRow)
		default:
			if row, err = sink.Mapper.Row(r, row); err == nil {
				err = cs.appendValues(r, seq, row)
			}
		}
		return err
	})
	if err != nil {
		st.done(cs)
		return nil, nil, err // not about the record: the batch is retried
	}
	cs.finish()
	return cs, bad, nil
}

// upsertFast writes the batch's change set into the table directly or
// through the staging table (applyChanges). It asks for attemptIsolated
// when Postgres refused a row, or when a record stops the partition
// (OnError "stop").
func (w *Writer) upsertFast(ctx context.Context, b *stream.Batch, sink Sink, kids mappedChildren) (outcome, error) {
	spec := txSpec{batches: []*stream.Batch{b}, sink: sink, describe: true, kids: kids}
	return w.inBatchTx(ctx, spec, func(ctx context.Context, tx *batchTx) (outcome, error) {
		return w.upsertSet(ctx, tx, b.Records, sink)
	})
}

// upsertSet encodes records as sink's change set for tx.oids, the column
// types of sink.Table, and applies it (applyChanges). It asks for
// attemptIsolated (outcome.redo) when a record stops the partition
// (OnError "stop"), and for what applyChanges asks.
func (w *Writer) upsertSet(ctx context.Context, tx *batchTx, records []stream.Record, sink Sink) (outcome, error) {
	st := w.upsertStateOf(sink.Table.QualifiedName())
	encode := func(oids []uint32) (*changeSet, []badRecord, error) {
		return w.changes(records, sink, st, tx.Conn().TypeMap(), oids)
	}
	cs, bad, err := encode(tx.oids)
	if err != nil {
		return outcome{}, err
	}
	defer func() { st.done(cs) }()
	if len(bad) > 0 && w.cfg.OnError == OnErrorStop {
		return outcome{redo: attemptIsolated}, nil
	}
	res := outcome{bad: bad, rows: len(cs.ops)}
	start := time.Now()
	if res.redo, err = w.applyChanges(ctx, tx, sink.Table, sink.Upsert.Key, st, &cs, encode); err != nil || res.redo != 0 {
		return outcome{redo: res.redo}, err
	}
	res.copyDuration = time.Since(start)
	res.stale = cs.stale
	return res, nil
}

// changeEncoder encodes a batch's operations as a changeSet of rows of the
// column types oids (upsertState.changeSet), and returns the records it
// set aside.
type changeEncoder func(oids []uint32) (*changeSet, []badRecord, error)

// applyChanges writes the change set *csp into t, keyed by key, in tx,
// whose oids are t's column types: when the set has no delete and st says
// t's recent batches brought new keys, by a COPY into t (copyDirect),
// else through the session's staging table (applyStaged). It asks for
// attemptIsolated when Postgres refused a row, and for attemptFast when
// the set must be applied again by the general statement. encode builds
// the set again, replacing *csp, for a staging table of other types.
func (w *Writer) applyChanges(ctx context.Context, tx *batchTx, t schema.Table, key []string, st *upsertState, csp **changeSet, encode changeEncoder) (attempt, error) {
	cs := *csp
	if cs.kept == 0 {
		return 0, nil
	}
	if st.tryDirect() && cs.deletes == 0 {
		done, redo, err := copyDirect(ctx, tx, t, cs, st)
		if err != nil || redo != 0 || done {
			return redo, err
		}
	}
	return w.applyStaged(ctx, tx, t, key, st, csp, encode)
}

// copyDirect COPYs the change set, upserts only, into the table under a
// savepoint, and reports whether it did. A key that exists already rolls
// it back: the caller stages the set. A row Postgres refuses asks for
// attemptIsolated.
func copyDirect(ctx context.Context, tx *batchTx, t schema.Table, cs *changeSet, st *upsertState) (bool, attempt, error) {
	if _, err := tx.Exec(ctx, "SAVEPOINT kafka2pg_direct"); err != nil {
		return false, 0, fmt.Errorf("savepoint: %w", err)
	}
	_, err := pgcopy.CopyTyped(ctx, tx, t.Ident(), t.ColumnNames(), tx.oids, &changeSource{cs: cs})
	if err == nil {
		if _, err := tx.Exec(ctx, "RELEASE SAVEPOINT kafka2pg_direct"); err != nil {
			return false, 0, fmt.Errorf("release savepoint: %w", err)
		}
		st.directDone()
		return true, 0, nil
	}
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || Retryable(err) || ctx.Err() != nil {
		// The connection, the server, a deadlock: the write fails, and
		// is retried by a claim.
		return false, 0, fmt.Errorf("copy into %s: %w", t.QualifiedName(), err)
	}
	if _, err := tx.Exec(ctx, "ROLLBACK TO SAVEPOINT kafka2pg_direct"); err != nil {
		return false, 0, fmt.Errorf("rollback to savepoint: %w", err)
	}
	switch {
	case pgErr.Code == "23505": // unique_violation: a key exists
		st.directFailed(false)
	case rowError(err):
		return false, attemptIsolated, nil
	default:
		// Refused for the table, not its rows: COPY is not supported
		// under row-level security (0A000), for one.
		st.directFailed(pgErr.Code == "0A000")
	}
	return false, 0, nil
}

// upsertOneSQL is the statements that apply one operation: the insert (of
// every column, $1...) that updates the key's row when it exists, and the
// delete of a key (its columns, $1...).
func upsertOneSQL(t schema.Table, key []string) (insert, del string) {
	cols := t.ColumnNames()
	var where []string
	for i, c := range key {
		where = append(where, fmt.Sprintf("%s = $%d", pgx.Identifier{c}.Sanitize(), i+1))
	}
	params := make([]string, len(cols))
	for i := range cols {
		params[i] = fmt.Sprintf("$%d", i+1)
	}
	insert = fmt.Sprintf("INSERT INTO %s (%s) VALUES (%s) ON CONFLICT (%s) %s",
		t.QualifiedName(), schema.QuoteIdentList(cols), strings.Join(params, ", "), schema.QuoteIdentList(key), conflictUpdate(t, key))
	del = fmt.Sprintf("DELETE FROM %s WHERE %s", t.QualifiedName(), strings.Join(where, " AND "))
	return insert, del
}

// upsertIsolated applies the batch one operation at a time, in offset
// order, each under a savepoint.
func (w *Writer) upsertIsolated(ctx context.Context, b *stream.Batch, sink Sink) (outcome, error) {
	ops, bad, err := w.upsertOps(b.Records, sink)
	if err != nil {
		return outcome{}, err
	}
	t := sink.Table
	stale := 0
	items := upsertOneByOne(sink, ops, &stale, nil)
	spec := txSpec{batches: []*stream.Batch{b}, sink: sink, isolating: true}
	return w.inBatchTx(ctx, spec, func(ctx context.Context, tx *batchTx) (outcome, error) {
		stale = 0
		res, err := w.applyEach(ctx, tx, b, items, bad, "upsert into "+t.QualifiedName())
		res.stale = stale
		return res, err
	})
}

// oneOp is one record's operation in a batch applied operation by
// operation: apply runs its statements.
type oneOp struct {
	rec   *stream.Record
	apply func(ctx context.Context, tx pgx.Tx) error
	table string // the table its dead letter names, when not the sink's
}

// applyEach applies ops in order, each under a savepoint: those Postgres
// refuses join bad, the records the mapping set aside, as dead letters;
// with OnError "stop", it commits what comes before the first bad record
// and stops there. what names the statements in errors.
func (w *Writer) applyEach(ctx context.Context, tx *batchTx, b *stream.Batch, ops []oneOp, bad []badRecord, what string) (outcome, error) {
	firstBad := int64(-1)
	if len(bad) > 0 {
		firstBad = slices.MinFunc(bad, func(x, y badRecord) int { return int(x.rec.Offset - y.rec.Offset) }).rec.Offset
	}
	res := outcome{isolated: true}
	start := time.Now()
	for _, op := range ops {
		if w.cfg.OnError == OnErrorStop && firstBad >= 0 && op.rec.Offset > firstBad {
			break
		}
		if _, err := tx.Exec(ctx, "SAVEPOINT kafka2pg_op"); err != nil {
			return outcome{}, err
		}
		opErr := op.apply(ctx, tx)
		if opErr != nil && !rowError(opErr) {
			return outcome{}, fmt.Errorf("%s: %w", what, opErr)
		}
		if opErr != nil {
			if _, err := tx.Exec(ctx, "ROLLBACK TO SAVEPOINT kafka2pg_op; RELEASE SAVEPOINT kafka2pg_op"); err != nil {
				return outcome{}, err
			}
			bad = append(bad, badRecord{rec: op.rec, kind: sqlstateKind(opErr), err: opErr, table: op.table})
			if w.cfg.OnError == OnErrorStop {
				if firstBad < 0 || op.rec.Offset < firstBad {
					firstBad = op.rec.Offset
				}
				break
			}
			continue
		}
		if _, err := tx.Exec(ctx, "RELEASE SAVEPOINT kafka2pg_op"); err != nil {
			return outcome{}, err
		}
		res.rows++
	}
	res.copyDuration = time.Since(start)
	if w.cfg.OnError == OnErrorStop && firstBad >= 0 {
		first := bad[slices.IndexFunc(bad, func(x badRecord) bool { return x.rec.Offset == firstBad })]
		return w.stopAt(ctx, tx, b, res.rows, first)
	}
	res.bad = bad
	return res, nil
}
