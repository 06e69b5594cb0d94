package cdc

import (
	"bytes"
	"crypto/md5"
	"encoding/base64"
	"fmt"
	"strconv"

	"github.com/kafka2pg/kafka2pg/decode"
	"github.com/kafka2pg/kafka2pg/stream"
)

// rowState is the scratch space of one record's decode.
type rowState struct {
	r       reader
	kr      reader // the record key's
	vals    []any  // by row field
	unavail []bool // by row field
	before  []any
	// source and transaction are the last record's blocks, whose strings
	// the next record's take when they are the same.
	source      sourceBlock
	transaction transactionBlock
	oldKey      []any // an update's key before it, to compare with after's
	// wireValue and wireKey hold the JSON of a registry format's record.
	wireValue, wireKey []byte
}

// readRow decodes the row object at r into vals (one per field of v's
// row, nil when absent or null), marking the fields that carry the
// unavailable-value placeholder. With only set it decodes those fields and
// skips the rest. It returns the field that refused its value.
func (t *table) readRow(r *reader, v *version, vals []any, unavail []bool, only []int) (string, *convError) {
	row := v.row
	if r.peek() != '{' {
		return "", mismatch(row, what(r))
	}
	r.object()
	next := 0 // fields usually come in schema order
	var (
		badField string
		badErr   *convError
	)
	for first := true; ; first = false {
		key, ok := r.member(first)
		if !ok {
			break
		}
		j := -1
		if next < len(row.fields) && string(key) == row.fields[next].s.Field {
			j = next
		} else if k, ok := row.byName[string(key)]; ok {
			j = k
		}
		next = j + 1
		if j < 0 || (only != nil && !containsInt(only, j)) {
			r.skip()
			continue
		}
		f := row.fields[j]
		if unavail != nil && t.isUnavailable(r) {
			unavail[j] = true
			vals[j] = nil
			r.skip()
			continue
		}
		start, depth := r.i, r.depth
		x, cerr := f.decode(r)
		if cerr != nil && r.err == nil {
			// A value its column cannot take: keep the first such error
			// and read on from after the value, so the rest of the
			// record is still checked as JSON.
			if badErr == nil {
				badField, badErr = f.s.Field, cerr
			}
			r.i, r.depth = start, depth
			r.skip()
			continue
		}
		vals[j] = x
	}
	if r.err != nil {
		return "", &convError{kind: r.err.kind, msg: "the value " + r.err.msg}
	}
	return badField, badErr
}

func containsInt(s []int, x int) bool {
	for _, y := range s {
		if y == x {
			return true
		}
	}
	return false
}

// isUnavailable reports whether the value at r is one of the forms
// Debezium gives the unavailable-value placeholder: the string, its bytes,
// an array of it (text, bytes, uuid) or of its bytes as integers, or an
// hstore map of it to itself. A real value equal to the placeholder is
// read the same way, as Debezium's own sink reads it.
func (t *table) isUnavailable(r *reader) bool {
	c := r.peek()
	if c != '"' && c != '[' && c != '{' {
		return false
	}
	rest := r.b[r.i:]
	for _, lit := range t.placeholders() {
		if bytes.HasPrefix(rest, lit) && (len(rest) == len(lit) || isDelim(rest[len(lit)])) {
			return true
		}
	}
	return false
}

func isDelim(c byte) bool {
	return c == ',' || c == '}' || c == ']' || c == ' ' || c == '\n' || c == '\r' || c == '\t'
}

// placeholders are the JSON forms of the unavailable-value placeholder.
func (t *table) placeholders() [][]byte {
	t.phOnce.Do(func() {
		p := t.cfg.UnavailableValue
		q := string(appendJSONString(nil, []byte(p)))
		b64 := `"` + base64.StdEncoding.EncodeToString([]byte(p)) + `"`
		ints := []byte{'['}
		for i, c := range []byte(p) {
			if i > 0 {
				ints = append(ints, ',')
			}
			ints = strconv.AppendInt(ints, int64(int8(c)), 10)
		}
		ints = append(ints, ']')
		// Java's UUID.nameUUIDFromBytes: MD5, version 3, IETF variant.
		h := md5.Sum([]byte(p))
		h[6] = h[6]&0x0f | 0x30
		h[8] = h[8]&0x3f | 0x80
		u := fmt.Sprintf(`"%x-%x-%x-%x-%x"`, h[0:4], h[4:6], h[6:8], h[8:10], h[10:16])
		t.ph = [][]byte{
			[]byte(q), []byte(b64), []byte("[" + q + "]"), []byte("[" + b64 + "]"), ints,
			[]byte("[" + u + "]"), []byte("{" + q + ":" + q + "}"),
		}
	})
	return t.ph
}

// assemble builds the row of layout l from the decoded fields.
// The source columns take env's blocks; ch gets the unavailable columns.
func (t *table) assemble(dst []any, l *layout, v *version, vals []any, unavail []bool, rec *stream.Record, env *envelope, kafka []any, ch *stream.Change) []any {
	idx := v.index(l)
	dst = dst[:0]
	for i, c := range l.cols {
		var x any
		switch c.kind {
		case colData:
			if j := idx[i]; j >= 0 {
				x = vals[j]
				if unavail != nil && unavail[j] {
					ch.Unavailable = append(ch.Unavailable, i)
				}
			}
		case colSource:
			if sourceField(c.meta) == srcVersion {
				x = ch.Version
			} else {
				x = sourceValue(sourceField(c.meta), env)
			}
		case colKafka:
			x = kafka[c.meta]
		}
		dst = append(dst, x)
	}
	return dst
}

// checkNotNull refuses a row whose NOT NULL column is NULL (a field a later
// schema dropped, or a null where the first schema said required).
func checkNotNull(rec *stream.Record, l *layout, row []any, ch *stream.Change) error {
	for i, c := range l.cols {
		if c.NotNull && row[i] == nil && !containsInt(ch.Unavailable, i) {
			return bad(rec, c.Name, decode.KindNullValue, "the value is null or missing and the column is NOT NULL")
		}
	}
	return nil
}
