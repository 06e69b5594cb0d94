package ingest

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/kafka2pg/kafka2pg/schema"
)

// CopyFrom is pgx's Conn.CopyFrom (binary COPY of rows from src into the
// columns cols of table) with an encoder of its own, for the values the
// mappers make. It writes byte for byte what pgx writes (copy_test.go holds
// it to that), and returns the same errors, but:
//
//   - each column's encoder is chosen once per COPY from the column's type,
//     where pgx looks a plan up by type OID and the value's reflect.Type for
//     every value (two map lookups and a reflect.TypeOf, on the path of
//     every field of every row). Values of other types, or of other
//     columns, go through the connection's pgtype.Map as in pgx;
//   - rows are encoded on pgconn's copy goroutine, into a buffer of about
//     one CopyData message that pgconn reads, where pgx hands them over an
//     io.Pipe from a goroutine of its own;
//   - a source that is a tupleSource (the writer's, when its mapper is a
//     RowAppender) writes each row's fields itself, without []any;
//   - the column types are described with the unnamed statement, fresh for
//     every COPY and inside its transaction, so a table altered since
//     (kafka2pg widens columns) is never written with stale types. The
//     writer's fast path reads them in the fence's round trip instead
//     (fenceAndTypes).
func CopyFrom(ctx context.Context, tx pgx.Tx, table pgx.Identifier, cols []string, src pgx.CopyFromSource) (int64, error) {
	sd, err := tx.Conn().PgConn().Prepare(ctx, "", describeSQL(table, cols), nil)
	if err != nil {
		return 0, fmt.Errorf("statement description failed: %w", err)
	}
	oids := make([]uint32, len(sd.Fields))
	for i, f := range sd.Fields {
		oids[i] = f.DataTypeOID
	}
	return copyTyped(ctx, tx, table, cols, oids, src)
}

// copyTyped is CopyFrom into columns of the given types, read in the same
// transaction.
func copyTyped(ctx context.Context, tx pgx.Tx, table pgx.Identifier, cols []string, oids []uint32, src pgx.CopyFromSource) (int64, error) {
	if len(oids) != len(cols) {
		return 0, fmt.Errorf("copy: %d column types for %d columns", len(oids), len(cols))
	}
	enc := newCopyEncoder(src, tx.Conn().TypeMap(), oids)
	tag, err := tx.Conn().PgConn().CopyFrom(ctx, enc, fmt.Sprintf("copy %s ( %s ) from stdin binary;", table.Sanitize(), columnList(cols)))
	// pgconn reads enc on a goroutine of its own, which it does not wait
	// for when the connection fails mid-COPY; the caller reads src next.
	enc.close()
	return tag.RowsAffected(), err
}

// describeSQL is the statement whose description gives the column types
// of a COPY into table (cols).
func describeSQL(table pgx.Identifier, cols []string) string {
	return fmt.Sprintf("select %s from %s", columnList(cols), table.Sanitize())
}

// columnList is cols quoted and comma-separated.
func columnList(cols []string) string {
	quoted := make([]string, len(cols))
	for i, c := range cols {
		quoted[i] = pgx.Identifier{c}.Sanitize()
	}
	return strings.Join(quoted, ", ")
}

// copyEncoder is the io.Reader pgconn.CopyFrom reads the COPY stream from.
type copyEncoder struct {
	// mu is held by Read; close takes it so that no Read runs after, and
	// the source is the caller's again.
	mu     sync.Mutex
	closed bool
	src    pgx.CopyFromSource
	tuples tupleSource // src, when it writes its rows itself
	m      *pgtype.Map
	cols   []columnEncoder
	oids   []uint32 // the columns' types; len(oids) is the field count
	field  schema.FieldEncoder
	buf    []byte // encoded, not yet read
	off    int    // buf[off:] is unread
	done   bool   // src is exhausted and the trailer is in buf
}

// tupleSource is a CopyFromSource that can write its rows straight into
// the COPY stream (a rowSource whose mapper is a RowAppender).
type tupleSource interface {
	pgx.CopyFromSource
	// appends reports whether nextTuple may be called instead of Next and
	// Values.
	appends() bool
	// nextTuple appends the fields of the next row to dst; ok is false
	// when no row is left or the source failed (Err says which).
	nextTuple(dst []byte, oids []uint32, enc schema.FieldEncoder) (out []byte, ok bool)
}

func newCopyEncoder(src pgx.CopyFromSource, m *pgtype.Map, oids []uint32) *copyEncoder {
	e := &copyEncoder{src: src, m: m, oids: oids, buf: make([]byte, 0, 64*1024)}
	e.cols = make([]columnEncoder, len(oids))
	for i, oid := range oids {
		e.cols[i] = columnEncoder{oid: oid, fast: fastEncoder(oid)}
	}
	if ts, ok := src.(tupleSource); ok && ts.appends() {
		e.tuples = ts
		e.field = func(col int, dst []byte, v any) ([]byte, error) { return e.cols[col].append(e.m, dst, v) }
	}
	e.buf = append(e.buf, "PGCOPY\n\377\r\n\000"...)
	e.buf = binary.BigEndian.AppendUint32(e.buf, 0) // flags
	e.buf = binary.BigEndian.AppendUint32(e.buf, 0) // header extension
	return e
}

type columnEncoder struct {
	oid  uint32
	fast encodeFunc // nil: every value through the type map
}

// encodeFunc appends the binary form of v, without its length, or reports
// false for a value it does not take (then the type map encodes it). It
// never fails: a value that could fail is not its to take.
type encodeFunc func(buf []byte, v any) ([]byte, bool)

func (e *copyEncoder) close() {
	e.mu.Lock()
	e.closed = true
	e.mu.Unlock()
}

func (e *copyEncoder) Read(p []byte) (int, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return 0, io.ErrClosedPipe
	}
	if len(e.buf)-e.off < len(p) && !e.done {
		// Move the unread tail to the front: the buffer stays about one
		// read long instead of growing to the whole COPY.
		n := copy(e.buf, e.buf[e.off:])
		e.buf, e.off = e.buf[:n], 0
		if err := e.fill(len(p)); err != nil {
			return 0, err
		}
	}
	n := copy(p, e.buf[e.off:])
	e.off += n
	if n == 0 && e.done {
		return 0, io.EOF
	}
	return n, nil
}

// fill encodes rows until buf holds at least want unread bytes or the source
// ends (then it adds the trailer).
func (e *copyEncoder) fill(want int) error {
	for len(e.buf)-e.off < want {
		if e.tuples != nil {
			at := len(e.buf)
			out, ok := e.tuples.nextTuple(binary.BigEndian.AppendUint16(e.buf, uint16(len(e.oids))), e.oids, e.field)
			if ok {
				e.buf = out
				continue
			}
			e.buf = e.buf[:at]
			if err := e.src.Err(); err != nil {
				return err
			}
			e.buf = binary.BigEndian.AppendUint16(e.buf, 0xffff) // trailer: -1 fields
			e.done = true
			return nil
		}
		if !e.src.Next() {
			if err := e.src.Err(); err != nil {
				return err
			}
			e.buf = binary.BigEndian.AppendUint16(e.buf, 0xffff) // trailer: -1 fields
			e.done = true
			return nil
		}
		values, err := e.src.Values()
		if err != nil {
			return err
		}
		if len(values) != len(e.oids) {
			return fmt.Errorf("expected %d values, got %d values", len(e.oids), len(values))
		}
		e.buf = binary.BigEndian.AppendUint16(e.buf, uint16(len(e.oids)))
		for i, v := range values {
			if e.buf, err = e.cols[i].append(e.m, e.buf, v); err != nil {
				return err
			}
		}
	}
	return nil
}

// append writes one field: its length (-1 for NULL), then its bytes.
func (c *columnEncoder) append(m *pgtype.Map, buf []byte, v any) ([]byte, error) {
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
		return schema.AppendTimestamptz(buf, t), true
	}
	return buf, false
}

func encodeTimestamp(buf []byte, v any) ([]byte, bool) {
	if t, ok := v.(time.Time); ok {
		return schema.AppendTimestamp(buf, t), true
	}
	return buf, false
}

func encodeDate(buf []byte, v any) ([]byte, bool) {
	if t, ok := v.(time.Time); ok {
		return schema.AppendDate(buf, t), true
	}
	return buf, false
}

func encodeNumeric(buf []byte, v any) ([]byte, bool) {
	if n, ok := v.(pgtype.Numeric); ok {
		return schema.AppendNumeric(buf, n)
	}
	return buf, false
}
