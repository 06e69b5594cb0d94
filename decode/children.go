package decode

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"unicode/utf8"

	"github.com/kafka2pg/kafka2pg/schema"
	"github.com/kafka2pg/kafka2pg/stream"
)

// ChildSpec maps an array of each record's value to the rows of a child
// table: an order's items[] to rows of order_items. Every child row is the
// parent's columns (Parent: the parent's key, or the record's
// coordinates), the element's index in the array, then the element's own
// columns.
type ChildSpec struct {
	// Path is the array, in the path syntax of ColumnSpec.Path. A missing
	// or null array has no children; a JSON string holding an array (how
	// Debezium writes a json or jsonb column, io.debezium.data.Json) is
	// read as that array. Required.
	Path string
	// Schema and Table name the child table. Schema "" means the
	// search_path.
	Schema, Table string
	// IndexColumn names the column of the element's index in the array,
	// from 0 (integer NOT NULL). Default "index".
	IndexColumn string
	// Columns are the element's columns, each path relative to the
	// element ("$" is the element itself, for an array of scalars).
	// Columns from the Kafka key (From "key") are refused: a child's
	// columns come from its element.
	Columns []ColumnSpec
	// Parent are the columns each child row starts with, whose values the
	// caller passes to Rows: the parent's key columns in upsert mode, the
	// record's topic, partition and offset in append mode. Required.
	Parent []schema.Column
	// Key makes Parent and IndexColumn the child table's primary key
	// (upsert mode, where a record delivered again replaces its
	// children).
	Key bool
	// Envelope says the value is a Debezium change event: Path is
	// relative to its after image (payload.after, or after in an event
	// without schema).
	Envelope bool
	// UnavailableValue is the string that stands for a value the source
	// left out of the event (Debezium's unavailable.value.placeholder, for
	// an unchanged TOASTed column): an array of that value makes Rows
	// return ErrChildrenUnavailable. "" means none.
	UnavailableValue string
	// Row, when set, reads the array from the parent's row rather than
	// from the record's value: Path's first member names a column of the
	// row (a registry format's array, which its mapper writes as jsonb),
	// and the rest of Path is a path in that column's JSON. Row returns
	// the parent's row of r and the table it fills; its error is the
	// parent mapping's, which Rows returns as it is.
	Row func(r *stream.Record) ([]any, schema.Table, error)
}

// ErrChildrenUnavailable is Rows' error for a record whose array the
// source left out (ChildSpec.UnavailableValue): its children are as they
// were, and the caller keeps them.
var ErrChildrenUnavailable = errors.New("the array is unavailable: the source left it out of the event")

// ChildMapper builds the child rows of records (ChildSpec). It is
// immutable and safe for concurrent use; build it with NewChildMapper.
type ChildMapper struct {
	spec  ChildSpec
	path  jsonPath
	elem  *JSONMapper
	table schema.Table
	// scalars: every element column reads the element itself ("$"), so an
	// element need not be an object.
	scalars bool
}

// NewChildMapper checks spec and compiles it. Every error names the
// setting, the bad value and the fix.
func NewChildMapper(spec ChildSpec) (*ChildMapper, error) {
	if spec.IndexColumn == "" {
		spec.IndexColumn = "index"
	}
	m := &ChildMapper{spec: spec}
	var err error
	if m.path, err = parsePath(spec.Path); err != nil {
		return nil, fmt.Errorf("path: %w", err)
	}
	if len(m.path.steps) == 0 || (spec.Row != nil && m.path.steps[0].isIndex) {
		return nil, fmt.Errorf("path %q is the whole document, which is no array of the record: name the array's member", spec.Path)
	}
	if len(spec.Parent) == 0 {
		return nil, errors.New("a child table needs the parent's columns (the parent's key, or the record's coordinates)")
	}
	if len(spec.Columns) == 0 {
		return nil, fmt.Errorf("child table %q has no columns: map at least one column of the element", spec.Table)
	}
	m.scalars = true
	for i, c := range spec.Columns {
		if c.From != "" && c.From != "value" {
			return nil, fmt.Errorf("columns[%d]: from %q: a child's columns come from its element: remove from", i, c.From)
		}
		if c.Path != "$" {
			m.scalars = false
		}
	}
	if m.elem, err = NewJSONMapper(MappingSpec{Schema: spec.Schema, Table: spec.Table, Columns: spec.Columns}); err != nil {
		return nil, err
	}
	if err := schema.ValidateIdent("index_column", spec.IndexColumn); err != nil {
		return nil, err
	}
	t := schema.Table{Schema: spec.Schema, Name: spec.Table}
	t.Columns = append(t.Columns, spec.Parent...)
	t.Columns = append(t.Columns, schema.Column{Name: spec.IndexColumn, Type: "integer", NotNull: true})
	t.Columns = append(t.Columns, m.elem.Table().Columns...)
	seen := map[string]bool{}
	for _, c := range t.Columns {
		if seen[c.Name] {
			return nil, fmt.Errorf("column %q of child table %q is both a parent's column (or the index column) and an element's: rename the element's column or set index_column", c.Name, spec.Table)
		}
		seen[c.Name] = true
	}
	if spec.Key {
		for _, c := range spec.Parent {
			t.PrimaryKey = append(t.PrimaryKey, c.Name)
		}
		t.PrimaryKey = append(t.PrimaryKey, spec.IndexColumn)
	}
	m.table = t
	return m, nil
}

// WithParent is m with the parent's columns parent, its primary key
// theirs and the index: for a parent whose key is known only once its
// events have told it (format debezium).
func (m *ChildMapper) WithParent(parent []schema.Column) (*ChildMapper, error) {
	spec := m.spec
	spec.Parent, spec.Key = parent, true
	return NewChildMapper(spec)
}

// FromRow is m reading its array from the parent's row (ChildSpec.Row).
func (m *ChildMapper) FromRow(row func(r *stream.Record) ([]any, schema.Table, error)) (*ChildMapper, error) {
	spec := m.spec
	spec.Row = row
	return NewChildMapper(spec)
}

// Table is the child table: the parent's columns, the index column, the
// element's columns; its primary key is the parent's and the index with
// ChildSpec.Key.
func (m *ChildMapper) Table() schema.Table {
	t := m.table
	t.Columns = slices.Clone(t.Columns)
	t.PrimaryKey = slices.Clone(t.PrimaryKey)
	return t
}

// Rows returns the child rows of r in array order, each parent's values
// (in ChildSpec.Parent order) then the index then the element's columns.
// A record whose array or any element does not fit is a *DecodeError
// (errors.Is ErrBadRecord) naming the child table and the element: the
// whole record is then a bad record.
func (m *ChildMapper) Rows(r *stream.Record, parent []any) ([][]any, error) {
	if len(parent) != len(m.spec.Parent) {
		return nil, fmt.Errorf("child rows of %s: %d parent values for %d parent columns", m.table.QualifiedName(), len(parent), len(m.spec.Parent))
	}
	elems, err := m.elements(r)
	if err != nil {
		return nil, err
	}
	rows := make([][]any, 0, len(elems))
	er := stream.Record{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset}
	for i, e := range elems {
		if !m.scalars && firstByte(e) != '{' {
			return nil, m.bad(r, "", KindTypeMismatch, fmt.Sprintf("element %d of %s is %s, not an object: send objects, or map the element itself with path $", i, m.path.text, rawKind(e)))
		}
		er.Value = e
		vals, err := m.elem.Row(&er, nil)
		if err != nil {
			var de *DecodeError
			if errors.As(err, &de) {
				return nil, m.bad(r, de.Column, de.Kind, fmt.Sprintf("element %d of %s: %v", i, m.path.text, de.Err))
			}
			return nil, err
		}
		row := make([]any, 0, len(m.table.Columns))
		row = append(row, parent...)
		row = append(row, int32(i))
		rows = append(rows, append(row, vals...))
	}
	return rows, nil
}

// elements are the raw JSON elements of r's array: none when it is
// missing or null.
func (m *ChildMapper) elements(r *stream.Record) ([]json.RawMessage, error) {
	steps, base := m.path.steps, 0
	var doc json.RawMessage
	switch {
	case m.spec.Row != nil:
		row, t, err := m.spec.Row(r)
		if err != nil {
			return nil, err
		}
		i := slices.Index(t.ColumnNames(), steps[0].key)
		if i < 0 || i >= len(row) || row[i] == nil {
			return nil, nil // no such column in this version of the schema, or null
		}
		switch v := row[i].(type) {
		case []byte:
			doc = v
		case string:
			doc = json.RawMessage(v)
		default:
			return nil, m.bad(r, "", KindTypeMismatch, fmt.Sprintf("column %s of the parent is %s, not a jsonb array: point path at an array field", steps[0].key, t.Columns[i].Type))
		}
		steps, base = steps[1:], 1
	case r.Value == nil:
		return nil, nil
	default:
		doc = json.RawMessage(r.Value)
	}
	if m.spec.Envelope {
		var ok bool
		var err error
		if doc, ok, err = afterImage(doc); err != nil {
			return nil, m.bad(r, "", KindInvalidJSON, "the change event "+err.Error())
		} else if !ok {
			return nil, nil // a delete, a truncate: no after image
		}
	}
	for n, st := range steps {
		n += base
		if isNull(doc) {
			return nil, nil
		}
		if st.isIndex {
			arr, ok := scanElements(doc)
			if !ok {
				return nil, m.stepError(r, doc, n, "an array")
			}
			i := st.index
			if i < 0 {
				i += len(arr)
			}
			if i < 0 || i >= len(arr) {
				return nil, nil
			}
			doc = arr[i]
			continue
		}
		v, found, ok := scanMember(doc, st.key)
		if !ok {
			return nil, m.stepError(r, doc, n, "an object")
		}
		if !found {
			return nil, nil
		}
		doc = v
	}
	if isNull(doc) {
		return nil, nil
	}
	if firstByte(doc) == '"' {
		// A json column as Debezium writes it: a string holding the
		// document.
		var s string
		if err := json.Unmarshal(doc, &s); err != nil {
			return nil, m.bad(r, "", KindInvalidJSON, fmt.Sprintf("path %s: %v", m.path.text, err))
		}
		if m.spec.UnavailableValue != "" && s == m.spec.UnavailableValue {
			return nil, ErrChildrenUnavailable
		}
		doc = json.RawMessage(s)
	}
	if firstByte(doc) != '[' {
		return nil, m.bad(r, "", KindTypeMismatch, fmt.Sprintf("path %s is %s, not an array: send an array, or point path at one", m.path.text, rawKind(doc)))
	}
	arr, ok := scanElements(doc)
	if !ok {
		var arr []json.RawMessage
		return nil, m.bad(r, "", KindInvalidJSON, fmt.Sprintf("path %s: %v", m.path.text, json.Unmarshal(doc, &arr)))
	}
	return arr, nil
}

// stepError is the error of a step of the path into doc, which is not
// what the step needs (want) or not JSON.
func (m *ChildMapper) stepError(r *stream.Record, doc json.RawMessage, n int, want string) error {
	if !utf8.Valid(doc) {
		return m.bad(r, "", KindInvalidUTF8, fmt.Sprintf("path %s: %s is not valid UTF-8", m.path.text, m.path.prefix(n)))
	}
	if json.Valid(doc) {
		return m.bad(r, "", KindTypeMismatch, fmt.Sprintf("path %s: %s is %s, not %s", m.path.text, m.path.prefix(n), rawKind(doc), want))
	}
	var v any
	return m.bad(r, "", KindInvalidJSON, fmt.Sprintf("the value is not JSON: %v", json.Unmarshal(doc, &v)))
}

// scanMember scans the JSON object doc whole, and returns the raw value of
// its member key (the last, if it has the key twice); found false when it
// has no such member. ok false: doc is not a valid JSON object.
func scanMember(doc []byte, key string) (v []byte, found, ok bool) {
	var s scanner
	i := skipSpace(doc, 0)
	if i >= len(doc) || doc[i] != '{' {
		return nil, false, false
	}
	if i = skipSpace(doc, i+1); i < len(doc) && doc[i] == '}' {
		return nil, false, skipSpace(doc, i+1) == len(doc)
	}
	for {
		if i >= len(doc) || doc[i] != '"' {
			return nil, false, false
		}
		s.lone = false
		end, esc, ok := s.str(doc, i)
		if !ok {
			return nil, false, false
		}
		name := doc[i+1 : end-1]
		match := string(name) == key
		if esc {
			match = !s.lone && string(appendUnquoted(nil, name)) == key
		}
		if i = skipSpace(doc, end); i >= len(doc) || doc[i] != ':' {
			return nil, false, false
		}
		start := skipSpace(doc, i+1)
		if i, ok = s.value(doc, start, -1); !ok {
			return nil, false, false
		}
		if match {
			v, found = doc[start:i], true
		}
		if i = skipSpace(doc, i); i >= len(doc) {
			return nil, false, false
		}
		switch doc[i] {
		case ',':
			i = skipSpace(doc, i+1)
		case '}':
			return v, found, skipSpace(doc, i+1) == len(doc)
		default:
			return nil, false, false
		}
	}
}

// scanElements scans the JSON array doc and returns its elements, raw.
// ok false: doc is not a valid JSON array.
func scanElements(doc []byte) (elems []json.RawMessage, ok bool) {
	var s scanner
	i := skipSpace(doc, 0)
	if i >= len(doc) || doc[i] != '[' {
		return nil, false
	}
	if i = skipSpace(doc, i+1); i < len(doc) && doc[i] == ']' {
		return []json.RawMessage{}, skipSpace(doc, i+1) == len(doc)
	}
	for {
		start := i
		if i, ok = s.value(doc, i, -1); !ok {
			return nil, false
		}
		elems = append(elems, doc[start:i])
		if i = skipSpace(doc, i); i >= len(doc) {
			return nil, false
		}
		switch doc[i] {
		case ',':
			i = skipSpace(doc, i+1)
		case ']':
			return elems, skipSpace(doc, i+1) == len(doc)
		default:
			return nil, false
		}
	}
}

func (m *ChildMapper) bad(r *stream.Record, column, kind, msg string) *DecodeError {
	return &DecodeError{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Column: column, Kind: kind,
		Err: fmt.Errorf("child table %s: %s", m.table.QualifiedName(), msg)}
}

// afterImage is the after image of a Debezium or Kafka Connect change
// event: payload.after with a schema, after without; ok false when the
// event has none (a delete).
func afterImage(doc json.RawMessage) (json.RawMessage, bool, error) {
	var env struct {
		Payload json.RawMessage `json:"payload"`
		After   json.RawMessage `json:"after"`
	}
	if err := json.Unmarshal(doc, &env); err != nil {
		return nil, false, fmt.Errorf("is not a JSON object: %w", err)
	}
	if len(env.Payload) > 0 && !isNull(env.Payload) {
		var p struct {
			After json.RawMessage `json:"after"`
		}
		if err := json.Unmarshal(env.Payload, &p); err != nil {
			return nil, false, fmt.Errorf("payload is not a JSON object: %w", err)
		}
		env.After = p.After
	}
	if len(env.After) == 0 || isNull(env.After) {
		return nil, false, nil
	}
	return env.After, true, nil
}

func firstByte(b []byte) byte {
	b = bytes.TrimLeft(b, " \t\r\n")
	if len(b) == 0 {
		return 0
	}
	return b[0]
}

func isNull(b []byte) bool { return bytes.Equal(bytes.TrimSpace(b), []byte("null")) }

// rawKind names the kind of a JSON value, for messages.
func rawKind(b []byte) string {
	switch c := firstByte(b); {
	case c == '{':
		return "an object"
	case c == '[':
		return "an array"
	case c == '"':
		return "a string"
	case c == 't' || c == 'f':
		return "a boolean"
	case c == 'n':
		return "null"
	case c == '-' || (c >= '0' && c <= '9'):
		return "a number"
	}
	return "not JSON"
}
