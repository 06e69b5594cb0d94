package pgcopy

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"sync"

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
//   - a source that is a TupleSource writes each row's fields itself,
//     without []any;
//   - the column types are described with the unnamed statement, fresh for
//     every COPY and inside its transaction, so a table altered since
//     (kafka2pg widens columns) is never written with stale types. A
//     caller that has read them already (ingest's fast path reads them in
//     the fence's round trip, with DescribeSQL) calls CopyTyped.
func CopyFrom(ctx context.Context, tx pgx.Tx, table pgx.Identifier, cols []string, src pgx.CopyFromSource) (int64, error) {
	sd, err := tx.Conn().PgConn().Prepare(ctx, "", DescribeSQL(table, cols), nil)
	if err != nil {
		return 0, fmt.Errorf("statement description failed: %w", err)
	}
	oids := make([]uint32, len(sd.Fields))
	for i, f := range sd.Fields {
		oids[i] = f.DataTypeOID
	}
	return CopyTyped(ctx, tx, table, cols, oids, src)
}

// CopyTyped is CopyFrom into columns of the given types (oids, in the
// order of cols), read in the same transaction.
func CopyTyped(ctx context.Context, tx pgx.Tx, table pgx.Identifier, cols []string, oids []uint32, src pgx.CopyFromSource) (int64, error) {
	if len(oids) != len(cols) {
		return 0, fmt.Errorf("copy: %d column types for %d columns", len(oids), len(cols))
	}
	enc := newCopyEncoder(src, tx.Conn().TypeMap(), oids)
	tag, err := tx.Conn().PgConn().CopyFrom(ctx, enc, fmt.Sprintf("copy %s ( %s ) from stdin binary;", table.Sanitize(), schema.QuoteIdentList(cols)))
	// pgconn reads enc on a goroutine of its own, which it does not wait
	// for when the connection fails mid-COPY; the caller reads src next.
	enc.close()
	return tag.RowsAffected(), err
}

// DescribeSQL is the statement whose description gives the column types
// of a COPY into table (cols).
func DescribeSQL(table pgx.Identifier, cols []string) string {
	return fmt.Sprintf("select %s from %s", schema.QuoteIdentList(cols), table.Sanitize())
}

// copyEncoder is the io.Reader pgconn.CopyFrom reads the COPY stream from.
type copyEncoder struct {
	// mu is held by Read; close takes it so that no Read runs after, and
	// the source is the caller's again.
	mu     sync.Mutex
	closed bool
	src    pgx.CopyFromSource
	tuples TupleSource // src, when it writes its rows itself
	m      *pgtype.Map
	cols   []ColumnEncoder
	oids   []uint32 // the columns' types; len(oids) is the field count
	field  FieldEncoder
	buf    []byte // encoded, not yet read
	off    int    // buf[off:] is unread
	done   bool   // src is exhausted and the trailer is in buf
}

// TupleSource is a CopyFromSource that can write its rows straight into
// the COPY stream (ingest's sources whose mapper appends rows itself).
// NextTuple is called on pgconn's goroutine, as Next and Values are.
type TupleSource interface {
	pgx.CopyFromSource
	// AppendsTuples reports whether NextTuple may be called instead of
	// Next and Values, for the whole COPY.
	AppendsTuples() bool
	// NextTuple appends the fields of the next row to dst (the field count
	// is written already): oids are the columns' types, enc writes a value
	// the source does not write itself. ok is false when no row is left or
	// the source failed (Err says which).
	NextTuple(dst []byte, oids []uint32, enc FieldEncoder) (out []byte, ok bool)
}

func newCopyEncoder(src pgx.CopyFromSource, m *pgtype.Map, oids []uint32) *copyEncoder {
	e := &copyEncoder{src: src, m: m, oids: oids, buf: make([]byte, 0, 64*1024)}
	e.cols = make([]ColumnEncoder, len(oids))
	for i, oid := range oids {
		e.cols[i] = NewColumnEncoder(oid)
	}
	if ts, ok := src.(TupleSource); ok && ts.AppendsTuples() {
		e.tuples = ts
		e.field = func(col int, dst []byte, v any) ([]byte, error) { return e.cols[col].Append(e.m, dst, v) }
	}
	e.buf = append(e.buf, "PGCOPY\n\377\r\n\000"...)
	e.buf = binary.BigEndian.AppendUint32(e.buf, 0) // flags
	e.buf = binary.BigEndian.AppendUint32(e.buf, 0) // header extension
	return e
}

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
			out, ok := e.tuples.NextTuple(binary.BigEndian.AppendUint16(e.buf, uint16(len(e.oids))), e.oids, e.field)
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
			if e.buf, err = e.cols[i].Append(e.m, e.buf, v); err != nil {
				return err
			}
		}
	}
	return nil
}
