package pgcopy

import (
	"encoding/binary"
	"errors"
	"math"
	"time"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/kafka2pg/kafka2pg/pgvalue"
)

// The fields of a tuple. A column's encoder is chosen once per COPY from
// its type: the Go types the mappers make for that type are written by a
// fast encoder of this file, other values (and other types) by the
// connection's pgtype.Map, as pgx's CopyFrom writes them; a pgvalue value
// reaches the type map as the pgtype value of the same name (PgxValue),
// but for TimeTZ, which pgx lacks and this package's codec takes as it is.

// FieldEncoder appends v, a value as a mapper's Row returns it for column
// col, as that column's whole field of a binary COPY tuple. It is
// pgvalue's, which the mappers' AppendRow takes without linking pgx.
type FieldEncoder = pgvalue.FieldEncoder

// ColumnEncoder writes the fields of one column of a COPY.
type ColumnEncoder struct {
	oid  uint32
	fast encodeFunc // nil: every value through the type map
}

// encodeFunc appends the binary form of v, without its length, or reports
// false for a value it does not take (then the type map encodes it). It
// never fails: a value that could fail is not its to take.
type encodeFunc func(buf []byte, v any) ([]byte, bool)

// NewColumnEncoder is the encoder of a column of type oid.
func NewColumnEncoder(oid uint32) ColumnEncoder {
	return ColumnEncoder{oid: oid, fast: fastEncoder(oid)}
}

// Append writes one field: its length (-1 for NULL), then its bytes; m
// encodes the values no fast encoder takes.
func (c *ColumnEncoder) Append(m *pgtype.Map, buf []byte, v any) ([]byte, error) {
	at := len(buf)
	buf = binary.BigEndian.AppendUint32(buf, math.MaxUint32) // -1
	if v == nil {
		return buf, nil
	}
	if c.fast != nil {
		if out, ok := c.fast(buf, v); ok {
			binary.BigEndian.PutUint32(out[at:], uint32(len(out)-at-4))
			return out, nil
		}
	}
	out, err := encodeValue(m, buf, c.oid, v)
	if err != nil {
		return nil, err
	}
	if out == nil { // NULL
		return buf, nil
	}
	binary.BigEndian.PutUint32(out[at:], uint32(len(out)-at-4))
	return out, nil
}

// encodeValue is pgx's encodeCopyValue without the length: the type map's
// binary encoding, or, for a value it cannot encode so, its text form
// parsed by the column's type and encoded from there. A nil result means
// NULL.
func encodeValue(m *pgtype.Map, buf []byte, oid uint32, v any) ([]byte, error) {
	v = PgxValue(v)
	out, err := m.Encode(oid, pgtype.BinaryFormatCode, v, buf)
	if err == nil {
		return out, nil
	}
	s, ok := v.(string)
	if !ok {
		text, terr := m.Encode(oid, pgtype.TextFormatCode, v, nil)
		if terr != nil {
			return nil, err
		}
		s = string(text)
	}
	if typ, ok := m.TypeForOID(oid); ok {
		if _, ok := typ.Codec.(*pgtype.ArrayCodec); ok {
			var arr pgtype.Array[any]
			if m.Scan(oid, pgtype.TextFormatCode, []byte(s), &arr) == nil {
				return m.Encode(oid, pgtype.BinaryFormatCode, arr, buf)
			}
		}
	}
	var parsed any
	if serr := m.Scan(oid, pgtype.TextFormatCode, []byte(s), &parsed); serr != nil {
		return nil, errors.Join(err, serr)
	}
	return m.Encode(oid, pgtype.BinaryFormatCode, parsed, buf)
}

// fastEncoder is the encoder of the Go types the mappers make for a column
// of type oid, nil for types left to the type map.
func fastEncoder(oid uint32) encodeFunc {
	switch oid {
	case pgtype.TextOID, pgtype.VarcharOID:
		return encodeText
	case pgtype.ByteaOID:
		return encodeBytea
	case pgtype.JSONBOID:
		return encodeJSONB
	case pgtype.JSONOID:
		return encodeJSON
	case pgtype.Int8OID:
		return encodeInt8
	case pgtype.Int4OID:
		return encodeInt4
	case pgtype.Int2OID:
		return encodeInt2
	case pgtype.Float8OID:
		return encodeFloat8
	case pgtype.Float4OID:
		return encodeFloat4
	case pgtype.BoolOID:
		return encodeBool
	case pgtype.TimestamptzOID:
		return encodeTimestamptz
	case pgtype.TimestampOID:
		return encodeTimestamp
	case pgtype.DateOID:
		return encodeDate
	case pgtype.NumericOID:
		return encodeNumeric
	case pgtype.TimeOID:
		return encodeTime
	case pgtype.UUIDOID:
		return encodeUUID
	case pgtype.IntervalOID:
		return encodeInterval
	case pgvalue.TimeTZOID:
		return encodeTimeTZ
	case pgtype.BitOID, pgtype.VarbitOID:
		return encodeBits
	}
	return nil
}

func encodeText(buf []byte, v any) ([]byte, bool) {
	switch x := v.(type) {
	case string:
		return append(buf, x...), true
	case []byte:
		if x != nil {
			return append(buf, x...), true
		}
	}
	return buf, false
}

func encodeBytea(buf []byte, v any) ([]byte, bool) {
	if x, ok := v.([]byte); ok && x != nil {
		return append(buf, x...), true
	}
	return buf, false
}

// encodeJSONB writes jsonb's binary format: version 1, then the JSON text.
// Like pgx, it takes the value as JSON text already.
func encodeJSONB(buf []byte, v any) ([]byte, bool) {
	if out, ok := encodeJSON(append(buf, 1), v); ok {
		return out, true
	}
	return buf, false
}

func encodeJSON(buf []byte, v any) ([]byte, bool) {
	switch x := v.(type) {
	case []byte:
		if x != nil { // nil is NULL in pgx: left to the type map
			return append(buf, x...), true
		}
	case string:
		return append(buf, x...), true
	}
	return buf, false
}

func encodeInt8(buf []byte, v any) ([]byte, bool) {
	switch x := v.(type) {
	case int64:
		return binary.BigEndian.AppendUint64(buf, uint64(x)), true
	case int32:
		return binary.BigEndian.AppendUint64(buf, uint64(int64(x))), true
	case int16:
		return binary.BigEndian.AppendUint64(buf, uint64(int64(x))), true
	}
	return buf, false
}

func encodeInt4(buf []byte, v any) ([]byte, bool) {
	switch x := v.(type) {
	case int32:
		return binary.BigEndian.AppendUint32(buf, uint32(x)), true
	case int16:
		return binary.BigEndian.AppendUint32(buf, uint32(int32(x))), true
	}
	return buf, false
}

func encodeInt2(buf []byte, v any) ([]byte, bool) {
	if x, ok := v.(int16); ok {
		return binary.BigEndian.AppendUint16(buf, uint16(x)), true
	}
	return buf, false
}

func encodeFloat8(buf []byte, v any) ([]byte, bool) {
	if x, ok := v.(float64); ok {
		return binary.BigEndian.AppendUint64(buf, math.Float64bits(x)), true
	}
	return buf, false
}

func encodeFloat4(buf []byte, v any) ([]byte, bool) {
	if x, ok := v.(float32); ok {
		return binary.BigEndian.AppendUint32(buf, math.Float32bits(x)), true
	}
	return buf, false
}

func encodeBool(buf []byte, v any) ([]byte, bool) {
	if x, ok := v.(bool); ok {
		if x {
			return append(buf, 1), true
		}
		return append(buf, 0), true
	}
	return buf, false
}

func encodeTimestamptz(buf []byte, v any) ([]byte, bool) {
	switch t := v.(type) {
	case time.Time:
		return pgvalue.AppendTimestamptz(buf, t), true
	case pgvalue.Infinity:
		return pgvalue.AppendTimestampInfinity(buf, t), true
	}
	return buf, false
}

func encodeTimestamp(buf []byte, v any) ([]byte, bool) {
	switch t := v.(type) {
	case time.Time:
		return pgvalue.AppendTimestamp(buf, t), true
	case pgvalue.Infinity:
		return pgvalue.AppendTimestampInfinity(buf, t), true
	}
	return buf, false
}

func encodeDate(buf []byte, v any) ([]byte, bool) {
	switch t := v.(type) {
	case time.Time:
		return pgvalue.AppendDate(buf, t), true
	case pgvalue.Infinity:
		return pgvalue.AppendDateInfinity(buf, t), true
	}
	return buf, false
}

func encodeNumeric(buf []byte, v any) ([]byte, bool) {
	switch n := v.(type) {
	case pgvalue.Numeric:
		return pgvalue.AppendNumeric(buf, n)
	case pgtype.Numeric:
		return appendPgtypeNumeric(buf, n)
	}
	return buf, false
}

// encodeTime writes time's binary format: microseconds since midnight.
func encodeTime(buf []byte, v any) ([]byte, bool) {
	if t, ok := v.(pgvalue.Time); ok {
		return binary.BigEndian.AppendUint64(buf, uint64(t.Microseconds)), true
	}
	return buf, false
}

func encodeUUID(buf []byte, v any) ([]byte, bool) {
	if u, ok := v.(pgvalue.UUID); ok {
		return append(buf, u[:]...), true
	}
	return buf, false
}

func encodeInterval(buf []byte, v any) ([]byte, bool) {
	if iv, ok := v.(pgvalue.Interval); ok {
		return pgvalue.AppendInterval(buf, iv), true
	}
	return buf, false
}

func encodeTimeTZ(buf []byte, v any) ([]byte, bool) {
	if t, ok := v.(pgvalue.TimeTZ); ok {
		return pgvalue.AppendTimeTZ(buf, t), true
	}
	return buf, false
}

func encodeBits(buf []byte, v any) ([]byte, bool) {
	if b, ok := v.(pgvalue.Bits); ok {
		return pgvalue.AppendBits(buf, b), true
	}
	return buf, false
}

// PgxValue is v as pgx encodes it: the pgtype value of a pgvalue value (or
// of a slice of them, an array column's), v itself otherwise. Only values
// no fast encoder takes come here; a caller that hands a mapper's row to
// pgx itself (a query's arguments) converts it with PgxValues.
func PgxValue(v any) any {
	if p, ok := pgxValue(v); ok {
		return p
	}
	return v
}

// PgxValues is values with PgxValue applied to each, for a query's
// arguments: values itself when none changes, a new slice otherwise.
func PgxValues(values []any) []any {
	var out []any
	for i, v := range values {
		p, ok := pgxValue(v)
		if ok && out == nil {
			out = append(make([]any, 0, len(values)), values[:i]...)
		}
		if out != nil {
			if !ok {
				p = v
			}
			out = append(out, p)
		}
	}
	if out == nil {
		return values
	}
	return out
}

// pgxValue is PgxValue, false when v is not pgvalue's.
func pgxValue(v any) (any, bool) {
	switch x := v.(type) {
	case pgvalue.Numeric:
		return pgtypeNumeric(x), true
	case pgvalue.Time:
		return pgtypeTime(x), true
	case pgvalue.UUID:
		return pgtypeUUID(x), true
	case pgvalue.Interval:
		return pgtype.Interval{Months: x.Months, Days: x.Days, Microseconds: x.Microseconds, Valid: true}, true
	case pgvalue.Bits:
		return pgtype.Bits{Bytes: x.Bytes, Len: x.Len, Valid: true}, true
	case pgvalue.Infinity:
		return pgxInfinity(x), true
	case []any:
		return pgxElements(x)
	case []pgvalue.Numeric:
		return convertSlice(x, pgtypeNumeric), true
	case []*pgvalue.Numeric:
		return convertSlice(x, ptrOf(pgtypeNumeric)), true
	case []pgvalue.Time:
		return convertSlice(x, pgtypeTime), true
	case []*pgvalue.Time:
		return convertSlice(x, ptrOf(pgtypeTime)), true
	case []pgvalue.UUID:
		return convertSlice(x, pgtypeUUID), true
	case []*pgvalue.UUID:
		return convertSlice(x, ptrOf(pgtypeUUID)), true
	}
	return nil, false
}

// pgxElements is PgxValue of an array's elements (package cdc's arrays
// are []any), false when none is pgvalue's.
func pgxElements(s []any) (any, bool) {
	var out []any
	for i, e := range s {
		p, ok := pgxValue(e)
		if ok && out == nil {
			out = append(make([]any, 0, len(s)), s[:i]...)
		}
		if out != nil {
			if !ok {
				p = e
			}
			out = append(out, p)
		}
	}
	return out, out != nil
}

// pgxInfinity is a pgvalue.Infinity as pgx's date, timestamp and
// timestamptz codecs take it: one value for the three, as the column's
// type, which PgxValue does not know, picks the codec.
type pgxInfinity pgvalue.Infinity

func (i pgxInfinity) modifier() pgtype.InfinityModifier {
	if i.Negative {
		return pgtype.NegativeInfinity
	}
	return pgtype.Infinity
}

// DateValue implements pgtype.DateValuer.
func (i pgxInfinity) DateValue() (pgtype.Date, error) {
	return pgtype.Date{InfinityModifier: i.modifier(), Valid: true}, nil
}

// TimestampValue implements pgtype.TimestampValuer.
func (i pgxInfinity) TimestampValue() (pgtype.Timestamp, error) {
	return pgtype.Timestamp{InfinityModifier: i.modifier(), Valid: true}, nil
}

// TimestamptzValue implements pgtype.TimestamptzValuer.
func (i pgxInfinity) TimestamptzValue() (pgtype.Timestamptz, error) {
	return pgtype.Timestamptz{InfinityModifier: i.modifier(), Valid: true}, nil
}

func pgtypeNumeric(n pgvalue.Numeric) pgtype.Numeric {
	return pgtype.Numeric{Int: n.Int, Exp: n.Exp, Valid: true}
}

func pgtypeTime(t pgvalue.Time) pgtype.Time {
	return pgtype.Time{Microseconds: t.Microseconds, Valid: true}
}

func pgtypeUUID(u pgvalue.UUID) pgtype.UUID { return pgtype.UUID{Bytes: u, Valid: true} }

func convertSlice[S ~[]E, E, T any](s S, f func(E) T) []T {
	if s == nil {
		return nil
	}
	out := make([]T, len(s))
	for i, e := range s {
		out[i] = f(e)
	}
	return out
}

// ptrOf lifts f to pointers: nil (a NULL element) stays nil.
func ptrOf[E, T any](f func(E) T) func(*E) *T {
	return func(e *E) *T {
		if e == nil {
			return nil
		}
		t := f(*e)
		return &t
	}
}
