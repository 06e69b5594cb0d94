package cdc

import (
	"bytes"
	"fmt"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/kafka2pg/kafka2pg/schema"
)

// reader is a strict pull parser over one JSON document. The decoders walk
// a record once, led by its Connect schema: they ask for the value they
// expect next (an object's next member, a string, a number's text) and skip
// the rest, so no tree of the document is ever built. It accepts exactly
// RFC 8259 JSON and refuses, with a kind, what Postgres could not store
// anyway: invalid UTF-8 and lone surrogate escapes.
//
// A reader never panics: every method checks bounds, and the first error
// sticks (err), so a caller may test it once after a sequence of reads.
type reader struct {
	b     []byte
	i     int
	depth int
	err   *readError
	// scratch holds unescaped strings; a string without escapes aliases b.
	scratch []byte
}

// readError is malformed JSON: kind is a schema.Kind* constant.
type readError struct {
	kind string
	msg  string
}

func (e *readError) Error() string { return e.msg }

// maxDepth bounds the nesting of objects and arrays, as encoding/json does.
const maxDepth = 10000

func (r *reader) reset(b []byte) {
	r.b, r.i, r.depth, r.err = b, 0, 0, nil
	r.scratch = r.scratch[:0]
}

func (r *reader) fail(kind, format string, args ...any) {
	if r.err == nil {
		r.err = &readError{kind: kind, msg: fmt.Sprintf(format, args...)}
	}
	r.i = len(r.b) // stop every later read
}

func (r *reader) syntax(want string) {
	if r.i >= len(r.b) {
		r.fail(schema.KindInvalidJSON, "is not JSON: unexpected end of input, want %s", want)
		return
	}
	r.fail(schema.KindInvalidJSON, "is not JSON: unexpected %q at byte %d, want %s", r.b[r.i], r.i, want)
}

func (r *reader) ws() {
	for r.i < len(r.b) {
		switch r.b[r.i] {
		case ' ', '\t', '\n', '\r':
			r.i++
		default:
			return
		}
	}
}

// peek returns the first byte of the next value, 0 at the end.
func (r *reader) peek() byte {
	r.ws()
	if r.i >= len(r.b) {
		return 0
	}
	return r.b[r.i]
}

// end checks that nothing but white space follows the document.
func (r *reader) end() {
	r.ws()
	if r.err == nil && r.i < len(r.b) {
		r.fail(schema.KindInvalidJSON, "is not one JSON document: it has more after byte %d", r.i)
	}
}

// null consumes a null and reports whether there was one.
func (r *reader) null() bool {
	if r.peek() == 'n' {
		r.literal("null")
		return true
	}
	return false
}

func (r *reader) literal(lit string) {
	if !bytes.HasPrefix(r.b[r.i:], []byte(lit)) {
		r.syntax(lit)
		return
	}
	r.i += len(lit)
}

// object starts reading an object; false (with err set) when the next
// value is not one. Call member until it returns false.
func (r *reader) object() bool {
	if r.peek() != '{' {
		r.syntax("an object")
		return false
	}
	r.i++
	if r.depth++; r.depth > maxDepth {
		r.fail(schema.KindTooDeep, "nests objects and arrays deeper than %d levels", maxDepth)
		return false
	}
	return true
}

// member reads the key of the object's next member, leaving the reader at
// its value; ok is false after the last member or on an error. first says
// whether this is the object's first call. The key may alias the input or
// the scratch space; it is valid until the next string is read.
func (r *reader) member(first bool) (key []byte, ok bool) {
	c := r.peek()
	switch {
	case c == '}':
		r.i++
		r.depth--
		return nil, false
	case !first && c == ',':
		r.i++
		if r.peek() != '"' {
			r.syntax("a member name")
			return nil, false
		}
	case first && c == '"':
	default:
		r.syntax("',' or '}'")
		return nil, false
	}
	key = r.str()
	if r.err != nil {
		return nil, false
	}
	if r.peek() != ':' {
		r.syntax("':'")
		return nil, false
	}
	r.i++
	return key, true
}

// array starts reading an array; call elem until it returns false.
func (r *reader) array() bool {
	if r.peek() != '[' {
		r.syntax("an array")
		return false
	}
	r.i++
	if r.depth++; r.depth > maxDepth {
		r.fail(schema.KindTooDeep, "nests objects and arrays deeper than %d levels", maxDepth)
		return false
	}
	return true
}

// elem reports whether the array has a next element, leaving the reader at it.
func (r *reader) elem(first bool) bool {
	c := r.peek()
	switch {
	case c == ']':
		r.i++
		r.depth--
		return false
	case first && c != 0:
		return r.err == nil
	case c == ',':
		r.i++
		return true
	}
	r.syntax("',' or ']'")
	return false
}

// str reads a string and returns its unescaped bytes, which alias the
// input or the scratch space (valid until the next call).
func (r *reader) str() []byte {
	if r.peek() != '"' {
		r.syntax("a string")
		return nil
	}
	r.i++
	start := r.i
	for r.i < len(r.b) {
		c := r.b[r.i]
		switch {
		case c == '"':
			s := r.b[start:r.i]
			r.i++
			if !utf8.Valid(s) {
				r.fail(schema.KindInvalidUTF8, "is not valid UTF-8 (in the string at byte %d)", start)
				return nil
			}
			return s
		case c == '\\':
			return r.escaped(start)
		case c < 0x20:
			r.fail(schema.KindInvalidJSON, "is not JSON: a control character in the string at byte %d", start)
			return nil
		}
		r.i++
	}
	r.syntax("the end of a string")
	return nil
}

// escaped finishes a string that has escapes, unescaping into scratch.
func (r *reader) escaped(start int) []byte {
	out := append(r.scratch[:0], r.b[start:r.i]...)
	for r.i < len(r.b) {
		c := r.b[r.i]
		switch {
		case c == '"':
			r.i++
			r.scratch = out
			if !utf8.Valid(out) {
				r.fail(schema.KindInvalidUTF8, "is not valid UTF-8 (in the string at byte %d)", start)
				return nil
			}
			return out
		case c < 0x20:
			r.fail(schema.KindInvalidJSON, "is not JSON: a control character in the string at byte %d", start)
			return nil
		case c != '\\':
			out = append(out, c)
			r.i++
			continue
		}
		if r.i+1 >= len(r.b) {
			break
		}
		r.i += 2
		switch e := r.b[r.i-1]; e {
		case '"', '\\', '/':
			out = append(out, e)
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			x, ok := r.hex4()
			if !ok {
				return nil
			}
			rn := rune(x)
			if utf16.IsSurrogate(rn) {
				lo, ok := rune(-1), false
				if r.i+1 < len(r.b) && r.b[r.i] == '\\' && r.b[r.i+1] == 'u' {
					r.i += 2
					var y uint16
					if y, ok = r.hex4(); !ok {
						return nil
					}
					lo = rune(y)
				}
				rn = utf16.DecodeRune(rn, lo)
				if rn == utf8.RuneError {
					r.fail(schema.KindUnsupported, "has a lone UTF-16 surrogate escape in the string at byte %d, which Postgres cannot store", start)
					return nil
				}
			}
			out = utf8.AppendRune(out, rn)
		default:
			r.fail(schema.KindInvalidJSON, "is not JSON: invalid escape \\%c in the string at byte %d", e, start)
			return nil
		}
	}
	r.syntax("the end of a string")
	return nil
}

func (r *reader) hex4() (uint16, bool) {
	if r.i+4 > len(r.b) {
		r.syntax("four hex digits")
		return 0, false
	}
	var x uint16
	for _, c := range r.b[r.i : r.i+4] {
		var d byte
		switch {
		case c >= '0' && c <= '9':
			d = c - '0'
		case c >= 'a' && c <= 'f':
			d = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			d = c - 'A' + 10
		default:
			r.fail(schema.KindInvalidJSON, "is not JSON: invalid \\u escape at byte %d", r.i)
			return 0, false
		}
		x = x<<4 | uint16(d)
	}
	r.i += 4
	return x, true
}

// number reads a number and returns its text, checked against JSON's
// grammar; it aliases the input.
func (r *reader) number() []byte {
	c := r.peek()
	start := r.i
	if c == '-' {
		r.i++
	}
	switch {
	case r.i < len(r.b) && r.b[r.i] == '0':
		r.i++
	case r.i < len(r.b) && r.b[r.i] >= '1' && r.b[r.i] <= '9':
		r.digits()
	default:
		r.i = start
		r.syntax("a number")
		return nil
	}
	if r.i < len(r.b) && r.b[r.i] == '.' {
		r.i++
		if !r.digits() {
			r.syntax("a digit after the decimal point")
			return nil
		}
	}
	if r.i < len(r.b) && (r.b[r.i] == 'e' || r.b[r.i] == 'E') {
		r.i++
		if r.i < len(r.b) && (r.b[r.i] == '+' || r.b[r.i] == '-') {
			r.i++
		}
		if !r.digits() {
			r.syntax("a digit in the exponent")
			return nil
		}
	}
	return r.b[start:r.i]
}

func (r *reader) digits() bool {
	start := r.i
	for r.i < len(r.b) && r.b[r.i] >= '0' && r.b[r.i] <= '9' {
		r.i++
	}
	return r.i > start
}

// boolean reads true or false.
func (r *reader) boolean() bool {
	switch r.peek() {
	case 't':
		r.literal("true")
		return true
	case 'f':
		r.literal("false")
		return false
	}
	r.syntax("true or false")
	return false
}

// skip reads past the next value, checking it, and returns its text.
func (r *reader) skip() []byte {
	start := r.i
	switch r.peek() {
	case '{':
		start = r.i
		if r.object() {
			for first := true; ; first = false {
				if _, ok := r.member(first); !ok {
					break
				}
				r.skip()
			}
		}
	case '[':
		start = r.i
		if r.array() {
			for first := true; r.elem(first); first = false {
				r.skip()
			}
		}
	case '"':
		start = r.i
		r.str()
	case 't', 'f':
		start = r.i
		r.boolean()
	case 'n':
		start = r.i
		r.literal("null")
	default:
		start = r.i
		r.number()
	}
	if r.err != nil {
		return nil
	}
	return r.b[start:r.i]
}
