package decode

// The reference of FuzzScanMatchesDecode: the mapper as it was before the
// single-pass scanner (scan.go), up to the converters. It decodes the whole
// document with encoding/json into any (decodeJSON), walks each column's
// path through the tree, and converts the value it finds with the
// converters the scanner uses (convert.go, decimal.go, datetime.go), handed
// the value as encoding/json decoded it. What the fuzzer holds to
// encoding/json is the scanner's reading of a document: its grammar, its
// strings and escapes, its numbers' literals, its paths, duplicate
// members, nesting; the conversions are held to their own references
// (time.Parse for quickTimestamp, numericOf for shortNumeric, Postgres in
// pg_test.go).

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"testing"
	"unicode/utf8"

	"github.com/kafka2pg/kafka2pg/stream"
)

// oracleMapper maps rows the old way, from the columns m compiled.
type oracleMapper struct {
	m    *JSONMapper
	defs []any // per column: the default, converted the old way
}

func newOracle(t testing.TB, m *JSONMapper) *oracleMapper {
	t.Helper()
	o := &oracleMapper{m: m, defs: make([]any, len(m.cols))}
	for i, cs := range m.spec.Columns {
		if cs.Default == nil {
			continue
		}
		v, err := decodeJSON([]byte(*cs.Default))
		if err != nil {
			t.Fatalf("default %s: %v", *cs.Default, err)
		}
		x, cerr := o.convert(&m.cols[i], v)
		if cerr != nil {
			t.Fatalf("default %s: %s", *cs.Default, cerr.msg)
		}
		o.defs[i] = x
	}
	return o
}

// convert is the column's converter of the decoded value v, never nil.
func (o *oracleMapper) convert(c *mappedColumn, v any) (any, *convError) {
	jv, cerr := treeValue(v)
	if cerr != nil {
		return nil, cerr
	}
	return c.convert(jv)
}

// treeValue is a value encoding/json decoded as the converters take it:
// a string's text, a number's literal, an object or array as encoding/json
// writes it.
func treeValue(v any) (jsonValue, *convError) {
	buf := &rowBuffer{}
	switch x := v.(type) {
	case string:
		return jsonValue{kind: kindString, text: x, buf: buf}, nil
	case json.Number:
		return jsonValue{kind: kindNumber, text: string(x), buf: buf}, nil
	case bool:
		if x {
			return jsonValue{kind: kindTrue, buf: buf}, nil
		}
		return jsonValue{kind: kindFalse, buf: buf}, nil
	}
	raw, cerr := encodeTree(v)
	if cerr != nil {
		return jsonValue{}, cerr
	}
	kind := kindObject
	if _, ok := v.([]any); ok {
		kind = kindArray
	}
	return jsonValue{kind: kind, raw: raw, buf: buf}, nil
}

// lookup finds the path's value in doc. found is false when a member or
// element is absent; a null on the way gives (nil, true, nil).
func (p jsonPath) lookup(doc any) (v any, found bool, cerr *convError) {
	cur := doc
	for n, st := range p.steps {
		if cur == nil {
			return nil, true, nil
		}
		if st.isIndex {
			arr, ok := cur.([]any)
			if !ok {
				return nil, false, convErrorf(KindTypeMismatch, "path %s: %s is %s, not an array", p.text, p.prefix(n), oldJsonKind(cur))
			}
			i := st.index
			if i < 0 {
				i += len(arr)
			}
			if i < 0 || i >= len(arr) {
				return nil, false, nil
			}
			cur = arr[i]
			continue
		}
		obj, ok := cur.(map[string]any)
		if !ok {
			return nil, false, convErrorf(KindTypeMismatch, "path %s: %s is %s, not an object", p.text, p.prefix(n), oldJsonKind(cur))
		}
		if cur, ok = obj[st.key]; !ok {
			return nil, false, nil
		}
	}
	return cur, true, nil
}

// oldDocs holds the lazily decoded value and key of one record.
type oldDocs struct {
	value, key     any
	valueOK, keyOK bool // decoded (and present)
	valueTried     bool
	keyd           bool // key decoding tried
}

func (o *oracleMapper) Row(r *stream.Record, dst []any) ([]any, error) {
	dst = dst[:0]
	var d oldDocs
	for i := range o.m.cols {
		v, err := o.value(i, r, &d)
		if err != nil {
			return nil, err
		}
		dst = append(dst, v)
	}
	return dst, nil
}

func (o *oracleMapper) KeyRow(r *stream.Record) ([]any, error) {
	if len(o.m.keyIdx) == 0 {
		return nil, errors.New("key row: the mapping has no key columns (append mode)")
	}
	out := make([]any, 0, len(o.m.keyIdx))
	var d oldDocs
	for _, i := range o.m.keyIdx {
		v, err := o.value(i, r, &d)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

// value computes column i: the record's own fields (topic, offset,
// headers, ...) as the mapper does, since the scanner is not involved;
// the key's and the value's paths through the reference.
func (o *oracleMapper) value(i int, r *stream.Record, d *oldDocs) (any, error) {
	c := &o.m.cols[i]
	if c.source != fromValue && c.source != fromKey {
		return o.m.value(c, r, nil)
	}
	return o.dataValue(i, r, d)
}

func (o *oracleMapper) dataValue(i int, r *stream.Record, d *oldDocs) (any, error) {
	c := &o.m.cols[i]
	doc, present, err := d.get(c.source, r)
	if err != nil {
		return nil, err
	}
	what := "value"
	if c.source == fromKey {
		what = "key"
	}
	var raw any
	if present {
		var found bool
		var cerr *convError
		raw, found, cerr = c.path.lookup(doc)
		if cerr != nil {
			return nil, badRecord(r, c.name, cerr.kind, "in the "+what+", "+cerr.msg)
		}
		if !found && c.onMissing == "error" {
			return nil, badRecord(r, c.name, KindMissingValue, fmt.Sprintf("path %s is missing from the %s: send it, or set on_missing to null or default", c.path.text, what))
		}
	}
	if raw == nil {
		switch {
		case o.defs[i] != nil:
			return o.defs[i], nil
		case !c.notNull:
			return nil, nil
		case !present && what == "value":
			return nil, badRecord(r, c.name, KindTombstone, "the record is a tombstone (null value) and the column is NOT NULL without default: set delete_on_tombstone with a key, give a default, or drop not_null")
		case !present:
			return nil, badRecord(r, c.name, KindNullValue, "the record has no key and the column is NOT NULL without default: give a default or drop not_null")
		}
		return nil, badRecord(r, c.name, KindNullValue, fmt.Sprintf("path %s is null or missing in the %s and the column is NOT NULL without default: send a value, give a default, or drop not_null", c.path.text, what))
	}
	v, cerr := o.convert(c, raw)
	if cerr != nil {
		return nil, badRecord(r, c.name, cerr.kind, fmt.Sprintf("path %s of the %s: %s", c.path.text, what, cerr.msg))
	}
	return v, nil
}

func (d *oldDocs) get(s source, r *stream.Record) (doc any, present bool, err error) {
	if s == fromKey {
		if r.Key == nil {
			return nil, false, nil
		}
		if !d.keyd {
			d.keyd = true
			v, err := decodeJSON(r.Key)
			if err != nil {
				return nil, false, badRecord(r, "", decodeKind(err), "the key "+err.Error())
			}
			d.key, d.keyOK = v, true
		}
		return d.key, d.keyOK, nil
	}
	if r.Value == nil {
		return nil, false, nil
	}
	if !d.valueTried {
		d.valueTried = true
		v, err := decodeJSON(r.Value)
		if err != nil {
			return nil, false, badRecord(r, "", decodeKind(err), "the value "+err.Error())
		}
		d.value, d.valueOK = v, true
	}
	return d.value, d.valueOK, nil
}

// describe renders a value for an error message, truncated.
func oldDescribe(v any) string {
	var s string
	switch v := v.(type) {
	case string:
		if len(v) > maxShown {
			cut := maxShown
			for cut > 0 && !utf8.RuneStart(v[cut]) {
				cut--
			}
			return strconv.Quote(v[:cut]) + "…"
		}
		return strconv.Quote(v)
	case json.Number:
		s = string(v)
	case bool:
		s = strconv.FormatBool(v)
	default:
		b, err := json.Marshal(v)
		if err != nil {
			return oldJsonKind(v)
		}
		s = string(b)
	}
	if len(s) > maxShown {
		return s[:maxShown] + "…"
	}
	return s
}

// jsonKind names the JSON kind of a decoded value.
func oldJsonKind(v any) string {
	switch v.(type) {
	case string:
		return "a string"
	case json.Number:
		return "a number"
	case bool:
		return "a boolean"
	case map[string]any:
		return "an object"
	case []any:
		return "an array"
	case nil:
		return "null"
	}
	return "an unknown value"
}

// encodingJSONB is what encoding/json writes for a decoded value, as the
// mapper wrote jsonb before the scanner: numbers keep their literal
// (json.Number), HTML characters are not escaped.
func encodingJSONB(_ *colType, v any) (any, *convError) {
	b, cerr := encodeTree(v)
	if cerr != nil {
		return nil, cerr
	}
	if kind, err := CheckJSON(b); err != nil {
		return nil, convErrorf(kind, "%s", err.Error())
	}
	return b, nil
}

// encodeTree is v as encoding/json writes it, without escaping HTML.
func encodeTree(v any) ([]byte, *convError) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, convErrorf(KindUnsupported, "cannot encode %s as JSON: %s", oldDescribe(v), err.Error())
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}
