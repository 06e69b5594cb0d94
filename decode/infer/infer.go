package infer

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"regexp"
	"strconv"
	"strings"

	"github.com/kafka2pg/kafka2pg/decode"
)

// Inference accumulates the statistics of sampled values. The zero value
// is ready to use; an Inference is not safe for concurrent use.
type Inference struct {
	Docs    int // values that are JSON objects
	Skipped int // values that are not (not JSON, or not an object)
	root    *objectStats
}

// objectStats are the members seen in the objects at one path, in the order
// they first appeared (which becomes the column order).
type objectStats struct {
	fields map[string]*fieldStats
	order  []string
}

func newObjectStats() *objectStats { return &objectStats{fields: map[string]*fieldStats{}} }

// fieldStats are the non-null values seen at one path.
type fieldStats struct {
	nonNull                               int
	bools, numbers, strings, objects, arr int
	num                                   numberStats
	notTime, notUUID                      bool         // some string is not an RFC 3339 timestamp, not a UUID
	children                              *objectStats // members of the object values
	elems                                 *fieldStats  // elements of all the array values
}

// numberStats describe the JSON numbers of a path exactly, from their
// literals.
type numberStats struct {
	fractional bool // some literal has a fraction or an exponent
	wide       bool // some integer does not fit int64
	notInt32   bool // some integer does not fit int32
	intDigits  int  // most digits before the decimal point
	scale      int  // most digits after it
}

// Observe adds one record value. A value that is not a JSON object is
// counted in Skipped and adds nothing else.
func (in *Inference) Observe(value []byte) {
	v, err := decodeOrdered(value)
	obj, isObject := v.(orderedObject)
	if err != nil || !isObject {
		in.Skipped++
		return
	}
	in.Docs++
	if in.root == nil {
		in.root = newObjectStats()
	}
	in.root.observe(obj)
}

func (o *objectStats) observe(obj orderedObject) {
	for _, m := range obj {
		f, ok := o.fields[m.key]
		if !ok {
			f = &fieldStats{}
			o.fields[m.key] = f
			o.order = append(o.order, m.key)
		}
		f.observe(m.value)
	}
}

func (f *fieldStats) observe(v any) {
	if v == nil {
		return
	}
	f.nonNull++
	switch x := v.(type) {
	case bool:
		f.bools++
	case json.Number:
		f.numbers++
		f.num.observe(string(x))
	case string:
		f.strings++
		f.notTime = f.notTime || !takes("timestamptz", x)
		f.notUUID = f.notUUID || !takes("uuid", x)
	case orderedObject:
		f.objects++
		if f.children == nil {
			f.children = newObjectStats()
		}
		f.children.observe(x)
	case []any:
		f.arr++
		if f.elems == nil {
			f.elems = &fieldStats{}
		}
		for _, e := range x {
			f.elems.observe(e)
		}
	}
}

// observe reads the digits of a JSON number literal: "-12.50" has 2 integer
// digits and scale 2; "1.5e3" is 1500 (4 and 0); "5e-3" is 0.005 (0 and 3).
func (n *numberStats) observe(lit string) {
	if x, err := strconv.ParseInt(lit, 10, 64); err == nil {
		n.notInt32 = n.notInt32 || x < math.MinInt32 || x > math.MaxInt32
	} else if !strings.ContainsAny(lit, ".eE") {
		n.wide, n.notInt32 = true, true
	}
	s := strings.TrimPrefix(lit, "-")
	mant, exp := s, 0
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		mant = s[:i]
		exp, _ = strconv.Atoi(strings.TrimPrefix(s[i+1:], "+"))
		n.fractional = true
	}
	intPart, frac, hasPoint := strings.Cut(mant, ".")
	n.fractional = n.fractional || hasPoint
	digits, point := intPart+frac, len(intPart)+exp
	for len(digits) > 0 && digits[0] == '0' {
		digits, point = digits[1:], point-1
	}
	n.intDigits = max(n.intDigits, point)
	if digits != "" {
		n.scale = max(n.scale, len(digits)-point)
	}
}

var idName = regexp.MustCompile(`^(?:[iI][dD]|.*_[iI][dD]|.*[a-z0-9]Id)$`)

// columnType is the SQL type of a path's values; name is the member name
// (names like id and order_id get bigint even when the samples are small).
//
//   - booleans → boolean;
//   - integers → integer when every sample fits int32 and the name is not an
//     id, else bigint, else (beyond int64) numeric(p,0);
//   - numbers with a fraction or an exponent → numeric(p,s): s is the most
//     fraction digits seen, p leaves twice the integer digits seen (at least
//     18) before the point; beyond numeric's precision limit, numeric;
//   - strings → timestamptz when the mapping takes every one as a
//     timestamptz (RFC 3339 with an offset), uuid when it takes every one
//     as a uuid, else text;
//   - arrays → the element type of one-kind scalar elements followed by [],
//     else (objects, arrays, mixed kinds, or never an element) jsonb;
//   - objects, mixed kinds and paths never seen with a value → jsonb.
func (f *fieldStats) columnType(name string) string {
	switch f.nonNull {
	case 0:
		return "jsonb"
	case f.bools:
		return "boolean"
	case f.strings:
		switch {
		case !f.notTime:
			return "timestamptz"
		case !f.notUUID:
			return "uuid"
		}
		return "text"
	case f.numbers:
		n := f.num
		switch {
		case !n.fractional && !n.wide && !n.notInt32 && !idName.MatchString(name):
			return "integer"
		case !n.fractional && !n.wide:
			return "bigint"
		}
		p := n.scale + max(2*n.intDigits, 18)
		if p > 1000 || n.scale > p {
			return "numeric"
		}
		return fmt.Sprintf("numeric(%d,%d)", p, n.scale)
	case f.arr:
		e := f.elems
		if e == nil || e.nonNull == 0 || e.objects > 0 || e.arr > 0 {
			return "jsonb"
		}
		if t := e.columnType(name); t != "jsonb" {
			return t + "[]"
		}
	}
	return "jsonb"
}

// Column is one column of the inferred mapping, as a decode.ColumnSpec
// names it.
type Column struct {
	Steps   []string // member names from the top
	Name    string   // the column's name: the steps joined by _, sanitized, unique
	Path    string   // the steps in the mapping's path syntax (ColumnSpec.Path)
	Type    string   // the column's SQL type (ColumnSpec.Type)
	NotNull bool     // every sample had a non-null value there
}

// MaxFlattenDepth is how many members deep nested objects become columns;
// deeper objects are jsonb.
const MaxFlattenDepth = 3

// Columns turns the statistics into columns, in the order their members
// first appeared: with decode.NestedFlatten, objects seen as objects in
// every sample that had them are flattened (up to MaxFlattenDepth);
// everything else is one column.
func (in *Inference) Columns(nested decode.Nested) []Column {
	if in.root == nil {
		return nil
	}
	var out []Column
	taken := map[string]bool{}
	var walk func(o *objectStats, prefix []string)
	walk = func(o *objectStats, prefix []string) {
		for _, key := range o.order {
			f := o.fields[key]
			steps := append(append([]string(nil), prefix...), key)
			if nested == decode.NestedFlatten && f.nonNull > 0 && f.objects == f.nonNull && len(steps) < MaxFlattenDepth &&
				f.children != nil && len(f.children.order) > 0 {
				walk(f.children, steps)
				continue
			}
			name := uniqueName(columnName(steps), taken)
			out = append(out, Column{Steps: steps, Name: name, Path: jsonPathOf(steps), Type: f.columnType(key), NotNull: f.nonNull == in.Docs})
		}
	}
	walk(in.root, nil)
	return out
}

// columnName joins the member names with _, in lower case, every character
// outside [a-z0-9_] as _, a leading digit prefixed with c_, at most 63 bytes.
func columnName(steps []string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.Join(steps, "_")) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '_':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	s := b.String()
	switch {
	case s == "":
		s = "column"
	case s[0] >= '0' && s[0] <= '9':
		s = "c_" + s
	}
	if len(s) > 63 {
		s = s[:63]
	}
	return s
}

// uniqueName returns name, or name_2, name_3... when it is taken, and takes
// it.
func uniqueName(name string, taken map[string]bool) string {
	out := name
	for i := 2; taken[out]; i++ {
		suffix := "_" + strconv.Itoa(i)
		out = name[:min(len(name), 63-len(suffix))] + suffix
	}
	taken[out] = true
	return out
}

var plainMember = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_-]*$`)

// jsonPathOf writes member names in the mapping's path syntax: plain names
// joined by dots, others as ["name"].
func jsonPathOf(steps []string) string {
	var b strings.Builder
	for i, s := range steps {
		switch {
		case plainMember.MatchString(s):
			if i > 0 {
				b.WriteByte('.')
			}
			b.WriteString(s)
		default:
			q, _ := json.Marshal(s)
			b.WriteString("[" + string(q) + "]")
		}
	}
	return b.String()
}

// takes says the mapping takes the string s into a column of type typ.
func takes(typ, s string) bool {
	_, err := decode.CheckString(typ, s)
	return err == nil
}

// orderedObject is a JSON object with its members in document order (a
// repeated name keeps its last value, at its first place, as the mapping
// reads it).
type orderedObject []member

type member struct {
	key   string
	value any
}

// decodeOrdered decodes one JSON document with exact numbers, objects as
// orderedObject.
func decodeOrdered(b []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	v, err := decodeValue(dec)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("more than one JSON document")
	}
	return v, nil
}

func decodeValue(dec *json.Decoder) (any, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			var obj orderedObject
			at := map[string]int{}
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, err
				}
				key, _ := kt.(string)
				v, err := decodeValue(dec)
				if err != nil {
					return nil, err
				}
				if i, dup := at[key]; dup {
					obj[i].value = v
					continue
				}
				at[key] = len(obj)
				obj = append(obj, member{key, v})
			}
			_, err := dec.Token() // }
			return obj, err
		case '[':
			arr := []any{}
			for dec.More() {
				v, err := decodeValue(dec)
				if err != nil {
					return nil, err
				}
				arr = append(arr, v)
			}
			_, err := dec.Token() // ]
			return arr, err
		}
		return nil, fmt.Errorf("unexpected %v", t)
	}
	return tok, nil
}
