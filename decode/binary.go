package decode

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/kafka2pg/kafka2pg/pgvalue"
	"github.com/kafka2pg/kafka2pg/stream"
)

// Rows straight into binary COPY. JSONMapper.AppendRow writes a record's
// row as the fields of one binary COPY tuple without building Row's []any:
// no value is boxed, no numeric becomes a big.Int, and the COPY encoder
// does not look at the values again. The bytes are the ones package
// pgcopy writes for Row's values (FuzzAppendRowMatchesRow). The
// commonest values of a column (its type's quick kind in types.go) are
// appended from the document's bytes by appendQuick; the others go through
// a jsonValue to the type's appendField. A caller that appends many rows
// in turn (ingest's COPY) takes AppendRowFunc, whose scratch space is its
// own. The field encodings themselves (times, numerics, the field layout)
// are package pgvalue's.

// appendFunc writes the binary form of a JSON value for a column of its
// type. A value it leaves to the FieldEncoder (rare ones, such as numerics
// over 64 bits) comes back as fallback, in convert's form.
//
// v is passed by pointer: it is 56 bytes, and copying it into and out of
// every call would cost each field more than the work done on it.
type appendFunc func(c *colType, v *jsonValue, dst []byte) (out []byte, fallback any, cerr *convError)

func appendTextField(c *colType, v *jsonValue, dst []byte) ([]byte, any, *convError) {
	s, cerr := textOf(c, *v)
	return append(dst, s...), nil, cerr
}

func appendInt16Field(_ *colType, v *jsonValue, dst []byte) ([]byte, any, *convError) {
	n, cerr := convertInt(*v, 16, "smallint")
	return binary.BigEndian.AppendUint16(dst, uint16(int16(n))), nil, cerr
}

func appendInt32Field(_ *colType, v *jsonValue, dst []byte) ([]byte, any, *convError) {
	n, cerr := convertInt(*v, 32, "integer")
	return binary.BigEndian.AppendUint32(dst, uint32(int32(n))), nil, cerr
}

func appendInt64Field(_ *colType, v *jsonValue, dst []byte) ([]byte, any, *convError) {
	n, cerr := convertInt(*v, 64, "bigint")
	return binary.BigEndian.AppendUint64(dst, uint64(n)), nil, cerr
}

func appendFloat32Field(_ *colType, v *jsonValue, dst []byte) ([]byte, any, *convError) {
	f, cerr := convertFloat(*v, 32, "real")
	return binary.BigEndian.AppendUint32(dst, math.Float32bits(float32(f))), nil, cerr
}

func appendFloat64Field(_ *colType, v *jsonValue, dst []byte) ([]byte, any, *convError) {
	f, cerr := convertFloat(*v, 64, "double precision")
	return binary.BigEndian.AppendUint64(dst, math.Float64bits(f)), nil, cerr
}

func appendBoolField(c *colType, v *jsonValue, dst []byte) ([]byte, any, *convError) {
	x, cerr := convertBool(c, *v)
	if cerr != nil {
		return dst, nil, cerr
	}
	if x.(bool) {
		return append(dst, 1), nil, nil
	}
	return append(dst, 0), nil, nil
}

// appendNumericField writes numerics whose digits fit 64 bits (nearly all)
// from the decimal, without the big.Int convert makes; others fall back.
func appendNumericField(c *colType, v *jsonValue, dst []byte) ([]byte, any, *convError) {
	if v.kind == kindNumber || v.kind == kindString {
		if out, ok := c.appendShortNumeric(dst, v.text); ok {
			return out, nil, nil
		}
	}
	d, cerr := numericOf(c, *v)
	if cerr != nil {
		return dst, nil, cerr
	}
	if len(d.digits) <= 19 {
		if out, ok := pgvalue.AppendDecimal(dst, d.uint64(), d.neg, int32(d.exp)); ok {
			return out, nil, nil
		}
	}
	return dst, d.numeric(), nil
}

// appendShortNumeric writes the literal s in numeric's binary format when
// shortNumeric reads it (few digits, the column's scale and precision
// applied); false leaves it to numericOf.
func (c *colType) appendShortNumeric(dst []byte, s string) ([]byte, bool) {
	if abs, exp, neg, ok := c.shortNumeric(s); ok {
		return pgvalue.AppendDecimal(dst, abs, neg, exp)
	}
	return dst, false
}

func appendTimestamptzField(c *colType, v *jsonValue, dst []byte) ([]byte, any, *convError) {
	t, cerr := parseTimestamp(c, *v, true)
	return pgvalue.AppendTimestamptz(dst, t), nil, cerr
}

func appendTimestampField(c *colType, v *jsonValue, dst []byte) ([]byte, any, *convError) {
	t, cerr := parseTimestamp(c, *v, false)
	return pgvalue.AppendTimestamp(dst, t), nil, cerr
}

func appendDateField(c *colType, v *jsonValue, dst []byte) ([]byte, any, *convError) {
	t, cerr := dateOf(c, *v)
	return pgvalue.AppendDate(dst, t), nil, cerr
}

// appendJSONBField writes jsonb's binary format: version 1, then the text.
func appendJSONBField(_ *colType, v *jsonValue, dst []byte) ([]byte, any, *convError) {
	b, cerr := jsonbOf(*v)
	return append(append(dst, 1), b...), nil, cerr
}

// quickKind says which values of a column appendQuick writes.
type quickKind uint8

const (
	quickNone        quickKind = iota
	quickText                  // text, varchar(n): a string without escapes
	quickInt                   // smallint, integer, bigint: a plain integer
	quickTimestamptz           // timestamptz: an RFC 3339 string quickTimestamp reads
	quickNumeric               // numeric: a number shortNumeric reads
)

// appendQuick writes the value of hit h of doc when it is one of the
// commonest and needs none of the checks and conversions of the column's
// type: a string without escapes for a text column (the scanner refused
// control characters in it, so it has no NUL, and a varchar(n) takes n
// bytes of any text), a plain integer in an integer column's range, a
// timestamp with its offset as quickTimestamp reads it (always within
// timestamptz's range: parseTimestamp's first step), a number of few
// digits for a numeric column (appendNumericField's first step). It is
// the type's appendField, byte for byte, for those; ok is false for any
// other value, which takes that path.
func (c *mappedColumn) appendQuick(doc []byte, h hit, dst []byte) (out []byte, ok bool) {
	// A column reaches here only written as its own type (c.oid), so its
	// type's quick kind applies.
	switch c.typ.base.quick {
	case quickText:
		if h.kind == kindString && !h.esc {
			if s := h.body(doc); c.typ.length == 0 || len(s) <= c.typ.length {
				return append(dst, s...), true
			}
		}
	case quickInt:
		if h.kind != kindNumber {
			break
		}
		n, ok := plainInt(h.literal(doc))
		if !ok {
			break
		}
		switch c.oid {
		case pgvalue.Int8OID:
			return binary.BigEndian.AppendUint64(dst, uint64(n)), true
		case pgvalue.Int4OID:
			if n == int64(int32(n)) {
				return binary.BigEndian.AppendUint32(dst, uint32(n)), true
			}
		case pgvalue.Int2OID:
			if n == int64(int16(n)) {
				return binary.BigEndian.AppendUint16(dst, uint16(n)), true
			}
		}
	case quickNumeric:
		if h.kind == kindNumber {
			return c.typ.appendShortNumeric(dst, h.literal(doc))
		}
	case quickTimestamptz:
		if h.kind == kindString && !h.esc {
			if t, ok := quickTimestamp(h.body(doc)); ok {
				return pgvalue.AppendTimestamptz(dst, t), true
			}
		}
	}
	return dst, false
}

// nativeOID is the type AppendRow writes column c as itself, 0 when it
// leaves the column to the FieldEncoder.
func (c *mappedColumn) nativeOID() uint32 {
	switch c.source {
	case fromValue, fromKey:
		if c.typ.array || c.typ.base.appendField == nil {
			return 0
		}
		return c.typ.base.OID
	case metaTopic:
		return pgvalue.TextOID
	case metaPartition:
		return pgvalue.Int4OID
	case metaOffset:
		return pgvalue.Int8OID
	case metaTimestamp:
		return pgvalue.TimestamptzOID
	case metaHeaders:
		return pgvalue.JSONBOID
	case metaKey:
		if c.keyFormat == KeyFormatBytes {
			return pgvalue.ByteaOID
		}
	}
	return 0
}

// AppendRow appends the fields of r's row to dst in binary COPY format, in
// Table's column order (the caller writes the tuple's field count). oids
// are the types of the table's columns: a column whose type is the one
// its mapping makes is written here, others through enc with the value Row
// gives, as are the rare values written here otherwise. A record that does
// not fit returns dst unchanged and the error Row returns.
func (m *JSONMapper) AppendRow(r *stream.Record, dst []byte, oids []uint32, enc pgvalue.FieldEncoder) ([]byte, error) {
	rs := m.getState()
	defer m.putState(rs)
	return m.appendRow(rs, r, dst, oids, enc)
}

// AppendRowFunc returns AppendRow with scratch space of its own, for one
// caller at a time (ingest's COPY of a batch): AppendRow takes a pooled
// state and gives it back with an atomic swap and compare-and-swap a row,
// on a word every COPY of the mapper shares, which the table's concurrent
// writers pulled from each other's cache for every row.
func (m *JSONMapper) AppendRowFunc() func(r *stream.Record, dst []byte, oids []uint32, enc pgvalue.FieldEncoder) ([]byte, error) {
	rs := &rowState{}
	return func(r *stream.Record, dst []byte, oids []uint32, enc pgvalue.FieldEncoder) ([]byte, error) {
		out, err := m.appendRow(rs, r, dst, oids, enc)
		rs.endRow()
		return out, err
	}
}

func (m *JSONMapper) appendRow(rs *rowState, r *stream.Record, dst []byte, oids []uint32, enc pgvalue.FieldEncoder) ([]byte, error) {
	if len(oids) != len(m.cols) {
		return dst, fmt.Errorf("append row: %d column types for the %d columns of %s", len(oids), len(m.cols), m.table.QualifiedName())
	}
	start := len(dst)
	rs.buf.arena = rs.scratch[:0]
	defer func() { rs.scratch = rs.buf.arena[:0] }()
	for i := range m.cols {
		var err error
		if dst, err = m.appendField(i, r, rs, dst, oids[i], enc); err != nil {
			return dst[:start], err
		}
	}
	return dst, nil
}

func (m *JSONMapper) appendField(i int, r *stream.Record, rs *rowState, dst []byte, oid uint32, enc pgvalue.FieldEncoder) ([]byte, error) {
	c := &m.cols[i]
	if oid == 0 || oid != c.oid {
		v, err := m.value(c, r, rs)
		if err != nil {
			return dst, err
		}
		return enc(i, dst, v)
	}
	at := len(dst)
	dst = binary.BigEndian.AppendUint32(dst, math.MaxUint32) // NULL until written
	switch c.source {
	case fromValue, fromKey:
		doc, h, null, err := m.dataHit(c, r, rs)
		switch {
		case err != nil:
			return dst[:at], err
		case null && c.def == nil:
			return dst, nil
		case null:
			return enc(i, dst[:at], c.def)
		}
		if out, ok := c.appendQuick(doc, h, dst); ok {
			dst = out
			break
		}
		v := &rs.v
		rs.buf.valueIn(v, doc, h)
		out, fallback, cerr := c.typ.base.appendField(&c.typ, v, dst)
		if cerr != nil {
			return dst[:at], c.refused(r, cerr)
		}
		if fallback != nil {
			return enc(i, dst[:at], fallback)
		}
		dst = out
	case metaTopic:
		dst = append(dst, r.Topic...)
	case metaPartition:
		dst = binary.BigEndian.AppendUint32(dst, uint32(r.Partition))
	case metaOffset:
		dst = binary.BigEndian.AppendUint64(dst, uint64(r.Offset))
	case metaTimestamp:
		if r.Timestamp.IsZero() {
			return m.appendNullMeta(c, r, rs, dst, at)
		}
		dst = pgvalue.AppendTimestamptz(dst, r.Timestamp)
	case metaHeaders:
		if len(r.Headers) == 0 {
			return m.appendNullMeta(c, r, rs, dst, at)
		}
		dst = appendHeadersJSON(append(dst, 1), r.Headers)
	case metaKey: // key_format bytes
		if r.Key == nil {
			return m.appendNullMeta(c, r, rs, dst, at)
		}
		dst = append(dst, r.Key...)
	}
	binary.BigEndian.PutUint32(dst[at:], uint32(len(dst)-at-4))
	return dst, nil
}

// rawOIDs are the types of RawTable's columns, in order.
func (m RawMapper) rawOIDs() [7]uint32 {
	value := uint32(pgvalue.JSONBOID)
	switch m.Format {
	case ValueText:
		value = pgvalue.TextOID
	case ValueBytes:
		value = pgvalue.ByteaOID
	}
	return [7]uint32{pgvalue.TextOID, pgvalue.Int4OID, pgvalue.Int8OID, pgvalue.TimestamptzOID, pgvalue.ByteaOID, pgvalue.JSONBOID, value}
}

// AppendRow is Row written straight into binary COPY, as
// JSONMapper.AppendRow: the bytes pgx writes for Row's values. A table
// whose columns have other types gets Row's values through enc.
func (m RawMapper) AppendRow(r *stream.Record, dst []byte, oids []uint32, enc pgvalue.FieldEncoder) ([]byte, error) {
	return m.appendRow(r, dst, oids, enc, true)
}

// AppendRowUnchecked is AppendRow that leaves to Postgres the check of a
// JSON value (ValueJSON) that jsonb's input makes anyway as it parses the
// value: a value AppendRow refuses is written, and Postgres refuses the row
// (SQLSTATE class 22), or, where the two would differ, the value is still
// checked here. Checking every value twice cost the zero-config table a
// third of the bridge's CPU. The caller writes the batch again through
// AppendRow when Postgres refuses a row, so bad records still get Row's
// kinds and messages.
//
// Where they would differ: a value may nest deeper than CheckJSON allows
// (encoding/json's 10,000 levels) and Postgres would store it, or fail on
// its stack (SQLSTATE 54001, not about the row). A value of at most
// maxNestingDepth bytes cannot nest that deep; longer ones are checked.
func (m RawMapper) AppendRowUnchecked(r *stream.Record, dst []byte, oids []uint32, enc pgvalue.FieldEncoder) ([]byte, error) {
	return m.appendRow(r, dst, oids, enc, m.Format != ValueJSON || len(r.Value) > maxNestingDepth)
}

func (m RawMapper) appendRow(r *stream.Record, dst []byte, oids []uint32, enc pgvalue.FieldEncoder, check bool) ([]byte, error) {
	native := m.rawOIDs()
	if len(oids) != len(native) {
		return dst, fmt.Errorf("append row: %d column types for the %d columns of a zero-config table", len(oids), len(native))
	}
	start := len(dst)
	if [7]uint32(oids) != native {
		row, err := m.Row(r, nil)
		if err != nil {
			return dst, err
		}
		for i, v := range row {
			if dst, err = enc(i, dst, v); err != nil {
				return dst[:start], err
			}
		}
		return dst, nil
	}
	if check {
		if err := m.checkValue(r); err != nil {
			return dst, err
		}
	}
	dst = pgvalue.AppendBytesField(dst, r.Topic)
	dst = pgvalue.AppendInt4Field(dst, r.Partition)
	dst = pgvalue.AppendInt8Field(dst, r.Offset)
	dst = pgvalue.AppendTimestamptzField(dst, r.Timestamp)
	dst = pgvalue.AppendBytesOrNull(dst, r.Key)
	if len(r.Headers) == 0 {
		dst = pgvalue.AppendNull(dst)
	} else {
		at := len(dst)
		dst = appendHeadersJSON(append(binary.BigEndian.AppendUint32(dst, 0), 1), r.Headers)
		binary.BigEndian.PutUint32(dst[at:], uint32(len(dst)-at-4))
	}
	switch {
	case r.Value == nil:
		dst = pgvalue.AppendNull(dst)
	case m.Format == ValueJSON:
		dst = pgvalue.AppendJSONBField(dst, r.Value)
	default:
		dst = pgvalue.AppendBytesField(dst, r.Value)
	}
	return dst, nil
}

// appendNullMeta leaves the NULL written at dst[at:] for a metadata column
// the record lacks, unless the column is NOT NULL (part of the upsert
// key): then it refuses the record as Row does.
func (m *JSONMapper) appendNullMeta(c *mappedColumn, r *stream.Record, rs *rowState, dst []byte, at int) ([]byte, error) {
	if c.notNull {
		if _, err := m.value(c, r, rs); err != nil {
			return dst[:at], err
		}
	}
	return dst, nil
}
