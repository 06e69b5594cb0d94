// Package pgvalue holds the Postgres values kafka2pg's decoders make and
// their binary formats, without a driver: package schema (the type
// table), the mappers of packages decode and cdc, and package pgcopy (the
// COPY, on pgx) all use it, so that only pgcopy and ingest link pgx.
//
// # Values
//
// A decoder returns a Go value per column: string, []byte, the integer and
// float types, bool and time.Time for the types Go has, and for the others
// the types of this package: [Numeric] (numeric, exact), [Time] (time
// without time zone), [TimeTZ] (time with time zone), [Interval], [UUID],
// [Bits] (bit, bit varying) and [Infinity] (a date's or a timestamp's
// infinity or -infinity). A nil value is NULL. Each has a String that
// Postgres reads back as the same value. pgcopy encodes each of them as
// pgx encodes the pgtype value of the same name (TimeTZ, which pgx lacks,
// with a codec of pgcopy's). [ParseUUID] is the one reader of a
// UUID's text form: the JSON mapping, Avro and the change events all parse
// with it.
//
// # Type OIDs
//
// The OID constants are Postgres' fixed OIDs of its built-in types, named
// as pgx's pgtype names them (TextOID, Int8OID, ...).
//
// # Binary formats
//
// The Append functions write a value in Postgres' binary format, the form
// a binary COPY carries: [AppendTimestamptz], [AppendTimestamp] and
// [AppendDate] the times, [AppendDateInfinity] and
// [AppendTimestampInfinity] their infinities, [AppendTimeTZ],
// [AppendInterval] and [AppendBits], [AppendNumeric] and [AppendDecimal] a
// numeric whose digits fit 64 bits; [AppendBytesField] and [AppendNull]
// write a whole field, its length first.
//
//	buf = pgvalue.AppendBytesField(buf, "a text field")
//	buf = pgvalue.AppendNull(buf)
//	at := len(buf)
//	buf = binary.BigEndian.AppendUint32(buf, 0) // the length, patched below
//	buf, _ = pgvalue.AppendNumeric(buf, pgvalue.Numeric{Int: big.NewInt(1234), Exp: -2}) // 12.34
//	binary.BigEndian.PutUint32(buf[at:], uint32(len(buf)-at-4))
//
// It imports nothing but the standard library.
package pgvalue
