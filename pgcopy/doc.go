// Package pgcopy writes Postgres' binary COPY format with pgx: the stream,
// the tuples and their fields, and a numeric codec for pgx.
//
// # What it owns
//
//   - copy.go: CopyFrom, pgx's Conn.CopyFrom with an encoder of its own
//     (byte for byte what pgx writes, copy_test.go), and CopyTyped, the
//     same into columns whose types the caller read already, with the
//     statement DescribeSQL reads them with. A source that is a
//     TupleSource writes its rows' fields straight into the stream.
//   - field.go: FieldEncoder and ColumnEncoder, one field of a column: a
//     fast encoder per column type for the Go values the mappers make
//     (package pgvalue's among them), the connection's pgtype.Map for the
//     others, which get pgvalue's values as their pgtype twins (PgxValue).
//     The layouts themselves (AppendTimestamptz, AppendNumeric, ...) are
//     package pgvalue's, which the mappers' AppendRow shares without pgx.
//   - numeric.go: NumericCodec, pgx's numeric codec with pgvalue's
//     AppendNumeric for the values that fit 64 bits (RegisterNumericCodec
//     installs it on a connection; every connection of kafka2pg has it).
//
// # Goroutines
//
// CopyFrom and CopyTyped read the source on pgconn's copy goroutine, and
// return only once no read runs any more: when they return, the source is
// the caller's again, even after a connection failed mid-COPY.
//
// Of ours it imports pgvalue, whose layouts package decode's mappers
// write their rows with, and schema for quoting the column list; package
// ingest runs the COPY.
package pgcopy
