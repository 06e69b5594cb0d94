package decode

import (
	"encoding/json"
	"errors"
	"flag"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kafka2pg/kafka2pg/schema"
	"github.com/kafka2pg/kafka2pg/stream"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

func TestCreateSQLMatchesGolden(t *testing.T) {
	cases := []struct {
		name  string
		table schema.Table
	}{
		{"raw_json", RawTable("", "orders", ValueJSON)},
		{"raw_text_in_schema", RawTable("sales", "Orders-2026", ValueText)},
		{"raw_bytes_hostile_name", RawTable("public", `evil"; DROP TABLE x; --`, ValueBytes)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := c.table.CreateSQL()
			path := filepath.Join("testdata", c.name+".sql")
			if *update {
				if err := os.WriteFile(path, []byte(got+"\n"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("read golden file (run go test ./decode -update to create it): %v", err)
			}
			if got+"\n" != string(want) {
				t.Errorf("CreateSQL() =\n%s\nwant\n%s", got, want)
			}
		})
	}
}

func TestRawMapperBuildsRowsInColumnOrder(t *testing.T) {
	ts := time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)
	r := &stream.Record{Topic: "t", Partition: 3, Offset: 42, Timestamp: ts, Key: []byte("k"),
		Value: []byte(`{"a":1}`), Headers: []stream.Header{{Key: "h", Value: []byte("v")}, {Key: "bin", Value: []byte{0xff, 0}}, {Key: "nil"}}}
	row, err := RawMapper{Format: ValueJSON}.Row(r, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(row) != len(RawTable("", "x", ValueJSON).Columns) {
		t.Fatalf("row has %d values, table has %d columns", len(row), len(RawTable("", "x", ValueJSON).Columns))
	}
	if row[0] != "t" || row[1] != int32(3) || row[2] != int64(42) || row[3] != ts {
		t.Errorf("coordinates = %v", row[:4])
	}
	wantHeaders := `[{"key":"h","value":"v"},{"key":"bin","value_base64":"/wA="},{"key":"nil","value":null}]`
	if got := string(row[5].([]byte)); got != wantHeaders {
		t.Errorf("headers = %s, want %s", got, wantHeaders)
	}
	if string(row[6].([]byte)) != `{"a":1}` {
		t.Errorf("value = %v", row[6])
	}

	tomb := &stream.Record{Topic: "t", Offset: 1}
	row, err = RawMapper{Format: ValueJSON}.Row(tomb, row)
	if err != nil {
		t.Fatal(err)
	}
	if row[4] != nil || row[5] != nil || row[6] != nil {
		t.Errorf("a tombstone without key or headers must give NULLs, got %v", row[4:])
	}
}

func TestRawMapperRefusesValuesTheColumnCannotHold(t *testing.T) {
	cases := []struct {
		name   string
		format ValueFormat
		value  string
		kind   string
	}{
		{"not JSON", ValueJSON, `{"a":`, KindInvalidJSON},
		{"plain words are not JSON", ValueJSON, `hello`, KindInvalidJSON},
		{"invalid UTF-8 in JSON", ValueJSON, "\"\xff\"", KindInvalidUTF8},
		{"NUL escape in JSON", ValueJSON, `{"a":"x\u0000y"}`, KindUnsupported},
		{"lone high surrogate", ValueJSON, `["\ud800"]`, KindUnsupported},
		{"lone low surrogate", ValueJSON, `["\udc00x"]`, KindUnsupported},
		{"NUL byte in text", ValueText, "a\x00b", KindNULByte},
		{"invalid UTF-8 in text", ValueText, "a\xc3", KindInvalidUTF8},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := &stream.Record{Topic: "t", Partition: 1, Offset: 7, Value: []byte(c.value)}
			_, err := RawMapper{Format: c.format}.Row(r, nil)
			var de *DecodeError
			if !errors.As(err, &de) {
				t.Fatalf("Row(%q) error = %v, want a *DecodeError", c.value, err)
			}
			if de.Kind != c.kind || de.Offset != 7 || de.Column != "value" || !errors.Is(err, ErrBadRecord) {
				t.Errorf("Row(%q) = %+v, want kind %s at offset 7", c.value, de, c.kind)
			}
		})
	}
}

func TestRawMapperAcceptsValidEdgeCases(t *testing.T) {
	cases := []struct {
		format ValueFormat
		value  string
	}{
		{ValueJSON, `{"escaped backslash then u0000":"\\u0000"}`},
		{ValueJSON, `["\ud83d\ude00"]`},
		{ValueJSON, `42`},
		{ValueJSON, `"\u00e9"`},
		{ValueText, "plain ünïcode"},
		{ValueBytes, "\x00\xff"},
	}
	for _, c := range cases {
		if _, err := (RawMapper{Format: c.format}).Row(&stream.Record{Value: []byte(c.value)}, nil); err != nil {
			t.Errorf("Row(%s %q) = %v, want no error", c.format, c.value, err)
		}
	}
}

func TestParseValueFormatNamesTheChoices(t *testing.T) {
	for _, s := range []string{"json", "text", "bytes"} {
		f, err := ParseValueFormat(s)
		if err != nil || f.String() != s {
			t.Errorf("ParseValueFormat(%q) = %v, %v", s, f, err)
		}
	}
	if _, err := ParseValueFormat("avro"); err == nil || !strings.Contains(err.Error(), "json, text, bytes") {
		t.Errorf("ParseValueFormat(avro) = %v, want the choices listed", err)
	}
}

// FuzzRawMapper: any bytes give a row or a DecodeError, never a panic; and a
// JSON value accepted by CheckJSON never holds what jsonb refuses.
func FuzzRawMapper(f *testing.F) {
	for _, s := range []string{`{"a":1}`, `"\u0000"`, `["\ud800\udc00"]`, "\xff", `"\\u0000"`, `[`, `"\ud800\u0041"`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, v []byte) {
		for _, format := range []ValueFormat{ValueJSON, ValueText, ValueBytes} {
			_, err := RawMapper{Format: format}.Row(&stream.Record{Value: v, Headers: []stream.Header{{Key: string(v), Value: v}}}, nil)
			if err != nil && !errors.Is(err, ErrBadRecord) {
				t.Fatalf("Row(%q) returned a non-record error %v", v, err)
			}
		}
	})
}

func TestHeadersRoundTripThroughJSON(t *testing.T) {
	in := []stream.Header{{Key: "a", Value: []byte("text")}, {Key: "bin", Value: []byte{0, 0xff}}, {Key: "none"}, {Key: "a", Value: []byte("again")}}
	out, err := ParseHeadersJSON(HeadersJSON(in))
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != len(in) {
		t.Fatalf("got %d headers, want %d", len(out), len(in))
	}
	for i := range in {
		if out[i].Key != in[i].Key || string(out[i].Value) != string(in[i].Value) || (out[i].Value == nil) != (in[i].Value == nil) {
			t.Errorf("header %d = %+v, want %+v", i, out[i], in[i])
		}
	}
}

// FuzzHeaders: any headers survive HeadersJSON and ParseHeadersJSON, and any
// bytes given to ParseHeadersJSON give headers or an error, never a panic.
func FuzzHeaders(f *testing.F) {
	f.Add("k", []byte("v"), []byte(`[{"key":"a","value_base64":"AAE="}]`))
	f.Add("", []byte{0xff, 0}, []byte(`[{"key":"a","value":null}]`))
	f.Add("\x00", []byte(nil), []byte(`{`))
	f.Fuzz(func(t *testing.T, key string, value, raw []byte) {
		_, _ = ParseHeadersJSON(raw)
		in := []stream.Header{{Key: key, Value: value}}
		out, err := ParseHeadersJSON(HeadersJSON(in))
		if err != nil {
			t.Fatalf("HeadersJSON(%q) does not parse back: %v", in, err)
		}
		if len(out) != 1 || (value != nil && string(out[0].Value) != string(value)) || (value == nil) != (out[0].Value == nil) {
			t.Fatalf("round trip of %q gave %q", in, out)
		}
		// In ASCII alone (dead letters on a LATIN1 database), and the key
		// exact too.
		ascii := HeadersJSONASCII(in)
		if !isASCII(string(ascii)) || !json.Valid(ascii) {
			t.Fatalf("HeadersJSONASCII(%q) = %s: not JSON in ASCII", in, ascii)
		}
		out, err = ParseHeadersJSON(ascii)
		if err != nil || len(out) != 1 || out[0].Key != key || string(out[0].Value) != string(value) || (value == nil) != (out[0].Value == nil) {
			t.Fatalf("round trip of %q through %s gave %q, %v", in, ascii, out, err)
		}
	})
}

// TestPlainIntMatchesTheDecimalPath: convertInt's quick reading of plain
// integers gives what the decimal path gives, at every width's edges.
func TestPlainIntMatchesTheDecimalPath(t *testing.T) {
	lits := []string{"0", "-0", "1", "-1", "7", "10", "32767", "32768", "-32768", "-32769",
		"2147483647", "2147483648", "-2147483648", "-2147483649",
		"999999999999999999", "-999999999999999999", "1000000000000000000", "9223372036854775807",
		"9223372036854775808", "-9223372036854775808", "-9223372036854775809",
		"00", "01", "-01", "1.0", "1e3", "1E3", "-", "", "1a", " 1", "1 ", "+1", "0x1"}
	rng := rand.New(rand.NewPCG(3, 4))
	for range 2000 {
		lits = append(lits, strconv.FormatInt(rng.Int64()>>rng.IntN(63), 10), strconv.FormatInt(-rng.Int64()>>rng.IntN(63), 10))
	}
	for _, lit := range lits {
		for _, bits := range []int{16, 32, 64} {
			got, gerr := convertInt(jsonNumber(lit), bits, "t")
			var want int64
			d, werr := numberOf(jsonNumber(lit), "t")
			if werr == nil {
				want, werr = d.toInt(bits)
			}
			if (gerr == nil) != (werr == nil) || got != want {
				t.Fatalf("convertInt(%q, %d) = %d, %v; the decimal path: %d, %v", lit, bits, got, gerr, want, werr)
			}
		}
	}
}
