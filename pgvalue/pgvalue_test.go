package pgvalue_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"math"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/kafka2pg/kafka2pg/internal/pgtest"
	"github.com/kafka2pg/kafka2pg/pgvalue"
)

// TestOIDsAreThoseOfPostgres asks Postgres for the OID of every type named
// here.
func TestOIDsAreThoseOfPostgres(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	conn := connect(t)
	for name, oid := range map[string]uint32{
		"boolean": pgvalue.BoolOID, "bytea": pgvalue.ByteaOID, "bigint": pgvalue.Int8OID, "smallint": pgvalue.Int2OID,
		"integer": pgvalue.Int4OID, "text": pgvalue.TextOID, "json": pgvalue.JSONOID, "real": pgvalue.Float4OID,
		"double precision": pgvalue.Float8OID, "inet": pgvalue.InetOID, "character varying": pgvalue.VarcharOID,
		"date": pgvalue.DateOID, "time without time zone": pgvalue.TimeOID, "timestamp without time zone": pgvalue.TimestampOID,
		"timestamp with time zone": pgvalue.TimestamptzOID, "numeric": pgvalue.NumericOID, "uuid": pgvalue.UUIDOID,
		"jsonb": pgvalue.JSONBOID, "interval": pgvalue.IntervalOID, "time with time zone": pgvalue.TimeTZOID,
		"bit": pgvalue.BitOID, "bit varying": pgvalue.VarbitOID,
	} {
		var got uint32
		if err := conn.QueryRow(ctx, "SELECT $1::regtype::oid", name).Scan(&got); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if got != oid {
			t.Errorf("%s: Postgres has OID %d, pgvalue %d", name, got, oid)
		}
	}
}

// TestStringsReadBackInPostgres casts each value's String to its type
// and back to text: Postgres reads the value meant.
func TestStringsReadBackInPostgres(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	conn := connect(t)
	for _, c := range []struct {
		v    interface{ String() string }
		typ  string
		want string
	}{
		{pgvalue.Numeric{Int: big.NewInt(150), Exp: -2}, "numeric", "1.50"},
		{pgvalue.Numeric{Int: big.NewInt(-5), Exp: -3}, "numeric", "-0.005"},
		{pgvalue.Numeric{Int: big.NewInt(15), Exp: 2}, "numeric", "1500"},
		{pgvalue.Numeric{Int: big.NewInt(0), Exp: 0}, "numeric", "0"},
		{pgvalue.Time{Microseconds: 13*3600e6 + 4*60e6 + 5e6 + 250}, "time", "13:04:05.00025"},
		{pgvalue.Time{Microseconds: 24 * 3600e6}, "time", "24:00:00"},
		{pgvalue.UUID{0x12, 0x3e, 0x45, 0x67, 0xe8, 0x9b, 0x12, 0xd3, 0xa4, 0x56, 0x42, 0x66, 0x14, 0x17, 0x40, 0x00}, "uuid", "123e4567-e89b-12d3-a456-426614174000"},
		{pgvalue.TimeTZ{Microseconds: 10*3600e6 + 15*60e6 + 30.5e6, OffsetSeconds: 3600}, "timetz", "10:15:30.5+01"},
		{pgvalue.TimeTZ{Microseconds: 24 * 3600e6, OffsetSeconds: -(5*3600 + 30*60 + 15)}, "timetz", "24:00:00-05:30:15"},
		{pgvalue.TimeTZ{Microseconds: 1, OffsetSeconds: 14 * 3600}, "timetz", "00:00:00.000001+14"},
		{pgvalue.Interval{Months: 14, Days: -3, Microseconds: 3723000004}, "interval", "1 year 2 mons -3 days +01:02:03.000004"},
		{pgvalue.Interval{Microseconds: -1}, "interval", "-00:00:00.000001"},
		{pgvalue.Interval{Months: -1, Days: 1, Microseconds: -86400e6 * 400}, "interval", "-1 mons +1 day -9600:00:00"},
		{pgvalue.Interval{}, "interval", "00:00:00"},
		{pgvalue.Bits{Bytes: []byte{0b0101_0000}, Len: 4}, "bit(4)", "0101"},
		{pgvalue.Bits{Bytes: []byte{0xff, 0x80}, Len: 9}, "varbit", "111111111"},
		{pgvalue.Bits{Bytes: []byte{}, Len: 0}, "varbit", ""},
		{pgvalue.Infinity{}, "date", "infinity"},
		{pgvalue.Infinity{Negative: true}, "timestamp", "-infinity"},
		{pgvalue.Infinity{Negative: true}, "timestamptz", "-infinity"},
	} {
		var got string
		if err := conn.QueryRow(ctx, "SELECT $1::"+c.typ+"::text", c.v.String()).Scan(&got); err != nil {
			t.Fatalf("%s %q: %v", c.typ, c.v.String(), err)
		}
		if got != c.want {
			t.Errorf("%s %q: Postgres reads it as %q, want %q", c.typ, c.v.String(), got, c.want)
		}
	}
}

// connect opens a connection to a fresh database, closed when t ends.
func connect(t *testing.T) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

func TestParseUUIDReadsTheCanonicalFormOnly(t *testing.T) {
	want := pgvalue.UUID{0x12, 0x3e, 0x45, 0x67, 0xe8, 0x9b, 0x12, 0xd3, 0xa4, 0x56, 0x42, 0x66, 0x14, 0x17, 0x40, 0x00}
	for s, ok := range map[string]bool{
		"123e4567-e89b-12d3-a456-426614174000":   true,
		"123E4567-E89B-12D3-A456-426614174000":   true,
		"123e4567e89b12d3a456426614174000":       false,
		"{123e4567-e89b-12d3-a456-426614174000}": false,
		"123e4567e-89b-12d3-a456-426614174000":   false,
		"123e4567-e89b-12d3-a456-42661417400g":   false,
		"123e4567-e89b-12d3-a456-4266141740-0":   false,
		"":                                       false,
	} {
		u, got := pgvalue.ParseUUID(s)
		if got != ok || (ok && u != want) {
			t.Errorf("ParseUUID(%q) = %v, %v; want ok %v", s, u, got, ok)
		}
		if b, gotB := pgvalue.ParseUUID([]byte(s)); b != u || gotB != got {
			t.Errorf("ParseUUID of %q as bytes = %v, %v; as a string %v, %v", s, b, gotB, u, got)
		}
		if ok && u.String() != strings.ToLower(s) {
			t.Errorf("ParseUUID(%q).String() = %s", s, u)
		}
	}
}

// The field appenders write what pgx's binary encoding writes for the
// value, after the field's length (-1 for NULL).
func TestFieldAppendersWriteWhatPgxWrites(t *testing.T) {
	m := pgtype.NewMap()
	at := time.Date(1999, 12, 31, 23, 59, 59, 123456789, time.FixedZone("x", 3600))
	for _, c := range []struct {
		name  string
		got   []byte
		oid   uint32
		value any
	}{
		{"int4", pgvalue.AppendInt4Field(nil, -7), pgtype.Int4OID, int32(-7)},
		{"int8", pgvalue.AppendInt8Field(nil, 1<<40+3), pgtype.Int8OID, int64(1<<40 + 3)},
		{"timestamptz", pgvalue.AppendTimestamptzField(nil, at), pgtype.TimestamptzOID, at},
		{"bytea", pgvalue.AppendBytesOrNull(nil, []byte{0, 1, 2}), pgtype.ByteaOID, []byte{0, 1, 2}},
		{"empty bytea", pgvalue.AppendBytesOrNull(nil, []byte{}), pgtype.ByteaOID, []byte{}},
		{"NULL bytea", pgvalue.AppendBytesOrNull(nil, nil), pgtype.ByteaOID, []byte(nil)},
		{"jsonb", pgvalue.AppendJSONBField(nil, `{"a": 1}`), pgtype.JSONBOID, `{"a": 1}`},
	} {
		// Encoded onto a buffer, an empty value stays apart from NULL (nil).
		want, err := m.Encode(c.oid, pgx.BinaryFormatCode, c.value, make([]byte, 0, 16))
		if err != nil {
			t.Fatalf("%s: pgx: %v", c.name, err)
		}
		field := binary.BigEndian.AppendUint32(nil, math.MaxUint32)
		if want != nil {
			field = append(binary.BigEndian.AppendUint32(nil, uint32(len(want))), want...)
		}
		if !bytes.Equal(c.got, field) {
			t.Errorf("%s: appended %x, pgx writes the field %x", c.name, c.got, field)
		}
	}
}
