package ingest

import (
	"bytes"
	"cmp"
	"context"
	"encoding/binary"
	"fmt"
	"math/big"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/kafka2pg/kafka2pg/pgcopy"
	"github.com/kafka2pg/kafka2pg/schema"
	"github.com/kafka2pg/kafka2pg/stream"
)

// Soft deletes and the version guard of upsert and change sinks
// (Sink.Deleted, Sink.Version).
//
// A soft delete marks the key's row: its Deleted column takes the
// record's Kafka timestamp (a timestamptz column) or true (a boolean
// one), so that a replay of the same records writes the same table. An
// upsert of the key writes NULL (or false) there, which clears the mark:
// the sink's mapper fills the column in every row it maps (LiveMapper
// adds it to one that does not know it; a change sink's decoder fills it
// itself, cdc.Config.Deleted). A marked row keeps the columns of the
// key's last upsert, also when that upsert is in the delete's batch: the
// changeSet keeps it, and the upserts apply before the deletes.
//
// The version guard applies a change only when its version is greater
// than the stored row's; an equal version is a change already applied.
// It lives in the statements themselves (ON CONFLICT DO UPDATE ... WHERE),
// so that it holds against every writer of the table, and in the
// changeSet, which keeps the newest version of each key of a batch, not
// the last by offset. A delete keeps its version in the marked row, so
// an older upsert cannot bring the key back; with a version, a delete of
// a key that has no row inserts one (the key, the mark and the version,
// the other columns NULL) for the same reason. A change without a version (NULL:
// a tombstone, a record whose version is null) never overwrites a row
// that has one, but for a tombstone, which marks the row and keeps its
// version. Skipped changes are counted (outcome.stale, BatchTrace.Stale).

// Deleted configures a sink's soft deletes.
type Deleted struct {
	// Column is the column that marks a deleted row.
	Column string
	// Flag makes Column a boolean (true: deleted); else it is a
	// timestamptz holding the delete's Kafka timestamp.
	Flag bool
}

// Type is the SQL type of d's column.
func (d Deleted) Type() string {
	if d.Flag {
		return "boolean"
	}
	return "timestamptz"
}

// versionTypes are the column types a version may have: those whose
// order Postgres and compareVersions agree on.
var versionTypes = map[uint32]bool{
	pgtype.Int2OID: true, pgtype.Int4OID: true, pgtype.Int8OID: true, pgtype.NumericOID: true,
	pgtype.TimestamptzOID: true, pgtype.TimestampOID: true, pgtype.DateOID: true,
}

func validateGuard(topic string, sink Sink) error {
	if sink.Deleted == nil && sink.Version == "" {
		return nil
	}
	if sink.Upsert == nil && sink.Changes == nil {
		return fmt.Errorf("ingest: the sink of topic %q has soft deletes or a version and is neither an upsert nor a change sink", topic)
	}
	names := sink.Table.ColumnNames()
	if d := sink.Deleted; d != nil && !slices.Contains(names, d.Column) {
		return fmt.Errorf("ingest: the deleted column %q of topic %q is not a column of %s", d.Column, topic, sink.Table.QualifiedName())
	}
	if d := sink.Deleted; d != nil && sink.Upsert != nil && names[len(names)-1] != d.Column {
		return fmt.Errorf("ingest: the deleted column %q of topic %q is not the last column of %s", d.Column, topic, sink.Table.QualifiedName())
	}
	if v := sink.Version; v != "" && !slices.Contains(names, v) {
		return fmt.Errorf("ingest: the version column %q of topic %q is not a column of %s", v, topic, sink.Table.QualifiedName())
	} else if v != "" {
		c := sink.Table.Columns[slices.Index(names, v)]
		if ct, err := schema.ParseType(c.Type); err != nil || ct.Array || !VersionType(ct.Base.OID) {
			return fmt.Errorf("ingest: the version column %q of topic %q is of type %s: a version is an integer, numeric, timestamp or date", v, topic, c.Type)
		}
	}
	if sink.Version != "" && sink.Deleted == nil && (sink.Changes != nil || sink.Upsert.DeleteOnTombstone) {
		return fmt.Errorf("ingest: the sink of topic %q has a version and hard deletes: a deleted key must keep its version, so it needs Deleted", topic)
	}
	return nil
}

// guard is a sink's soft delete and version, by column index in its
// table's row.
type guard struct {
	del  int // the Deleted column; -1: hard deletes
	flag bool
	ver  int // the version column; -1: none
}

func guardOf(sink Sink) guard {
	g := guard{del: -1, ver: -1}
	names := sink.Table.ColumnNames()
	if d := sink.Deleted; d != nil {
		g.del, g.flag = slices.Index(names, d.Column), d.Flag
	}
	if sink.Version != "" {
		g.ver = slices.Index(names, sink.Version)
	}
	return g
}

func (g guard) active() bool { return g.del >= 0 || g.ver >= 0 }

// live is the Deleted column's value in an upserted row.
func (g guard) live() any {
	if g.flag {
		return false
	}
	return nil
}

// appendLive appends the Deleted column's field of an upserted row.
func (g guard) appendLive(dst []byte) []byte {
	if g.flag {
		return append(binary.BigEndian.AppendUint32(dst, 1), 0)
	}
	return binary.BigEndian.AppendUint32(dst, 0xffffffff)
}

// deleted is the Deleted column's value in the row a delete of r marks.
func (g guard) deleted(r *stream.Record) any {
	if g.flag {
		return true
	}
	return r.Timestamp
}

// LiveMapper is a mapper of an upsert sink with soft deletes whose rows
// lack the Deleted column: it adds the column to the table, last, and the
// value of a live row (NULL, or false) to each row. A mapper that is a
// RowAppender keeps appending its rows itself.
type LiveMapper struct {
	m interface {
		KeyMapper
		TableMapper
	}
	d     Deleted
	g     guard
	table schema.Table
}

// NewLiveMapper is m with d's column.
func NewLiveMapper(m interface {
	KeyMapper
	TableMapper
}, d Deleted) *LiveMapper {
	g := guard{del: len(m.Table().Columns), flag: d.Flag, ver: -1}
	return &LiveMapper{m: m, d: d, g: g}
}

// Table is the mapper's table and the Deleted column.
func (l *LiveMapper) Table() schema.Table {
	t := l.m.Table()
	t.Columns = append(slices.Clone(t.Columns), schema.Column{Name: l.d.Column, Type: l.d.Type()})
	return t
}

func (l *LiveMapper) Row(r *stream.Record, dst []any) ([]any, error) {
	row, err := l.m.Row(r, dst)
	if err != nil {
		return row, err
	}
	return append(row, l.g.live()), nil
}

// ResolveSchemas is the mapper's, when it has one (SchemaResolver).
func (l *LiveMapper) ResolveSchemas(ctx context.Context, records []stream.Record) error {
	if r, ok := l.m.(SchemaResolver); ok {
		return r.ResolveSchemas(ctx, records)
	}
	return nil
}

func (l *LiveMapper) IsTombstone(r *stream.Record) bool      { return l.m.IsTombstone(r) }
func (l *LiveMapper) KeyRow(r *stream.Record) ([]any, error) { return l.m.KeyRow(r) }

// AppendRow is AppendRowFunc's function, with the mapper's scratch space.
func (l *LiveMapper) AppendRow(r *stream.Record, dst []byte, oids []uint32, enc pgcopy.FieldEncoder) ([]byte, error) {
	return l.AppendRowFunc()(r, dst, oids, enc)
}

// AppendRowFunc appends the mapper's row (RowAppender's, else its Row's
// values through enc), then the Deleted column's field.
func (l *LiveMapper) AppendRowFunc() appendFunc {
	var inner appendFunc
	if a, ok := l.m.(RowAppender); ok {
		inner = appendFuncOf(a)
	}
	var row []any
	return func(r *stream.Record, dst []byte, oids []uint32, enc pgcopy.FieldEncoder) ([]byte, error) {
		start := len(dst)
		if inner != nil {
			out, err := inner(r, dst, oids[:len(oids)-1], enc)
			if err != nil {
				return out, err
			}
			return l.g.appendLive(out), nil
		}
		var err error
		if row, err = l.m.Row(r, row); err != nil {
			return dst, err
		}
		for i, v := range row {
			if dst, err = enc(i, dst, v); err != nil {
				return dst[:start], err
			}
		}
		return l.g.appendLive(dst), nil
	}
}

var _ RowAppender = (*LiveMapper)(nil)

// softDelete adds a soft delete of key by r: a row of the key, the mark
// and the version (nil: none), NULL in the other columns.
func (cs *changeSet) softDelete(r *stream.Record, seq int64, key []any, version any) error {
	if len(key) != len(cs.keyIdx) {
		return fmt.Errorf("the key of offset %d has %d values for %d key columns", r.Offset, len(key), len(cs.keyIdx))
	}
	row := make([]any, len(cs.oids))
	for j, i := range cs.keyIdx {
		row[i] = key[j]
	}
	row[cs.g.del] = cs.g.deleted(r)
	if cs.g.ver >= 0 {
		row[cs.g.ver] = version
	}
	return cs.appendFields(r, seq, row, true)
}

// newer reports whether operation i (added after prev, of the same key)
// wins over prev: by version when both have one, else by offset.
func (cs *changeSet) newer(i, prev int) bool {
	if cs.g.ver < 0 {
		return true
	}
	a, nullA := cs.version(i)
	b, nullB := cs.version(prev)
	if nullA || nullB {
		return true
	}
	return compareVersions(cs.oids[cs.g.ver], a, b) > 0
}

// version is the version field of operation j; a soft delete without one
// (a tombstone) has that of the upsert it follows in the batch, which the
// row it marks keeps.
func (cs *changeSet) version(j int) (field []byte, null bool) {
	op := &cs.ops[j]
	f, err := fieldAt(cs.buf[op.start:op.end], cs.g.ver)
	if err != nil {
		return nil, true
	}
	field, null, _ = nextField(f)
	if null && op.del && op.pre > 0 {
		return cs.version(op.pre - 1)
	}
	return field, null
}

// compareVersions orders two binary fields of a version column of type
// oid (versionTypes).
func compareVersions(oid uint32, a, b []byte) int {
	switch oid {
	case pgtype.NumericOID:
		return numericOf(a).Cmp(numericOf(b))
	case pgtype.Int2OID, pgtype.Int4OID, pgtype.Int8OID, pgtype.TimestamptzOID, pgtype.TimestampOID, pgtype.DateOID:
		// Big-endian two's complement: microseconds, days.
		return cmp.Compare(signed(a), signed(b))
	}
	return bytes.Compare(a, b)
}

// numericOf is a binary numeric's value; NaN and the infinities order
// below every number (they are no version).
func numericOf(b []byte) *big.Rat {
	var n pgtype.Numeric
	if err := numericScanner.Scan(pgtype.NumericOID, pgtype.BinaryFormatCode, b, &n); err != nil || !n.Valid || n.NaN || n.InfinityModifier != pgtype.Finite {
		return new(big.Rat).SetInt64(-1 << 62)
	}
	r := new(big.Rat).SetInt(n.Int)
	scale := new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(max(n.Exp, -n.Exp))), nil)
	if n.Exp >= 0 {
		return r.Mul(r, new(big.Rat).SetInt(scale))
	}
	return r.Quo(r, new(big.Rat).SetInt(scale))
}

// numericScanner decodes numerics with pgx's own codec (a connection's map
// may have pgcopy's, which encodes only).
var numericScanner = pgtype.NewMap()

// guardedSQL are the statements that apply a staging table of a guarded
// sink: the upserts, then the soft deletes (or hard ones). A key has at
// most one upsert and one delete in the changeSet, the upsert only when
// it came before the delete (changeSet.keep), so upserts go first. Each
// statement returns two counts: the staged operations it applies, and
// the rows it changed.
func guardedSQL(t schema.Table, key []string, stage pgx.Identifier, g guard) (upsert, del string) {
	cols := t.ColumnNames()
	k := schema.QuoteIdentList(key)
	order := k
	if g.ver >= 0 {
		order += ", " + pgx.Identifier{cols[g.ver]}.Sanitize() + " DESC NULLS LAST"
	}
	staged := func(which string) string {
		return fmt.Sprintf("WITH s AS (\n    SELECT DISTINCT ON (%s) * FROM %s WHERE %s%s ORDER BY %s, %s DESC\n)",
			k, stage.Sanitize(), which, stageDelCol, order, stageSeqCol)
	}
	const counts = "\nSELECT (SELECT count(*) FROM s), (SELECT count(*) FROM u)"
	quoted := schema.QuoteIdentList(cols)
	upsert = fmt.Sprintf("%s, u AS (\n    INSERT INTO %s AS t (%s)\n    SELECT %s FROM s\n    ON CONFLICT (%s) %s\n    RETURNING 1\n)%s",
		staged("NOT "), t.QualifiedName(), quoted, quoted, k, guardedUpdate(t, key, nil, g), counts)
	switch {
	case g.del < 0:
		del = fmt.Sprintf("%s, u AS (\n    DELETE FROM %s t USING s WHERE %s\n    RETURNING 1\n)%s",
			staged(""), t.QualifiedName(), keyMatch(key), counts)
	case g.ver < 0:
		d := pgx.Identifier{cols[g.del]}.Sanitize()
		del = fmt.Sprintf("%s, u AS (\n    UPDATE %s t SET %s = s.%s FROM s WHERE %s\n    RETURNING 1\n)%s",
			staged(""), t.QualifiedName(), d, d, keyMatch(key), counts)
	default:
		marked := schema.QuoteIdentList(append(slices.Clone(key), cols[g.del], cols[g.ver]))
		del = fmt.Sprintf("%s, u AS (\n    INSERT INTO %s AS t (%s)\n    SELECT %s FROM s\n    ON CONFLICT (%s) %s\n    RETURNING 1\n)%s",
			staged(""), t.QualifiedName(), marked, marked, k, markUpdate(cols, g), counts)
	}
	return upsert, del
}

// guardedUpdate is the ON CONFLICT action of a guarded upsert: every
// column but the key and keep takes the new row's value, when the new
// version is greater than the stored one.
func guardedUpdate(t schema.Table, key, keep []string, g guard) string {
	action := conflictUpdate(t, append(slices.Clone(key), keep...))
	if g.ver < 0 || action == "DO NOTHING" {
		return action
	}
	v := pgx.Identifier{t.ColumnNames()[g.ver]}.Sanitize()
	return fmt.Sprintf("%s WHERE t.%s IS NULL OR t.%s < EXCLUDED.%s", action, v, v, v)
}

// markUpdate is the ON CONFLICT action of a soft delete with a version:
// the row is marked, and takes the delete's version, when that is greater
// than the stored one; a delete without a version marks it and keeps its
// version.
func markUpdate(cols []string, g guard) string {
	d, v := pgx.Identifier{cols[g.del]}.Sanitize(), pgx.Identifier{cols[g.ver]}.Sanitize()
	return fmt.Sprintf("DO UPDATE SET %s = EXCLUDED.%s, %s = COALESCE(EXCLUDED.%s, t.%s) WHERE EXCLUDED.%s IS NULL OR t.%s IS NULL OR t.%s < EXCLUDED.%s",
		d, d, v, v, v, v, v, v, v)
}

// applyGuarded applies the staged change set cs of a guarded sink, and
// counts the operations the version guard skipped in cs.stale.
func applyGuarded(ctx context.Context, tx *batchTx, t schema.Table, key []string, stage pgx.Identifier, cs *changeSet) error {
	upsert, del := guardedSQL(t, key, stage, cs.g)
	stmts := []string{upsert}
	if cs.deletes > 0 {
		stmts = append(stmts, del)
	}
	for _, q := range stmts {
		var staged, changed int
		if err := tx.QueryRow(ctx, q).Scan(&staged, &changed); err != nil {
			return err
		}
		if cs.g.ver >= 0 {
			cs.stale += staged - changed
		}
	}
	return nil
}

// guardedOneSQL are the statements that apply one operation of a guarded
// sink (upsertOneSQL): the upsert of a row ($1... every column), and the
// delete of a key ($1... the key columns, then the mark and the version
// when soft).
func guardedOneSQL(t schema.Table, key []string, keep []string, g guard) (insert, del string) {
	cols := t.ColumnNames()
	insert = fmt.Sprintf("INSERT INTO %s AS t (%s) VALUES (%s) ON CONFLICT (%s) %s",
		t.QualifiedName(), schema.QuoteIdentList(cols), params(1, len(cols)), schema.QuoteIdentList(key), guardedUpdate(t, key, keep, g))
	var where []string
	for i, c := range key {
		where = append(where, fmt.Sprintf("%s = $%d", pgx.Identifier{c}.Sanitize(), i+1))
	}
	switch {
	case g.del < 0:
		del = fmt.Sprintf("DELETE FROM %s WHERE %s", t.QualifiedName(), strings.Join(where, " AND "))
	case g.ver < 0:
		del = fmt.Sprintf("UPDATE %s SET %s = $%d WHERE %s", t.QualifiedName(), pgx.Identifier{cols[g.del]}.Sanitize(), len(key)+1, strings.Join(where, " AND "))
	default:
		marked := append(slices.Clone(key), cols[g.del], cols[g.ver])
		del = fmt.Sprintf("INSERT INTO %s AS t (%s) VALUES (%s) ON CONFLICT (%s) %s",
			t.QualifiedName(), schema.QuoteIdentList(marked), params(1, len(marked)), schema.QuoteIdentList(key), markUpdate(cols, g))
	}
	return insert, del
}

// upsertSinkSQL are the statements that apply one operation of an upsert
// sink: upsertOneSQL's, or guardedOneSQL's for a guarded sink.
func upsertSinkSQL(sink Sink) (insert, del string) {
	if g := guardOf(sink); g.active() {
		return guardedOneSQL(sink.Table, sink.Upsert.Key, nil, g)
	}
	return upsertOneSQL(sink.Table, sink.Upsert.Key)
}

// deleteArgs are the arguments of guardedOneSQL's delete of key by r.
func (g guard) deleteArgs(r *stream.Record, key []any, version any) []any {
	if g.del < 0 {
		return key
	}
	args := append(slices.Clone(key), g.deleted(r))
	if g.ver >= 0 {
		args = append(args, version)
	}
	return args
}

func params(from, n int) string {
	ps := make([]string, n)
	for i := range ps {
		ps[i] = fmt.Sprintf("$%d", from+i)
	}
	return strings.Join(ps, ", ")
}

// VersionType reports whether a column of the type oid can be a sink's
// version: an integer, a numeric, a timestamp or a date.
func VersionType(oid uint32) bool { return versionTypes[oid] }
