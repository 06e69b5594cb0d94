package decode

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/kafka2pg/kafka2pg/schema"
	"github.com/kafka2pg/kafka2pg/stream"
)

// ValueFormat says how the zero-config table stores a record value.
type ValueFormat int

const (
	ValueJSON  ValueFormat = iota // jsonb; a value that is not JSON Postgres accepts is a bad record
	ValueText                     // text; the value must be UTF-8 without NUL bytes
	ValueBytes                    // bytea; any value fits
)

// ParseValueFormat reads json (or ""), text or bytes.
func ParseValueFormat(s string) (ValueFormat, error) {
	switch s {
	case "json", "":
		return ValueJSON, nil
	case "text":
		return ValueText, nil
	case "bytes":
		return ValueBytes, nil
	}
	return 0, fmt.Errorf("value format %q is not one of json, text, bytes", s)
}

func (f ValueFormat) String() string {
	switch f {
	case ValueText:
		return "text"
	case ValueBytes:
		return "bytes"
	}
	return "json"
}

func (f ValueFormat) MarshalText() ([]byte, error) { return []byte(f.String()), nil }

func (f *ValueFormat) UnmarshalText(b []byte) (err error) {
	*f, err = ParseValueFormat(string(b))
	return err
}

func (f ValueFormat) sqlType() string {
	switch f {
	case ValueText:
		return "text"
	case ValueBytes:
		return "bytea"
	}
	return "jsonb"
}

// RawTable is the zero-config table: the record's coordinates, key, headers
// and value, keyed by (partition, offset, topic). The topic comes last in
// the key: it is the same in nearly every row (one topic a table, unless
// one table gathers several), and first it would make every index insertion
// compare it and find the other two key columns past a variable-length one
// (nocache_index_getattr): Postgres CPU spent on every row for nothing.
func RawTable(schemaName, name string, f ValueFormat) schema.Table {
	return schema.Table{
		Schema: schemaName,
		Name:   name,
		Columns: []schema.Column{
			{Name: "kafka_topic", Type: "text", NotNull: true},
			{Name: "kafka_partition", Type: "integer", NotNull: true},
			{Name: "kafka_offset", Type: "bigint", NotNull: true},
			{Name: "kafka_timestamp", Type: "timestamptz"},
			{Name: "kafka_key", Type: "bytea"},
			{Name: "kafka_headers", Type: "jsonb"},
			{Name: "value", Type: f.sqlType()},
		},
		PrimaryKey: []string{"kafka_partition", "kafka_offset", "kafka_topic"},
	}
}

// RawMapper builds rows of a RawTable.
type RawMapper struct {
	Format ValueFormat
}

// checkValue refuses a value its column cannot store (Row and AppendRow).
func (m RawMapper) checkValue(r *stream.Record) error {
	if r.Value == nil {
		return nil
	}
	var kind string
	var err error
	switch m.Format {
	case ValueJSON:
		kind, err = CheckJSON(r.Value)
	case ValueText:
		kind, err = CheckText(r.Value)
	}
	if err != nil {
		return &DecodeError{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Column: "value", Kind: kind, Err: err}
	}
	return nil
}

// Row appends the row of r to dst[:0] and returns it. A value that does not
// fit the value column is a *DecodeError. The returned slice aliases r's
// buffers: use it before r is reused.
func (m RawMapper) Row(r *stream.Record, dst []any) ([]any, error) {
	if err := m.checkValue(r); err != nil {
		return nil, err
	}
	var value any
	switch {
	case r.Value == nil:
	case m.Format == ValueText:
		value = string(r.Value)
	default:
		value = r.Value
	}
	var headers any
	if len(r.Headers) > 0 {
		headers = HeadersJSON(r.Headers)
	}
	var key any
	if r.Key != nil {
		key = r.Key
	}
	return append(dst[:0], r.Topic, r.Partition, r.Offset, r.Timestamp, key, headers, value), nil
}

// HeadersJSON renders headers as a jsonb array that keeps order and
// duplicates: [{"key":"k","value":"v"}]. A value that is not UTF-8 text
// Postgres accepts is given as "value_base64"; a null value as null.
func HeadersJSON(hs []stream.Header) []byte {
	return appendHeadersJSON(make([]byte, 0, 32*len(hs)), hs)
}

// HeadersJSONASCII is HeadersJSON in ASCII alone, for a database whose
// encoding may lack a character of the headers (LATIN1, say; jsonb
// converts its input to it): a key or value with a byte beyond ASCII (or a
// NUL) is given as "key_base64" or "value_base64", so both read back
// exactly. Dead letters are stored so.
func HeadersJSONASCII(hs []stream.Header) []byte {
	return appendHeadersJSONIn(make([]byte, 0, 32*len(hs)), hs, true)
}

// appendHeadersJSON appends HeadersJSON(hs) to b.
func appendHeadersJSON(b []byte, hs []stream.Header) []byte {
	return appendHeadersJSONIn(b, hs, false)
}

func appendHeadersJSONIn(b []byte, hs []stream.Header, ascii bool) []byte {
	b = append(b, '[')
	for i, h := range hs {
		if i > 0 {
			b = append(b, ',')
		}
		if ascii && !plainASCII(h.Key) {
			b = append(b, `{"key_base64":"`...)
			b = base64.StdEncoding.AppendEncode(b, []byte(h.Key))
			b = append(b, '"')
		} else {
			b = append(b, `{"key":`...)
			b = appendJSONString(b, h.Key)
		}
		switch {
		case h.Value == nil:
			b = append(b, `,"value":null}`...)
		case plainHeaderValue(h.Value, ascii):
			b = append(b, `,"value":`...)
			b = appendJSONString(b, string(h.Value))
			b = append(b, '}')
		default:
			b = append(b, `,"value_base64":"`...)
			b = base64.StdEncoding.AppendEncode(b, h.Value)
			b = append(b, `"}`...)
		}
	}
	return append(b, ']')
}

// appendJSONString quotes s as a JSON string. Invalid UTF-8 and NUL become
// U+FFFD so the result is always valid for jsonb. It is json.Marshal's
// quoting but for U+2028 and U+2029, which it writes as they are rather
// than escaped (Marshal escapes them for JavaScript's sake, not JSON's): a
// SQL_ASCII database's jsonb cannot store a \u escape beyond ASCII, and a
// header holding one failed its row and then its dead letter for ever.
func appendJSONString(b []byte, s string) []byte {
	if plainJSONString(s) { // what json.Marshal writes unchanged, quoted
		b = append(b, '"')
		b = append(b, s...)
		return append(b, '"')
	}
	s = string(bytes.ToValidUTF8([]byte(s), []byte("\uFFFD")))
	s = string(bytes.ReplaceAll([]byte(s), []byte{0}, []byte("\uFFFD")))
	q, _ := json.Marshal(s) // a string always marshals
	if !strings.ContainsAny(s, "\u2028\u2029") {
		return append(b, q...)
	}
	return appendLineSeparators(b, q)
}

// marshalJSONB is json.Marshal for a value stored in a jsonb column, with
// U+2028 and U+2029 written as they are, as appendJSONString writes them:
// on a SQL_ASCII database Marshal's escapes of them made the record a
// dead letter.
func marshalJSONB(v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil || !bytes.Contains(b, []byte(`\u202`)) {
		return b, err
	}
	return appendLineSeparators(nil, b), nil
}

// appendLineSeparators appends the JSON text q with its \u2028 and \u2029
// escapes written as the characters; every other byte as it is.
func appendLineSeparators(b, q []byte) []byte {
	for i := 0; i < len(q); {
		switch {
		case q[i] != '\\':
			b = append(b, q[i])
			i++
		case bytes.HasPrefix(q[i:], []byte(`\u2028`)):
			b, i = append(b, "\u2028"...), i+6
		case bytes.HasPrefix(q[i:], []byte(`\u2029`)):
			b, i = append(b, "\u2029"...), i+6
		default: // an escape of another character, or an escaped backslash
			b, i = append(b, q[i:i+2]...), i+2
		}
	}
	return b
}

// plainJSONString reports whether s is printable ASCII that json.Marshal
// neither escapes nor replaces (no quote, backslash, or its HTML escapes).
func plainJSONString(s string) bool {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c < 0x20 || c > 0x7e, c == '"', c == '\\', c == '<', c == '>', c == '&':
			return false
		}
	}
	return true
}

// CheckText reports why v cannot be stored in a Postgres text column of a
// UTF8 database: invalid UTF-8, or a NUL byte.
func CheckText(v []byte) (kind string, err error) {
	if !utf8.Valid(v) {
		return KindInvalidUTF8, errors.New("the value is not valid UTF-8")
	}
	if i := bytes.IndexByte(v, 0); i >= 0 {
		return KindNULByte, fmt.Errorf("the value has a NUL byte at position %d, which Postgres text cannot store", i)
	}
	return "", nil
}

// CheckJSON reports why v cannot be stored in a jsonb column: not JSON,
// invalid UTF-8, or a \u0000 escape or lone surrogate, which jsonb refuses.
func CheckJSON(v []byte) (kind string, err error) {
	// The one-pass scanner of the typed mapper accepts exactly the
	// documents encoding/json does (fuzzed against it) and refuses lone
	// surrogates; it is about twice as fast as json.Valid. What it refuses,
	// and documents with a \u0000 escape, take the slow path, which
	// decides and says why.
	s := rawScanners.Get().(*scanner)
	ok := s.scan(v, rootTree)
	s.data = nil
	rawScanners.Put(s)
	if ok && !bytes.Contains(v, []byte(`\u0000`)) {
		return "", nil
	}
	return checkJSONSlow(v)
}

var rawScanners = sync.Pool{New: func() any { return new(scanner) }}

func checkJSONSlow(v []byte) (kind string, err error) {
	if !utf8.Valid(v) {
		return KindInvalidUTF8, errors.New("the value is not valid UTF-8")
	}
	if !json.Valid(v) {
		var x any
		err := json.Unmarshal(v, &x) // only for the message; v is invalid anyway
		if err == nil {
			err = errors.New("not a JSON document")
		}
		if tooDeep(err) {
			return KindTooDeep, fmt.Errorf("the value nests objects and arrays deeper than %d levels, the decoder's limit: %w", maxNestingDepth, err)
		}
		return KindInvalidJSON, fmt.Errorf("the value is not JSON: %w", err)
	}
	if bytes.Contains(v, []byte(`\u`)) {
		if err := checkEscapes(v); err != nil {
			return KindUnsupported, err
		}
	}
	return "", nil
}

// checkEscapes walks the \u escapes of a valid JSON document and refuses the
// ones jsonb cannot store: \u0000 and surrogates that are not a pair.
func checkEscapes(v []byte) error {
	inString := false
	for i := 0; i < len(v); i++ {
		c := v[i]
		if !inString {
			if c == '"' {
				inString = true
			}
			continue
		}
		switch c {
		case '"':
			inString = false
		case '\\':
			if i+1 >= len(v) {
				return nil
			}
			if v[i+1] != 'u' {
				i++ // skip the escaped character
				continue
			}
			cp, ok := hex4(v, i+2)
			if !ok {
				return nil // json.Valid already refused malformed escapes
			}
			switch {
			case cp == 0:
				return fmt.Errorf(`the value has a \u0000 escape at byte %d, which jsonb cannot store`, i)
			case cp >= 0xD800 && cp <= 0xDBFF:
				lo, ok := -1, false
				if i+7 < len(v) && v[i+6] == '\\' && v[i+7] == 'u' {
					var l int
					l, ok = hex4(v, i+8)
					lo = l
				}
				if !ok || lo < 0xDC00 || lo > 0xDFFF {
					return fmt.Errorf(`the value has a lone high surrogate \u%04x at byte %d, which jsonb cannot store`, cp, i)
				}
				i += 11
				continue
			case cp >= 0xDC00 && cp <= 0xDFFF:
				return fmt.Errorf(`the value has a lone low surrogate \u%04x at byte %d, which jsonb cannot store`, cp, i)
			}
			i += 5
		}
	}
	return nil
}

func hex4(v []byte, at int) (int, bool) {
	if at+4 > len(v) {
		return 0, false
	}
	n, err := strconv.ParseUint(string(v[at:at+4]), 16, 32)
	if err != nil {
		return 0, false
	}
	return int(n), true
}

// ParseHeadersJSON reads what HeadersJSON or HeadersJSONASCII wrote, for
// replaying dead letters.
func ParseHeadersJSON(b []byte) ([]stream.Header, error) {
	if len(b) == 0 {
		return nil, nil
	}
	var raw []struct {
		Key         string  `json:"key"`
		KeyBase64   *string `json:"key_base64"`
		Value       *string `json:"value"`
		ValueBase64 *string `json:"value_base64"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return nil, fmt.Errorf("parse headers %q: %w", b, err)
	}
	hs := make([]stream.Header, len(raw))
	for i, h := range raw {
		hs[i].Key = h.Key
		if h.KeyBase64 != nil {
			k, err := base64.StdEncoding.DecodeString(*h.KeyBase64)
			if err != nil {
				return nil, fmt.Errorf("parse headers: key_base64 %q: %w", *h.KeyBase64, err)
			}
			hs[i].Key = string(k)
		}
		switch {
		case h.ValueBase64 != nil:
			v, err := base64.StdEncoding.DecodeString(*h.ValueBase64)
			if err != nil {
				return nil, fmt.Errorf("parse headers: value_base64 of %q: %w", h.Key, err)
			}
			hs[i].Value = v
		case h.Value != nil:
			hs[i].Value = []byte(*h.Value)
		}
	}
	return hs, nil
}

// isASCII says s has no byte beyond ASCII.
func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// plainASCII says s is ASCII without NUL, which appendJSONString keeps
// as it is (escaping control characters in ASCII).
func plainASCII(s string) bool {
	return isASCII(s) && strings.IndexByte(s, 0) < 0
}

// plainHeaderValue says a header value is written as a JSON string rather
// than as value_base64: UTF-8 without NUL, and in ASCII alone when ascii.
func plainHeaderValue(v []byte, ascii bool) bool {
	if ascii {
		return plainASCII(string(v))
	}
	return utf8.Valid(v) && bytes.IndexByte(v, 0) < 0
}
