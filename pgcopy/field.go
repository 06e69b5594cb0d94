package pgcopy

import (
	"encoding/binary"
	"errors"
	"math"
	"time"

	"github.com/jackc/pgx/v5/pgtype"
)

// The fields of a tuple. A column's encoder is chosen once per COPY from
// its type: the Go types the mappers make for that type are written by a
// fast encoder of this file, other values (and other types) by the
// connection's pgtype.Map, as pgx's CopyFrom writes them.

// FieldEncoder appends v, a value as a mapper's Row returns it for column
// col, as that column's whole field of a binary COPY tuple: its length (-1
// for NULL), then its bytes. v may share memory the caller reuses: it is
// valid during the call only.
type FieldEncoder func(col int, dst []byte, v any) ([]byte, error)

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
	if t, ok := v.(time.Time); ok {
		return AppendTimestamptz(buf, t), true
	}
	return buf, false
}

func encodeTimestamp(buf []byte, v any) ([]byte, bool) {
	if t, ok := v.(time.Time); ok {
		return AppendTimestamp(buf, t), true
	}
	return buf, false
}

func encodeDate(buf []byte, v any) ([]byte, bool) {
	if t, ok := v.(time.Time); ok {
		return AppendDate(buf, t), true
	}
	return buf, false
}

func encodeNumeric(buf []byte, v any) ([]byte, bool) {
	if n, ok := v.(pgtype.Numeric); ok {
		return AppendNumeric(buf, n)
	}
	return buf, false
}

// Postgres counts time from 2000-01-01 00:00:00 UTC.
const (
	pgEpochUnix   = 946684800
	secondsPerDay = 86400
)

// AppendTimestamptz appends t in timestamptz's binary format: microseconds
// since 2000-01-01 UTC, the nanoseconds truncated as pgx truncates them.
func AppendTimestamptz(buf []byte, t time.Time) []byte {
	return binary.BigEndian.AppendUint64(buf, uint64((t.Unix()-pgEpochUnix)*1_000_000+int64(t.Nanosecond())/1000))
}

// AppendTimestamp appends t's wall clock in its location in timestamp's
// binary format, as pgx does.
func AppendTimestamp(buf []byte, t time.Time) []byte {
	return AppendTimestamptz(buf, time.Date(t.Year(), t.Month(), t.Day(), t.Hour(), t.Minute(), t.Second(), t.Nanosecond(), time.UTC))
}

// AppendDate appends t's day in date's binary format: days since
// 2000-01-01.
func AppendDate(buf []byte, t time.Time) []byte {
	day := time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, time.UTC).Unix()
	return binary.BigEndian.AppendUint32(buf, uint32(int32((day-pgEpochUnix)/secondsPerDay)))
}

// AppendBytesField appends b as a whole field: its length, then its bytes.
func AppendBytesField[T string | []byte](dst []byte, b T) []byte {
	return append(binary.BigEndian.AppendUint32(dst, uint32(len(b))), b...)
}

// AppendNull appends a NULL field.
func AppendNull(dst []byte) []byte { return binary.BigEndian.AppendUint32(dst, math.MaxUint32) }
