package cdc

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"testing"
	"unicode/utf8"

	"github.com/kafka2pg/kafka2pg/decode"
)

// FuzzReaderMatchesEncodingJSON holds the pull reader to encoding/json:
// walking a document value by value (every object, member, array element,
// string, number and literal through the reader's calls) and skipping it
// whole both accept exactly the documents encoding/json accepts, minus
// those with invalid UTF-8 or a lone surrogate escape (which Postgres
// cannot store and encoding/json would replace), and read the same values.
func FuzzReaderMatchesEncodingJSON(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("testdata", "*.json"))
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	for _, s := range []string{
		`{"a":1,"a":2}`, `[1,[2,{"b":[]}]]`, `"\u00e9\ud83d\ude00\n"`, `"\ud800"`, `"\udc00x"`, `"a\u0000"`,
		`-0.5e+10`, `01`, `1.`, `{"a" 1}`, `{"a":1,}`, `[1,]`, `[,1]`, ` true `, `nul`, "\"\xff\"", "\"\t\"",
		`"\x"`, `"\u12"`, `{}` + `{}`, `{"a":{"b":"\\\"\/"}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		var r reader
		r.reset(doc)
		got := walk(&r)
		r.end()
		walked := r.err

		r.reset(doc)
		r.skip()
		r.end()
		skipped := r.err

		dec := json.NewDecoder(bytes.NewReader(doc))
		dec.UseNumber()
		var want any
		err := dec.Decode(&want)
		if err == nil && dec.More() {
			err = errors.New("more than one value")
		}
		if err == nil {
			if _, err2 := dec.Token(); err2 == nil {
				err = errors.New("trailing data")
			}
		}
		valid := json.Valid(doc)
		accept := valid && utf8.Valid(doc) && !hasLoneSurrogate(doc)
		if (walked == nil) != accept || (skipped == nil) != accept {
			t.Fatalf("%q: walk err %v, skip err %v; encoding/json valid %v, want accepted %v", doc, walked, skipped, valid, accept)
		}
		if !accept {
			// Of several faults the reader names the first it meets, so
			// only a valid document's refusal has one right kind.
			ok := walked.kind == decode.KindInvalidJSON || walked.kind == decode.KindInvalidUTF8 || walked.kind == decode.KindUnsupported
			switch {
			case valid && !utf8.Valid(doc):
				ok = walked.kind == decode.KindInvalidUTF8 || walked.kind == decode.KindUnsupported
			case valid:
				ok = walked.kind == decode.KindUnsupported
			}
			if !ok {
				t.Fatalf("%q: walk refused it as %s (%s)", doc, walked.kind, walked.msg)
			}
			return
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%q: walk read %#v, encoding/json %#v", doc, got, want)
		}
	})
}

// walk reads any value through the reader's calls into what encoding/json
// decodes it to with UseNumber.
func walk(r *reader) any {
	switch r.peek() {
	case '{':
		out := map[string]any{}
		if !r.object() {
			return nil
		}
		for first := true; ; first = false {
			k, ok := r.member(first)
			if !ok {
				break
			}
			key := string(k)
			out[key] = walk(r)
		}
		return out
	case '[':
		out := []any{}
		if !r.array() {
			return nil
		}
		for first := true; r.elem(first); first = false {
			out = append(out, walk(r))
		}
		return out
	case '"':
		return string(r.str())
	case 't', 'f':
		return r.boolean()
	case 'n':
		r.literal("null")
		return nil
	}
	return json.Number(r.number())
}

// hasLoneSurrogate reports whether valid JSON has a \u escape of a UTF-16
// surrogate that is not a high one followed by a low one.
func hasLoneSurrogate(doc []byte) bool {
	in := false
	for i := 0; i < len(doc); i++ {
		switch c := doc[i]; {
		case !in:
			in = c == '"'
		case c == '"':
			in = false
		case c == '\\' && doc[i+1] == 'u':
			x := hexOf(doc[i+2 : i+6])
			i += 5
			switch {
			case x >= 0xDC00 && x <= 0xDFFF:
				return true
			case x >= 0xD800 && x <= 0xDBFF:
				if i+6 >= len(doc) || doc[i+1] != '\\' || doc[i+2] != 'u' {
					return true
				}
				if y := hexOf(doc[i+3 : i+7]); y < 0xDC00 || y > 0xDFFF {
					return true
				}
				i += 6
			}
		case c == '\\':
			i++
		}
	}
	return false
}

func hexOf(b []byte) int {
	x := 0
	for _, c := range b {
		d, _ := strconv.ParseUint(string(rune(c)), 16, 8) // 0 for a non-digit
		x = x<<4 | int(d)
	}
	return x
}

// The reader's refusals keep their kinds.
func TestReaderRefusesWithKinds(t *testing.T) {
	for _, c := range []struct{ doc, kind string }{
		{`{"a":"\ud800"}`, decode.KindUnsupported},
		{"{\"a\":\"\xff\"}", decode.KindInvalidUTF8},
		{`{"a":"\x"}`, decode.KindInvalidJSON},
		{`{"a":01}`, decode.KindInvalidJSON},
		{`{"a":1`, decode.KindInvalidJSON},
		{`{"a":[` + string(bytes.Repeat([]byte("["), decode.MaxJSONDepth)) + `]}`, decode.KindTooDeep},
	} {
		for _, how := range []string{"walk", "skip"} {
			var r reader
			r.reset([]byte(c.doc))
			if how == "walk" {
				walk(&r)
			} else {
				r.skip()
			}
			r.end()
			if r.err == nil || r.err.kind != c.kind {
				t.Errorf("%s %.40q: err %v, want kind %s", how, c.doc, r.err, c.kind)
			}
		}
	}
}
