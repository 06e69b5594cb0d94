package cdc

import (
	"bytes"
	"fmt"
	"strings"
	"unsafe"

	"github.com/kafka2pg/kafka2pg/decode"
)

// reader is a strict pull parser over one JSON document. The decoders walk
// a record once, led by its Connect schema: they ask for the value they
// expect next (an object's next member, a string, a number's text) and skip
// the rest, so no tree of the document is ever built. It accepts exactly
// RFC 8259 JSON and refuses, with a kind, what Postgres could not store
// anyway: invalid UTF-8 and lone surrogate escapes. Strings, numbers and
// skipped values are scanned by package decode's scanner (ScanJSONString,
// ScanJSONNumber, SkipJSONValue), so that the typed JSON mapper and this
// reader agree on what JSON is
// (FuzzReaderMatchesEncodingJSON); the reader adds the structure.
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
	// arena holds the text of the strings keep returned. It is append
	// only: bytes once written are never written again, so the strings
	// that share it stay as they are, and a full arena is left to them
	// (the GC frees it with the last) for a new one.
	arena []byte
}

// readError is malformed JSON: kind is a decode.Kind* constant.
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
		r.fail(decode.KindInvalidJSON, "is not JSON: unexpected end of input, want %s", want)
		return
	}
	r.fail(decode.KindInvalidJSON, "is not JSON: unexpected %q at byte %d, want %s", r.b[r.i], r.i, want)
}

func (r *reader) ws() {
	// A byte over ' ' (the common case: no space at all) ends it at the
	// first comparison.
	i := r.i
	for i < len(r.b) && r.b[i] <= ' ' && (r.b[i] == ' ' || r.b[i] == '\t' || r.b[i] == '\n' || r.b[i] == '\r') {
		i++
	}
	r.i = i
}

// peek returns the first byte of the next value, 0 at the end.
func (r *reader) peek() byte {
	for ; r.i < len(r.b); r.i++ {
		if c := r.b[r.i]; c > ' ' || (c != ' ' && c != '\t' && c != '\n' && c != '\r') {
			return c
		}
	}
	return 0
}

// end checks that nothing but white space follows the document.
func (r *reader) end() {
	r.ws()
	if r.err == nil && r.i < len(r.b) {
		r.fail(decode.KindInvalidJSON, "is not one JSON document: it has more after byte %d", r.i)
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
func (r *reader) object() bool { return r.open('{', "an object") }

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
	// A member name is nearly always ASCII without escapes: find its
	// closing quote, and leave anything else to str.
	if i := decode.PlainJSONBytes(r.b, r.i+1); i < len(r.b) && r.b[i] == '"' {
		key, r.i = r.b[r.i+1:i], i+1
	} else if key = r.str(); r.err != nil {
		return nil, false
	}
	if r.i < len(r.b) && r.b[r.i] == ':' {
		r.i++
		return key, true
	}
	if r.peek() != ':' {
		r.syntax("':'")
		return nil, false
	}
	r.i++
	return key, true
}

// array starts reading an array; call elem until it returns false.
func (r *reader) array() bool { return r.open('[', "an array") }

// open starts reading an object or an array, whose first character is
// c (what, in the error when it is not), one level deeper.
func (r *reader) open(c byte, what string) bool {
	if r.peek() != c {
		r.syntax(what)
		return false
	}
	r.i++
	if r.depth++; r.depth > maxDepth {
		r.fail(decode.KindTooDeep, "nests objects and arrays deeper than %d levels", maxDepth)
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
	start := r.i
	end, esc, lone, ok := decode.ScanJSONString(r.b, start)
	switch {
	case !ok:
		r.invalid(start)
		return nil
	case lone:
		r.fail(decode.KindUnsupported, "has a lone UTF-16 surrogate escape in the string at byte %d, which Postgres cannot store", start)
		return nil
	}
	r.i = end
	body := r.b[start+1 : end-1]
	if !esc {
		return body
	}
	r.scratch = decode.AppendJSONUnquoted(r.scratch[:0], body)
	return r.scratch
}

// arenaSize is the size of a reader's arena: rows of a few dozen short
// strings share one allocation.
const arenaSize = 4096

// keep returns b as a string of its own, from the arena.
func (r *reader) keep(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	if cap(r.arena)-len(r.arena) < len(b) {
		if len(b) > arenaSize/4 {
			return string(b)
		}
		r.arena = make([]byte, 0, arenaSize)
	}
	start := len(r.arena)
	r.arena = append(r.arena, b...)
	return unsafe.String(&r.arena[start], len(b))
}

// invalid fails the read of a value at byte at that the scanner refused,
// saying why as decode.CheckJSON does for the whole document (the reader
// has checked everything before it).
func (r *reader) invalid(at int) {
	kind, err := decode.CheckJSON(r.b)
	if err == nil { // not reached while the scanner and CheckJSON agree
		r.fail(decode.KindInvalidJSON, "is not JSON at byte %d", at)
		return
	}
	r.fail(kind, "%s", strings.TrimPrefix(err.Error(), "the value "))
}

// number reads a number and returns its text, checked against JSON's
// grammar; it aliases the input.
func (r *reader) number() []byte {
	if r.peek() == 0 {
		r.syntax("a number")
		return nil
	}
	start := r.i
	end, ok := decode.ScanJSONNumber(r.b, start)
	if !ok {
		r.invalid(start)
		return nil
	}
	r.i = end
	return r.b[start:end]
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
	if r.peek() == 0 {
		r.syntax("a value")
		return nil
	}
	start := r.i
	end, lone, ok := decode.SkipJSONValue(r.b, start, r.depth)
	switch {
	case !ok:
		r.invalid(start)
		return nil
	case lone:
		r.fail(decode.KindUnsupported, "has a lone UTF-16 surrogate escape in a string after byte %d, which Postgres cannot store", start)
		return nil
	}
	r.i = end
	return r.b[start:end]
}
