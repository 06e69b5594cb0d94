package ingest

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/kafka2pg/kafka2pg/decode"
	"github.com/kafka2pg/kafka2pg/pgcopy"
	"github.com/kafka2pg/kafka2pg/schema"
	"github.com/kafka2pg/kafka2pg/stream"
)

// Children tables. A sink's Children map an array of each record to rows
// of child tables (decode.ChildMapper), written in the batch's
// transaction with the parent's rows, so a parent and its children commit
// together or not at all:
//
//   - at the start of each attempt, every record's children are mapped;
//     a record with a bad element is marked unreadable (like a record its
//     filter cannot evaluate), so every path sets it aside as a bad record
//     and neither its parent row nor its children are written;
//   - the fast paths write the parents as usual, then writeChildren, in
//     the same transaction, writes the children of the records the body
//     wrote: in append mode a COPY of them; in upsert mode, and for change
//     events, one DELETE of the children of every key the batch wrote (an
//     upsert or a delete), then a COPY of the children of each key's last
//     record, so a record delivered again replaces its children; a
//     truncate truncates the child tables;
//   - the isolating paths apply each record, parent and children, under
//     a savepoint of its own (childrenIsolated, changesOneByOne), so a row
//     Postgres refuses, parent or child, makes the whole record a dead
//     letter; a replay does the same with each letter.
//
// The children of a change sink are bound to the parent's table once its
// events have told it (Child.Bind, changeTable): their rows start with
// its primary key.

// Child is a child table of a sink.
type Child struct {
	// Table is the child table: the parent's columns (the upsert key,
	// or the record's topic, partition and offset in append mode), then
	// the element's index and columns.
	Table schema.Table
	// Mapper builds a record's child rows.
	Mapper ChildMapper
	// Bind, on a sink of change events (Changes), whose table and key
	// the events tell, builds the child of the parent's table once it is
	// known: Table and Mapper are zero until then. The writer binds the
	// children when the parent's table is created or changes.
	Bind func(parent schema.Table) (Child, error)
}

// bindChildren is children bound to the parent's table t (Child.Bind);
// children without Bind as they are.
func bindChildren(children []Child, t schema.Table) ([]Child, error) {
	out := make([]Child, len(children))
	for i, c := range children {
		out[i] = c
		if c.Bind == nil {
			continue
		}
		bound, err := c.Bind(t)
		if err != nil {
			return nil, err
		}
		bound.Bind = c.Bind
		out[i] = bound
	}
	return out, nil
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

// childOp is what a record does to the children of a key.
type childOp struct {
	rec *stream.Record
	i   int // rec's index in its batch
	// parent are the values the children's rows start with: the key, or
	// the record's coordinates in append mode.
	parent []any
	// del deletes the key's children and writes none; truncate empties
	// the child tables.
	del, truncate bool
}

// childOpsOf are r's operations on children, in order. A change event
// has none (a message, a tombstone), one, or two (an update that changed
// its key deletes the children of the old key). An error is the
// record's mapping's, which the write path meets too.
func childOpsOf(r *stream.Record, sink Sink, i int) ([]childOp, error) {
	if sink.Changes == nil {
		parent, err := parentValues(r, sink)
		if err != nil {
			return nil, err
		}
		return []childOp{{rec: r, i: i, parent: parent, del: isDelete(r, sink)}}, nil
	}
	var ch stream.Change
	if err := sink.Changes.Decode(r, &ch); err != nil {
		return nil, err
	}
	ops := changeChildOps(r, &ch)
	for k := range ops {
		ops[k].i = i
	}
	return ops, nil
}

// rows are the rows of c that op writes: none for a delete; keep says
// the source left the array out (decode.ErrChildrenUnavailable), so the
// key's children stay as they are.
func (op childOp) rows(c Child) (rows [][]any, keep bool, err error) {
	if op.del {
		return nil, false, nil
	}
	rows, err = c.Mapper.Rows(op.rec, op.parent)
	if errors.Is(err, decode.ErrChildrenUnavailable) {
		return nil, true, nil
	}
	return rows, false, err
}

// changeChildOps are the operations on children of the change ch of r.
// The key's values go to pgx as queries' arguments and COPY rows
// (pgcopy.PgxValues).
func changeChildOps(r *stream.Record, ch *stream.Change) []childOp {
	switch ch.Op {
	case stream.OpTruncate:
		return []childOp{{rec: r, truncate: true}}
	case stream.OpDelete:
		return []childOp{{rec: r, parent: pgcopy.PgxValues(ch.Key), del: true}}
	case stream.OpUpsert:
		var ops []childOp
		if ch.OldKey != nil {
			ops = append(ops, childOp{rec: r, parent: pgcopy.PgxValues(ch.OldKey), del: true})
		}
		return append(ops, childOp{rec: r, parent: pgcopy.PgxValues(ch.Key)})
	}
	return nil
}

// keyed reports whether a sink's children belong to a key (upsert and
// change sinks), which a later record replaces, rather than to a record.
func keyed(sink Sink) bool { return sink.Upsert != nil || sink.Changes != nil }

// mappedChildren are the child rows checkChildren mapped, by the index of
// their record in the batch, then by child: writeChildren writes them
// rather than mapping the records again. A record's entry is nil when
// none were mapped (it is unreadable, its mapping fails, it writes no
// children).
type mappedChildren [][]childRows

// childRows are the rows of one child of one record's operation (its one
// that writes children); keep: the source left the array out
// (decode.ErrChildrenUnavailable). mapped is false for a child not bound
// yet.
type childRows struct {
	rows         [][]any
	keep, mapped bool
}

// rows are the rows of child ci, c, that op writes: those checkChildren
// mapped, else op's own (childOp.rows).
func (m mappedChildren) rows(op childOp, ci int, c Child) ([][]any, bool, error) {
	if !op.del && op.i < len(m) && m[op.i] != nil && m[op.i][ci].mapped {
		return m[op.i][ci].rows, m[op.i][ci].keep, nil
	}
	return op.rows(c)
}

// checkChildren is b with the records whose children do not fit marked
// unreadable with the reason, so that every path sets them aside whole;
// b itself when no record's children are bad. It returns the child rows
// of the others too.
func checkChildren(b *stream.Batch, sink Sink) (*stream.Batch, mappedChildren, error) {
	if len(sink.Children) == 0 {
		return b, nil, nil
	}
	var out *stream.Batch
	kids := make(mappedChildren, len(b.Records))
	for i := range b.Records {
		rows, reason, err := childrenOf(&b.Records[i], sink)
		if err != nil {
			return b, nil, err
		}
		if reason == nil {
			kids[i] = rows
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
		return b, kids, nil
	}
	return out, kids, nil
}

// childrenOf maps r's children: the rows of each child of its operation
// that writes children, or why they do not fit (reason, an error
// wrapping decode.ErrBadRecord). rows is nil when r has none to map: it
// is unreadable already, it writes no children (a delete, a truncate),
// or its mapping fails, which the write path meets and handles; a child
// not bound yet is left unmapped. err is not about the record.
func childrenOf(r *stream.Record, sink Sink) (rows []childRows, reason, err error) {
	if r.Unreadable != nil {
		return nil, nil, nil
	}
	ops, oerr := childOpsOf(r, sink, 0)
	if oerr != nil {
		return nil, nil, nil
	}
	for _, op := range ops {
		if op.del || op.truncate {
			continue
		}
		if rows != nil {
			return nil, nil, nil // two that write: mapped when written
		}
		rows = make([]childRows, len(sink.Children))
		for ci, c := range sink.Children {
			if c.Mapper == nil {
				continue // not bound yet: no table, so no change to check
			}
			cr, keep, err := op.rows(c)
			if err == nil {
				rows[ci] = childRows{rows: cr, keep: keep, mapped: true}
				continue
			}
			bad, err := classify(r, err)
			if err != nil {
				return nil, nil, err
			}
			return nil, bad.err, nil
		}
	}
	return rows, nil, nil
}

// writeChildren writes, in tx, the children of the records of b that the
// body wrote: all but bad, from kids where checkChildren mapped them. It
// asks for attemptIsolated when Postgres refuses a child row.
func (w *Writer) writeChildren(ctx context.Context, tx pgx.Tx, b *stream.Batch, sink Sink, bad []badRecord, kids mappedChildren) (attempt, error) {
	skip := make(map[int64]bool, len(bad))
	for _, x := range bad {
		skip[x.rec.Offset] = true
	}
	var ops []childOp
	for i := range b.Records {
		r := &b.Records[i]
		if skip[r.Offset] || r.Unreadable != nil {
			continue
		}
		more, err := childOpsOf(r, sink, i)
		if err != nil {
			return 0, fmt.Errorf("children of %s/%d@%d: %w", r.Topic, r.Partition, r.Offset, err)
		}
		ops = append(ops, more...)
	}
	for ci, c := range sink.Children {
		if c.Mapper == nil {
			continue // not bound yet: the parent's table does not exist either
		}
		if redo, err := writeChildTable(ctx, tx, c, ci, ops, keyed(sink), kids); err != nil || redo != 0 {
			return redo, err
		}
	}
	return 0, nil
}

// writeChildTable writes the child table of c for ops, in order: with
// keyed, the children of each key's last operation replace the key's, in
// one DELETE of the keys and one COPY; without, every operation's
// children are copied. A truncate empties the table and voids the
// operations before it. An operation whose array the source left out
// (decode.ErrChildrenUnavailable) leaves the key's children as they are.
func writeChildTable(ctx context.Context, tx pgx.Tx, c Child, ci int, ops []childOp, keyed bool, kids mappedChildren) (attempt, error) {
	type keyRows struct {
		key  []any
		rows [][]any
	}
	truncate := false
	var order []string
	last := map[string]keyRows{}
	var rows [][]any
	for _, op := range ops {
		if op.truncate {
			truncate, order, last, rows = true, nil, map[string]keyRows{}, nil
			continue
		}
		cr, keep, err := kids.rows(op, ci, c)
		if err != nil {
			return 0, fmt.Errorf("children of %s/%d@%d: %w", op.rec.Topic, op.rec.Partition, op.rec.Offset, err)
		}
		if keep {
			continue
		}
		if !keyed {
			rows = append(rows, cr...)
			continue
		}
		k := keyString(op.parent)
		if _, seen := last[k]; !seen {
			order = append(order, k)
		}
		last[k] = keyRows{key: op.parent, rows: cr}
	}
	if truncate {
		if _, err := tx.Exec(ctx, truncateSQL(c.Table)); err != nil {
			return 0, fmt.Errorf("truncate %s: %w", c.Table.QualifiedName(), err)
		}
	}
	if len(order) > 0 {
		keys := make([][]any, len(order))
		for i, k := range order {
			keys[i] = last[k].key
			rows = append(rows, last[k].rows...)
		}
		if err := deleteChildren(ctx, tx, c.Table, len(keys[0]), keys); err != nil {
			return 0, err
		}
	}
	if len(rows) == 0 {
		return 0, nil
	}
	if _, err := pgcopy.CopyFrom(ctx, tx, c.Table.Ident(), c.Table.ColumnNames(), pgx.CopyFromRows(rows)); err != nil {
		if rowError(err) {
			return attemptIsolated, nil
		}
		return 0, fmt.Errorf("copy into %s: %w", c.Table.QualifiedName(), err)
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
		return upsertOneByOne(sink, ops, nil, func(ctx context.Context, tx pgx.Tx, rec *stream.Record) error {
			return replaceChildren(ctx, tx, rec, sink)
		}), bad, nil
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
			return replaceChildren(ctx, tx, row.rec, sink)
		}})
	}
	return items, bad, nil
}

// applyChildOps applies ops, one record's operations on children, in
// tx: a truncate empties the child tables; any other replaces the key's
// children (keyed) or adds the record's.
func applyChildOps(ctx context.Context, tx pgx.Tx, sink Sink, ops []childOp) error {
	for _, op := range ops {
		for _, c := range sink.Children {
			if c.Mapper == nil {
				continue // not bound yet: the parent's table does not exist either
			}
			if op.truncate {
				if _, err := tx.Exec(ctx, truncateSQL(c.Table)); err != nil {
					return err
				}
				continue
			}
			rows, keep, err := op.rows(c)
			if err != nil {
				return err
			}
			if keep {
				continue // the children stay as they are
			}
			if keyed(sink) {
				q, args := deleteChildrenSQL(c.Table, len(op.parent), [][]any{op.parent})
				if _, err := tx.Exec(ctx, q, args...); err != nil {
					return err
				}
			}
			if len(rows) == 0 {
				continue
			}
			if _, err := pgcopy.CopyFrom(ctx, tx, c.Table.Ident(), c.Table.ColumnNames(), pgx.CopyFromRows(rows)); err != nil {
				return err
			}
		}
	}
	return nil
}

// replaceChildren writes r's children in tx (applyChildOps).
func replaceChildren(ctx context.Context, tx pgx.Tx, r *stream.Record, sink Sink) error {
	ops, err := childOpsOf(r, sink, 0)
	if err != nil {
		return err
	}
	return applyChildOps(ctx, tx, sink, ops)
}
