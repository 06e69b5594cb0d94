package decode

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"unicode/utf8"

	"github.com/kafka2pg/kafka2pg/schema"
	"github.com/kafka2pg/kafka2pg/stream"
)

// ColumnSpec maps one JSON value to one typed column.
type ColumnSpec struct {
	// Name is the column name. Required.
	Name string `yaml:"name"`
	// Path picks the value (see jsonpath.go for the syntax). "" means the
	// member named like the column; "$" is the whole document.
	Path string `yaml:"path"`
	// Type is the SQL type: text, varchar(n), smallint, integer, bigint,
	// numeric, numeric(p,s), real, double precision, boolean, timestamptz,
	// timestamp, date, time, uuid, jsonb, bytea, inet, or type[] for an
	// array of any of them but jsonb. Aliases such as int8 or float8 are
	// accepted. Required.
	Type string `yaml:"type"`
	// From is "value" (default) or "key": the path applies to the Kafka
	// key, read as JSON.
	From string `yaml:"from"`
	// TimeUnit is s, ms, us or ns: a JSON number in a time column
	// (timestamptz, timestamp, date, time) is an epoch (or, for time, a
	// time since midnight) in that unit. "" means numbers are refused.
	TimeUnit string `yaml:"time_unit"`
	// NotNull makes a null that no default replaces a bad record, and the
	// column NOT NULL in the planned DDL.
	NotNull bool `yaml:"not_null"`
	// Default is a JSON literal ("0", "\"n/a\"", "false") used when the
	// value is null, or missing (unless OnMissing is "error"). It is
	// converted like a value when the mapper is built; nil means none.
	Default *string `yaml:"default"`
	// OnMissing says what a missing path means: "null" (default) is the
	// same as a JSON null; "default" is the same but requires Default;
	// "error" makes the record a bad record of kind missing_value.
	OnMissing string `yaml:"on_missing"`
}

// MetadataSpec names the columns that receive the record's Kafka metadata;
// "" leaves a column out.
type MetadataSpec struct {
	Topic         string `yaml:"topic"`          // text NOT NULL
	Partition     string `yaml:"partition"`      // integer NOT NULL
	Offset        string `yaml:"offset"`         // bigint NOT NULL
	Timestamp     string `yaml:"timestamp"`      // timestamptz
	TimestampType string `yaml:"timestamp_type"` // text: stream.Record.TimestampType, NULL when unknown
	Key           string `yaml:"key"`            // text, bytea or jsonb after KeyFormat; NULL without key
	// KeyFormat is text (UTF-8 without NUL), bytes (default, any key) or
	// json (a JSON document jsonb accepts). A key that does not fit is a bad
	// record.
	KeyFormat string `yaml:"key_format"`
	Headers   string `yaml:"headers"` // jsonb as HeadersJSON writes it; NULL without headers
	// Header maps a column name to a header name: the column (text) gets
	// the value of the last header with that name, NULL when absent.
	Header map[string]string `yaml:"header"`
}

// MappingSpec is a complete typed mapping of one topic to one table.
type MappingSpec struct {
	Schema string // "" means the search_path
	Table  string // required
	// Columns are the data columns, in row order.
	Columns []ColumnSpec
	// Metadata columns follow the data columns.
	Metadata MetadataSpec
	// Key lists the upsert key columns (data or metadata): the primary key.
	// Empty means append mode and no primary key.
	Key []string
	// DeleteOnTombstone makes a tombstone (Value == nil) delete the row of
	// its key. Requires Key, and every key column must come from the Kafka
	// key (From "key") or the metadata, since a tombstone has no value.
	DeleteOnTombstone bool
}

// The KeyFormat values.
const (
	KeyFormatText  = "text"
	KeyFormatBytes = "bytes"
	KeyFormatJSON  = "json"
)

// source says where a column's value comes from.
type source uint8

const (
	fromValue source = iota
	fromKey
	metaTopic
	metaPartition
	metaOffset
	metaTimestamp
	metaTimestampType
	metaKey
	metaHeaders
	metaHeader
)

// mappedColumn is one compiled column.
type mappedColumn struct {
	name      string
	source    source
	path      jsonPath
	typ       colType
	sqlType   string
	notNull   bool
	def       any // converted default; nil when none
	onMissing string
	header    string // metaHeader: the header name
	keyFormat string // metaKey
	// nodes are the path's node ids in the value's or the key's pathTree;
	// leaf is the last of them, the node of the column's value.
	nodes []int32
	leaf  int32
	// oid is the type AppendRow writes the column as itself (nativeOID).
	oid uint32
}

// JSONMapper builds typed rows from JSON records. It is immutable (but for a
// pool of scratch space) and safe for concurrent use; build it with
// NewJSONMapper. Row reads each document in one pass (scan.go) for the
// values its columns' paths need.
//
// Tombstones (Value == nil): with DeleteOnTombstone the caller checks
// IsTombstone and calls KeyRow. Otherwise Row maps a tombstone like any
// record whose value columns are all absent: each is its default or NULL,
// and a NOT NULL value column without default makes the tombstone a bad
// record of kind tombstone. Key and metadata columns are filled as usual,
// so an append-mode table can keep deletes as rows.
type JSONMapper struct {
	spec   MappingSpec
	cols   []mappedColumn
	keyIdx []int
	table  schema.Table
	// valueTree and keyTree are the paths the columns read from each;
	// valueLeaves and keyLeaves the columns' nodes in them.
	valueTree, keyTree     *pathTree
	valueLeaves, keyLeaves []int32
	states                 sync.Pool // of *rowState
	hot                    atomic.Pointer[rowState]
}

// NewJSONMapper checks spec and compiles it. Every error names the column
// or setting, the bad value and the fix.
func NewJSONMapper(spec MappingSpec) (*JSONMapper, error) {
	m := &JSONMapper{spec: spec}
	if spec.Schema != "" {
		if err := schema.ValidateIdent("schema", spec.Schema); err != nil {
			return nil, err
		}
	}
	if err := schema.ValidateIdent("table", spec.Table); err != nil {
		return nil, err
	}
	seen := map[string]string{} // column name → what defined it
	add := func(c mappedColumn, what string) error {
		if err := schema.ValidateIdent(what+" name", c.name); err != nil {
			return err
		}
		if prev, dup := seen[c.name]; dup {
			return fmt.Errorf("column %q is defined twice, by %s and by %s: rename one", c.name, prev, what)
		}
		seen[c.name] = what
		m.cols = append(m.cols, c)
		return nil
	}
	for i, cs := range spec.Columns {
		c, err := compileColumn(cs)
		if err != nil {
			if cs.Name == "" {
				return nil, fmt.Errorf("columns[%d]: %w", i, err)
			}
			return nil, fmt.Errorf("column %q: %w", cs.Name, err)
		}
		if err := add(c, fmt.Sprintf("columns[%d]", i)); err != nil {
			return nil, err
		}
	}
	var valuePaths, keyPaths pathTrie
	for i := range m.cols {
		switch c := &m.cols[i]; c.source {
		case fromValue:
			c.nodes = valuePaths.add(c.path.steps)
		case fromKey:
			c.nodes = keyPaths.add(c.path.steps)
		}
	}
	m.valueTree, m.keyTree = valuePaths.build(), keyPaths.build()
	for i := range m.cols {
		switch c := &m.cols[i]; c.source {
		case fromValue:
			c.leaf = c.nodes[len(c.nodes)-1]
			m.valueLeaves = append(m.valueLeaves, c.leaf)
		case fromKey:
			c.leaf = c.nodes[len(c.nodes)-1]
			m.keyLeaves = append(m.keyLeaves, c.leaf)
		}
	}
	md := spec.Metadata
	keyFormat := md.KeyFormat
	switch keyFormat {
	case "":
		keyFormat = KeyFormatBytes
	case KeyFormatText, KeyFormatBytes, KeyFormatJSON:
	default:
		return nil, fmt.Errorf("metadata key_format %q is not text, bytes or json", md.KeyFormat)
	}
	keyType := map[string]string{KeyFormatText: "text", KeyFormatBytes: "bytea", KeyFormatJSON: "jsonb"}[keyFormat]
	metas := []struct {
		name, what, sqlType string
		src                 source
		notNull             bool
	}{
		{md.Topic, "metadata topic", "text", metaTopic, true},
		{md.Partition, "metadata partition", "integer", metaPartition, true},
		{md.Offset, "metadata offset", "bigint", metaOffset, true},
		{md.Timestamp, "metadata timestamp", "timestamp with time zone", metaTimestamp, false},
		{md.TimestampType, "metadata timestamp_type", "text", metaTimestampType, false},
		{md.Key, "metadata key", keyType, metaKey, false},
		{md.Headers, "metadata headers", "jsonb", metaHeaders, false},
	}
	for _, mc := range metas {
		if mc.name == "" {
			continue
		}
		c := mappedColumn{name: mc.name, source: mc.src, sqlType: mc.sqlType, notNull: mc.notNull, keyFormat: keyFormat}
		if err := add(c, mc.what); err != nil {
			return nil, err
		}
	}
	if md.KeyFormat != "" && md.Key == "" {
		return nil, fmt.Errorf("metadata key_format %q is set but no key column is: name the key column, or remove key_format", md.KeyFormat)
	}
	headerCols := make([]string, 0, len(md.Header))
	for col := range md.Header {
		headerCols = append(headerCols, col)
	}
	sort.Strings(headerCols)
	for _, col := range headerCols {
		h := md.Header[col]
		if h == "" {
			return nil, fmt.Errorf("metadata header column %q: the header name is empty: name the header to store", col)
		}
		c := mappedColumn{name: col, source: metaHeader, sqlType: "text", header: h}
		if err := add(c, fmt.Sprintf("metadata header %q", h)); err != nil {
			return nil, err
		}
	}
	if len(m.cols) == 0 {
		return nil, fmt.Errorf("table %q has no columns: map at least one column or metadata column", spec.Table)
	}
	if err := m.compileKey(); err != nil {
		return nil, err
	}
	m.table = schema.Table{Schema: spec.Schema, Name: spec.Table, Columns: make([]schema.Column, len(m.cols)), PrimaryKey: slices.Clone(spec.Key)}
	for i := range m.cols {
		m.cols[i].oid = m.cols[i].nativeOID()
	}
	for i, c := range m.cols {
		m.table.Columns[i] = schema.Column{Name: c.name, Type: c.sqlType, NotNull: c.notNull}
	}
	return m, nil
}

func (m *JSONMapper) compileKey() error {
	spec := m.spec
	if spec.DeleteOnTombstone && len(spec.Key) == 0 {
		return errors.New("delete_on_tombstone needs key columns: list the upsert key, or turn delete_on_tombstone off")
	}
	for _, k := range spec.Key {
		i := slices.IndexFunc(m.cols, func(c mappedColumn) bool { return c.name == k })
		if i < 0 {
			return fmt.Errorf("key column %q is not a column of the mapping: add it to columns or metadata, or remove it from key", k)
		}
		if slices.Contains(m.keyIdx, i) {
			return fmt.Errorf("key column %q is listed twice: remove one", k)
		}
		c := &m.cols[i]
		if spec.DeleteOnTombstone && c.source == fromValue {
			return fmt.Errorf("key column %q comes from the record value, which a tombstone does not have: with delete_on_tombstone take it from the Kafka key (from: key) or the metadata", k)
		}
		if c.typ.base != nil && c.typ.base.Name == "jsonb" {
			return fmt.Errorf("key column %q is jsonb, which makes a poor primary key: extract the identifying scalar into its own column", k)
		}
		c.notNull = true // a primary key column is NOT NULL in Postgres anyway
		m.keyIdx = append(m.keyIdx, i)
	}
	return nil
}

var timeUnits = map[string]int64{"s": 1e9, "ms": 1e6, "us": 1e3, "ns": 1}

func compileColumn(cs ColumnSpec) (mappedColumn, error) {
	c := mappedColumn{name: cs.Name, notNull: cs.NotNull}
	switch cs.From {
	case "", "value":
		c.source = fromValue
	case "key":
		c.source = fromKey
	default:
		return c, fmt.Errorf("from %q is not value or key", cs.From)
	}
	typ, err := parseType(cs.Type)
	if err != nil {
		return c, err
	}
	if cs.TimeUnit != "" {
		u, ok := timeUnits[cs.TimeUnit]
		if !ok {
			return c, fmt.Errorf("time_unit %q is not s, ms, us or ns", cs.TimeUnit)
		}
		switch typ.base.Name {
		case "timestamp with time zone", "timestamp without time zone", "date", "time without time zone":
		default:
			return c, fmt.Errorf("time_unit %q applies only to timestamptz, timestamp, date and time, not to %s: remove it", cs.TimeUnit, typ.sql())
		}
		typ.unitNanos = u
	}
	c.typ, c.sqlType = typ, typ.sql()
	if cs.Path == "" {
		c.path = jsonPath{text: cs.Name, steps: []pathStep{{key: cs.Name}}}
	} else if c.path, err = parsePath(cs.Path); err != nil {
		return c, err
	}
	switch cs.OnMissing {
	case "", "null":
		c.onMissing = "null"
	case "default":
		if cs.Default == nil {
			return c, errors.New("on_missing is default but no default is given: set default, or use on_missing null")
		}
		c.onMissing = "default"
	case "error":
		c.onMissing = "error"
	default:
		return c, fmt.Errorf("on_missing %q is not null, default or error", cs.OnMissing)
	}
	if cs.Default != nil {
		if _, err := decodeJSON([]byte(*cs.Default)); err != nil {
			return c, fmt.Errorf("default %q is not a JSON literal (write strings quoted, as \"\\\"n/a\\\"\"): %w", *cs.Default, err)
		}
		v := rootValue([]byte(*cs.Default))
		if v.kind == kindNull {
			return c, fmt.Errorf("default %q is null, which is the same as no default: remove it", *cs.Default)
		}
		x, cerr := c.convert(v)
		if cerr != nil {
			return c, fmt.Errorf("default %s does not fit %s: %s", *cs.Default, c.sqlType, cerr.msg)
		}
		c.def = x
	}
	return c, nil
}

// convert runs the type table's converter for the column.
func (c *mappedColumn) convert(v jsonValue) (any, *convError) {
	if c.typ.array {
		return convertArray(&c.typ, v)
	}
	return c.typ.base.convert(&c.typ, v)
}

// Table is the target table: data columns in spec order, then metadata
// columns (topic, partition, offset, timestamp, timestamp_type, key, headers,
// then header columns by name); the primary key is the upsert key.
func (m *JSONMapper) Table() schema.Table {
	t := m.table
	t.Columns = slices.Clone(t.Columns)
	t.PrimaryKey = slices.Clone(t.PrimaryKey)
	return t
}

// KeyColumns lists the upsert key columns; empty in append mode.
func (m *JSONMapper) KeyColumns() []string { return slices.Clone(m.spec.Key) }

// IsTombstone reports whether r is a tombstone: a record with a null value.
func (m *JSONMapper) IsTombstone(r *stream.Record) bool { return r.Value == nil }

// Row appends the row of r to dst[:0] in Table's column order. A record that
// does not fit is a *DecodeError (errors.Is ErrBadRecord). Values may alias
// r's buffers, and those of one row share a buffer of their own, which no
// later call touches: rows stay valid together.
func (m *JSONMapper) Row(r *stream.Record, dst []any) ([]any, error) {
	dst = dst[:0]
	rs := m.getState()
	defer m.putState(rs)
	for i := range m.cols {
		v, err := m.value(&m.cols[i], r, rs)
		if err != nil {
			return nil, err
		}
		dst = append(dst, v)
	}
	return dst, nil
}

// KeyRow returns the key columns' values of r, in KeyColumns order, for a
// delete. With DeleteOnTombstone they come from the Kafka key and metadata
// only, so a tombstone has them all.
func (m *JSONMapper) KeyRow(r *stream.Record) ([]any, error) {
	if len(m.keyIdx) == 0 {
		return nil, errors.New("key row: the mapping has no key columns (append mode)")
	}
	out := make([]any, 0, len(m.keyIdx))
	rs := m.getState()
	defer m.putState(rs)
	for _, i := range m.keyIdx {
		v, err := m.value(&m.cols[i], r, rs)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

func badRecord(r *stream.Record, column, kind, msg string) *DecodeError {
	return &DecodeError{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Column: column, Kind: kind, Err: errors.New(msg)}
}

// value computes one column of r.
func (m *JSONMapper) value(c *mappedColumn, r *stream.Record, rs *rowState) (any, error) {
	var v any
	switch c.source {
	case fromValue, fromKey:
		return m.dataValue(c, r, rs)
	case metaTopic:
		v = r.Topic
	case metaPartition:
		v = r.Partition
	case metaOffset:
		v = r.Offset
	case metaTimestamp:
		if !r.Timestamp.IsZero() {
			v = r.Timestamp
		}
	case metaTimestampType:
		if r.TimestampType != "" {
			v = r.TimestampType
		}
	case metaKey:
		if r.Key == nil {
			break
		}
		switch c.keyFormat {
		case KeyFormatText:
			if kind, err := CheckText(r.Key); err != nil {
				return nil, badRecord(r, c.name, kind, "the key "+strings.TrimPrefix(err.Error(), "the value ")+": use key_format bytes")
			}
			v = string(r.Key)
		case KeyFormatJSON:
			if kind, err := CheckJSON(r.Key); err != nil {
				return nil, badRecord(r, c.name, kind, "the key "+strings.TrimPrefix(err.Error(), "the value ")+": use key_format bytes or text")
			}
			v = r.Key
		default:
			v = r.Key
		}
	case metaHeaders:
		if len(r.Headers) > 0 {
			v = HeadersJSON(r.Headers)
		}
	case metaHeader:
		for i := len(r.Headers) - 1; i >= 0; i-- {
			if h := r.Headers[i]; h.Key == c.header {
				if h.Value != nil {
					if kind, err := CheckText(h.Value); err != nil {
						return nil, badRecord(r, c.name, kind, fmt.Sprintf("header %q: %s", c.header, err.Error()))
					}
					v = string(h.Value)
				}
				break
			}
		}
	}
	if v == nil && c.notNull {
		return nil, badRecord(r, c.name, KindNullValue, "the record has no "+metaWhat(c)+", and the column is NOT NULL (it is part of the key)")
	}
	return v, nil
}

func metaWhat(c *mappedColumn) string {
	switch c.source {
	case metaKey:
		return "key"
	case metaHeader:
		return fmt.Sprintf("header %q", c.header)
	case metaHeaders:
		return "headers"
	case metaTimestampType:
		return "timestamp type"
	}
	return "timestamp"
}

// dataValue computes a column mapped from the value or key document.
func (m *JSONMapper) dataValue(c *mappedColumn, r *stream.Record, rs *rowState) (any, error) {
	doc, h, null, err := m.dataHit(c, r, rs)
	if err != nil {
		return nil, err
	}
	if null {
		return c.def, nil // nil (NULL) when the column has no default
	}
	x, cerr := c.convert(rs.buf.valueOf(doc, h))
	if cerr != nil {
		return nil, c.refused(r, cerr)
	}
	return x, nil
}

// refused is the error of a value column c's type does not take.
func (c *mappedColumn) refused(r *stream.Record, cerr *convError) error {
	return badRecord(r, c.name, cerr.kind, fmt.Sprintf("path %s of the %s: %s", c.path.text, c.source.document(), cerr.msg))
}

// document names the document a column is mapped from, for messages.
func (s source) document() string {
	if s == fromKey {
		return "key"
	}
	return "value"
}

// dataHit finds the JSON value of a column mapped from the value or key
// document: h, where it is in doc. null says the column takes its default,
// or NULL without one; a NOT NULL column without default makes that an
// error instead.
func (m *JSONMapper) dataHit(c *mappedColumn, r *stream.Record, rs *rowState) (doc []byte, h hit, null bool, err error) {
	// The common case first: the document is scanned (by an earlier
	// column) and has a value at the path, so every step on the way was
	// there (see resolve).
	if d := rs.docOf(c.source); d.ok {
		if h := d.sc.hits[c.leaf]; h.kind > kindNull {
			return d.sc.data, h, false, nil
		}
	}
	d, present, err := rs.doc(m, c.source, r)
	if err != nil {
		return nil, h, false, err
	}
	if present {
		var found bool
		var cerr *convError
		h, found, cerr = c.path.resolve(d.sc.hits, c.nodes)
		if cerr != nil {
			return nil, h, false, badRecord(r, c.name, cerr.kind, "in the "+c.source.document()+", "+cerr.msg)
		}
		if !found && c.onMissing == "error" {
			return nil, h, false, badRecord(r, c.name, KindMissingValue, fmt.Sprintf("path %s is missing from the %s: send it, or set on_missing to null or default", c.path.text, c.source.document()))
		}
	}
	if h.kind == kindAbsent || h.kind == kindNull {
		switch {
		case c.def != nil, !c.notNull:
			return nil, h, true, nil
		case !present && c.source == fromValue:
			return nil, h, false, badRecord(r, c.name, KindTombstone, "the record is a tombstone (null value) and the column is NOT NULL without default: set delete_on_tombstone with a key, give a default, or drop not_null")
		case !present:
			return nil, h, false, badRecord(r, c.name, KindNullValue, "the record has no key and the column is NOT NULL without default: give a default or drop not_null")
		}
		return nil, h, false, badRecord(r, c.name, KindNullValue, fmt.Sprintf("path %s is null or missing in the %s and the column is NOT NULL without default: send a value, give a default, or drop not_null", c.path.text, c.source.document()))
	}
	return d.sc.data, h, false, nil
}

// decodeError carries a kind out of decodeJSON.
type decodeError struct {
	kind string
	msg  string
}

func (e *decodeError) Error() string { return e.msg }

func decodeKind(err error) string {
	var de *decodeError
	if errors.As(err, &de) {
		return de.kind
	}
	return KindInvalidJSON
}

// decodeJSON decodes one JSON document with exact numbers (json.Number). Row
// no longer uses it but for the words of its refusals: the scanner refuses
// exactly what it refuses (FuzzScanMatchesDecode).
// Invalid UTF-8 and lone surrogate escapes are refused rather than replaced
// by U+FFFD, so no value is altered silently.
func decodeJSON(b []byte) (any, error) {
	if !utf8.Valid(b) {
		return nil, &decodeError{KindInvalidUTF8, "is not valid UTF-8"}
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		if tooDeep(err) {
			return nil, &decodeError{KindTooDeep, "nests objects and arrays deeper than " + strconv.Itoa(maxNestingDepth) + " levels, the decoder's limit: flatten it before it is produced, or store the value as text"}
		}
		return nil, &decodeError{KindInvalidJSON, "is not JSON: " + err.Error()}
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, &decodeError{KindInvalidJSON, "is not one JSON document: it has more after the first"}
	}
	if bytes.Contains(b, []byte(`\u`)) {
		err := checkEscapes(b)
		if err != nil && !strings.Contains(err.Error(), "surrogate") {
			// A \u0000 came first; look past it for surrogates.
			err = checkEscapes(bytes.ReplaceAll(b, []byte(`\u0000`), []byte(`\u0020`)))
		}
		if err != nil {
			return nil, &decodeError{KindUnsupported, strings.TrimPrefix(err.Error(), "the value ")}
		}
	}
	return v, nil
}

// tooDeep reports whether encoding/json refused a document for its nesting
// alone: it is valid JSON, so its dead letter says so (KindTooDeep).
func tooDeep(err error) bool {
	var se *json.SyntaxError
	return errors.As(err, &se) && strings.Contains(se.Error(), "exceeded max depth")
}
