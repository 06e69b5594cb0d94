package ingest

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/kafka2pg/kafka2pg/pgcopy"
	"github.com/kafka2pg/kafka2pg/schema"
	"github.com/kafka2pg/kafka2pg/stream"
)

// Children tables. A sink's Children map an array of each record to rows
// of child tables (decode.ChildMapper), written in the batch's
// transaction with the parent's rows, so a parent and its children commit
// together or not at all:
//
//   - before any attempt, every record's children are mapped; a record
//     with a bad element is marked unreadable (like a record its filter
//     cannot evaluate), so every path sets it aside as a bad record and
//     neither its parent row nor its children are written;
//   - the fast paths write the parents as usual, then writeChildren, in
//     the same transaction, writes the children of the records the body
//     wrote: in append mode a COPY of them; in upsert mode one DELETE of
//     the children of every key the batch wrote (an upsert or a delete),
//     then a COPY of the children of each key's last record, so a record
//     delivered again replaces its children;
//   - the isolating path applies each record, parent and children, under
//     a savepoint of its own (childrenIsolated), so a row Postgres
//     refuses, parent or child, makes the whole record a dead letter.

// Child is a child table of a sink.
type Child struct {
	// Table is the child table: the parent's columns (the upsert key,
	// or the record's topic, partition and offset in append mode), then
	// the element's index and columns.
	Table schema.Table
	// Mapper builds a record's child rows.
	Mapper ChildMapper
}

// ChildMapper builds the rows of a child table from a record
// (decode.ChildMapper). Rows' error wraps decode.ErrBadRecord for a record
// whose children do not fit, which makes the whole record a bad record;
// any other error aborts the batch. Safe for concurrent use.
type ChildMapper interface {
	// Rows returns r's child rows, each starting with parent, the
	// parent's values: the upsert key (KeyMapper.KeyRow), or the record's
	// topic, partition and offset in append mode.
	Rows(r *stream.Record, parent []any) ([][]any, error)
}

// parentValues are the values r's child rows start with: its key in
// upsert mode, its coordinates in append mode.
func parentValues(r *stream.Record, sink Sink) ([]any, error) {
	if sink.Upsert != nil {
		return sink.Mapper.(KeyMapper).KeyRow(r)
	}
	return []any{r.Topic, r.Partition, r.Offset}, nil
}

// isDelete reports whether r deletes its key's row (and children).
func isDelete(r *stream.Record, sink Sink) bool {
	return sink.Upsert != nil && sink.Upsert.DeleteOnTombstone && sink.Mapper.(KeyMapper).IsTombstone(r)
}

// checkChildren is b with the records whose children do not fit marked
// unreadable with the reason, so that every path sets them aside whole;
// b itself when no record's children are bad.
func checkChildren(b *stream.Batch, sink Sink) (*stream.Batch, error) {
	if len(sink.Children) == 0 {
		return b, nil
	}
	var out *stream.Batch
	for i := range b.Records {
		reason, err := childrenError(&b.Records[i], sink)
		if err != nil {
			return b, err
		}
		if reason == nil {
			continue
		}
		if out == nil {
			cp := *b
			cp.Records = append([]stream.Record(nil), b.Records...)
			out = &cp
		}
		out.Records[i].Unreadable = reason
	}
	if out == nil {
		return b, nil
	}
	return out, nil
}

// childrenError is why r's children do not fit (an error wrapping
// decode.ErrBadRecord), nil when they do or when r has none to check: it
// is unreadable already, a delete, or its parent values cannot be read,
// which the parent's mapping refuses. err is not about the record.
func childrenError(r *stream.Record, sink Sink) (reason, err error) {
	if r.Unreadable != nil || isDelete(r, sink) {
		return nil, nil
	}
	parent, perr := parentValues(r, sink)
	if perr != nil {
		return nil, nil
	}
	for _, c := range sink.Children {
		if _, err := c.Mapper.Rows(r, parent); err != nil {
			bad, err := classify(r, err)
			if err != nil {
				return nil, err
			}
			return bad.err, nil
		}
	}
	return nil, nil
}

// writeChildren writes, in tx, the children of the records of b that the
// body wrote: all but bad. It asks for attemptIsolated when Postgres
// refuses a child row.
func (w *Writer) writeChildren(ctx context.Context, tx pgx.Tx, b *stream.Batch, sink Sink, bad []badRecord) (attempt, error) {
	skip := make(map[int64]bool, len(bad))
	for _, x := range bad {
		skip[x.rec.Offset] = true
	}
	type written struct {
		rec    *stream.Record
		parent []any
		del    bool
	}
	var recs []written
	last := map[string]int{} // upsert: the last record of each key, by its index in recs
	for i := range b.Records {
		r := &b.Records[i]
		if skip[r.Offset] || r.Unreadable != nil {
			continue
		}
		parent, err := parentValues(r, sink)
		if err != nil {
			return 0, fmt.Errorf("children of %s/%d@%d: parent key: %w", r.Topic, r.Partition, r.Offset, err)
		}
		recs = append(recs, written{rec: r, parent: parent, del: isDelete(r, sink)})
		if sink.Upsert != nil {
			last[keyString(parent)] = len(recs) - 1
		}
	}
	for _, c := range sink.Children {
		var rows [][]any
		var keys [][]any
		for i, x := range recs {
			if sink.Upsert != nil {
				if last[keyString(x.parent)] != i {
					continue // a later record of the key replaces it
				}
				keys = append(keys, x.parent)
			}
			if x.del {
				continue
			}
			cr, err := c.Mapper.Rows(x.rec, x.parent)
			if err != nil {
				return 0, fmt.Errorf("children of %s/%d@%d: %w", x.rec.Topic, x.rec.Partition, x.rec.Offset, err)
			}
			rows = append(rows, cr...)
		}
		if sink.Upsert != nil {
			if err := deleteChildren(ctx, tx, c.Table, len(sink.Upsert.Key), keys); err != nil {
				return 0, err
			}
		}
		if len(rows) == 0 {
			continue
		}
		if _, err := pgcopy.CopyFrom(ctx, tx, c.Table.Ident(), c.Table.ColumnNames(), pgx.CopyFromRows(rows)); err != nil {
			if rowError(err) {
				return attemptIsolated, nil
			}
			return 0, fmt.Errorf("copy into %s: %w", c.Table.QualifiedName(), err)
		}
	}
	return 0, nil
}

// deleteKeysPerStatement bounds the keys of one DELETE, well under
// Postgres' 65,535 parameters for keys of many columns.
const deleteKeysPerStatement = 1000

// deleteChildren deletes the rows of t whose first n columns (the
// parent's key) are one of keys, in statements of up to
// deleteKeysPerStatement keys.
func deleteChildren(ctx context.Context, tx pgx.Tx, t schema.Table, n int, keys [][]any) error {
	for len(keys) > 0 {
		chunk := keys[:min(len(keys), deleteKeysPerStatement)]
		keys = keys[len(chunk):]
		q, args := deleteChildrenSQL(t, n, chunk)
		if _, err := tx.Exec(ctx, q, args...); err != nil {
			return fmt.Errorf("delete children from %s: %w", t.QualifiedName(), err)
		}
	}
	return nil
}

// deleteChildrenSQL is the DELETE of the rows of t whose first n columns
// are one of keys: WHERE (k1, k2) IN (VALUES ($1::type, $2::type), ...).
func deleteChildrenSQL(t schema.Table, n int, keys [][]any) (string, []any) {
	cols := t.ColumnNames()[:n]
	var sb strings.Builder
	fmt.Fprintf(&sb, "DELETE FROM %s WHERE (%s) IN (VALUES ", t.QualifiedName(), schema.QuoteIdentList(cols))
	args := make([]any, 0, n*len(keys))
	for i, k := range keys {
		if i > 0 {
			sb.WriteString(", ")
		}
		sb.WriteByte('(')
		for j := range n {
			if j > 0 {
				sb.WriteString(", ")
			}
			args = append(args, k[j])
			fmt.Fprintf(&sb, "$%d::%s", len(args), t.Columns[j].Type)
		}
		sb.WriteByte(')')
	}
	sb.WriteByte(')')
	return sb.String(), args
}

// keyString tells the keys of a batch apart: its values with their Go
// types. Two keys Postgres holds equal but that differ here (numerics of
// another scale) both get their children copied, which the child table's
// primary key refuses; the isolating path then applies them in order.
func keyString(key []any) string {
	var sb strings.Builder
	for _, v := range key {
		fmt.Fprintf(&sb, "%T:%v\x00", v, v)
	}
	return sb.String()
}

// childrenIsolated writes a batch of a sink with children record by
// record, in offset order, each record's parent and children under one
// savepoint: a row Postgres refuses, parent or child, makes the whole
// record a bad record. OnError "stop" commits what comes before the first
// bad record (applyEach).
func (w *Writer) childrenIsolated(ctx context.Context, b *stream.Batch, sink Sink) (outcome, error) {
	items, bad, err := w.childrenOps(b.Records, sink)
	if err != nil {
		return outcome{}, err
	}
	spec := txSpec{batches: []*stream.Batch{b}, sink: sink, isolating: true}
	return w.inBatchTx(ctx, spec, func(ctx context.Context, tx *batchTx) (outcome, error) {
		return w.applyEach(ctx, tx, b, items, bad, "write "+sink.Table.QualifiedName()+" and its children")
	})
}

// childrenOps are the operations of records of a sink with children, one
// a record, each writing (or deleting) the record's row and replacing its
// children; the records the mapping refuses are set aside. The caller
// has marked the records whose children do not fit (childrenError).
func (w *Writer) childrenOps(records []stream.Record, sink Sink) ([]oneOp, []badRecord, error) {
	t := sink.Table
	var items []oneOp
	if sink.Upsert != nil {
		ops, bad, err := w.upsertOps(records, sink)
		if err != nil {
			return nil, nil, err
		}
		insert, del := upsertOneSQL(t, sink.Upsert.Key)
		for _, op := range ops {
			q := insert
			if op.del {
				q = del
			}
			items = append(items, oneOp{rec: op.rec, apply: func(ctx context.Context, tx pgx.Tx) error {
				if _, err := tx.Exec(ctx, q, op.values...); err != nil {
					return err
				}
				return w.replaceChildren(ctx, tx, op.rec, sink, op.del)
			}})
		}
		return items, bad, nil
	}
	rows, bad, err := materialize(records, sink.Mapper, w.cfg.MaxRecordBytes)
	if err != nil {
		return nil, nil, err
	}
	params := make([]string, len(t.Columns))
	for i := range params {
		params[i] = fmt.Sprintf("$%d", i+1)
	}
	insert := fmt.Sprintf("INSERT INTO %s (%s) VALUES (%s)", t.QualifiedName(), schema.QuoteIdentList(t.ColumnNames()), strings.Join(params, ", "))
	for _, row := range rows {
		items = append(items, oneOp{rec: row.rec, apply: func(ctx context.Context, tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, insert, row.values...); err != nil {
				return err
			}
			return w.replaceChildren(ctx, tx, row.rec, sink, false)
		}})
	}
	return items, bad, nil
}

// replaceChildren writes r's children in tx: in upsert mode it deletes
// its key's children first; with del, it writes none.
func (w *Writer) replaceChildren(ctx context.Context, tx pgx.Tx, r *stream.Record, sink Sink, del bool) error {
	parent, err := parentValues(r, sink)
	if err != nil {
		return err
	}
	for _, c := range sink.Children {
		if sink.Upsert != nil {
			if err := deleteChildren(ctx, tx, c.Table, len(parent), [][]any{parent}); err != nil {
				return err
			}
		}
		if del {
			continue
		}
		rows, err := c.Mapper.Rows(r, parent)
		if err != nil {
			return err
		}
		if len(rows) == 0 {
			continue
		}
		if _, err := pgcopy.CopyFrom(ctx, tx, c.Table.Ident(), c.Table.ColumnNames(), pgx.CopyFromRows(rows)); err != nil {
			return err
		}
	}
	return nil
}
