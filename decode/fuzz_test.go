package decode

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/kafka2pg/kafka2pg/stream"
)

// fuzzMapper maps one column of every type, from the value and the key,
// plus every metadata column.
func fuzzMapper(t testing.TB) *JSONMapper {
	t.Helper()
	def := `"d"`
	spec := MappingSpec{Table: "fuzz", Key: []string{"k"},
		Metadata: MetadataSpec{Topic: "m_topic", Partition: "m_partition", Offset: "m_offset", Timestamp: "m_ts", TimestampType: "m_tst",
			Key: "m_key", KeyFormat: "json", Headers: "m_headers", Header: map[string]string{"m_h": "h"}},
		Columns: []ColumnSpec{{Name: "k", From: "key", Path: "id", Type: "text", Default: &def}}}
	for _, typ := range []string{"text", "varchar(4)", "smallint", "integer", "bigint", "numeric(6,2)", "numeric", "real",
		"double precision", "boolean", "timestamptz", "timestamp", "date", "time", "uuid", "jsonb", "bytea", "inet"} {
		spec.Columns = append(spec.Columns, ColumnSpec{Name: "v " + typ, Path: "v", Type: typ})
		if typ != "jsonb" {
			spec.Columns = append(spec.Columns, ColumnSpec{Name: "a " + typ, Path: "a[-1]", Type: typ + "[]"})
		}
		spec.Columns = append(spec.Columns, ColumnSpec{Name: "k " + typ, From: "key", Path: "$", Type: typ})
	}
	for _, unit := range []string{"s", "ms", "us", "ns"} {
		for _, typ := range []string{"timestamptz", "timestamp", "date", "time"} {
			spec.Columns = append(spec.Columns, ColumnSpec{Name: unit + " " + typ, Path: "v", Type: typ, TimeUnit: unit})
		}
	}
	m, err := NewJSONMapper(spec)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// FuzzJSONMapperRow: any bytes as value and key give a row of the table's
// width or a *DecodeError, never a panic.
func FuzzJSONMapperRow(f *testing.F) {
	for _, s := range [][2]string{
		{`{"v":1,"a":[[1],null,2]}`, `{"id":"x"}`},
		{`{"v":"2026-01-02T03:04:05Z","a":["1","2"]}`, `"a"`},
		{`{"v":1e400}`, `1e-400`},
		{`{"v":"123e4567-e89b-12d3-a456-426614174000"}`, `null`},
		{`{"v":"\ud800\u0000"}`, "\xff"},
		{`{"v":-9223372036854775809.5}`, `99999999999999999999999`},
		{`{"v":"24:00:00.9999995"}`, `"10.0.0.1/33"`},
		{`{"v":{"x":[1,{"y":"\u0000"}]}}`, `{"id":null}`},
		{`[]`, ``},
	} {
		f.Add([]byte(s[0]), []byte(s[1]), false)
	}
	m := fuzzMapper(f)
	width := len(m.Table().Columns)
	f.Fuzz(func(t *testing.T, value, key []byte, tombstone bool) {
		r := &stream.Record{Topic: "t", Value: value, Key: key, Headers: []stream.Header{{Key: "h", Value: key}}}
		if tombstone {
			r.Value = nil
		}
		row, err := m.Row(r, nil)
		if err != nil {
			var de *DecodeError
			if !errors.As(err, &de) || !errors.Is(err, ErrBadRecord) || de.Kind == "" {
				t.Fatalf("Row error %v is not a *DecodeError with a kind", err)
			}
		} else if len(row) != width {
			t.Fatalf("row has %d values, the table %d columns", len(row), width)
		}
		if _, err := m.KeyRow(r); err != nil && !errors.Is(err, ErrBadRecord) {
			t.Fatalf("KeyRow error %v is not a bad record", err)
		}
	})
}

// FuzzParsePath: any path parses or is refused, and lookups never panic.
func FuzzParsePath(f *testing.F) {
	for _, s := range []string{"a.b[0]", `["x"][-1]`, "$", "$.a", "a[99999999999999999999]"} {
		f.Add(s)
	}
	doc, _ := decodeJSON([]byte(`{"a":{"b":[1,2]},"x":[{"":null}]}`))
	f.Fuzz(func(t *testing.T, s string) {
		p, err := parsePath(s)
		if err != nil {
			return
		}
		p.lookup(doc)
	})
}

// FuzzCheckJSONMatchesTheSlowPath: the scanner's fast path of CheckJSON
// answers exactly like the json.Valid path it shortcuts.
func FuzzCheckJSONMatchesTheSlowPath(f *testing.F) {
	for _, s := range []string{`{}`, `{"a":"\u0000"}`, `{"a":"\\u0000"}`, `"\ud800"`, `"\ud800\udc00"`, `[1,2,{"x":null}]`,
		`{"a":1,}`, "\"\xff\"", `1e999`, `-0`, `01`, `{"a":"\u00e9"}`, ` [] `, ``} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, v []byte) {
		kind, err := CheckJSON(v)
		wantKind, wantErr := checkJSONSlow(v)
		if kind != wantKind || (err == nil) != (wantErr == nil) || (err != nil && err.Error() != wantErr.Error()) {
			t.Fatalf("CheckJSON(%q) = %q, %v; the slow path says %q, %v", v, kind, err, wantKind, wantErr)
		}
	})
}

// FuzzAppendJSONStringMatchesMarshal: the plain fast path writes what the
// sanitizing json.Marshal path writes.
func FuzzAppendJSONStringMatchesMarshal(f *testing.F) {
	for _, s := range []string{"", "k", "trace-id", "a\"b", "a\\b", "<&>", "\x00", "\xff", "é", "\u2028", "\t"} {
		f.Add(s)
	}
	for _, s := range []string{"a\u2028b", "\u2029", `\u2028`, "\\\u2028", `a\\u2028`, "<\u2028>\\\u2029\""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := appendJSONString(nil, s)
		v := string(bytes.ToValidUTF8([]byte(s), []byte("\uFFFD")))
		v = string(bytes.ReplaceAll([]byte(v), []byte{0}, []byte("\uFFFD")))
		want, _ := json.Marshal(v)
		if !strings.ContainsAny(v, "\u2028\u2029") {
			if string(got) != string(want) {
				t.Fatalf("appendJSONString(%q) = %s, want %s", s, got, want)
			}
			return
		}
		// U+2028 and U+2029 are written as they are, not escaped as
		// Marshal escapes them: the string reads back the same, and has
		// them as characters.
		var back string
		if err := json.Unmarshal(got, &back); err != nil || back != v {
			t.Fatalf("appendJSONString(%q) = %s, reads back as %q (%v)", s, got, back, err)
		}
		for _, r := range "\u2028\u2029" {
			if strings.Count(string(got), string(r)) != strings.Count(v, string(r)) {
				t.Fatalf("appendJSONString(%q) = %s: U+%04X escaped", s, got, r)
			}
		}
	})
}
