package decode

import (
	"bytes"
	"slices"
	"unicode/utf8"
)

// A jsonb column whose value is a scalar, or an object or array with an
// escape in it, gets the bytes encoding/json writes for the decoded
// sub-document, produced here straight from the scanned bytes: compact,
// members sorted by name with the last of duplicate names kept, numbers as
// written, strings escaped as encoding/json escapes them with
// SetEscapeHTML(false). That form refuses what jsonb refuses (\u0000) before
// Postgres sees it. An object or array without escapes goes as sent
// (rowBuffer.appendJSON); tests compare it in this form.

// jsonbWriter holds scratch space reused across rows.
type jsonbWriter struct {
	members []jsonbMember
	order   []int32 // member indexes, sorted by name
	nul     bool    // the output has a \u0000 escape
	// ends[i] is one past the object or array that starts at raw[i], once
	// haveEnds: members are found without walking their values twice, so
	// deep nesting costs linear time.
	ends     []int32
	haveEnds bool
}

type jsonbMember struct {
	key        []byte // the decoded name
	start, end int    // the value in raw
	rawKey     []byte // the name as sent, quotes included, when it needs no rewriting
	rawValue   bool   // the value needs no rewriting either (a scalar)
}

// appendCanonical appends the canonical form of raw, one valid JSON value
// without lone surrogate escapes.
func (w *jsonbWriter) appendCanonical(dst, raw []byte) []byte {
	w.nul, w.haveEnds = false, false
	dst, _ = w.value(dst, raw, 0)
	return dst
}

// end returns the index after the value starting at raw[i].
func (w *jsonbWriter) end(raw []byte, i int) int {
	if c := raw[i]; c != '{' && c != '[' {
		return skipValue(raw, i)
	}
	if !w.haveEnds {
		w.haveEnds = true
		if cap(w.ends) < len(raw) {
			w.ends = make([]int32, len(raw))
		}
		w.ends = w.ends[:len(raw)]
		var open []int32
		for j := 0; j < len(raw); j++ {
			switch raw[j] {
			case '"':
				j = skipString(raw, j) - 1
			case '{', '[':
				open = append(open, int32(j))
			case '}', ']':
				w.ends[open[len(open)-1]] = int32(j + 1)
				open = open[:len(open)-1]
			}
		}
	}
	return int(w.ends[i])
}

func skipSpaceAt(raw []byte, i int) int {
	for i < len(raw) && (raw[i] == ' ' || raw[i] == '\t' || raw[i] == '\n' || raw[i] == '\r') {
		i++
	}
	return i
}

// value appends the value at raw[i:] and returns the index after it.
func (w *jsonbWriter) value(dst, raw []byte, i int) ([]byte, int) {
	i = skipSpaceAt(raw, i)
	switch raw[i] {
	case '{':
		base := len(w.members)
		i = skipSpaceAt(raw, i+1)
		for raw[i] != '}' {
			ks := i
			ke, esc, plain := scanString(raw, i)
			m := jsonbMember{key: raw[ks+1 : ke-1]}
			if esc {
				m.key = appendUnquoted(nil, m.key)
			} else if plain {
				m.rawKey = raw[ks:ke]
			}
			m.start = skipSpaceAt(raw, skipSpaceAt(raw, ke)+1) // past the colon
			switch raw[m.start] {
			case '{', '[':
				m.end = w.end(raw, m.start)
			case '"':
				m.end, _, m.rawValue = scanString(raw, m.start)
			default:
				m.end, m.rawValue = skipValue(raw, m.start), true
			}
			w.members = append(w.members, m)
			i = skipSpaceAt(raw, m.end)
			if raw[i] == ',' {
				i = skipSpaceAt(raw, i+1)
			}
		}
		ms := w.members[base:]
		obase := len(w.order)
		sorted := true
		for j := range ms {
			w.order = append(w.order, int32(j))
			sorted = sorted && (j == 0 || bytes.Compare(ms[j-1].key, ms[j].key) < 0)
		}
		order := w.order[obase:]
		if !sorted {
			// Indexes, not members, move: they are small.
			slices.SortStableFunc(order, func(a, b int32) int { return bytes.Compare(ms[a].key, ms[b].key) })
		}
		dst = append(dst, '{')
		first := true
		for j, o := range order {
			if j+1 < len(order) && bytes.Equal(ms[o].key, ms[order[j+1]].key) {
				continue // a later duplicate wins
			}
			if !first {
				dst = append(dst, ',')
			}
			first = false
			m := &ms[o]
			if m.rawKey != nil {
				dst = append(dst, m.rawKey...)
			} else {
				dst = appendEncodedString(w, dst, m.key)
			}
			dst = append(dst, ':')
			if m.rawValue {
				dst = append(dst, raw[m.start:m.end]...)
			} else {
				dst, _ = w.value(dst, raw, m.start)
			}
		}
		w.members, w.order = w.members[:base], w.order[:obase]
		return append(dst, '}'), i + 1
	case '[':
		dst = append(dst, '[')
		i = skipSpaceAt(raw, i+1)
		first := true
		for raw[i] != ']' {
			if !first {
				dst = append(dst, ',')
			}
			first = false
			dst, i = w.value(dst, raw, i)
			i = skipSpaceAt(raw, i)
			if raw[i] == ',' {
				i = skipSpaceAt(raw, i+1)
			}
		}
		return append(dst, ']'), i + 1
	case '"':
		e, esc, plain := scanString(raw, i)
		body := raw[i+1 : e-1]
		switch {
		case esc:
			dst = appendEncodedString(w, dst, appendUnquoted(nil, body))
		case !plain:
			dst = appendEncodedString(w, dst, body)
		default:
			dst = append(dst, raw[i:e]...)
		}
		return dst, e
	}
	e := skipValue(raw, i)
	return append(dst, raw[i:e]...), e
}

// scanString returns the index after the valid string starting at
// raw[i] == '"', whether it has escapes, and whether it is plain: written
// as encoding/json writes it (no escapes, no U+2028 or U+2029).
func scanString(raw []byte, i int) (end int, esc, plain bool) {
	e2 := false
	for i++; i < len(raw); i++ {
		switch raw[i] {
		case '\\':
			esc = true
			i++
		case 0xE2: // maybe U+2028 or U+2029
			e2 = true
		case '"':
			return i + 1, esc, !esc && !e2
		}
	}
	return i, esc, false
}

// skipString returns the index after the string starting at raw[i] == '"'.
func skipString(raw []byte, i int) int {
	for i++; i < len(raw); i++ {
		switch raw[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return i
}

// skipValue returns the index after the valid value starting at raw[i].
func skipValue(raw []byte, i int) int {
	depth := 0
	for i < len(raw) {
		switch c := raw[i]; c {
		case '"':
			i = skipString(raw, i)
			if depth == 0 {
				return i
			}
			continue
		case '{', '[':
			depth++
		case '}', ']':
			if depth == 0 {
				return i
			}
			depth--
			if depth == 0 {
				return i + 1
			}
		case ',', ' ', '\t', '\n', '\r', ':':
			if depth == 0 {
				return i
			}
		}
		i++
	}
	return i
}

const hexDigits = "0123456789abcdef"

// appendEncodedString quotes s (valid UTF-8) as encoding/json does without
// HTML escaping.
func appendEncodedString[T string | []byte](w *jsonbWriter, dst []byte, s T) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		if b := s[i]; b < utf8.RuneSelf {
			if b >= 0x20 && b != '"' && b != '\\' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch b {
			case '\\', '"':
				dst = append(dst, '\\', b)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				if b == 0 {
					w.nul = true
				}
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[b>>4], hexDigits[b&0xF])
			}
			i++
			start = i
			continue
		}
		c, size := utf8.DecodeRuneInString(string(s[i:min(len(s), i+utf8.UTFMax)]))
		if c == '\u2028' || c == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[c&0xF])
			start = i + size
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}
