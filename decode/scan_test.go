package decode

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/kafka2pg/kafka2pg/pgvalue"

	"github.com/kafka2pg/kafka2pg/stream"
)

// pathsMapper reads the same document through overlapping paths: nested
// members, indexes from both ends, escaped member names, the whole
// document, and columns with defaults and on_missing error.
func pathsMapper(t testing.TB) *JSONMapper {
	t.Helper()
	def := `{"d":[1,"x"]}`
	seven := "7"
	m, err := NewJSONMapper(MappingSpec{Table: "paths", Columns: []ColumnSpec{
		{Name: "whole", Path: "$", Type: "jsonb"},
		{Name: "a", Path: "a", Type: "jsonb", Default: &def},
		{Name: "a text", Path: "a", Type: "text"},
		{Name: "abc", Path: "a.b[0].c", Type: "bigint"},
		{Name: "ab last", Path: "a.b[-1]", Type: "jsonb"},
		{Name: "ab second last c", Path: "a.b[-2].c", Type: "numeric"},
		{Name: "ab 1", Path: "a.b[1]", Type: "text"},
		{Name: "x.y", Path: `["x.y"]["z w"]`, Type: "integer", OnMissing: "error", Default: &seven},
		{Name: "escaped", Path: `["é\n"]`, Type: "text"},
		{Name: "deep", Path: "a.b[0].c.d[-1][0]", Type: "double precision"},
		{Name: "first", Path: "[0]", Type: "text"},
		{Name: "last", Path: "[-1]", Type: "integer[]"},
		{Name: "n", Path: "n.deeper", Type: "timestamptz"},
		{Name: "k", From: "key", Path: "$", Type: "jsonb"},
		{Name: "k id", From: "key", Path: "id[-3]", Type: "uuid"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

var scanSeeds = [][2]string{
	{`{"v":1,"a":[[1],null,2]}`, `{"id":"x"}`},
	{`{"v":"2026-01-02T03:04:05Z","a":["1","2"]}`, `"a"`},
	{`{"v":1e400}`, `1e-400`},
	{`{"v":"123e4567-e89b-12d3-a456-426614174000"}`, `null`},
	{`{"v":"\ud800\u0000"}`, "\xff"},
	{`{"v":-9223372036854775809.5}`, `99999999999999999999999`},
	{`{"v":"24:00:00.9999995"}`, `"10.0.0.1/33"`},
	{`{"v":{"x":[1,{"y":"\u0000"}]}}`, `{"id":null}`},
	{`[]`, ``},
	{`{"a":{"b":[{"c":1},{"c":2.50}]},"x.y":{"z w":3},"n":null,"s":"str"}`, `{"id":[1,2,"00112233-4455-6677-8899-aabbccddeeff"]}`},
	{` { "a" : { "b" : [ { "c" : 10 , "c" : "20" } , 3 ] } , "a" : {"b":[{"c":{"d":[[1.5e3]]}}]} } `, ` {"z":1, "a":[ ]} `},
	{`{"b":2,"a":1,"\u00e9\n":"\u2028 x\u0007\"\\\/\b\f\n\r\t\ud83d\ude00 <&>","a":{"y":1,"x":[]}}`, `"k"`},
	{"{\"v\":\"\u2028\u2029\",\"\\u0061\":{\"b\":[]}}", `{}`},
	{`[1,"two",3]`, `[]`},
	{`{"b":{"x":{"q":1,"p":[{"s":2,"r":3}]}},"a":[{"z":1,"y":{"w":[],"v":{}}}]}`, `{"b":[{"d":1,"c":2}],"a":{"f":{"h":1,"g":2}}}`},
	{`["a",[1,null,3]]`, `{"id":[]}`},
	{`{"a":{"b":[{"c":-0.0e+0},{"c":1E2}]}}`, `-0`},
	{`{"a":"\ud800"}`, `"\udc00"`},
	{`{"a":1} x`, `{"a":1}{}`},
	{`{"a":01}`, `[1,]`},
	{`{"a":[1,2,]}`, `{"a" 1}`},
	{`{"a":tru}`, `nul`},
	{"{\"a\":\"\x01\"}", `"\x"`},
	{`{"a":"\u12"}`, `1.`},
	{`{"a":1.e5}`, `-`},
	{`{"a":{"b":[{"c":1}]}}`, strings.Repeat("[", 10001) + strings.Repeat("]", 10001)},
	{strings.Repeat(`{"a":`, 10000) + "1" + strings.Repeat("}", 10000), strings.Repeat("[", 10000) + strings.Repeat("]", 10000)},
}

// FuzzScanMatchesDecode: the scanner path and encoding/json's tree with the
// same converters (scan_oracle_test.go) give the same row, value for value,
// or the same bad record, message and all, for any value and key.
func FuzzScanMatchesDecode(f *testing.F) {
	for _, s := range scanSeeds {
		f.Add([]byte(s[0]), []byte(s[1]), false)
	}
	mappers := []*JSONMapper{fuzzMapper(f), pathsMapper(f)}
	var oracles []*oracleMapper
	for _, m := range mappers {
		oracles = append(oracles, newOracle(f, m))
	}
	f.Fuzz(func(t *testing.T, value, key []byte, tombstone bool) {
		r := &stream.Record{Topic: "t", Offset: 3, Value: value, Key: key, Headers: []stream.Header{{Key: "h", Value: key}}}
		if tombstone {
			r.Value = nil
		}
		for i, m := range mappers {
			got, err := m.Row(r, nil)
			want, werr := oracles[i].Row(r, nil)
			checkSameRow(t, m, "Row", r, got, err, want, werr)
			got, err = m.KeyRow(r)
			want, werr = oracles[i].KeyRow(r)
			checkSameRow(t, m, "KeyRow", r, got, err, want, werr)
		}
	})
}

func checkSameRow(t *testing.T, m *JSONMapper, what string, r *stream.Record, got []any, err error, want []any, werr error) {
	t.Helper()
	if (err == nil) != (werr == nil) || (err != nil && err.Error() != werr.Error()) {
		t.Fatalf("%s of value %.200q key %.200q:\nscan:   %v\noracle: %v", what, r.Value, r.Key, err, werr)
	}
	var de, wde *DecodeError
	if err != nil && errors.As(werr, &wde) && (!errors.As(err, &de) || de.Kind != wde.Kind || de.Column != wde.Column) {
		t.Fatalf("%s of value %.200q key %.200q: kinds differ: %v / %v", what, r.Value, r.Key, err, werr)
	}
	if len(got) != len(want) {
		t.Fatalf("%s of value %.200q key %.200q: %d values, the oracle %d", what, r.Value, r.Key, len(got), len(want))
	}
	for i := range got {
		col := &m.cols[i]
		if what == "KeyRow" {
			col = &m.cols[m.keyIdx[i]]
		}
		g := got[i]
		if b, ok := g.([]byte); ok && col.typ.base != nil && col.typ.base.Name == "jsonb" {
			// An object or array without escapes goes as sent; the oracle
			// writes encoding/json's form, which the canonical writer
			// makes (TestJSONBBytesAreWhatEncodingJSONWrites).
			g = (&jsonbWriter{}).appendCanonical(nil, b)
		}
		if !sameMapped(reflect.ValueOf(g), reflect.ValueOf(want[i])) {
			t.Fatalf("%s of value %.200q key %.200q: column %d (%s) = %#v, the oracle %#v", what, r.Value, r.Key, i, col.name, got[i], want[i])
		}
	}
}

var (
	numericType = reflect.TypeFor[pgvalue.Numeric]()
	timeType    = reflect.TypeFor[time.Time]()
)

// sameMapped compares mapped values: numerics by value and exponent, times
// as instants in the same location, the rest deeply.
func sameMapped(a, b reflect.Value) bool {
	if a.IsValid() != b.IsValid() {
		return false
	}
	if !a.IsValid() {
		return true
	}
	if a.Type() != b.Type() {
		return false
	}
	switch {
	case a.Type() == numericType:
		x, y := a.Interface().(pgvalue.Numeric), b.Interface().(pgvalue.Numeric)
		return x.Exp == y.Exp && (x.Int == nil) == (y.Int == nil) && (x.Int == nil || x.Int.Cmp(y.Int) == 0)
	case a.Type() == timeType:
		x, y := a.Interface().(time.Time), b.Interface().(time.Time)
		return x.Equal(y) && x.Location() == y.Location()
	}
	switch a.Kind() {
	case reflect.Slice:
		if a.IsNil() != b.IsNil() || a.Len() != b.Len() {
			return false
		}
		for i := range a.Len() {
			if !sameMapped(a.Index(i), b.Index(i)) {
				return false
			}
		}
		return true
	case reflect.Pointer:
		if a.IsNil() || b.IsNil() {
			return a.IsNil() == b.IsNil()
		}
		return sameMapped(a.Elem(), b.Elem())
	}
	return reflect.DeepEqual(a.Interface(), b.Interface())
}

func TestScanSeedsMatchDecode(t *testing.T) {
	mappers := []*JSONMapper{fuzzMapper(t), pathsMapper(t)}
	for _, s := range scanSeeds {
		r := &stream.Record{Topic: "t", Value: []byte(s[0]), Key: []byte(s[1])}
		for _, m := range mappers {
			o := newOracle(t, m)
			got, err := m.Row(r, nil)
			want, werr := o.Row(r, nil)
			if (err == nil) != (werr == nil) || (err != nil && err.Error() != werr.Error()) {
				t.Errorf("value %.80q key %.80q:\nscan:   %v\noracle: %v", s[0], s[1], err, werr)
				continue
			}
			for i := range got {
				if !sameMapped(reflect.ValueOf(got[i]), reflect.ValueOf(want[i])) {
					t.Errorf("value %.80q: column %s = %#v, the oracle %#v", s[0], m.cols[i].name, got[i], want[i])
				}
			}
		}
	}
}

func TestScanRefusesWhatDecodeJSONRefuses(t *testing.T) {
	docs := []string{
		strings.Repeat("[", 10000) + strings.Repeat("]", 10000),
		strings.Repeat("[", 10001) + strings.Repeat("]", 10001),
		strings.Repeat(`{"a":`, 10001) + "1" + strings.Repeat("}", 10001),
		``, ` `, `1 2`, `{"a":1,}`, `"\ud800\udc00"`, `"\udc00\ud800"`, `"\ud800\\udc00"`, `"\ud800\u0041"`,
		`"\u0000"`, "\"\xed\xa0\x80\"", `[1,2]]`, `-01`, `1e`, `1e+`, `.5`, `"\U0041"`, `{"a" : [ true , false , null ] }`,
		"\ufeff{}", "{}\x00", `"a\/b"`, `[-0.0e-0]`,
		// UTF-8 is checked inside strings only: elsewhere a byte over
		// 0x7f is refused by the grammar.
		"{\"a\":\"\xc3\"}", "{\"\xe2\x82\":1}", "{\"a\":\"\xc3\xa9\xf0\x9f\x98\x80\"}", "{\"a\":1}\xff", "\xff",
		"[1,\xc3\xa9]", "\"\xf4\x90\x80\x80\"", "\"\xc0\xaf\"", "\"\xef\xbf\xbd\"", "\"\xe2\x82\xac\"",
	}
	for _, d := range docs {
		var sc scanner
		_, err := decodeJSON([]byte(d))
		if ok := sc.scan([]byte(d), rootTree); ok != (err == nil) {
			t.Errorf("scan(%.40q) = %v; decodeJSON says %v", d, ok, err)
		}
	}
}

func TestJSONBBytesAreWhatEncodingJSONWrites(t *testing.T) {
	for _, d := range []string{
		`{"b":1,"a":{"d":[1,2.50,{"z":null,"y":true}],"c":"x"},"a":{"f":false,"e":"\u00e9\u2028\u0001<>&"}}`,
		`[ ]`, `{ }`, `{"b": 1, "a": [1, 2.50, {"z" : null}], "b": 2}`, `"\ud83d\ude00"`, `-1.5E+3`, `{"":1,"\u0000":2}`, `{"\u00e9":1,"e":2,"é":3}`,
	} {
		tree, err := decodeJSON([]byte(d))
		if err != nil {
			t.Fatal(err)
		}
		want, cerr := encodingJSONB(nil, tree)
		got, gerr := convertJSONB(nil, rootValue([]byte(d)))
		if b, ok := got.([]byte); ok && !bytes.ContainsRune([]byte(d), '\\') && (d[0] == '{' || d[0] == '[') {
			if !bytes.Equal(b, []byte(d)) {
				t.Errorf("%s: an object or array without escapes became %s, want it as sent", d, b)
			}
			got = (&jsonbWriter{}).appendCanonical(nil, b)
		}
		if (cerr == nil) != (gerr == nil) {
			t.Fatalf("%s: errors %v / %v", d, gerr, cerr)
		}
		if cerr != nil {
			if cerr.msg != gerr.msg || cerr.kind != gerr.kind {
				t.Errorf("%s: error %s %s, want %s %s", d, gerr.kind, gerr.msg, cerr.kind, cerr.msg)
			}
			continue
		}
		if !bytes.Equal(got.([]byte), want.([]byte)) {
			t.Errorf("%s:\n got %s\nwant %s", d, got, want)
		}
	}
}

// TestRowValuesOutliveTheNextRow: the values of one row stay as they were
// while later rows are mapped, as ingest's isolating path keeps a batch's
// rows together.
func TestRowValuesOutliveTheNextRow(t *testing.T) {
	spec := benchSpec()
	spec.Columns = append(spec.Columns, ColumnSpec{Name: "tags", Type: "text[]"}, ColumnSpec{Name: "esc", Type: "text"})
	m, err := NewJSONMapper(spec)
	if err != nil {
		t.Fatal(err)
	}
	var rows [][]any
	var want []string
	for i, v := range benchValues(50) {
		v = fmt.Appendf(v[:len(v)-1], `,"tags":["t%d","\u00e9%d"],"esc":"\"%d\""}`, i, i, i)
		row, err := m.Row(&stream.Record{Value: v}, nil)
		if err != nil {
			t.Fatal(err)
		}
		rows = append(rows, row)
		want = append(want, fmt.Sprintf("%s", row))
	}
	for i, row := range rows {
		if got := fmt.Sprintf("%s", row); got != want[i] {
			t.Errorf("row %d changed after later rows:\n got %s\nwant %s", i, got, want[i])
		}
	}
	if !strings.Contains(want[7], `[t7 é7] "7"`) {
		t.Errorf("row 7 = %s, want the tags and the escaped text", want[7])
	}
}

// BenchmarkJSONMapperRowOracle is BenchmarkJSONMapperRow through the old
// encoding/json path, to compare the two in one run on a noisy machine.
func BenchmarkJSONMapperRowOracle(b *testing.B) {
	recs := benchRecords(benchValues(1024))
	m, err := NewJSONMapper(benchSpec())
	if err != nil {
		b.Fatal(err)
	}
	o := newOracle(b, m)
	b.ReportAllocs()
	b.SetBytes(int64(len(recs[0].Value)))
	var row []any
	b.ResetTimer()
	for i := range b.N {
		if row, err = o.Row(&recs[i%len(recs)], row); err != nil {
			b.Fatal(err)
		}
	}
}

// FuzzPathMatchesDecode: for any path and document, columns reading the
// path (and the path's parent, so the tree shares nodes) give what the old
// tree walk gave.
func FuzzPathMatchesDecode(f *testing.F) {
	for _, s := range [][2]string{
		{"a.b[0]", `{"a":{"b":[1,2]},"x":[{"":null}]}`},
		{`["x"][-1]`, `{"x":[1,[2],{"y":3}]}`},
		{"$", `[1,2]`},
		{"$.a", `{"a":null,"a":{"b":1}}`},
		{"a[99999999999999999999]", `{"a":[]}`},
		{"a[-9223372036854775808]", `{"a":[1]}`},
		{`a[-1][-2][0]`, `{"a":[[[1],[2,3],4]]}`},
		{`[""]["\u00e9"]`, `{"":{"é":"x"}}`},
	} {
		f.Add(s[0], []byte(s[1]))
	}
	f.Fuzz(func(t *testing.T, path string, doc []byte) {
		p, err := parsePath(path)
		if err != nil {
			return
		}
		cols := []ColumnSpec{{Name: "j", Path: path, Type: "jsonb"}, {Name: "t", Path: path, Type: "text"}}
		if n := len(p.steps); n > 0 {
			parent := jsonPath{steps: p.steps[:n-1]}
			cols = append(cols, ColumnSpec{Name: "parent", Path: parent.prefix(n - 1), Type: "jsonb"})
		}
		m, err := NewJSONMapper(MappingSpec{Table: "t", Columns: cols})
		if err != nil {
			t.Fatalf("path %q: %v", path, err)
		}
		r := &stream.Record{Topic: "t", Value: doc}
		got, err := m.Row(r, nil)
		want, werr := newOracle(t, m).Row(r, nil)
		checkSameRow(t, m, "Row", r, got, err, want, werr)
	})
}

// BenchmarkJSONBValue: the bench record's props object as a jsonb value.
func BenchmarkJSONBValue(b *testing.B) {
	v := rootValue([]byte(`{"path":"/docs/42","ref":"newsletter","device":"mobile","ab":"b","lang":"de"}`))
	var buf rowBuffer
	b.ReportAllocs()
	for b.Loop() {
		buf.arena = buf.arena[:0]
		if _, cerr := convertJSONB(nil, jsonValue{kind: v.kind, raw: v.raw, buf: &buf}); cerr != nil {
			b.Fatal(cerr.msg)
		}
	}
}

// TestPlainRunMatchesStringStop holds the eight-byte test of str to the
// byte table it stands for: every byte value at every position, among
// neighbours drawn from the bytes nearest each threshold.
func TestPlainRunMatchesStringStop(t *testing.T) {
	near := []byte{0x00, 0x01, 0x1f, 0x20, 0x21, 0x22, 0x23, 0x5b, 0x5c, 0x5d, 0x7e, 0x7f, 0x80, 0x81, 0xa2, 0xdc, 0xff, 'a', '0'}
	rng := rand.New(rand.NewPCG(1, 2))
	var w [8]byte
	for c := range 256 {
		for at := range 8 {
			for range 200 {
				for k := range w {
					w[k] = near[rng.IntN(len(near))]
				}
				w[at] = byte(c)
				want := 8
				for k, b := range w {
					if stringStop[b] {
						want = k
						break
					}
				}
				if got := plainRun(binary.LittleEndian.Uint64(w[:])); got != want {
					t.Fatalf("plainRun(% x) = %d, want %d", w, got, want)
				}
			}
		}
	}
}

// TestMemberEdgeAtMatchesKeyAt: the one-word comparison of short member
// names answers as the byte comparison, for names of every length around
// the word's, at every position up to the document's end.
func TestMemberEdgeAtMatchesKeyAt(t *testing.T) {
	doc := []byte(`{"":1,"a":2,"ab":3,"abcdefg":4,"abcdefgh":5,"abcdefghi":6,"abc\"":7,"abcdefgx":8}`)
	for _, key := range []string{"", "a", "ab", "abc", "abcdefg", "abcdefgh", "abcdefghi", "abcdefgx", "b", "abcdefh", `abc"`} {
		e := newMemberEdge(key, 1)
		if !e.plain {
			continue
		}
		for i := range len(doc) + 1 {
			for _, d := range [][]byte{doc, doc[:i]} {
				if i > len(d) {
					continue
				}
				if got, want := e.at(d, i), keyAt(d, i, key); got != want {
					t.Fatalf("key %q at %d of %q: %v, keyAt says %v", key, i, d, got, want)
				}
			}
		}
	}
}
