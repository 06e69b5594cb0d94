// Package pgcopy writes Postgres' binary COPY format: the stream, the
// tuples and their fields, and a numeric codec for pgx.
//
// # What it owns
//
//   - copy.go: CopyFrom, pgx's Conn.CopyFrom with an encoder of its own
//     (byte for byte what pgx writes, copy_test.go), and CopyTyped, the
//     same into columns whose types the caller read already, with the
//     statement DescribeSQL reads them with. A source that is a
//     TupleSource writes its rows' fields straight into the stream.
//   - field.go: FieldEncoder and ColumnEncoder, one field of a column: a
//     fast encoder per column type for the Go values the mappers make, the
//     connection's pgtype.Map for the others; the time and field layouts
//     (AppendTimestamptz, AppendDate, AppendBytesField, AppendNull) the
//     mappers' AppendRow shares.
//   - numeric.go: AppendNumeric and AppendDecimal, numeric's binary format
//     without math/big for the values that fit 64 bits, and NumericCodec,
//     the pgx codec built on them (RegisterNumericCodec installs it on a
//     connection; every connection of kafka2pg has it).
//
// # Goroutines
//
// CopyFrom and CopyTyped read the source on pgconn's copy goroutine, and
// return only once no read runs any more: when they return, the source is
// the caller's again, even after a connection failed mid-COPY.
//
// It imports nothing of ours: package schema's mappers write their rows
// with it, and package ingest runs the COPY.
package pgcopy
