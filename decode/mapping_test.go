package decode

import (
	"errors"
	"math/big"
	"net/netip"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kafka2pg/kafka2pg/pgvalue"

	"github.com/kafka2pg/kafka2pg/stream"
)

// mapOne maps value with a mapper of the one column c.
func mapOne(t testing.TB, c ColumnSpec, value string) (any, error) {
	t.Helper()
	m, err := NewJSONMapper(MappingSpec{Table: "t", Columns: []ColumnSpec{c}})
	if err != nil {
		t.Fatalf("NewJSONMapper(%+v): %v", c, err)
	}
	row, err := m.Row(&stream.Record{Topic: "t", Partition: 1, Offset: 5, Value: []byte(value)}, nil)
	if err != nil {
		return nil, err
	}
	return row[0], nil
}

func num(s string) pgvalue.Numeric {
	d, ok := parseDecimal(s)
	if !ok {
		panic(s)
	}
	return d.numeric()
}

func TestJSONMapperConvertsEveryTypeAtItsEdges(t *testing.T) {
	utc := func(y int, mo time.Month, d, h, mi, s, ns int) time.Time {
		return time.Date(y, mo, d, h, mi, s, ns, time.UTC)
	}
	cases := []struct {
		name  string
		col   ColumnSpec
		value string // the JSON of member "v"
		want  any
	}{
		{"text keeps unicode", ColumnSpec{Type: "text"}, `"héllo \ud83d\ude00"`, "héllo 😀"},
		{"text takes a number literally", ColumnSpec{Type: "text"}, `12.50`, "12.50"},
		{"text takes a boolean", ColumnSpec{Type: "text"}, `false`, "false"},
		{"varchar at its length counts characters, not bytes", ColumnSpec{Type: "varchar(3)"}, `"äöü"`, "äöü"},
		{"smallint minimum", ColumnSpec{Type: "smallint"}, `-32768`, int16(-32768)},
		{"smallint maximum", ColumnSpec{Type: "int2"}, `32767`, int16(32767)},
		{"integer minimum", ColumnSpec{Type: "integer"}, `-2147483648`, int32(-2147483648)},
		{"integer maximum", ColumnSpec{Type: "int4"}, `2147483647`, int32(2147483647)},
		{"bigint minimum", ColumnSpec{Type: "bigint"}, `-9223372036854775808`, int64(-9223372036854775808)},
		{"bigint maximum as a protobuf-style string", ColumnSpec{Type: "bigint"}, `"9223372036854775807"`, int64(9223372036854775807)},
		{"an integer written with an exponent is still an integer", ColumnSpec{Type: "bigint"}, `1.5e3`, int64(1500)},
		{"an integer written with a zero fraction is still an integer", ColumnSpec{Type: "integer"}, `7.000`, int32(7)},
		{"negative zero is zero", ColumnSpec{Type: "integer"}, `-0`, int32(0)},
		{"numeric keeps every digit", ColumnSpec{Type: "numeric(38,10)"}, `1234567890123456789012345678.0123456789`, num("1234567890123456789012345678.0123456789")},
		{"numeric at its precision edge", ColumnSpec{Type: "numeric(5,2)"}, `999.99`, num("999.99")},
		{"numeric rounds half away from zero to its scale, as Postgres", ColumnSpec{Type: "numeric(5,2)"}, `-1.005`, num("-1.01")},
		{"numeric drops digits below its scale", ColumnSpec{Type: "numeric(5,2)"}, `0.001`, num("0")},
		{"numeric(p) has scale 0", ColumnSpec{Type: "decimal(3)"}, `999.4`, num("999")},
		{"unconstrained numeric keeps tiny values", ColumnSpec{Type: "numeric"}, `1e-30`, num("1e-30")},
		{"numeric from a string", ColumnSpec{Type: "numeric(10,2)"}, `"12.34"`, num("12.34")},
		{"real", ColumnSpec{Type: "real"}, `3.4e38`, float32(3.4e38)},
		{"double precision is correctly rounded", ColumnSpec{Type: "float8"}, `0.1`, 0.1},
		{"double precision takes NaN as a string", ColumnSpec{Type: "double precision"}, `"NaN"`, nil}, // checked below
		{"boolean true", ColumnSpec{Type: "bool"}, `true`, true},
		{"timestamptz in UTC", ColumnSpec{Type: "timestamptz"}, `"2026-01-02T03:04:05Z"`, utc(2026, 1, 2, 3, 4, 5, 0)},
		{"timestamptz converts an offset to the instant", ColumnSpec{Type: "timestamptz"}, `"2026-01-02T03:04:05.5-05:30"`, utc(2026, 1, 2, 8, 34, 5, 5e8)},
		{"timestamptz rounds nanoseconds to microseconds", ColumnSpec{Type: "timestamptz"}, `"2026-01-02 03:04:05.0000005Z"`, utc(2026, 1, 2, 3, 4, 5, 1000)},
		{"timestamptz from epoch seconds with a fraction", ColumnSpec{Type: "timestamptz", TimeUnit: "s"}, `1700000000.25`, utc(2023, 11, 14, 22, 13, 20, 25e7)},
		{"timestamptz from epoch millis", ColumnSpec{Type: "timestamptz", TimeUnit: "ms"}, `1700000000123`, utc(2023, 11, 14, 22, 13, 20, 123e6)},
		{"timestamptz from epoch micros", ColumnSpec{Type: "timestamptz", TimeUnit: "us"}, `-1`, utc(1969, 12, 31, 23, 59, 59, 999999000)},
		{"timestamptz from epoch nanos", ColumnSpec{Type: "timestamptz", TimeUnit: "ns"}, `1700000000123456789`, utc(2023, 11, 14, 22, 13, 20, 123457000)},
		{"timestamptz from epoch millis in a string", ColumnSpec{Type: "timestamptz", TimeUnit: "ms"}, `"0"`, utc(1970, 1, 1, 0, 0, 0, 0)},
		{"timestamp without offset is kept as written", ColumnSpec{Type: "timestamp"}, `"2026-01-02T03:04:05"`, utc(2026, 1, 2, 3, 4, 5, 0)},
		{"timestamp with an offset is converted to UTC", ColumnSpec{Type: "timestamp"}, `"2026-01-02T03:04:05+01:00"`, utc(2026, 1, 2, 2, 4, 5, 0)},
		{"date", ColumnSpec{Type: "date"}, `"2024-02-29"`, utc(2024, 2, 29, 0, 0, 0, 0)},
		{"date from epoch seconds takes the UTC day", ColumnSpec{Type: "date", TimeUnit: "s"}, `86399`, utc(1970, 1, 1, 0, 0, 0, 0)},
		{"time with microseconds", ColumnSpec{Type: "time"}, `"23:59:59.999999"`, pgvalue.Time{Microseconds: microsPerDay - 1}},
		{"time 24:00:00 is the end of the day", ColumnSpec{Type: "time"}, `"24:00:00"`, pgvalue.Time{Microseconds: microsPerDay}},
		{"time without seconds", ColumnSpec{Type: "time"}, `"07:30"`, pgvalue.Time{Microseconds: 27000e6}},
		{"time from millis since midnight", ColumnSpec{Type: "time", TimeUnit: "ms"}, `1500`, pgvalue.Time{Microseconds: 1500000}},
		{"uuid in braces and upper case", ColumnSpec{Type: "uuid"}, `"{00112233-4455-6677-8899-AABBCCDDEEFF}"`,
			pgvalue.UUID{0, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, 0x99, 0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff}},
		{"jsonb of a sub-document keeps number literals", ColumnSpec{Type: "jsonb"}, `{"a":1.10,"b":"<&>"}`, []byte(`{"a":1.10,"b":"<&>"}`)},
		{"jsonb of a string", ColumnSpec{Type: "jsonb"}, `"x"`, []byte(`"x"`)},
		{"bytea from padded base64", ColumnSpec{Type: "bytea"}, `"AAE="`, []byte{0, 1}},
		{"bytea from unpadded base64", ColumnSpec{Type: "bytea"}, `"AAE"`, []byte{0, 1}},
		{"bytea empty", ColumnSpec{Type: "bytea"}, `""`, []byte{}},
		{"inet address", ColumnSpec{Type: "inet"}, `"2001:db8::1"`, netip.MustParsePrefix("2001:db8::1/128")},
		{"inet keeps host bits", ColumnSpec{Type: "inet"}, `"10.1.2.3/8"`, netip.MustParsePrefix("10.1.2.3/8")},
		{"integer array", ColumnSpec{Type: "int[]"}, `[1,2]`, []int32{1, 2}},
		{"array with nulls is a slice of pointers", ColumnSpec{Type: "smallint[]"}, `[null,2]`, []*int16{nil, ptr(int16(2))}},
		{"empty array", ColumnSpec{Type: "text[]"}, `[]`, []string{}},
		{"null is NULL", ColumnSpec{Type: "bigint"}, `null`, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.col.Name, c.col.Path = "v", "v"
			got, err := mapOne(t, c.col, `{"v":`+c.value+`}`)
			if err != nil {
				t.Fatalf("%s from %s: %v", c.col.Type, c.value, err)
			}
			if f, ok := got.(float64); ok && c.want == nil && f != f {
				return // NaN
			}
			if !sameValue(got, c.want) {
				t.Errorf("%s from %s = %#v, want %#v", c.col.Type, c.value, got, c.want)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }

func sameValue(a, b any) bool {
	if an, ok := a.(pgvalue.Numeric); ok {
		bn, ok := b.(pgvalue.Numeric)
		return ok && new(big.Rat).SetFrac(an.Int, big.NewInt(1)).Cmp(new(big.Rat).SetFrac(bn.Int, big.NewInt(1))) == 0 && an.Exp == bn.Exp
	}
	if at, ok := a.(time.Time); ok {
		bt, ok := b.(time.Time)
		return ok && at.Equal(bt) && at.Location() == time.UTC
	}
	return reflect.DeepEqual(a, b)
}

func TestJSONMapperRefusesValuesThatDoNotFit(t *testing.T) {
	cases := []struct {
		name  string
		col   ColumnSpec
		value string
		kind  string
		says  string // part of the message
	}{
		{"smallint overflow is not wrapped", ColumnSpec{Type: "smallint"}, `32768`, KindOutOfRange, "32768 is out of the range of smallint"},
		{"integer underflow", ColumnSpec{Type: "integer"}, `-2147483649`, KindOutOfRange, "integer"},
		{"bigint overflow", ColumnSpec{Type: "bigint"}, `9223372036854775808`, KindOutOfRange, "bigint"},
		{"huge exponent", ColumnSpec{Type: "bigint"}, `1e999999999999`, KindOutOfRange, "bigint"},
		{"a fraction is not an integer", ColumnSpec{Type: "integer"}, `1.5`, KindTypeMismatch, "1.5 is not a whole number"},
		{"a string that is not a number", ColumnSpec{Type: "integer"}, `"12a"`, KindTypeMismatch, `"12a" is not a number`},
		{"a boolean is not a number", ColumnSpec{Type: "integer"}, `true`, KindTypeMismatch, "true is a boolean"},
		{"numeric over its precision", ColumnSpec{Type: "numeric(5,2)"}, `1000`, KindOutOfRange, "numeric(5,2) allows 3"},
		{"numeric over its precision after rounding", ColumnSpec{Type: "numeric(5,2)"}, `999.995`, KindOutOfRange, "999.995"},
		{"numeric refuses NaN", ColumnSpec{Type: "numeric(12,2)"}, `"NaN"`, KindTypeMismatch, "NaN"},
		{"numeric refuses Infinity", ColumnSpec{Type: "numeric"}, `"Infinity"`, KindTypeMismatch, "Infinity"},
		{"a date that does not exist (no leap day in 2026)", ColumnSpec{Type: "date"}, `"2026-02-29"`, KindInvalidTimestamp, "2026-02-29"},
		{"real overflow", ColumnSpec{Type: "real"}, `3.5e38`, KindOutOfRange, "real"},
		{"double overflow", ColumnSpec{Type: "double precision"}, `1e309`, KindOutOfRange, "double precision"},
		{"boolean is strict about strings", ColumnSpec{Type: "boolean"}, `"true"`, KindTypeMismatch, "only true or false"},
		{"boolean is strict about numbers", ColumnSpec{Type: "boolean"}, `1`, KindTypeMismatch, "only true or false"},
		{"varchar too long", ColumnSpec{Type: "varchar(3)"}, `"abcd"`, KindOutOfRange, "4 characters long"},
		{"text with a NUL", ColumnSpec{Type: "text"}, `"a\u0000b"`, KindNULByte, "NUL"},
		{"text from an object", ColumnSpec{Type: "text"}, `{"a":1}`, KindTypeMismatch, "jsonb"},
		{"timestamptz needs an offset", ColumnSpec{Type: "timestamptz"}, `"2026-01-02T03:04:05"`, KindInvalidTimestamp, "no UTC offset"},
		{"timestamptz garbage", ColumnSpec{Type: "timestamptz"}, `"yesterday"`, KindInvalidTimestamp, `"yesterday"`},
		{"timestamptz invalid day", ColumnSpec{Type: "timestamptz"}, `"2026-02-30T00:00:00Z"`, KindInvalidTimestamp, "RFC 3339"},
		{"epoch number without a unit", ColumnSpec{Type: "timestamptz"}, `1700000000`, KindTypeMismatch, "time_unit"},
		{"epoch beyond Postgres' range", ColumnSpec{Type: "timestamptz", TimeUnit: "s"}, `9223372036854775807`, KindOutOfRange, "timestamp"},
		{"date in another format", ColumnSpec{Type: "date"}, `"02/01/2026"`, KindInvalidTimestamp, "YYYY-MM-DD"},
		{"time past 24:00", ColumnSpec{Type: "time"}, `"24:00:01"`, KindInvalidTimestamp, "HH:MM:SS"},
		{"time with an offset", ColumnSpec{Type: "time"}, `"12:00:00Z"`, KindInvalidTimestamp, "no offset"},
		{"time from a negative number", ColumnSpec{Type: "time", TimeUnit: "s"}, `-1`, KindOutOfRange, "one day"},
		{"uuid too short", ColumnSpec{Type: "uuid"}, `"123e4567-e89b-12d3-a456"`, KindInvalidUUID, "not a UUID"},
		{"uuid with a non-hex digit", ColumnSpec{Type: "uuid"}, `"123e4567-e89b-12d3-a456-42661417400g"`, KindInvalidUUID, "hex"},
		{"jsonb with a NUL escape", ColumnSpec{Type: "jsonb"}, `{"a":"\u0000"}`, KindUnsupported, `\u0000`},
		{"bytea not base64", ColumnSpec{Type: "bytea"}, `"***"`, KindInvalidBase64, "base64"},
		{"inet garbage", ColumnSpec{Type: "inet"}, `"300.1.1.1"`, KindInvalidInet, "300.1.1.1"},
		{"inet with a zone", ColumnSpec{Type: "inet"}, `"fe80::1%eth0"`, KindInvalidInet, "zone"},
		{"array element out of range names the element", ColumnSpec{Type: "smallint[]"}, `[1,70000]`, KindOutOfRange, "element 1"},
		{"nested arrays", ColumnSpec{Type: "integer[]"}, `[[1]]`, KindTypeMismatch, "one-dimensional"},
		{"a scalar for an array", ColumnSpec{Type: "integer[]"}, `1`, KindTypeMismatch, "JSON array"},
		{"a long value is truncated in the message", ColumnSpec{Type: "integer"}, `"` + strings.Repeat("x", 500) + `"`, KindTypeMismatch, "…"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.col.Name, c.col.Path = "v", "v"
			_, err := mapOne(t, c.col, `{"v":`+c.value+`}`)
			var de *DecodeError
			if !errors.As(err, &de) || !errors.Is(err, ErrBadRecord) {
				t.Fatalf("%s from %s: error %v, want a *DecodeError", c.col.Type, c.value, err)
			}
			if de.Kind != c.kind || de.Column != "v" || de.Offset != 5 || !strings.Contains(err.Error(), c.says) {
				t.Errorf("%s from %s: %v (kind %s), want kind %s in column v saying %q", c.col.Type, c.value, err, de.Kind, c.kind, c.says)
			}
			if len(err.Error()) > 400 {
				t.Errorf("the message is %d bytes long: %s", len(err.Error()), err)
			}
		})
	}
}

func TestJSONMapperFollowsPaths(t *testing.T) {
	doc := `{"a":{"b":[{"c":1},{"c":2}]},"x.y":{"z w":3},"n":null,"s":"str"}`
	cases := []struct {
		path string
		want any // nil = NULL
		kind string
	}{
		{"a.b[0].c", int64(1), ""},
		{"$.a.b[1].c", int64(2), ""},
		{"a.b[-1].c", int64(2), ""},
		{`["x.y"]["z w"]`, int64(3), ""},
		{"a.b[5].c", nil, ""},
		{"a.missing", nil, ""},
		{"n.deeper", nil, ""},
		{"s.deeper", nil, KindTypeMismatch},
		{"a[0]", nil, KindTypeMismatch},
	}
	for _, c := range cases {
		got, err := mapOne(t, ColumnSpec{Name: "v", Path: c.path, Type: "bigint"}, doc)
		var de *DecodeError
		switch {
		case c.kind != "" && (!errors.As(err, &de) || de.Kind != c.kind):
			t.Errorf("path %s: error %v, want kind %s", c.path, err, c.kind)
		case c.kind == "" && (err != nil || got != c.want):
			t.Errorf("path %s = %v, %v; want %v", c.path, got, err, c.want)
		}
	}
	if _, err := mapOne(t, ColumnSpec{Name: "v", Path: "$", Type: "integer"}, `42`); err != nil {
		t.Errorf("$ of a scalar document: %v", err)
	}
}

func TestJSONPathSyntaxErrorsSayWhere(t *testing.T) {
	for _, p := range []string{"a..b", ".a", "a.", "a[", "a[x]", "a[+1]", "a[0]b", `a["x`, `a["x"`, "$x", "a]b", `a"b`} {
		if _, err := parsePath(p); err == nil || !strings.Contains(err.Error(), strconv.Quote(p)) {
			t.Errorf("parsePath(%q) = %v, want an error quoting the path", p, err)
		}
	}
}

func TestJSONMapperNullsMissingValuesAndDefaults(t *testing.T) {
	def := func(s string) *string { return &s }
	cases := []struct {
		name  string
		col   ColumnSpec
		value string
		want  any
		kind  string
	}{
		{"missing is NULL by default", ColumnSpec{Type: "integer"}, `{}`, nil, ""},
		{"null is NULL", ColumnSpec{Type: "integer"}, `{"v":null}`, nil, ""},
		{"missing takes the default", ColumnSpec{Type: "integer", Default: def("7")}, `{}`, int32(7), ""},
		{"null takes the default", ColumnSpec{Type: "text", Default: def(`"n/a"`)}, `{"v":null}`, "n/a", ""},
		{"on_missing default", ColumnSpec{Type: "integer", Default: def("7"), OnMissing: "default"}, `{}`, int32(7), ""},
		{"on_missing error refuses a missing path", ColumnSpec{Type: "integer", Default: def("7"), OnMissing: "error"}, `{}`, nil, KindMissingValue},
		{"on_missing error still takes the default for null", ColumnSpec{Type: "integer", Default: def("7"), OnMissing: "error"}, `{"v":null}`, int32(7), ""},
		{"not null refuses null", ColumnSpec{Type: "integer", NotNull: true}, `{"v":null}`, nil, KindNullValue},
		{"not null refuses missing", ColumnSpec{Type: "integer", NotNull: true}, `{}`, nil, KindNullValue},
		{"not null with a default takes it", ColumnSpec{Type: "integer", NotNull: true, Default: def("0")}, `{}`, int32(0), ""},
		{"a present value wins over the default", ColumnSpec{Type: "integer", Default: def("0")}, `{"v":3}`, int32(3), ""},
		{"a value that is not JSON is a bad record", ColumnSpec{Type: "integer"}, `{"v":`, nil, KindInvalidJSON},
		{"two documents are a bad record", ColumnSpec{Type: "integer"}, `{} {}`, nil, KindInvalidJSON},
		{"invalid UTF-8 is refused, not replaced", ColumnSpec{Type: "text"}, "{\"v\":\"\xff\"}", nil, KindInvalidUTF8},
		{"a lone surrogate is refused, not replaced", ColumnSpec{Type: "text"}, `{"v":"\u0000","w":"\ud800"}`, nil, KindUnsupported},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.col.Name = "v"
			got, err := mapOne(t, c.col, c.value)
			if c.kind != "" {
				var de *DecodeError
				if !errors.As(err, &de) || de.Kind != c.kind {
					t.Fatalf("%s: error %v, want kind %s", c.value, err, c.kind)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, c.want) {
				t.Errorf("%s = %#v, %v; want %#v", c.value, got, err, c.want)
			}
		})
	}
}

func TestNewJSONMapperRefusesBadSpecsNamingTheFix(t *testing.T) {
	def := func(s string) *string { return &s }
	ok := ColumnSpec{Name: "id", Type: "bigint"}
	cases := []struct {
		name string
		spec MappingSpec
		says []string
	}{
		{"unknown type", MappingSpec{Table: "t", Columns: []ColumnSpec{{Name: "a", Type: "money"}}}, []string{`"a"`, "money", "use one of"}},
		{"varchar length zero", MappingSpec{Table: "t", Columns: []ColumnSpec{{Name: "a", Type: "varchar(0)"}}}, []string{`"a"`, "varchar(255)"}},
		{"varchar length not a number", MappingSpec{Table: "t", Columns: []ColumnSpec{{Name: "a", Type: "varchar(x)"}}}, []string{`"x"`}},
		{"numeric precision too large", MappingSpec{Table: "t", Columns: []ColumnSpec{{Name: "a", Type: "numeric(1001,2)"}}}, []string{"precision", "1000"}},
		{"numeric scale over precision", MappingSpec{Table: "t", Columns: []ColumnSpec{{Name: "a", Type: "numeric(3,4)"}}}, []string{"scale"}},
		{"modifiers on a type without them", MappingSpec{Table: "t", Columns: []ColumnSpec{{Name: "a", Type: "bigint(3)"}}}, []string{"takes no modifiers"}},
		{"jsonb array", MappingSpec{Table: "t", Columns: []ColumnSpec{{Name: "a", Type: "jsonb[]"}}}, []string{"arrays of jsonb"}},
		{"bad path", MappingSpec{Table: "t", Columns: []ColumnSpec{{Name: "a", Path: "x..y", Type: "text"}}}, []string{`"a"`, "x..y"}},
		{"duplicate column", MappingSpec{Table: "t", Columns: []ColumnSpec{ok, ok}}, []string{`"id"`, "twice", "rename"}},
		{"metadata clashes with data", MappingSpec{Table: "t", Columns: []ColumnSpec{ok}, Metadata: MetadataSpec{Offset: "id"}}, []string{`"id"`, "metadata offset"}},
		{"header column clashes", MappingSpec{Table: "t", Metadata: MetadataSpec{Topic: "x", Header: map[string]string{"x": "h"}}}, []string{`"x"`, "twice"}},
		{"empty header name", MappingSpec{Table: "t", Metadata: MetadataSpec{Header: map[string]string{"x": ""}}}, []string{`"x"`, "header name is empty"}},
		{"key column unknown", MappingSpec{Table: "t", Columns: []ColumnSpec{ok}, Key: []string{"nope"}}, []string{`"nope"`, "not a column"}},
		{"key column twice", MappingSpec{Table: "t", Columns: []ColumnSpec{ok}, Key: []string{"id", "id"}}, []string{`"id"`, "twice"}},
		{"delete without key", MappingSpec{Table: "t", Columns: []ColumnSpec{ok}, DeleteOnTombstone: true}, []string{"delete_on_tombstone", "key"}},
		{"delete with a key from the value", MappingSpec{Table: "t", Columns: []ColumnSpec{ok}, Key: []string{"id"}, DeleteOnTombstone: true}, []string{`"id"`, "from: key"}},
		{"jsonb key", MappingSpec{Table: "t", Columns: []ColumnSpec{{Name: "j", Type: "jsonb"}}, Key: []string{"j"}}, []string{`"j"`, "jsonb"}},
		{"time unit on a number column", MappingSpec{Table: "t", Columns: []ColumnSpec{{Name: "a", Type: "bigint", TimeUnit: "ms"}}}, []string{`"a"`, "time_unit"}},
		{"unknown time unit", MappingSpec{Table: "t", Columns: []ColumnSpec{{Name: "a", Type: "timestamptz", TimeUnit: "min"}}}, []string{`"min"`}},
		{"unknown from", MappingSpec{Table: "t", Columns: []ColumnSpec{{Name: "a", Type: "text", From: "header"}}}, []string{`"header"`, "value or key"}},
		{"on_missing default without default", MappingSpec{Table: "t", Columns: []ColumnSpec{{Name: "a", Type: "text", OnMissing: "default"}}}, []string{"set default"}},
		{"unknown on_missing", MappingSpec{Table: "t", Columns: []ColumnSpec{{Name: "a", Type: "text", OnMissing: "skip"}}}, []string{`"skip"`}},
		{"default not JSON", MappingSpec{Table: "t", Columns: []ColumnSpec{{Name: "a", Type: "text", Default: def("n/a")}}}, []string{`"a"`, "n/a", "quoted"}},
		{"default that does not fit", MappingSpec{Table: "t", Columns: []ColumnSpec{{Name: "a", Type: "smallint", Default: def("99999")}}}, []string{`"a"`, "99999", "smallint"}},
		{"default null", MappingSpec{Table: "t", Columns: []ColumnSpec{{Name: "a", Type: "text", Default: def("null")}}}, []string{"remove it"}},
		{"bad key format", MappingSpec{Table: "t", Metadata: MetadataSpec{Key: "k", KeyFormat: "avro"}}, []string{`"avro"`}},
		{"key format without key column", MappingSpec{Table: "t", Columns: []ColumnSpec{ok}, Metadata: MetadataSpec{KeyFormat: "json"}}, []string{"key_format"}},
		{"no columns", MappingSpec{Table: "t"}, []string{"no columns"}},
		{"empty table name", MappingSpec{Columns: []ColumnSpec{ok}}, []string{"table"}},
		{"empty column name", MappingSpec{Table: "t", Columns: []ColumnSpec{{Type: "text"}}}, []string{"columns[0]"}},
		{"long column name", MappingSpec{Table: "t", Columns: []ColumnSpec{{Name: strings.Repeat("c", 64), Type: "text"}}}, []string{"63 bytes"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := NewJSONMapper(c.spec)
			if err == nil {
				t.Fatalf("NewJSONMapper(%+v) = nil error", c.spec)
			}
			for _, s := range c.says {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not say %q", err, s)
				}
			}
		})
	}
}

func TestJSONMapperMetadataColumnsAndKafkaKey(t *testing.T) {
	m, err := NewJSONMapper(MappingSpec{Schema: "s", Table: "accounts",
		Columns: []ColumnSpec{{Name: "id", From: "key", Path: "id", Type: "uuid"}, {Name: "balance", Type: "numeric(12,2)", NotNull: true}},
		Metadata: MetadataSpec{Topic: "topic", Partition: "partition", Offset: "offset", Timestamp: "ts", TimestampType: "ts_type",
			Key: "raw_key", KeyFormat: "text", Headers: "headers", Header: map[string]string{"z_trace": "trace", "a_src": "source"}},
		Key: []string{"id"}, DeleteOnTombstone: true})
	if err != nil {
		t.Fatal(err)
	}
	tbl := m.Table()
	wantCols := []string{"id", "balance", "topic", "partition", "offset", "ts", "ts_type", "raw_key", "headers", "a_src", "z_trace"}
	if !reflect.DeepEqual(tbl.ColumnNames(), wantCols) {
		t.Errorf("columns = %v, want %v", tbl.ColumnNames(), wantCols)
	}
	if !tbl.Columns[0].NotNull || !reflect.DeepEqual(tbl.PrimaryKey, []string{"id"}) || !reflect.DeepEqual(m.KeyColumns(), []string{"id"}) {
		t.Errorf("the key column must be the NOT NULL primary key: %+v", tbl)
	}
	ts := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	key := `{"id":"123e4567-e89b-12d3-a456-426614174000"}`
	r := &stream.Record{Topic: "acc", Partition: 3, Offset: 10, Timestamp: ts, TimestampType: stream.TimestampCreateTime, Key: []byte(key),
		Value: []byte(`{"balance":"10.5"}`), Headers: []stream.Header{{Key: "trace", Value: []byte("old")}, {Key: "trace", Value: []byte("new")}}}
	row, err := m.Row(r, make([]any, 3))
	if err != nil {
		t.Fatal(err)
	}
	if len(row) != len(wantCols) {
		t.Fatalf("row has %d values: %v", len(row), row)
	}
	if row[2] != "acc" || row[3] != int32(3) || row[4] != int64(10) || row[5] != ts || row[6] != stream.TimestampCreateTime || row[7] != key || row[9] != nil || row[10] != "new" {
		t.Errorf("metadata = %#v", row[2:])
	}
	if string(row[8].([]byte)) != `[{"key":"trace","value":"old"},{"key":"trace","value":"new"}]` {
		t.Errorf("headers = %s", row[8])
	}

	tomb := &stream.Record{Topic: "acc", Offset: 11, Key: []byte(key)}
	if !m.IsTombstone(tomb) || m.IsTombstone(r) {
		t.Error("IsTombstone must be true exactly for a null value")
	}
	k, err := m.KeyRow(tomb)
	if err != nil || len(k) != 1 || k[0] != row[0] {
		t.Errorf("KeyRow(tombstone) = %v, %v; want [%v]", k, err, row[0])
	}
	_, err = m.KeyRow(&stream.Record{Topic: "acc", Offset: 12})
	var de *DecodeError
	if !errors.As(err, &de) || de.Column != "id" || de.Kind != KindNullValue {
		t.Errorf("KeyRow of a tombstone without key = %v, want a null_value DecodeError for id", err)
	}
	_, err = m.KeyRow(&stream.Record{Topic: "acc", Offset: 13, Key: []byte("not json")})
	if !errors.As(err, &de) || de.Kind != KindInvalidJSON || !strings.Contains(err.Error(), "the key is not JSON") {
		t.Errorf("KeyRow with a key that is not JSON = %v", err)
	}
	_, err = m.Row(&stream.Record{Key: []byte(key), Value: []byte(`{"balance":1}`), Headers: []stream.Header{{Key: "source", Value: []byte{0xff}}}}, nil)
	if !errors.As(err, &de) || de.Column != "a_src" || de.Kind != KindInvalidUTF8 {
		t.Errorf("a header that is not text = %v, want invalid_utf8 in a_src", err)
	}
	_, err = m.Row(&stream.Record{Key: []byte("\xff"), Value: []byte(`{"balance":1}`)}, nil)
	if !errors.As(err, &de) || de.Kind != KindInvalidUTF8 {
		t.Errorf("a key that is not UTF-8 = %v, want invalid_utf8", err)
	}
}

func TestJSONMapperTombstonesInAppendMode(t *testing.T) {
	spec := MappingSpec{Table: "events", Columns: []ColumnSpec{{Name: "k", From: "key", Path: "$", Type: "text"}, {Name: "v", Type: "integer"}},
		Metadata: MetadataSpec{Offset: "off"}}
	m, err := NewJSONMapper(spec)
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Table().PrimaryKey) != 0 || len(m.KeyColumns()) != 0 {
		t.Errorf("append mode has no primary key: %+v", m.Table())
	}
	row, err := m.Row(&stream.Record{Offset: 4, Key: []byte(`"a"`)}, nil)
	if err != nil || !reflect.DeepEqual(row, []any{"a", nil, int64(4)}) {
		t.Errorf("a tombstone with nullable value columns = %#v, %v; want the key, NULL and the offset", row, err)
	}
	spec.Columns[1].NotNull = true
	m, err = NewJSONMapper(spec)
	if err != nil {
		t.Fatal(err)
	}
	_, err = m.Row(&stream.Record{Offset: 4, Key: []byte(`"a"`)}, nil)
	var de *DecodeError
	if !errors.As(err, &de) || de.Kind != KindTombstone || de.Column != "v" || !strings.Contains(err.Error(), "delete_on_tombstone") {
		t.Errorf("a tombstone with a NOT NULL value column = %v, want kind tombstone naming v and the fix", err)
	}
	if _, err := m.KeyRow(&stream.Record{}); err == nil {
		t.Error("KeyRow in append mode must fail")
	}
}

func TestJSONMapperTableIsACopy(t *testing.T) {
	m, err := NewJSONMapper(MappingSpec{Table: "t", Columns: []ColumnSpec{{Name: "a", Type: "INT"}}, Key: []string{"a"}})
	if err != nil {
		t.Fatal(err)
	}
	tbl := m.Table()
	tbl.Columns[0].Name = "changed"
	if m.Table().Columns[0].Name != "a" || m.Table().Columns[0].Type != "integer" {
		t.Errorf("Table() = %+v, want an unchanged copy with the canonical type name", m.Table())
	}
}
