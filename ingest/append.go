package ingest

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/kafka2pg/kafka2pg/pgcopy"
	"github.com/kafka2pg/kafka2pg/stream"
)

// The bodies of an append sink's attempts (attempt, tx.go).

// appendFast copies the rows as the mapping builds them; with unchecked
// set (uncheckedFor), through it. It asks for attemptChecked when Postgres
// refused a row of the unchecked COPY, and for attemptIsolated when it
// refused a row of a checked one, or when a record stops the partition
// (OnError "stop").
func (w *Writer) appendFast(ctx context.Context, b *stream.Batch, sink Sink, unchecked RowAppender, kids mappedChildren) (outcome, error) {
	spec := txSpec{batches: []*stream.Batch{b}, sink: sink, describe: true, kids: kids}
	return w.inBatchTx(ctx, spec, func(ctx context.Context, tx *batchTx) (outcome, error) {
		src := newRowSource(b.Records, sink.Mapper, unchecked, w.cfg.MaxRecordBytes)
		var res outcome
		if len(b.Records) > 0 {
			copyStart := time.Now()
			n, err := pgcopy.CopyTyped(ctx, tx, sink.Table.Ident(), sink.Table.ColumnNames(), tx.oids, src)
			res.copyDuration = time.Since(copyStart)
			if src.err != nil {
				// The mapping failed, not Postgres (which only reports that
				// the COPY was cancelled): say why, keeping ErrTableChanged.
				err = src.err
			}
			if rowError(err) && unchecked != nil {
				w.recheck(b.Topic)
				return outcome{redo: attemptChecked}, nil
			}
			if unchecked == nil {
				w.checked(b.Topic, sink.Mapper, slices.ContainsFunc(src.bad, badRecord.refusedByMapping))
			}
			if rowError(err) {
				return outcome{redo: attemptIsolated}, nil
			}
			if err != nil {
				return outcome{}, fmt.Errorf("copy into %s: %w", sink.Table.QualifiedName(), err)
			}
			res.rows = int(n)
		}
		if len(src.bad) > 0 && w.cfg.OnError == OnErrorStop {
			return outcome{redo: attemptIsolated}, nil // commit only what comes before the first bad record
		}
		res.bad = src.bad
		return res, nil
	})
}

// appendIsolated redoes a batch whose fast path met bad rows: it finds
// every row Postgres refuses, then applies OnError.
func (w *Writer) appendIsolated(ctx context.Context, b *stream.Batch, sink Sink) (outcome, error) {
	rows, bad, err := materialize(b.Records, sink.Mapper, w.cfg.MaxRecordBytes)
	if err != nil {
		return outcome{}, err
	}
	spec := txSpec{batches: []*stream.Batch{b}, sink: sink, isolating: true}
	return w.inBatchTx(ctx, spec, func(ctx context.Context, tx *batchTx) (outcome, error) {
		if _, err := tx.Exec(ctx, "SAVEPOINT kafka2pg_batch"); err != nil {
			return outcome{}, fmt.Errorf("savepoint: %w", err)
		}
		copyStart := time.Now()
		refused, copied, err := copyIsolating(ctx, tx, sink.Table, rows)
		copyDuration := time.Since(copyStart)
		if err != nil {
			return outcome{}, fmt.Errorf("copy into %s: %w", sink.Table.QualifiedName(), err)
		}
		bad := append(bad, refused...)
		slices.SortFunc(bad, func(x, y badRecord) int { return cmp.Compare(x.rec.Offset, y.rec.Offset) })
		if w.cfg.OnError == OnErrorStop && len(bad) > 0 {
			return w.appendPrefix(ctx, tx, b, sink, rows, bad[0])
		}
		return outcome{rows: copied, copyDuration: copyDuration, isolated: true, bad: bad}, nil
	})
}

// appendPrefix is the end of appendIsolated with OnError "stop": it undoes
// the copy, keeps only the rows before the first bad record (all good:
// the first bad one is the earliest), moves next_offset back to it, and
// stops.
func (w *Writer) appendPrefix(ctx context.Context, tx *batchTx, b *stream.Batch, sink Sink, rows []mappedRow, first badRecord) (outcome, error) {
	if _, err := tx.Exec(ctx, "ROLLBACK TO SAVEPOINT kafka2pg_batch"); err != nil {
		return outcome{}, fmt.Errorf("rollback to savepoint: %w", err)
	}
	var prefix [][]any
	for _, r := range rows {
		if r.rec.Offset < first.rec.Offset {
			prefix = append(prefix, r.values)
		}
	}
	if len(prefix) > 0 {
		if _, err := pgcopy.CopyFrom(ctx, tx, sink.Table.Ident(), sink.Table.ColumnNames(), pgx.CopyFromRows(prefix)); err != nil {
			return outcome{}, fmt.Errorf("copy into %s: %w", sink.Table.QualifiedName(), err)
		}
	}
	return w.stopAt(ctx, tx, b, len(prefix), first)
}

// stopAt ends the body of a write that stops at the bad record first, with
// rows rows before it written: the fence above holds the row lock, and
// next_offset moves back to first, so nothing past it is committed.
func (w *Writer) stopAt(ctx context.Context, tx *batchTx, b *stream.Batch, rows int, first badRecord) (outcome, error) {
	if err := w.offs.Rewind(ctx, tx, b, first.rec.Offset); err != nil {
		return outcome{}, fmt.Errorf("stop at offset %d: %w", first.rec.Offset, err)
	}
	return outcome{rows: rows, stop: &stream.StopError{Topic: b.Topic, Partition: b.Partition, Offset: first.rec.Offset,
		Kind: first.kind, Err: first.err}}, nil
}
