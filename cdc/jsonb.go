package cdc

import (
	"bytes"
	"encoding/base64"
	"math"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/kafka2pg/kafka2pg/decode"
	"github.com/kafka2pg/kafka2pg/pgvalue"
)

// Structs, maps and arrays that no Postgres array holds become jsonb. The
// value is walked with its schema, so the logical and semantic types
// inside keep their meaning: a Decimal becomes a JSON number, a date
// "2024-02-29", a timestamp an ISO-8601 string, bytes stay base64, and a
// Json field is embedded as the document it holds. A map with string keys
// is an object; a map with other keys stays the JsonConverter's array of
// [key, value] pairs.

func decodeAsJSONB(r *reader, n *node) (any, *convError) {
	b, cerr := n.appendJSON(nil, r)
	if cerr != nil {
		return nil, cerr
	}
	if bytes.Contains(b, []byte(`\u0000`)) {
		return nil, convErrorf(decode.KindNULByte, "a member name has a NUL character, which jsonb cannot store")
	}
	return b, nil
}

// decodeArray reads an array into []any for a Postgres array column, or
// into jsonb.
func decodeArray(r *reader, n *node) (any, *convError) {
	if n.sqlType == "jsonb" {
		return decodeAsJSONB(r, n)
	}
	if r.peek() != '[' {
		return nil, mismatch(n, what(r))
	}
	out := []any{}
	r.array()
	for first := true; r.elem(first); first = false {
		v, cerr := n.items.decode(r)
		if cerr != nil {
			return nil, cerr
		}
		out = append(out, v)
	}
	return out, nil
}

// appendJSON appends the JSON of the value at r.
func (n *node) appendJSON(dst []byte, r *reader) ([]byte, *convError) {
	if r.null() {
		return append(dst, "null"...), nil
	}
	switch {
	case n.s.Type == typeStruct && n.t == connectTypes[typeStruct],
		n.s.Type == typeMap && n.keys.s.Type == typeString && r.peek() == '{':
		if r.peek() != '{' {
			return nil, mismatch(n, what(r))
		}
		dst = append(dst, '{')
		r.object()
		for first := true; ; first = false {
			key, ok := r.member(first)
			if !ok {
				break
			}
			if !first {
				dst = append(dst, ',')
			}
			dst = appendJSONString(dst, key)
			dst = append(dst, ':')
			value := n.values // a map's
			if n.s.Type == typeStruct {
				value = n.field(string(key))
			}
			if value == nil { // a struct's member not in the schema: kept as it is
				dst = append(dst, r.skip()...)
				continue
			}
			var cerr *convError
			if dst, cerr = value.appendJSON(dst, r); cerr != nil {
				return nil, cerr
			}
		}
		dst = append(dst, '}')
	case n.s.Type == typeMap, n.s.Type == typeArray:
		// An array, or a map of other keys: [[key, value], ...].
		if r.peek() != '[' {
			return nil, mismatch(n, what(r))
		}
		dst = append(dst, '[')
		r.array()
		for first := true; r.elem(first); first = false {
			if !first {
				dst = append(dst, ',')
			}
			var cerr *convError
			if n.s.Type == typeMap {
				dst, cerr = n.appendEntryJSON(dst, r)
			} else {
				dst, cerr = n.items.appendJSON(dst, r)
			}
			if cerr != nil {
				return nil, cerr
			}
		}
		dst = append(dst, ']')
	default:
		v, cerr := n.decode(r)
		if cerr != nil {
			return nil, cerr
		}
		return n.appendValueJSON(dst, v), nil
	}
	if r.err != nil {
		return nil, &convError{kind: r.err.kind, msg: "the value " + r.err.msg}
	}
	return dst, nil
}

// appendEntryJSON appends the JSON of the map entry at r, a [key, value]
// pair.
func (n *node) appendEntryJSON(dst []byte, r *reader) ([]byte, *convError) {
	if r.peek() != '[' {
		return nil, mismatch(n, "a map entry that is not a [key, value] pair")
	}
	r.array()
	dst = append(dst, '[')
	var cerr *convError
	for i, part := range []*node{n.keys, n.values} {
		if !r.elem(i == 0) {
			return nil, mismatch(n, "a map entry that is not a [key, value] pair")
		}
		if i > 0 {
			dst = append(dst, ',')
		}
		if dst, cerr = part.appendJSON(dst, r); cerr != nil {
			return nil, cerr
		}
	}
	if r.elem(false) {
		return nil, mismatch(n, "a map entry with more than a key and a value")
	}
	return append(dst, ']'), nil
}

// appendValueJSON appends the JSON form of a decoded scalar of n.
func (n *node) appendValueJSON(dst []byte, v any) []byte {
	switch x := v.(type) {
	case nil:
		return append(dst, "null"...)
	case int16:
		return strconv.AppendInt(dst, int64(x), 10)
	case int32:
		return strconv.AppendInt(dst, int64(x), 10)
	case int64:
		return strconv.AppendInt(dst, x, 10)
	case float32:
		return appendJSONFloat(dst, float64(x), 32)
	case float64:
		return appendJSONFloat(dst, x, 64)
	case bool:
		return strconv.AppendBool(dst, x)
	case string:
		return appendJSONString(dst, []byte(x))
	case []byte:
		if n.sqlType == "jsonb" {
			return append(dst, x...)
		}
		return appendJSONString(dst, []byte(base64.StdEncoding.EncodeToString(x)))
	case pgvalue.Numeric:
		return append(dst, x.String()...)
	case time.Time:
		layout := "2006-01-02T15:04:05.999999"
		switch n.sqlType {
		case "date":
			layout = "2006-01-02"
		case "timestamp with time zone":
			layout = "2006-01-02T15:04:05.999999Z07:00"
		}
		return appendJSONString(dst, []byte(x.Format(layout)))
	case pgvalue.Time:
		us := x.Microseconds
		s := time.Unix(0, 0).UTC().Add(time.Duration(us) * time.Microsecond).Format("15:04:05.999999")
		if us == microsPerDay {
			s = "24:00:00"
		}
		return appendJSONString(dst, []byte(s))
	case pgvalue.TimeTZ:
		return appendPlainJSONString(dst, x.String())
	case pgvalue.Infinity:
		return appendPlainJSONString(dst, x.String())
	case pgvalue.Interval:
		s := "P" + strconv.Itoa(int(x.Months)) + "M" + strconv.Itoa(int(x.Days)) + "DT" +
			strconv.FormatFloat(float64(x.Microseconds)/1e6, 'f', -1, 64) + "S"
		return appendJSONString(dst, []byte(s))
	case pgvalue.UUID:
		return appendPlainJSONString(dst, x.String())
	case pgvalue.Bits:
		return appendPlainJSONString(dst, x.String())
	case []string:
		dst = append(dst, '[')
		for i, e := range x {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendJSONString(dst, []byte(e))
		}
		return append(dst, ']')
	case []any:
		dst = append(dst, '[')
		for i, e := range x {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = n.items.appendValueJSON(dst, e)
		}
		return append(dst, ']')
	}
	return append(dst, "null"...)
}

// appendJSONFloat writes NaN and the infinities as strings: JSON has no
// number for them.
func appendJSONFloat(dst []byte, f float64, bits int) []byte {
	switch {
	case math.IsNaN(f):
		return append(dst, `"NaN"`...)
	case math.IsInf(f, 1):
		return append(dst, `"Infinity"`...)
	case math.IsInf(f, -1):
		return append(dst, `"-Infinity"`...)
	}
	return strconv.AppendFloat(dst, f, 'g', -1, bits)
}

// appendPlainJSONString quotes s, whose characters need no escape (the
// text of a uuid, a bit string, a time): appendJSONString of it, without
// copying it to a []byte first.
func appendPlainJSONString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	dst = append(dst, s...)
	return append(dst, '"')
}

// appendJSONString quotes valid UTF-8 (the reader checked it) for jsonb,
// which refuses \u0000.
func appendJSONString(dst, s []byte) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	for i := 0; i < len(s); {
		// The bytes that need no escape go in one append.
		if j := decode.PlainJSONBytes(s, i); j > i {
			dst = append(dst, s[i:j]...)
			if i = j; i == len(s) {
				break
			}
		}
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			dst = append(dst, '\\', c)
		case c == '\n':
			dst = append(dst, '\\', 'n')
		case c == '\r':
			dst = append(dst, '\\', 'r')
		case c == '\t':
			dst = append(dst, '\\', 't')
		case c < 0x20:
			dst = append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&15])
		case c < utf8.RuneSelf:
			dst = append(dst, c)
		default:
			_, size := utf8.DecodeRune(s[i:])
			dst = append(dst, s[i:i+size]...)
			i += size
			continue
		}
		i++
	}
	return append(dst, '"')
}
