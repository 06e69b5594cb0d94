// Package pgcopy writes Postgres' binary COPY format with pgx: the stream,
// the tuples and their fields, and the codecs pgx needs for package
// pgvalue's values (numeric without math/big, timetz).
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
//   - timetz.go: TimeTZCodec, the codec of timetz and timetz[] for
//     pgvalue.TimeTZ, which pgx lacks (RegisterTimeTZ; every connection
//     of kafka2pg has it too).
//
// A query's arguments reach pgx through PgxValues, which turns pgvalue's
// values into their pgtype twins (pgvalue.Infinity into one value that
// pgx's date, timestamp and timestamptz codecs all take).
//
// # Goroutines
//
// CopyFrom and CopyTyped read the source on pgconn's copy goroutine, and
// return only once no read runs any more: when they return, the source is
// the caller's again, even after a connection failed mid-COPY.
//
// Of ours it imports pgvalue, whose values the mappers of packages decode
// and cdc make (decode's AppendRow writes them with pgvalue's layouts),
// and schema for quoting the column list; package ingest runs the COPY.
package pgcopy
