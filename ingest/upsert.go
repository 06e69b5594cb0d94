package ingest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/kafka2pg/kafka2pg/schema"
	"github.com/kafka2pg/kafka2pg/stream"
)

// Upsert mode. The fast path copies the batch into a temporary staging
// table (every column nullable, plus the record's offset and whether it is a
// delete), then one statement keeps the last operation of each key by
// offset, deletes the keys whose last operation is a tombstone and
// INSERT ... ON CONFLICT DO UPDATEs the rest, all inside the fenced
// transaction. If Postgres refuses a row, the batch is redone operation by
// operation under savepoints, in offset order, so the refused ones become
// dead letters and the table ends as if the good ones had been applied one
// by one.

const (
	stageTable  = "kafka2pg_stage"
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
	ops := make([]upsertOp, 0, len(records))
	var bad []badRecord
	for i := range records {
		r := &records[i]
		if sink.Upsert.DeleteOnTombstone && km.IsTombstone(r) {
			key, err := km.KeyRow(r)
			if err != nil && !errors.Is(err, schema.ErrBadRecord) {
				return nil, nil, err
			}
			if err != nil {
				bad = append(bad, badRecordOf(r, err))
				continue
			}
			ops = append(ops, upsertOp{rec: r, values: key, del: true})
			continue
		}
		values, b, err := mapRecord(r, sink.Mapper, w.cfg.MaxRecordBytes, nil)
		switch {
		case err != nil:
			return nil, nil, err // not about the record: the batch is retried
		case b != nil:
			bad = append(bad, *b)
		default:
			ops = append(ops, upsertOp{rec: r, values: values})
		}
	}
	return ops, bad, nil
}

func badRecordOf(r *stream.Record, err error) badRecord {
	kind := schema.KindInvalidValue
	if de, ok := err.(*schema.DecodeError); ok {
		kind = de.Kind
	}
	return badRecord{rec: r, kind: kind, err: err}
}

func quotedList(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = pgx.Identifier{n}.Sanitize()
	}
	return strings.Join(q, ", ")
}

// upsertSQL is the statement that applies the staged batch.
func upsertSQL(t schema.Table, key []string) string {
	cols := t.ColumnNames()
	k := quotedList(key)
	var match []string
	for _, c := range key {
		q := pgx.Identifier{c}.Sanitize()
		match = append(match, fmt.Sprintf("t.%s = l.%s", q, q))
	}
	var set []string
	for _, c := range cols {
		if !slices.Contains(key, c) {
			q := pgx.Identifier{c}.Sanitize()
			set = append(set, fmt.Sprintf("%s = EXCLUDED.%s", q, q))
		}
	}
	conflict := "DO NOTHING"
	if len(set) > 0 {
		conflict = "DO UPDATE SET " + strings.Join(set, ", ")
	}
	return fmt.Sprintf(`WITH l AS (
    SELECT DISTINCT ON (%[1]s) * FROM %[2]s ORDER BY %[1]s, %[3]s DESC
), d AS (
    DELETE FROM %[4]s t USING l WHERE l.%[5]s AND %[6]s
)
INSERT INTO %[4]s (%[7]s)
SELECT %[7]s FROM l WHERE NOT l.%[5]s
ON CONFLICT (%[1]s) %[8]s`,
		k, stageTable, stageSeqCol, t.QualifiedName(), stageDelCol, strings.Join(match, " AND "), quotedList(cols), conflict)
}

func stageSQL(t schema.Table) string {
	var defs []string
	for _, c := range t.Columns {
		defs = append(defs, pgx.Identifier{c.Name}.Sanitize()+" "+c.Type)
	}
	defs = append(defs, stageSeqCol+" bigint NOT NULL", stageDelCol+" boolean NOT NULL")
	return fmt.Sprintf("CREATE TEMP TABLE %s (%s) ON COMMIT DROP", stageTable, strings.Join(defs, ", "))
}

// upsertFast stages the batch and applies it in one statement. It asks for
// attemptIsolated when Postgres refused a row, or when a record stops the
// partition (OnError "stop").
func (w *Writer) upsertFast(ctx context.Context, b *stream.Batch, sink Sink) (outcome, error) {
	ops, bad, err := w.upsertOps(b.Records, sink)
	if err != nil {
		return outcome{}, err
	}
	if len(bad) > 0 && w.cfg.OnError == OnErrorStop {
		return outcome{redo: attemptIsolated}, nil
	}
	spec := txSpec{batches: []*stream.Batch{b}, sink: sink}
	return w.inBatchTx(ctx, spec, func(ctx context.Context, tx *batchTx) (outcome, error) {
		res := outcome{bad: bad}
		if len(ops) == 0 {
			return res, nil
		}
		if _, err := tx.Exec(ctx, stageSQL(sink.Table)); err != nil {
			return outcome{}, fmt.Errorf("create the staging table: %w", err)
		}
		keyIdx := keyIndexes(sink.Table, sink.Upsert.Key)
		rows := make([][]any, len(ops))
		for i, op := range ops {
			row := make([]any, len(sink.Table.Columns)+2)
			if op.del {
				for j, ki := range keyIdx {
					row[ki] = op.values[j]
				}
			} else {
				copy(row, op.values)
			}
			row[len(row)-2], row[len(row)-1] = op.rec.Offset, op.del
			rows[i] = row
		}
		copyStart := time.Now()
		cols := append(sink.Table.ColumnNames(), stageSeqCol, stageDelCol)
		if _, err := CopyFrom(ctx, tx, pgx.Identifier{stageTable}, cols, pgx.CopyFromRows(rows)); err != nil {
			if rowError(err) {
				return outcome{redo: attemptIsolated}, nil
			}
			return outcome{}, fmt.Errorf("copy into the staging table: %w", err)
		}
		_, err := tx.Exec(ctx, upsertSQL(sink.Table, sink.Upsert.Key))
		res.copyDuration = time.Since(copyStart)
		if rowError(err) {
			return outcome{redo: attemptIsolated}, nil
		}
		if err != nil {
			return outcome{}, fmt.Errorf("upsert into %s: %w", sink.Table.QualifiedName(), err)
		}
		res.rows = len(ops)
		return res, nil
	})
}

// upsertOneSQL is the statements that apply one operation: the insert (of
// every column, $1...) that updates the key's row when it exists, and the
// delete of a key (its columns, $1...).
func upsertOneSQL(t schema.Table, key []string) (insert, del string) {
	cols := t.ColumnNames()
	var set, where []string
	for _, c := range cols {
		if !slices.Contains(key, c) {
			q := pgx.Identifier{c}.Sanitize()
			set = append(set, fmt.Sprintf("%s = EXCLUDED.%s", q, q))
		}
	}
	for i, c := range key {
		where = append(where, fmt.Sprintf("%s = $%d", pgx.Identifier{c}.Sanitize(), i+1))
	}
	conflict := "DO NOTHING"
	if len(set) > 0 {
		conflict = "DO UPDATE SET " + strings.Join(set, ", ")
	}
	params := make([]string, len(cols))
	for i := range cols {
		params[i] = fmt.Sprintf("$%d", i+1)
	}
	insert = fmt.Sprintf("INSERT INTO %s (%s) VALUES (%s) ON CONFLICT (%s) %s",
		t.QualifiedName(), quotedList(cols), strings.Join(params, ", "), quotedList(key), conflict)
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
	insert, del := upsertOneSQL(t, sink.Upsert.Key)

	spec := txSpec{batches: []*stream.Batch{b}, sink: sink, isolating: true}
	return w.inBatchTx(ctx, spec, func(ctx context.Context, tx *batchTx) (outcome, error) {
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
			var opErr error
			if op.del {
				_, opErr = tx.Exec(ctx, del, op.values...)
			} else {
				_, opErr = tx.Exec(ctx, insert, op.values...)
			}
			if opErr != nil && !rowError(opErr) {
				return outcome{}, fmt.Errorf("upsert into %s: %w", t.QualifiedName(), opErr)
			}
			if opErr != nil {
				if _, err := tx.Exec(ctx, "ROLLBACK TO SAVEPOINT kafka2pg_op; RELEASE SAVEPOINT kafka2pg_op"); err != nil {
					return outcome{}, err
				}
				bad = append(bad, badRecord{rec: op.rec, kind: sqlstateKind(opErr), err: opErr})
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
	})
}
