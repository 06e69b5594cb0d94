package ingest

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/kafka2pg/kafka2pg/pgcopy"
	"github.com/kafka2pg/kafka2pg/pgvalue"
	"github.com/kafka2pg/kafka2pg/stream"
)

// A changeSet is what a batch does to a table by key: for every key, the
// last of the batch's operations on it in offset order, an upsert of a row
// or a delete, each encoded once for a binary COPY (the row's fields; a
// delete's key fields with the other columns NULL), sorted by key.
//
// The bridge knows the records' order, so it keeps the last operation of
// each key itself: Postgres then neither sorts the batch's rows nor joins
// them to find it. Sorted by key, the rows reach the table's index in
// order, and concurrent writers of one table take the rows' locks in the
// same order.
//
// Keys are told apart by their binary form. Equal forms are equal keys,
// always; for the types of exactKeyTypes, under deterministic collations,
// different forms are different keys too, and the set holds each key
// once. For other types (numeric 1.0 and 1.00, a case-insensitive text)
// two operations on one key may stay; the statement that applies the set
// must then keep the last by seq itself (upsertGeneralSQL).
//
// Operations are added in offset order, and seq numbers them in that
// order, so that two of one record (a change of a row's key: the delete of
// the old key, then the upsert of the new one) keep theirs.
type changeSet struct {
	keyIdx  []int    // the key columns' indexes in the row, in key order
	oids    []uint32 // the row's column types
	keyOIDs []uint32 // the key columns' types
	m       *pgtype.Map
	cols    []pgcopy.ColumnEncoder
	field   pgcopy.FieldEncoder // cols, for a RowAppender
	buf     []byte              // the operations' fields, back to back
	keys    []byte              // the operations' key fields, back to back
	ops     []change            // in the order added
	// ascending: each operation's key is greater than the one before it
	// (a batch of new keys, often): the set holds each key once, in order,
	// without a map or a sort.
	ascending bool
	// last maps a key to the index in ops of its last operation, once the
	// set is not ascending.
	last map[string]int
	// kept counts the operations that have no later one of their key,
	// deletes the deletes among them.
	kept, deletes int
	// sorted lists the kept operations' indexes in key order, once
	// finish has run.
	sorted []int
	// g is the sink's soft delete and version (guard.go): with a version,
	// an operation supersedes an earlier one of its key only when newer,
	// and stale counts those that were not, and those the statements
	// skipped.
	g     guard
	stale int
}

// change is one operation of a changeSet.
type change struct {
	rec              *stream.Record
	seq              int64
	start, end       int // its fields in buf
	keyStart, keyEnd int // its key fields in keys, as encoded (length and bytes each)
	del              bool
	superseded       bool // a later operation of the set has its key
	// pre, on a soft delete (guard.go), is 1 + the index of the upsert of
	// its key it follows in the batch, which the set keeps and applies
	// before it, so that the marked row holds the key's last columns
	// whatever the batch's bounds; 0: none.
	pre int
}

func (cs *changeSet) keyAt(i int) []byte { return cs.keys[cs.ops[i].keyStart:cs.ops[i].keyEnd] }

// reset empties cs for operations on rows of the column types oids, keyed
// by the columns keyIdx, keeping its memory: ops operations of about
// sizeHint bytes of rows fit without growing it. A changeSet is reused
// batch after batch (upsertState.sets): its buffer and its map stay warm,
// where new ones of a few MB each batch cost page faults and collections.
func (cs *changeSet) reset(m *pgtype.Map, oids []uint32, keyIdx []int, ops, sizeHint int) {
	if !slices.Equal(cs.oids, oids) {
		cs.oids = slices.Clone(oids)
		cs.cols = make([]pgcopy.ColumnEncoder, len(oids))
		for i, oid := range oids {
			cs.cols[i] = pgcopy.NewColumnEncoder(oid)
		}
	}
	if cs.field == nil {
		cs.field = func(col int, dst []byte, v any) ([]byte, error) { return cs.cols[col].Append(cs.m, dst, v) }
	}
	if cs.last == nil {
		cs.last = make(map[string]int, ops)
	}
	cs.m, cs.keyIdx = m, keyIdx
	cs.keyOIDs = cs.keyOIDs[:0]
	for _, i := range keyIdx {
		cs.keyOIDs = append(cs.keyOIDs, oids[i])
	}
	cs.buf = slices.Grow(cs.buf[:0], sizeHint)
	cs.keys = slices.Grow(cs.keys[:0], 16*ops)
	cs.ops = slices.Grow(cs.ops[:0], ops)
	cs.sorted, cs.ascending, cs.kept, cs.deletes = cs.sorted[:0], true, 0, 0
	cs.g, cs.stale = guard{del: -1, ver: -1}, 0
}

// release forgets the records and keys cs refers to, before it waits for
// the next batch.
func (cs *changeSet) release() {
	clear(cs.ops)
	clear(cs.last)
	cs.m = nil
}

// appendRow adds an upsert of r's row, which appendRow writes (a
// RowAppender's AppendRow). An error is the mapper's, and adds nothing.
func (cs *changeSet) appendRow(r *stream.Record, seq int64, appendRow appendFunc) error {
	at := len(cs.buf)
	out, err := appendRow(r, cs.buf, cs.oids, cs.field)
	if err != nil {
		cs.buf = cs.buf[:at]
		return err
	}
	cs.buf = out
	return cs.keep(r, seq, at, false)
}

// appendValues adds an upsert of the row values (one per column).
func (cs *changeSet) appendValues(r *stream.Record, seq int64, values []any) error {
	if len(values) != len(cs.oids) {
		return fmt.Errorf("the row of offset %d has %d values for %d columns", r.Offset, len(values), len(cs.oids))
	}
	return cs.appendFields(r, seq, values, false)
}

// appendDelete adds a delete of the key whose columns' values are key, in
// key order: a row of the key, NULL in the other columns.
func (cs *changeSet) appendDelete(r *stream.Record, seq int64, key []any) error {
	if len(key) != len(cs.keyIdx) {
		return fmt.Errorf("the key of offset %d has %d values for %d key columns", r.Offset, len(key), len(cs.keyIdx))
	}
	row := make([]any, len(cs.oids))
	for j, i := range cs.keyIdx {
		row[i] = key[j]
	}
	return cs.appendFields(r, seq, row, true)
}

func (cs *changeSet) appendFields(r *stream.Record, seq int64, values []any, del bool) error {
	at := len(cs.buf)
	for i, v := range values {
		out, err := cs.cols[i].Append(cs.m, cs.buf, v)
		if err != nil {
			cs.buf = cs.buf[:at]
			return fmt.Errorf("column %d: %w", i+1, err)
		}
		cs.buf = out
	}
	return cs.keep(r, seq, at, del)
}

// keep records the operation whose fields start at buf[at], superseding
// the earlier operation of its key.
func (cs *changeSet) keep(r *stream.Record, seq int64, at int, del bool) error {
	ks := len(cs.keys)
	for _, i := range cs.keyIdx {
		f, err := fieldAt(cs.buf[at:], i)
		if err != nil {
			cs.buf, cs.keys = cs.buf[:at], cs.keys[:ks]
			return err
		}
		cs.keys = append(cs.keys, f...)
	}
	i := len(cs.ops)
	cs.ops = append(cs.ops, change{rec: r, seq: seq, start: at, end: len(cs.buf), keyStart: ks, keyEnd: len(cs.keys), del: del})
	if del {
		cs.deletes++
	}
	if cs.ascending {
		if i == 0 || compareKeys(cs.keyOIDs, cs.keyAt(i-1), cs.keyAt(i)) < 0 {
			cs.kept++
			return nil
		}
		// Out of order: from now on the map finds each key's last
		// operation; the ones so far are all different.
		cs.ascending = false
		for j := range i {
			cs.last[string(cs.keyAt(j))] = j
		}
	}
	key := cs.keyAt(i)
	if prev, ok := cs.last[string(key)]; ok && !cs.newer(i, prev) {
		// An older version of the key than one the batch has: skipped.
		cs.ops[i].superseded = true
		cs.stale++
		if del {
			cs.deletes--
		}
		return nil
	} else if ok {
		p := &cs.ops[prev]
		pre := p.pre
		if del && !p.del && cs.g.del >= 0 {
			// A soft delete after an upsert: both stay.
			pre = prev + 1
			cs.kept++
		} else {
			p.superseded = true
			if p.del {
				cs.deletes--
			}
		}
		if !del && pre > 0 {
			// An upsert after a soft delete supersedes the upsert before it too.
			cs.ops[pre-1].superseded = true
			cs.kept--
			pre = 0
		}
		cs.ops[i].pre = pre
	} else {
		cs.kept++
	}
	cs.last[string(key)] = i
	return nil
}

// fieldAt returns field i (from 0) of tuple, binary COPY fields back to
// back, with its length.
func fieldAt(tuple []byte, i int) ([]byte, error) {
	at := 0
	for n := 0; ; n++ {
		if len(tuple)-at < 4 {
			return nil, fmt.Errorf("encode the key: the row has no field %d", i+1)
		}
		size := int(int32(binary.BigEndian.Uint32(tuple[at:])))
		end := at + 4 + max(size, 0)
		if end > len(tuple) {
			return nil, fmt.Errorf("encode the key: field %d overruns the row", n+1)
		}
		if n == i {
			return tuple[at:end], nil
		}
		at = end
	}
}

// finish sorts the kept operations by key: field by field, NULL first,
// integers by value, other types by their bytes (C's order for text).
func (cs *changeSet) finish() {
	for i, op := range cs.ops {
		if !op.superseded {
			cs.sorted = append(cs.sorted, i)
		}
	}
	if !cs.ascending && !cs.sortByInt() {
		slices.SortFunc(cs.sorted, func(a, b int) int { return compareKeys(cs.keyOIDs, cs.keyAt(a), cs.keyAt(b)) })
	}
}

// sortByInt sorts the kept operations of a key of one integer column, and
// reports whether it did (not for other keys, nor with a NULL key): by the
// integers, decoded once, not field by field at every comparison.
func (cs *changeSet) sortByInt() bool {
	if len(cs.keyOIDs) != 1 || !intKeyTypes[cs.keyOIDs[0]] {
		return false
	}
	type keyed struct {
		key int64
		op  int
	}
	ks := make([]keyed, len(cs.sorted))
	for j, i := range cs.sorted {
		f, null, _ := nextField(cs.keyAt(i))
		if null {
			return false
		}
		ks[j] = keyed{signed(f), i}
	}
	slices.SortFunc(ks, func(a, b keyed) int { return cmp.Compare(a.key, b.key) })
	for j, k := range ks {
		cs.sorted[j] = k.op
	}
	return true
}

// intKeyTypes are the integer types, which keys order by value.
var intKeyTypes = map[uint32]bool{pgtype.Int2OID: true, pgtype.Int4OID: true, pgtype.Int8OID: true}

// compareKeys orders two encoded keys of the column types oids.
func compareKeys(oids []uint32, a, b []byte) int {
	for _, oid := range oids {
		fa, nullA, ra := nextField(a)
		fb, nullB, rb := nextField(b)
		var c int
		switch {
		case nullA || nullB: // NULL first
			c = cmp.Compare(boolInt(!nullA), boolInt(!nullB))
		case intKeyTypes[oid]:
			c = cmp.Compare(signed(fa), signed(fb))
		default:
			c = bytes.Compare(fa, fb)
		}
		if c != 0 {
			return c
		}
		a, b = ra, rb
	}
	return 0
}

// nextField splits an encoded field off the front of k: its bytes, whether
// it is NULL, and the rest.
func nextField(k []byte) (field []byte, null bool, rest []byte) {
	if len(k) < 4 {
		return nil, true, nil
	}
	size := int(int32(binary.BigEndian.Uint32(k)))
	if size < 0 {
		return nil, true, k[4:]
	}
	size = min(size, len(k)-4)
	return k[4 : 4+size], false, k[4+size:]
}

// signed is a big-endian two's-complement integer of 2, 4 or 8 bytes.
func signed(b []byte) int64 {
	switch len(b) {
	case 2:
		return int64(int16(binary.BigEndian.Uint16(b)))
	case 4:
		return int64(int32(binary.BigEndian.Uint32(b)))
	case 8:
		return int64(binary.BigEndian.Uint64(b))
	}
	return 0
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// exactKeyTypes are the types whose binary form tells any two different
// values apart (with a deterministic collation for text and varchar):
// not numeric (1.0 and 1.00 are equal), float (-0 and 0), bpchar
// (trailing spaces), or types of extensions (citext).
var exactKeyTypes = map[uint32]bool{
	pgtype.Int2OID: true, pgtype.Int4OID: true, pgtype.Int8OID: true, pgtype.TextOID: true, pgtype.VarcharOID: true,
	pgtype.ByteaOID: true, pgtype.UUIDOID: true, pgtype.BoolOID: true, pgtype.DateOID: true, pgtype.TimestampOID: true,
	pgtype.TimestamptzOID: true,
}

// changeSource streams a changeSet's kept operations, in key order, into a
// binary COPY: into the table itself (upserts only), or into the staging
// table, each row followed by its seq and whether it is a delete.
type changeSource struct {
	cs    *changeSet
	stage bool
	i     int
}

func (s *changeSource) AppendsTuples() bool { return true }

func (s *changeSource) NextTuple(dst []byte, _ []uint32, _ pgcopy.FieldEncoder) ([]byte, bool) {
	if s.i >= len(s.cs.sorted) {
		return dst, false
	}
	op := &s.cs.ops[s.cs.sorted[s.i]]
	s.i++
	dst = append(dst, s.cs.buf[op.start:op.end]...)
	if s.stage {
		dst = pgvalue.AppendInt8Field(dst, op.seq)
		dst = binary.BigEndian.AppendUint32(dst, 1)
		dst = append(dst, byte(boolInt(op.del)))
	}
	return dst, true
}

func (s *changeSource) Next() bool             { return false }
func (s *changeSource) Values() ([]any, error) { return nil, nil }
func (s *changeSource) Err() error             { return nil }

var _ pgx.CopyFromSource = (*changeSource)(nil)
