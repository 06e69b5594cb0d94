package cdc

import (
	"encoding/base64"
	"reflect"
	"testing"
	"time"

	"github.com/kafka2pg/kafka2pg/pgvalue"
)

// decodeOne decodes the JSON value v with a one-field schema.
func decodeOne(t *testing.T, typ, name string, params map[string]string, v string) (any, *convError) {
	t.Helper()
	n, err := compile(&connectSchema{Type: typ, Name: name, Parameters: params, Field: "f"})
	if err != nil {
		t.Fatal(err)
	}
	var r reader
	r.reset([]byte(v))
	return n.decode(&r)
}

func TestEachTypeAtItsEdges(t *testing.T) {
	b64 := func(b ...byte) string { return `"` + base64.StdEncoding.EncodeToString(b) + `"` }
	dec := map[string]string{"scale": "2", "connect.decimal.precision": "4"}
	cases := []struct {
		name, typ, sem string
		params         map[string]string
		in             string
		want           any    // when kind is ""
		kind           string // a refusal's kind
	}{
		{"int8 at its minimum", "int8", "", nil, `-128`, int16(-128), ""},
		{"int8 past its maximum", "int8", "", nil, `128`, nil, "out_of_range"},
		{"an int64 written as a float", "int64", "", nil, `1.0`, nil, "type_mismatch"},
		{"a float that overflows", "float", "", nil, `1e39`, nil, "out_of_range"},
		{"a float as an unknown string", "double", "", nil, `"nan"`, nil, "type_mismatch"},
		{"a decimal as a JSON number", "bytes", "org.apache.kafka.connect.data.Decimal", dec, `-12.50`, pgvalue.Numeric{Int: bigInt(-1250), Exp: -2}, ""},
		{"a decimal of one negative byte", "bytes", "org.apache.kafka.connect.data.Decimal", dec, b64(0xff), pgvalue.Numeric{Int: bigInt(-1), Exp: -2}, ""},
		{"a decimal too wide for numeric(4,2)", "bytes", "org.apache.kafka.connect.data.Decimal", dec, b64(0x27, 0x10), nil, "out_of_range"},
		{"a decimal of 9 bytes", "bytes", "org.apache.kafka.connect.data.Decimal", map[string]string{"scale": "0"}, b64(0x80, 0, 0, 0, 0, 0, 0, 0, 0), pgvalue.Numeric{Int: bigInt(-1).Lsh(bigInt(1), 71).Neg(bigInt(-1).Lsh(bigInt(1), 71)), Exp: 0}, ""},
		{"bytes not in base64", "bytes", "", nil, `"**"`, nil, "invalid_value"},
		{"a date before Postgres' first", "int32", "io.debezium.time.Date", nil, `-2440589`, nil, "out_of_range"},
		{"Postgres' last date", "int32", "io.debezium.time.Date", nil, `2145042905`, time.Date(5874897, 12, 31, 0, 0, 0, 0, time.UTC), ""},
		{"a time past 24:00", "int64", "io.debezium.time.MicroTime", nil, `86400000001`, nil, "out_of_range"},
		{"a negative time", "int32", "io.debezium.time.Time", nil, `-1`, nil, "out_of_range"},
		{"nanoseconds before 1970 floor", "int64", "io.debezium.time.NanoTimestamp", nil, `-1001`, time.UnixMicro(-2).UTC(), ""},
		{"the nanosecond mode's infinity", "int64", "io.debezium.time.NanoTimestamp", nil, `9223372036854775807`, pgvalue.Infinity{}, ""},
		{"milliseconds that overflow microseconds", "int64", "io.debezium.time.Timestamp", nil, `-9223372036854775`, nil, "out_of_range"},
		{"a zoned timestamp after 9999", "string", "io.debezium.time.ZonedTimestamp", nil, `"+10000-01-01T00:00:00Z"`, time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC), ""},
		{"a zoned timestamp with nanoseconds", "string", "io.debezium.time.ZonedTimestamp", nil, `"2020-01-01T00:00:00.123456789-01:30"`, time.Date(2020, 1, 1, 1, 30, 0, 123456000, time.UTC), ""},
		{"a zoned timestamp without offset", "string", "io.debezium.time.ZonedTimestamp", nil, `"2020-01-01T00:00:00"`, nil, "invalid_timestamp"},
		{"February 30", "string", "io.debezium.time.ZonedTimestamp", nil, `"2021-02-30T00:00:00Z"`, nil, "invalid_timestamp"},
		{"a zoned time with an offset", "string", "io.debezium.time.ZonedTime", nil, `"23:59:59.999999-05:00"`, pgvalue.TimeTZ{Microseconds: 86399999999, OffsetSeconds: -18000}, ""},
		{"an ISO date", "string", "io.debezium.time.IsoDate", nil, `"2017-09-15Z"`, time.Date(2017, 9, 15, 0, 0, 0, 0, time.UTC), ""},
		{"an ISO time", "string", "io.debezium.time.IsoTime", nil, `"04:05:11.789Z"`, pgvalue.Time{Microseconds: 14711789000}, ""},
		{"a negative interval", "string", "io.debezium.time.Interval", nil, `"P-1Y0M-3DT0H0M-0.0000019S"`, pgvalue.Interval{Months: -12, Days: -3, Microseconds: -1}, ""},
		{"an interval of weeks", "string", "io.debezium.time.Interval", nil, `"P2W"`, pgvalue.Interval{Days: 14}, ""},
		{"an interval that is not one", "string", "io.debezium.time.Interval", nil, `"1 day"`, nil, "invalid_value"},
		{"a variable scale decimal with a negative scale", "struct", "io.debezium.data.VariableScaleDecimal", nil, `{"scale":-3,"value":` + b64(0x05) + `}`, pgvalue.Numeric{Int: bigInt(5), Exp: 3}, ""},
		{"a variable scale decimal without value", "struct", "io.debezium.data.VariableScaleDecimal", nil, `{"scale":1}`, nil, "invalid_value"},
		{"a UUID in upper case", "string", "io.debezium.data.Uuid", nil, `"0E2C74A1-9B3D-4C5E-8F00-123456789ABC"`, pgvalue.UUID{0x0e, 0x2c, 0x74, 0xa1, 0x9b, 0x3d, 0x4c, 0x5e, 0x8f, 0, 0x12, 0x34, 0x56, 0x78, 0x9a, 0xbc}, ""},
		{"a UUID that is not one", "string", "io.debezium.data.Uuid", nil, `"0E2C74A1"`, nil, "invalid_uuid"},
		{"Json that is not JSON", "string", "io.debezium.data.Json", nil, `"{"`, nil, "invalid_json"},
		{"an empty set", "string", "io.debezium.data.EnumSet", nil, `""`, []string{}, ""},
		{"bits without a length", "bytes", "io.debezium.data.Bits", nil, b64(0x06), pgvalue.Bits{Bytes: []byte{0xc0}, Len: 3}, ""},
		{"bits past the length", "bytes", "io.debezium.data.Bits", map[string]string{"length": "3"}, b64(0x08), nil, "out_of_range"},
		{"a big-endian geometry with an SRID", "struct", "io.debezium.data.geometry.Geometry", nil, `{"wkb":` + b64(0, 0, 0, 0, 1, 9) + `,"srid":4326}`, []byte{0, 0x20, 0, 0, 1, 0, 0, 0x10, 0xe6, 9}, ""},
		{"a geometry that is not WKB", "struct", "io.debezium.data.geometry.Geometry", nil, `{"wkb":` + b64(7) + `}`, nil, "invalid_value"},
		{"a name on another type falls back", "string", "io.debezium.time.Date", nil, `"x"`, "x", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, cerr := decodeOne(t, c.typ, c.sem, c.params, c.in)
			if c.kind != "" {
				if cerr == nil || cerr.kind != c.kind {
					t.Fatalf("%s: got %#v, %v; want a refusal of kind %s", c.in, got, cerr, c.kind)
				}
				return
			}
			if cerr != nil {
				t.Fatalf("%s: %s: %s", c.in, cerr.kind, cerr.msg)
			}
			if n, ok := c.want.(pgvalue.Numeric); ok {
				if g, ok := got.(pgvalue.Numeric); !ok || !sameNumeric(g, n) {
					t.Fatalf("%s: %#v, want %s", c.in, got, n)
				}
				return
			}
			if !reflect.DeepEqual(got, c.want) {
				t.Fatalf("%s: %#v, want %#v", c.in, got, c.want)
			}
		})
	}
}

func TestTheDayAfterPostgresLastDateIsRefused(t *testing.T) {
	if _, cerr := decodeOne(t, "int32", "io.debezium.time.Date", nil, `2145042906`); cerr == nil || cerr.kind != "out_of_range" {
		t.Fatalf("got %v, want out_of_range", cerr)
	}
}
