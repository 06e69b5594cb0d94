package cdc

import (
	"bytes"
	"reflect"

	"github.com/kafka2pg/kafka2pg/pgvalue"
	"github.com/kafka2pg/kafka2pg/stream"
)

// The record key. Debezium's key is a struct of the source table's
// primary key columns, with or without the Connect schema wrapper; a
// table without a key has a null record key.

func (t *table) getState() *rowState {
	if rs, ok := t.states.Get().(*rowState); ok {
		return rs
	}
	return &rowState{}
}

func (t *table) putState(rs *rowState) {
	rs.r.b, rs.kr.b = nil, nil
	clear(rs.vals)
	clear(rs.before)
	t.states.Put(rs)
}

// keyParts finds the schema text and the payload of a record key: the
// wrapper's members, or the whole key as its own payload.
func keyParts(kr *reader, key []byte) (schemaText []byte, payloadAt int, err *readError) {
	schemaText, _, payloadAt, err = wrapperParts(kr, key, nil)
	return schemaText, payloadAt, err
}

// wrapperParts finds the schema and the payload of a document in the
// JsonConverter's {"schema": ..., "payload": ...} wrapper: the schema's
// text, or its version when t has it last (see lastVersionAt), and where
// the payload starts; payloadAt is -1 when the document is not wrapped
// and is its own payload.
func wrapperParts(kr *reader, doc []byte, t *table) (schemaText []byte, v *version, payloadAt int, err *readError) {
	kr.reset(doc)
	if kr.peek() != '{' {
		kr.syntax("an object")
		return nil, nil, 0, kr.err
	}
	kr.object()
	payloadAt = -1
	wrapped := true
	for first := true; ; first = false {
		k, ok := kr.member(first)
		if !ok {
			break
		}
		switch string(k) {
		case "schema":
			schemaText, v = nil, nil
			if kr.null() {
				continue
			}
			if t != nil {
				if v, kr.i = t.lastVersionAt(kr.b, kr.i); v != nil {
					continue
				}
			}
			schemaText = kr.skip()
		case "payload":
			payloadAt = kr.i
			kr.skip()
		default:
			wrapped = false
			kr.skip()
		}
	}
	kr.end()
	if kr.err != nil {
		return nil, nil, 0, kr.err
	}
	if !wrapped || payloadAt < 0 {
		return nil, nil, -1, nil // the document is its own payload
	}
	return schemaText, v, payloadAt, nil
}

// keyNames are the key columns a record key names: its schema's fields,
// else its payload's members; empty for a null key.
func (t *table) keyNames(rec *stream.Record, kr *reader) ([]string, error) {
	if rec.Key == nil || bytes.Equal(bytes.TrimSpace(rec.Key), []byte("null")) {
		return []string{}, nil
	}
	schemaText, at, rerr := keyParts(kr, rec.Key)
	if rerr != nil {
		return nil, bad(rec, "", rerr.kind, "the key %s", rerr.msg)
	}
	if schemaText != nil {
		if names, ok := t.keys.Load(string(schemaText)); ok {
			return names.([]string), nil
		}
		s, err := parseConnectSchema(schemaText)
		if err != nil {
			return nil, bad(rec, "", KindInvalidSchema, "the key's %s", err.Error())
		}
		if s.Type != typeStruct {
			return nil, bad(rec, "", KindNoKey, "the key's schema is %s, not a struct of key columns: name the key columns in the mapping", s.describe())
		}
		names := make([]string, len(s.Fields))
		for i, f := range s.Fields {
			names[i] = f.Field
		}
		t.keys.Store(string(schemaText), names)
		return names, nil
	}
	if at >= 0 {
		kr.i, kr.depth = at, 0
	} else {
		kr.reset(rec.Key)
	}
	if kr.null() {
		return []string{}, nil
	}
	if kr.peek() != '{' {
		return nil, bad(rec, "", KindNoKey, "the key is %s, not an object of key columns: name the key columns in the mapping", what(kr))
	}
	var names []string
	kr.object()
	for first := true; ; first = false {
		k, ok := kr.member(first)
		if !ok {
			break
		}
		names = append(names, string(k))
		kr.skip()
	}
	if kr.err != nil {
		return nil, bad(rec, "", kr.err.kind, "the key %s", kr.err.msg)
	}
	return names, nil
}

// recordKey decodes the key columns of l from the record key, each with
// the type of its field in v, into dst[:0].
func (t *table) recordKey(rec *stream.Record, kr *reader, v *version, l *layout, dst []any) ([]any, error) {
	_, at, rerr := keyParts(kr, rec.Key)
	if rerr != nil {
		return nil, bad(rec, "", rerr.kind, "the key %s", rerr.msg)
	}
	if at >= 0 {
		kr.i, kr.depth = at, 0
	} else {
		kr.reset(rec.Key)
	}
	if kr.peek() != '{' {
		return nil, bad(rec, "", KindNoKey, "the key is %s, not an object of the key columns %v", what(kr), l.key)
	}
	dst = dst[:0]
	for range l.key {
		dst = append(dst, nil)
	}
	found := 0
	kr.object()
	for first := true; ; first = false {
		k, ok := kr.member(first)
		if !ok {
			break
		}
		i := -1
		for n, name := range l.key {
			if name == string(k) {
				i = n
			}
		}
		f := v.row.field(string(k))
		if i < 0 || f == nil {
			kr.skip()
			continue
		}
		x, cerr := f.decode(kr)
		if cerr != nil {
			return nil, bad(rec, string(k), cerr.kind, "the key: %s", cerr.msg)
		}
		if x != nil && dst[i] == nil {
			found++
		}
		dst[i] = x
	}
	if kr.err != nil {
		return nil, bad(rec, "", kr.err.kind, "the key %s", kr.err.msg)
	}
	if found != len(l.key) {
		return nil, bad(rec, "", KindNoKey, "the key lacks some of the key columns %v", l.key)
	}
	return dst, nil
}

// sameKey compares two keys' decoded values.
func sameKey(a, b []any) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		x, y := a[i], b[i]
		if nx, ok := x.(pgvalue.Numeric); ok {
			ny, ok := y.(pgvalue.Numeric)
			if !ok || !sameNumeric(nx, ny) {
				return false
			}
			continue
		}
		if bx, ok := x.([]byte); ok {
			by, ok := y.([]byte)
			if !ok || !bytes.Equal(bx, by) {
				return false
			}
			continue
		}
		if !reflect.DeepEqual(x, y) {
			return false
		}
	}
	return true
}

// sameNumeric compares two numerics as Postgres prints them: 1.5 and
// 1.50 differ, as their scales do.
func sameNumeric(a, b pgvalue.Numeric) bool { return a.String() == b.String() }
