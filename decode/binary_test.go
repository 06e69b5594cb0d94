package decode

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/kafka2pg/kafka2pg/pgcopy"
	"github.com/kafka2pg/kafka2pg/pgvalue"
	"github.com/kafka2pg/kafka2pg/stream"
)

// FuzzAppendRowMatchesRow: for any value and key, AppendRow writes the
// bytes pgx writes for Row's values (with NumericCodec, as every kafka2pg
// connection has it), hands the columns it does not write itself to the
// FieldEncoder with Row's value, or refuses the record with Row's error
// and leaves dst as it was.
func FuzzAppendRowMatchesRow(f *testing.F) {
	for _, s := range scanSeeds {
		f.Add([]byte(s[0]), []byte(s[1]), false, uint8(0))
	}
	for _, v := range []string{`1234.5`, `-0`, `0.000`, `-12.345`, `123456789012345678901234`, `9223372036854775807`,
		`1e-70`, `1E+70`, `0.1e2`, `"2026-11-30T09:01:02.123456789+02:00"`, `"1999-12-31 23:59:59.9999995Z"`, `"2026-11-30"`,
		`"0001-01-01T00:00:00Z"`, `1700000000123`, `-1700000000.5`, `true`, `"NaN"`, `"-Infinity"`, `3.4e39`, `"x\u00e9\n"`,
		`{"b": [1, 2.50], "a": "\u00e9"}`, `{"a" : 1}`, `null`, `"12345"`, `32768`, `-2147483649`} {
		f.Add([]byte(`{"v":`+v+`,"a":[`+v+`]}`), []byte(v), false, uint8(1))
	}
	for _, v := range benchValues(8) {
		f.Add(v, []byte(`{"id":"k1"}`), false, uint8(2))
		f.Add(v, []byte(nil), false, uint8(3)) // no key, no timestamp
	}
	mappers := []*JSONMapper{fuzzMapper(f), pathsMapper(f), benchMapper(f, nil), benchMapper(f, []string{"kafka_key", "kafka_ts"})}
	tm := pgtype.NewMap()
	pgcopy.RegisterNumericCodec(tm)
	f.Fuzz(func(t *testing.T, value, key []byte, tombstone bool, mix uint8) {
		r := &stream.Record{Topic: "t", Partition: 5, Offset: 1 << 40, Value: value, Key: key, Headers: []stream.Header{{Key: "h", Value: key}}}
		if tombstone {
			r.Value = nil
		}
		if mix%2 == 0 {
			r.Timestamp = time.Unix(1700000000, 123456789).In(time.FixedZone("X", 3600))
		}
		for _, m := range mappers {
			checkAppendRow(t, m, tm, r, mix)
		}
		if mix%3 == 1 {
			r.Headers = nil
		}
		if mix%5 == 1 {
			r.Key = nil
		}
		for _, f := range []ValueFormat{ValueJSON, ValueText, ValueBytes} {
			checkRawAppendRow(t, RawMapper{Format: f}, tm, r)
		}
	})
}

// checkRawAppendRow holds RawMapper.AppendRow to pgx's encoding of Row's
// values, on the zero-config table's types and on other ones.
func checkRawAppendRow(t *testing.T, m RawMapper, tm *pgtype.Map, r *stream.Record) {
	t.Helper()
	row, rowErr := m.Row(r, nil)
	native := m.rawOIDs()
	wantFields := func(oids []uint32) []byte {
		want := []byte("prefix")
		for i, v := range row {
			at := len(want)
			want = binary.BigEndian.AppendUint32(want, math.MaxUint32)
			if v == nil {
				continue
			}
			out, err := tm.Encode(oids[i], pgtype.BinaryFormatCode, pgcopy.PgxValue(v), want)
			if err != nil {
				t.Fatalf("pgx cannot encode column %d's %#v as type %d: %v", i, v, oids[i], err)
			}
			if out == nil {
				continue // NULL
			}
			want = out
			binary.BigEndian.PutUint32(want[at:], uint32(len(want)-at-4))
		}
		return want
	}
	// The zero-config types, and the value as text where it was jsonb:
	// the second goes through the encoder.
	other := native
	other[6] = pgtype.TextOID
	if m.Format == ValueText {
		other[6] = pgtype.JSONOID
	}
	for _, oids := range [][7]uint32{native, other} {
		enc := func(col int, dst []byte, v any) ([]byte, error) {
			at := len(dst)
			dst = binary.BigEndian.AppendUint32(dst, math.MaxUint32)
			if v == nil {
				return dst, nil
			}
			out, err := tm.Encode(oids[col], pgtype.BinaryFormatCode, pgcopy.PgxValue(v), dst)
			if err != nil || out == nil {
				return dst, err
			}
			binary.BigEndian.PutUint32(out[at:], uint32(len(out)-at-4))
			return out, nil
		}
		got, err := m.AppendRow(r, []byte("prefix"), oids[:], enc)
		if (err == nil) != (rowErr == nil) || (err != nil && err.Error() != rowErr.Error()) {
			t.Fatalf("%s value %.200q: AppendRow: %v, Row: %v", m.Format, r.Value, err, rowErr)
		}
		if err != nil {
			if string(got) != "prefix" {
				t.Fatalf("%s value %.200q: a refused record left %q", m.Format, r.Value, got)
			}
			continue
		}
		if want := wantFields(oids[:]); !bytes.Equal(got, want) {
			t.Fatalf("%s value %.200q key %q, types %v:\n got %q\nwant %q", m.Format, r.Value, r.Key, oids, got, want)
		}
	}
	checkRawAppendRowUnchecked(t, m, r, native)
}

// checkRawAppendRowUnchecked: AppendRowUnchecked writes what AppendRow
// writes, and where AppendRow refuses, refuses as it does, except a JSON
// value of at most maxNestingDepth bytes on the zero-config types: that is
// written as it is, for Postgres to refuse.
func checkRawAppendRowUnchecked(t *testing.T, m RawMapper, r *stream.Record, native [7]uint32) {
	t.Helper()
	enc := func(col int, dst []byte, v any) ([]byte, error) {
		return append(dst, fmt.Sprintf("col %d: %v", col, v)...), nil
	}
	other := native
	other[6] = pgtype.TextOID
	for _, oids := range [][7]uint32{native, other} {
		want, wantErr := m.AppendRow(r, []byte("prefix"), oids[:], enc)
		got, err := m.AppendRowUnchecked(r, []byte("prefix"), oids[:], enc)
		leftToPostgres := wantErr != nil && m.Format == ValueJSON && len(r.Value) <= maxNestingDepth && oids == native
		switch {
		case leftToPostgres:
			field := append(binary.BigEndian.AppendUint32(nil, uint32(len(r.Value)+1)), 1)
			if err != nil || !bytes.HasSuffix(got, append(field, r.Value...)) {
				t.Fatalf("value %.200q refused by AppendRow (%v): AppendRowUnchecked wrote %.300q, %v; want the value as it is", r.Value, wantErr, got, err)
			}
		case (err == nil) != (wantErr == nil) || (err != nil && err.Error() != wantErr.Error()) || !bytes.Equal(got, want):
			t.Fatalf("%s value %.200q, types %v:\nAppendRowUnchecked: %.300q, %v\nAppendRow:          %.300q, %v", m.Format, r.Value, oids, got, err, want, wantErr)
		}
	}
}

func TestAppendRowUncheckedLeavesShortJSONToPostgres(t *testing.T) {
	deep := strings.Repeat("[", maxNestingDepth+1) + strings.Repeat("]", maxNestingDepth+1)
	for _, v := range []string{`{"n":1}`, `{"n":`, `"\u0000"`, `["\ud800"]`, "{\"s\":\"\xff\"}", "\"a\x00b\"", ``, `1e1000000`,
		deep, deep[1 : len(deep)-1], `{"long":"` + strings.Repeat("x", maxNestingDepth) + `",}`} {
		for _, f := range []ValueFormat{ValueJSON, ValueText, ValueBytes} {
			m := RawMapper{Format: f}
			r := &stream.Record{Topic: "t", Offset: 7, Value: []byte(v)}
			checkRawAppendRowUnchecked(t, m, r, m.rawOIDs())
		}
	}
	// The cases the check above must see: a value left to Postgres, and
	// a value too long to be.
	m := RawMapper{Format: ValueJSON}
	oids := m.rawOIDs()
	if _, err := m.AppendRowUnchecked(&stream.Record{Value: []byte(`{"n":`)}, nil, oids[:], nil); err != nil {
		t.Errorf("a short value that is not JSON: %v, want it written for Postgres to refuse", err)
	}
	if _, err := m.AppendRowUnchecked(&stream.Record{Value: []byte(deep)}, nil, oids[:], nil); err == nil {
		t.Errorf("%d levels of arrays: written, want refused here (longer than %d bytes)", maxNestingDepth+1, maxNestingDepth)
	}
}

func checkAppendRow(t *testing.T, m *JSONMapper, tm *pgtype.Map, r *stream.Record, mix uint8) {
	t.Helper()
	row, rowErr := m.Row(r, nil)
	// The table's types: the mapped ones, but for some columns (chosen by
	// mix) another, which AppendRow must leave to the FieldEncoder.
	oids := make([]uint32, len(m.cols))
	for i, c := range m.cols {
		oids[i] = c.oid
		if mix > 2 && (i+int(mix))%3 == 0 {
			oids[i] = pgtype.UnknownOID
		}
	}
	handed := map[int]any{}
	enc := func(col int, dst []byte, v any) ([]byte, error) {
		if _, dup := handed[col]; dup {
			t.Fatalf("column %d handed to the FieldEncoder twice", col)
		}
		handed[col] = v
		marker := "col " + strconv.Itoa(col)
		return append(binary.BigEndian.AppendUint32(dst, uint32(len(marker))), marker...), nil
	}
	prefix := []byte("prefix")
	got, err := m.AppendRow(r, bytes.Clone(prefix), oids, enc)
	if (err == nil) != (rowErr == nil) || (err != nil && err.Error() != rowErr.Error()) {
		t.Fatalf("value %.200q key %.200q:\nAppendRow: %v\nRow:       %v", r.Value, r.Key, err, rowErr)
	}
	if err != nil {
		if !bytes.Equal(got, prefix) {
			t.Fatalf("value %.200q: a refused record left %q, not the prefix", r.Value, got)
		}
		return
	}
	want := bytes.Clone(prefix)
	for i, c := range m.cols {
		if oids[i] == 0 || oids[i] != c.oid {
			v, ok := handed[i]
			if !ok {
				t.Fatalf("value %.200q: column %s (type %d, mapped %d) was written, not handed over", r.Value, c.name, oids[i], c.oid)
			}
			if !sameMapped(reflect.ValueOf(v), reflect.ValueOf(row[i])) {
				t.Fatalf("value %.200q: column %s handed over %#v, Row has %#v", r.Value, c.name, v, row[i])
			}
			marker := "col " + strconv.Itoa(i)
			want = append(binary.BigEndian.AppendUint32(want, uint32(len(marker))), marker...)
			continue
		}
		if v, ok := handed[i]; ok {
			// A value written natively but for rare ones (numerics over
			// 64 bits, defaults): those must be Row's.
			if !sameMapped(reflect.ValueOf(v), reflect.ValueOf(row[i])) {
				t.Fatalf("value %.200q: column %s handed over %#v, Row has %#v", r.Value, c.name, v, row[i])
			}
			marker := "col " + strconv.Itoa(i)
			want = append(binary.BigEndian.AppendUint32(want, uint32(len(marker))), marker...)
			continue
		}
		at := len(want)
		want = binary.BigEndian.AppendUint32(want, math.MaxUint32)
		if row[i] == nil {
			continue
		}
		out, err := tm.Encode(c.oid, pgtype.BinaryFormatCode, pgcopy.PgxValue(row[i]), want)
		if err != nil {
			t.Fatalf("value %.200q: pgx cannot encode column %s's %#v: %v", r.Value, c.name, row[i], err)
		}
		want = out
		binary.BigEndian.PutUint32(want[at:], uint32(len(want)-at-4))
	}
	if !bytes.Equal(got, want) {
		// Name the first column that differs.
		t.Fatalf("value %.200q key %.200q: AppendRow wrote\n%q\npgx writes\n%q", r.Value, r.Key, got, want)
	}
}

// benchMapper is the bench's table with metadata columns, key the upsert
// key (metadata columns in it are NOT NULL).
func benchMapper(t testing.TB, key []string) *JSONMapper {
	t.Helper()
	spec := benchSpec()
	spec.Key = key
	spec.Metadata = MetadataSpec{Topic: "kafka_topic", Partition: "kafka_partition", Offset: "kafka_offset", Timestamp: "kafka_ts",
		Key: "kafka_key", Headers: "kafka_headers"}
	m, err := NewJSONMapper(spec)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestShortNumericWritesWhatNumericOfWrites holds appendNumericField's
// fast path to the exact one: for literals around every rounding and
// precision edge, the bytes written are numericOf's, and a literal the
// fast path takes is one numericOf accepts.
func TestShortNumericWritesWhatNumericOfWrites(t *testing.T) {
	var lits []string
	for _, ip := range []string{"0", "1", "5", "9", "10", "99", "100", "999", "123456", "9999999999", "100000000000000000", "999999999999999999"} {
		lits = append(lits, ip)
		for _, fp := range []string{"0", "00", "4", "5", "9", "05", "45", "49", "50", "51", "95", "99", "995", "994", "005", "0049999", "5000000", "123456789", "99999999"} {
			lits = append(lits, ip+"."+fp)
		}
	}
	for _, l := range slices.Clone(lits) {
		lits = append(lits, "-"+l)
	}
	lits = append(lits, "", "-", "01", "1.", ".5", "1e2", "1.5E-3", "--1", "1.2.3", "+1", " 1", "0.0000000000000000001", "1234567890123456789")
	tested := 0
	for _, typ := range []string{"numeric", "numeric(12,2)", "numeric(5,0)", "numeric(3,3)", "numeric(18,4)", "numeric(1,0)", "numeric(19,2)"} {
		c, err := parseType(typ)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range lits {
			for _, kind := range []valueKind{kindNumber, kindString} {
				v := jsonValue{kind: kind, text: l}
				abs, exp, neg, ok := c.shortNumeric(l)
				if !ok {
					continue
				}
				tested++
				d, cerr := numericOf(&c, v)
				if cerr != nil {
					t.Errorf("%s %q: the fast path takes it, numericOf says %s", typ, l, cerr.msg)
					continue
				}
				want, wok := pgvalue.AppendDecimal(nil, d.uint64(), d.neg, int32(d.exp))
				got, gok := pgvalue.AppendDecimal(nil, abs, neg, exp)
				if !wok || !gok || !bytes.Equal(got, want) {
					t.Errorf("%s %q: fast %d×10^%d neg %v (% x), numericOf %s×10^%d neg %v (% x)", typ, l, abs, exp, neg, got, d.digits, d.exp, d.neg, want)
				}
			}
		}
	}
	if tested < 1000 {
		t.Fatalf("only %d literals took the fast path", tested)
	}
}

// TestAppendQuickMatchesRow: the values appendQuick writes without their
// type's appendField are written as pgx writes Row's, and those it must
// not take (too long for the varchar, out of the integer's range, not a
// timestamp quickTimestamp reads, escaped, not plain) are refused or
// converted as Row does.
func TestAppendQuickMatchesRow(t *testing.T) {
	tm := pgtype.NewMap()
	pgcopy.RegisterNumericCodec(tm)
	lits := []string{`""`, `"a"`, `"abc"`, `"abcd"`, `"abcde"`, `"ab\"c"`, `"\u00e9t\u00e9"`, `"été!"`, `"ééééé"`, `"a\u0000"`,
		`0`, `-0`, `7`, `-7`, `32767`, `32768`, `-32768`, `-32769`, `2147483647`, `2147483648`, `-2147483648`, `-2147483649`,
		`999999999999999999`, `9223372036854775807`, `9223372036854775808`, `-9223372036854775808`, `1.0`, `1e2`, `-1.5`,
		`"12"`, `true`, `null`, `{}`, `[1]`, `"2026-11-30T09:01:02Z"`, `"2026-11-30 09:01:02.1234565+05:30"`, `"2026-11-30T09:01:02.9999995-00:00"`,
		`"0001-01-01T00:00:00Z"`, `"9999-12-31T23:59:59.999999999+14:00"`, `"2024-02-29T00:00:00Z"`, `"2026-02-29T00:00:00Z"`, `"2026-11-30T09:01:02"`,
		`"2026-11-30T24:00:00Z"`, `"2026-11-30T09:01:02\u005a"`, `"2026-11-30"`, `1764493262`,
		`12.5`, `-0.005`, `0.015`, `9999.995`, `99999.99`, `1e3`, `1.5E-2`, `-12345678901234567890.5`, `"7.25"`}
	for _, typ := range []string{"text", "varchar(4)", "smallint", "integer", "bigint", "timestamptz", "numeric(6,2)", "numeric"} {
		m, err := NewJSONMapper(MappingSpec{Table: "t", Columns: []ColumnSpec{{Name: "c", Path: "v", Type: typ}}})
		if err != nil {
			t.Fatal(err)
		}
		if m.cols[0].typ.base.quick == quickNone {
			t.Fatalf("%s: no quick path", typ)
		}
		for _, lit := range lits {
			checkAppendRow(t, m, tm, &stream.Record{Topic: "t", Value: []byte(`{"v":` + lit + `}`)}, 0)
		}
	}
}
