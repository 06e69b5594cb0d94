package pgcopy

import (
	"bytes"
	"math"
	"math/big"
	"reflect"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/kafka2pg/kafka2pg/pgvalue"
)

// TestTheFastEncodersWriteWhatPgxWrites holds every fast encoder to pgtype's
// binary encoding of the same value for the same column type, and checks
// that each takes the values the mappers make and leaves the others (nil
// byte slices are NULL in pgx; narrowing integers can fail) to the type map.
func TestTheFastEncodersWriteWhatPgxWrites(t *testing.T) {
	berlin := time.FixedZone("CET", 3600)
	times := []time.Time{
		time.Date(2026, 11, 30, 9, 1, 2, 345678912, time.UTC),
		time.Date(2026, 11, 30, 0, 30, 0, 0, berlin),
		time.Date(1999, 12, 31, 23, 59, 59, 999999999, time.UTC),
		time.Date(1969, 7, 20, 20, 17, 40, 123, time.UTC),
		time.Date(1, 1, 1, 0, 0, 0, 1000, time.UTC),
		time.Date(9999, 12, 31, 23, 59, 59, 999999000, berlin),
		time.Unix(-1, 500),
	}
	numerics := []pgtype.Numeric{
		{Int: big.NewInt(12345), Exp: -2, Valid: true},
		{Int: big.NewInt(-1), Exp: 0, Valid: true},
		{Int: big.NewInt(0), Exp: -3, Valid: true},
		{Int: big.NewInt(7), Exp: 9, Valid: true},
		{Int: big.NewInt(math.MaxInt64), Exp: -17, Valid: true},
		{Int: new(big.Int).Lsh(big.NewInt(1), 80), Exp: -2, Valid: true}, // over 64 bits: not fast
		{NaN: true, Valid: true},                                         // not fast
	}
	// The mappers' numerics, times of day and uuids, as package pgvalue
	// has them (their pgtype twins are what pgx encodes).
	var mapped []any
	for _, n := range numerics {
		if n.Valid && !n.NaN {
			mapped = append(mapped, pgvalue.Numeric{Int: n.Int, Exp: n.Exp})
		}
	}
	timesOfDay := []any{pgvalue.Time{}, pgvalue.Time{Microseconds: 13*3600e6 + 4*60e6 + 5e6 + 250}, pgvalue.Time{Microseconds: 24 * 3600e6}, "12:00:00"}
	uuids := []any{pgvalue.UUID{}, pgvalue.UUID{0x12, 0x3e, 0x45, 0x67, 0xe8, 0x9b, 0x12, 0xd3, 0xa4, 0x56, 0x42, 0x66, 0x14, 0x17, 0x40, 0x00}, "123e4567-e89b-12d3-a456-426614174000"}
	infinities := []any{pgvalue.Infinity{}, pgvalue.Infinity{Negative: true}}
	intervals := []any{pgvalue.Interval{}, pgvalue.Interval{Months: -14, Days: 3, Microseconds: -3723000004},
		pgvalue.Interval{Months: math.MaxInt32, Days: math.MinInt32, Microseconds: math.MaxInt64}, "1 day"}
	timeTZs := []any{pgvalue.TimeTZ{}, pgvalue.TimeTZ{Microseconds: 24 * 3600e6, OffsetSeconds: -(5*3600 + 30*60 + 15)},
		pgvalue.TimeTZ{Microseconds: 37230500000, OffsetSeconds: 14 * 3600}}
	bits := []any{pgvalue.Bits{Bytes: []byte{}, Len: 0}, pgvalue.Bits{Bytes: []byte{0b0101_0000}, Len: 4}, pgvalue.Bits{Bytes: []byte{0xff, 0x80}, Len: 9}, "101"}
	type tc struct {
		oid    uint32
		values []any
	}
	cases := []tc{
		{pgtype.TextOID, []any{"", "plain", "ünï\u00a0code", []byte("bytes"), []byte{}, []byte(nil), 42}},
		{pgtype.VarcharOID, []any{"abc", []byte("x")}},
		{pgtype.ByteaOID, []any{[]byte{0, 1, 255}, []byte{}, []byte(nil), "as text"}},
		{pgtype.JSONBOID, []any{[]byte(`{"a":1}`), []byte(`[]`), []byte(nil), `"s"`, map[string]any{"k": 1}}},
		{pgtype.JSONOID, []any{[]byte(`{"a": 1}`), `1`, []byte(nil)}},
		{pgtype.Int8OID, []any{int64(math.MinInt64), int64(math.MaxInt64), int64(0), int32(-5), int16(7), "12"}},
		{pgtype.Int4OID, []any{int32(math.MinInt32), int32(math.MaxInt32), int16(-3), int64(5), int64(math.MaxInt64)}},
		{pgtype.Int2OID, []any{int16(math.MinInt16), int16(math.MaxInt16), int32(1)}},
		{pgtype.Float8OID, []any{0.1, math.Inf(-1), math.NaN(), -0.0, float32(1.5)}},
		{pgtype.Float4OID, []any{float32(0.1), float32(math.Inf(1)), float64(2)}},
		{pgtype.BoolOID, []any{true, false, "t"}},
		{pgtype.TimestamptzOID, append(anys(times), infinities...)},
		{pgtype.TimestampOID, append(anys(times), infinities...)},
		{pgtype.DateOID, append(anys(times), infinities...)},
		{pgtype.NumericOID, anys(numerics)},
		{pgtype.NumericOID, mapped},
		{pgtype.TimeOID, timesOfDay},
		{pgtype.UUIDOID, uuids},
		{pgtype.IntervalOID, intervals},
		{pgvalue.TimeTZOID, timeTZs},
		{pgtype.BitOID, bits},
		{pgtype.VarbitOID, bits},
	}
	m := pgtype.NewMap() // pgtype's own numeric codec: an oracle independent of ours
	RegisterTimeTZ(m)    // pgx has none; copy_test.go holds it to Postgres
	for _, c := range cases {
		enc := fastEncoder(c.oid)
		if enc == nil {
			t.Fatalf("oid %d has no fast encoder", c.oid)
		}
		taken := 0
		for _, v := range c.values {
			got, ok := enc([]byte{}, v)
			if !ok {
				if len(got) != 0 {
					t.Errorf("oid %d, %T %v: left to the type map, but wrote % x", c.oid, v, v, got)
				}
				continue
			}
			taken++
			// As pgx's COPY does, encode after bytes already written: a nil
			// result is NULL, an empty one an empty value.
			want, err := m.Encode(c.oid, pgtype.BinaryFormatCode, PgxValue(v), []byte{})
			if err != nil {
				t.Errorf("oid %d, %T %v: fast encoder took a value pgx refuses: %v", c.oid, v, v, err)
				continue
			}
			if want == nil {
				t.Errorf("oid %d, %T %v: fast encoder wrote % x for what pgx sends as NULL", c.oid, v, v, got)
				continue
			}
			if !bytes.Equal(got, want) {
				t.Errorf("oid %d, %T %v:\n got % x\nwant % x", c.oid, v, v, got, want)
			}
		}
		if taken < len(c.values)/2 {
			t.Errorf("oid %d: the fast encoder took %d of %d values", c.oid, taken, len(c.values))
		}
	}
}

func anys[T any](xs []T) []any {
	out := make([]any, len(xs))
	for i, x := range xs {
		out[i] = x
	}
	return out
}

// TestTheEncoderHandsPgconnEveryByteOnce reads the COPY stream with reads of
// many sizes and checks it against one encoding of the same rows.
func TestTheEncoderHandsPgconnEveryByteOnce(t *testing.T) {
	rows := make([][]any, 5000)
	for i := range rows {
		rows[i] = []any{int64(i), "row " + string(rune('a'+i%26)), nil}
	}
	stream := func(read int) []byte {
		e := &copyEncoder{src: rowsOf(rows), m: pgtype.NewMap(), oids: []uint32{pgtype.Int8OID, pgtype.TextOID, pgtype.TextOID},
			cols: []ColumnEncoder{{oid: pgtype.Int8OID, fast: encodeInt8}, {oid: pgtype.TextOID, fast: encodeText}, {oid: pgtype.TextOID}}}
		var out []byte
		p := make([]byte, read)
		for {
			n, err := e.Read(p)
			out = append(out, p[:n]...)
			// The buffer holds one read and at most one row (27 bytes)
			// or the trailer more, however long the COPY.
			if len(e.buf) > read+27 {
				t.Fatalf("reads of %d bytes: the buffer grew to %d bytes", read, len(e.buf))
			}
			if err != nil {
				return out
			}
			if n == 0 {
				t.Fatalf("read of %d bytes returned 0 bytes and no error", read)
			}
		}
	}
	want := stream(1 << 20)
	// 5000 rows of 2 + (4+8) + (4+5) + 4 bytes, and the trailer.
	if len(want) != 5000*27+2 {
		t.Fatalf("stream is %d bytes, want %d", len(want), 5000*27+2)
	}
	for _, n := range []int{1, 7, 27, 4096, 65531} {
		if got := stream(n); !bytes.Equal(got, want) {
			t.Errorf("reads of %d bytes: the stream differs (%d bytes, want %d)", n, len(got), len(want))
		}
	}
}

type sliceSource struct {
	rows [][]any
	i    int
}

func rowsOf(rows [][]any) *sliceSource { return &sliceSource{rows: rows, i: -1} }
func (s *sliceSource) Next() bool      { s.i++; return s.i < len(s.rows) }
func (s *sliceSource) Values() ([]any, error) {
	return s.rows[s.i], nil
}
func (s *sliceSource) Err() error { return nil }

// BenchmarkCopyEncode encodes rows of the bench's typed table (the values
// JSONMapper makes) into the COPY stream: with the fast encoders, and with
// the type map alone (what pgx's CopyFrom does for every value), with
// kafka2pg's numeric codec registered in both.
func BenchmarkCopyEncode(b *testing.B) {
	at := time.Date(2026, 11, 30, 9, 1, 2, 0, time.UTC)
	row := []any{int64(123456), "u01234", "page_view", pgvalue.Numeric{Int: big.NewInt(1234), Exp: -2},
		"EUR", "DE", at, "/docs/42", "mobile", []byte(`{"ab":"b","device":"mobile","lang":"de","path":"/docs/42","ref":"newsletter"}`),
		"events", int32(3), int64(987654), at, []byte("k"), []byte(`[{"key":"source","value":"bench"}]`)}
	oids := []uint32{pgtype.Int8OID, pgtype.TextOID, pgtype.TextOID, pgtype.NumericOID, pgtype.VarcharOID, pgtype.TextOID,
		pgtype.TimestamptzOID, pgtype.TextOID, pgtype.TextOID, pgtype.JSONBOID,
		pgtype.TextOID, pgtype.Int4OID, pgtype.Int8OID, pgtype.TimestamptzOID, pgtype.ByteaOID, pgtype.JSONBOID}
	rows := make([][]any, 1024)
	for i := range rows {
		rows[i] = row
	}
	for _, fast := range []bool{true, false} {
		name := "fast"
		if !fast {
			name = "typemap"
		}
		b.Run(name, func(b *testing.B) {
			cols := make([]ColumnEncoder, len(oids))
			for i, oid := range oids {
				cols[i].oid = oid
				if fast {
					cols[i].fast = fastEncoder(oid)
				}
			}
			m := pgtype.NewMap()
			RegisterNumericCodec(m) // as every connection of kafka2pg's has it
			e := &copyEncoder{m: m, oids: oids, cols: cols}
			b.ReportAllocs()
			for i := 0; i < b.N; i += len(rows) {
				e.src, e.buf, e.off, e.done = rowsOf(rows), e.buf[:0], 0, false
				if err := e.fill(1 << 30); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestPgxValuesConvertsOnlyPgvalueValues: a row of pgvalue's values and
// others (some of them not comparable) comes back with pgtype's values in
// their place, and a row without any is the same slice.
func TestPgxValuesConvertsOnlyPgvalueValues(t *testing.T) {
	plain := []any{[]byte("b"), "s", int64(1), nil, []int64{1}}
	if got := PgxValues(plain); &got[0] != &plain[0] {
		t.Errorf("a row without pgvalue's values was copied")
	}
	n := pgvalue.Numeric{Int: big.NewInt(5), Exp: -1}
	row := []any{[]byte("b"), n, pgvalue.UUID{1}, "s", []*pgvalue.Numeric{&n, nil}, pgvalue.Time{Microseconds: 7},
		pgvalue.Interval{Months: 1, Days: 2, Microseconds: 3}, pgvalue.Bits{Bytes: []byte{0x80}, Len: 1}, pgvalue.Infinity{Negative: true},
		[]any{"x", n, nil}, []any{"plain"}, pgvalue.TimeTZ{Microseconds: 1}}
	got := PgxValues(row)
	want := []any{[]byte("b"), pgtype.Numeric{Int: n.Int, Exp: -1, Valid: true}, pgtype.UUID{Bytes: [16]byte{1}, Valid: true}, "s",
		[]*pgtype.Numeric{{Int: n.Int, Exp: -1, Valid: true}, nil}, pgtype.Time{Microseconds: 7, Valid: true},
		pgtype.Interval{Months: 1, Days: 2, Microseconds: 3, Valid: true}, pgtype.Bits{Bytes: []byte{0x80}, Len: 1, Valid: true}, pgxInfinity{Negative: true},
		[]any{"x", pgtype.Numeric{Int: n.Int, Exp: -1, Valid: true}, nil}, []any{"plain"}, pgvalue.TimeTZ{Microseconds: 1}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("PgxValues:\n got %#v\nwant %#v", got, want)
	}
	if _, ok := row[1].(pgvalue.Numeric); !ok {
		t.Errorf("PgxValues changed its argument: %#v", row)
	}
}

// TestPgvalueStringsArePgtypeJSON: package cdc writes pgvalue's numerics and
// uuids into jsonb with their String, where it wrote pgtype's MarshalJSON.
func TestPgvalueStringsArePgtypeJSON(t *testing.T) {
	for _, n := range []pgvalue.Numeric{
		{Int: big.NewInt(0), Exp: 0}, {Int: big.NewInt(0), Exp: -3}, {Int: big.NewInt(0), Exp: 2},
		{Int: big.NewInt(-5), Exp: -3}, {Int: big.NewInt(150), Exp: -2}, {Int: big.NewInt(-150), Exp: -3},
		{Int: big.NewInt(15), Exp: 2}, {Int: big.NewInt(-1), Exp: 0}, {Int: big.NewInt(123456), Exp: -6},
		{Int: new(big.Int).Lsh(big.NewInt(-3), 90), Exp: -40},
	} {
		want, err := pgtypeNumeric(n).MarshalJSON()
		if err != nil || n.String() != string(want) {
			t.Errorf("numeric %v×10^%d: String %q, pgtype's JSON %s (%v)", n.Int, n.Exp, n.String(), want, err)
		}
	}
	for _, u := range []pgvalue.UUID{{}, {0x0e, 0x2c, 0x74, 0xa1, 0x9b, 0x3d, 0x4c, 0x5e, 0x8f, 0, 0x12, 0x34, 0x56, 0x78, 0x9a, 0xbc}} {
		want, err := pgtypeUUID(u).MarshalJSON()
		if err != nil || `"`+u.String()+`"` != string(want) {
			t.Errorf("uuid %x: String %q, pgtype's JSON %s (%v)", u, u.String(), want, err)
		}
	}
}
