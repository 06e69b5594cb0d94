package decode

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/kafka2pg/kafka2pg/internal/enum"
	"github.com/kafka2pg/kafka2pg/schema"
	"github.com/kafka2pg/kafka2pg/stream"
)

// RegistryMapper maps records in the Confluent wire format (Avro or
// Protobuf, schemas in a Schema Registry) to typed rows, and follows the
// schema as it evolves: it is an ingest.TableMapper and an ingest.KeyMapper.
//
// The table is the fold of the subject's versions, oldest first: the first
// version's fields become the columns; each later version may add fields
// (new nullable columns at the end), widen a field's type (int → long,
// float → double: the column is altered) or drop a field (its column stays,
// NULL for the new records, and loses NOT NULL). Any other change makes the
// records of that version bad records of kind schema_incompatible, and the
// table does not change. A record of a schema id the mapper has not seen is
// folded in the same way when it arrives; if that changes the table, Row
// returns an error wrapping ErrTableChanged and Table describes the new table.
//
// Its schemas come from ResolveSchemas, which the caller runs with the
// batch's ctx before Row: Row does no I/O.
//
// Safe for concurrent use. Lock order: mu, and resolved's lock, never held
// together; the lookup runs without either.
type RegistryMapper struct {
	spec   RegistryMappingSpec
	meta   *JSONMapper // the metadata columns; nil without any
	keyIdx []int       // upsert key columns' indexes in cols

	mu       sync.RWMutex // guards cols, gen, versions and each version's idx
	cols     []regColumn
	gen      int                       // bumped when cols change
	versions [2]map[string]*regVersion // by part, by wireHeader.key()

	resolved ResolvedSchemas // what ResolveSchemas fetched, for version
}

// RegistryMappingSpec configures a RegistryMapper.
type RegistryMappingSpec struct {
	// Format is FormatAvro (the zero value), FormatProtobuf or
	// FormatJSONSchema.
	Format Format
	Schema string // "" means the search_path
	Table  string // required
	// Value are the versions of the value subject, oldest first; the table
	// starts as their fold. At least one is required.
	Value []RegisteredSchema
	// Key are the versions of the key subject, oldest first: the key's
	// fields become columns too (key_<field>, or key for a key that is not
	// a record). None means the key is not decoded.
	Key []RegisteredSchema
	// Message is the full name of the Protobuf message the table is made
	// of; "" means the first message of the schema (message index 0).
	Message string
	// Nested is NestedFlatten (default: a record field's fields become
	// columns named parent_child) or NestedJSONB (one jsonb column per
	// record field).
	Nested Nested
	// Metadata columns come after the schema's columns.
	Metadata MetadataSpec
	// KeyColumns lists the upsert key columns (key fields, value fields or
	// metadata); empty means append mode.
	KeyColumns []string
	// DeleteOnTombstone makes a tombstone delete its key's row: every key
	// column must then come from the Kafka key or the metadata.
	DeleteOnTombstone bool
	// Lookup fetches schemas by id. Required.
	Lookup SchemaLookup
}

// The parts of a record a registry schema describes.
const (
	partValue = 0
	partKey   = 1
)

var partNames = [2]string{"value", "key"}

// regColumn is one column of the table.
type regColumn struct {
	schema.Column
	part  int    // partValue, partKey; -1 for metadata
	meta  int    // metadata columns: the index in the metadata row
	def   any    // the value for records whose version lacks the field
	field string // the schema field it holds, for messages
	what  string // the field's schema type, for messages
}

// regField is one column a schema version produces.
type regField struct {
	name    string // column name
	field   string // field path in the schema, e.g. customer.id
	what    string // schema type for messages, e.g. long, string (uuid)
	sqlType string // format_type spelling
	notNull bool
	def     any // converted default, nil for none
}

// regVersion is one compiled schema version (and message) of a part.
type regVersion struct {
	id     int
	part   int
	fields []regField
	// decode fills out (len(fields)) from the encoded value after the
	// header; an error is a payload that does not decode.
	decode func(payload []byte, out []any) error
	bad    string // why its records do not fit the table; "" when they do
	// message is the full name of the Protobuf message; "" for Avro.
	message string
	// idx[i] is the field of table column i, -1 when it has none;
	// computed for gen.
	idx    []int
	idxGen int
}

// compiler compiles a registered schema of a format (compileAvro,
// compileProtobuf) into a version; indexes pick a Protobuf message (nil:
// message names it, or the first), prefix names a key's columns.
type compiler func(rs RegisteredSchema, indexes []int, message, prefix string, nested Nested) (*regVersion, error)

// NewRegistryMapper checks spec and folds its versions into the table.
// Every error names the setting or field, the value and the fix.
func NewRegistryMapper(spec RegistryMappingSpec) (*RegistryMapper, error) {
	if spec.Schema != "" {
		if err := schema.ValidateIdent("schema", spec.Schema); err != nil {
			return nil, err
		}
	}
	if err := schema.ValidateIdent("table", spec.Table); err != nil {
		return nil, err
	}
	if !formatNames.Valid(int(spec.Format)) {
		return nil, fmt.Errorf("format %s is not %s", spec.Format, formatNames.List())
	}
	if !nestedNames.Valid(int(spec.Nested)) {
		return nil, fmt.Errorf("nested %s is not %s", spec.Nested, nestedNames.List())
	}
	if spec.Lookup == nil {
		return nil, errors.New("registry mapping: Lookup is nil")
	}
	if len(spec.Value) == 0 {
		return nil, errors.New("registry mapping: no version of the value subject: register a schema first")
	}
	m := &RegistryMapper{spec: spec, versions: [2]map[string]*regVersion{{}, {}}}
	for part, versions := range [2][]RegisteredSchema{spec.Value, spec.Key} {
		for i, rs := range versions {
			h := wireHeader{id: rs.ID}
			if spec.Format == FormatProtobuf {
				h.indexes = []int{-1} // the configured message
			}
			v, err := m.compile(part, rs, h)
			switch {
			case err != nil && i == len(versions)-1:
				return nil, fmt.Errorf("the %s schema (id %d): %w", partNames[part], rs.ID, err)
			case err != nil:
				// An older version that does not compile (or lacks the
				// configured message) makes its records bad records.
				v = &regVersion{id: rs.ID, part: part, bad: err.Error()}
			default:
				if _, err := m.fold(part, v); err != nil {
					return nil, err
				}
			}
			if v.bad != "" && i == len(versions)-1 {
				return nil, fmt.Errorf("the latest %s schema (id %d) does not fit the table its earlier versions made: %s", partNames[part], rs.ID, v.bad)
			}
			m.versions[part][h.key()] = v
		}
	}
	if !spec.Metadata.empty() {
		jm, err := NewJSONMapper(MappingSpec{Schema: spec.Schema, Table: spec.Table, Metadata: spec.Metadata})
		if err != nil {
			return nil, err
		}
		m.meta = jm
		for mi, c := range jm.Table().Columns {
			if i := m.colIndex(c.Name); i >= 0 {
				return nil, fmt.Errorf("metadata column %q has the name of the schema's field %s: rename the metadata column", c.Name, m.cols[i].field)
			}
			m.cols = append(m.cols, regColumn{Column: c, part: -1, meta: mi})
		}
	}
	if spec.DeleteOnTombstone && len(spec.KeyColumns) == 0 {
		return nil, errors.New("delete_on_tombstone needs key columns: list the upsert key, or turn delete_on_tombstone off")
	}
	for _, k := range spec.KeyColumns {
		i := m.colIndex(k)
		switch {
		case i < 0:
			return nil, fmt.Errorf("key column %q is not a column of the schema's table (%s): name one of them", k, strings.Join(m.names(), ", "))
		case slices.Contains(m.keyIdx, i):
			return nil, fmt.Errorf("key column %q is listed twice: remove one", k)
		case spec.DeleteOnTombstone && m.cols[i].part == partValue:
			return nil, fmt.Errorf("key column %q comes from the record value, which a tombstone does not have: with delete_on_tombstone use the key's fields (key_<field>) or metadata", k)
		case m.cols[i].Type == "jsonb":
			return nil, fmt.Errorf("key column %q is jsonb, which makes a poor primary key: key on a scalar field", k)
		}
		m.cols[i].NotNull = true
		m.keyIdx = append(m.keyIdx, i)
	}
	return m, nil
}

// Format is the wire format of a registry sink's records: Confluent's
// serializers write a magic byte, the schema id and the payload.
type Format int

const (
	FormatAvro       Format = iota // Avro binary
	FormatProtobuf                 // Protobuf, with the message's indexes after the id
	FormatJSONSchema               // JSON, checked against a JSON Schema by the writer
)

var formatNames = enum.Names{"avro", "protobuf", "json_schema"}

func (f Format) String() string { return formatNames.Name(int(f), "Format") }

// ParseFormat reads avro, protobuf or json_schema.
func ParseFormat(s string) (Format, error) {
	v, err := formatNames.Parse(s)
	return Format(v), err
}

func (f Format) MarshalText() ([]byte, error) { return []byte(f.String()), nil }

func (f *Format) UnmarshalText(b []byte) (err error) {
	*f, err = ParseFormat(string(b))
	return err
}

// Nested is how a record field of a registry schema becomes columns.
type Nested int

const (
	NestedFlatten Nested = iota // its fields become columns named parent_child
	NestedJSONB                 // one jsonb column
)

var nestedNames = enum.Names{"flatten", "jsonb"}

func (n Nested) String() string { return nestedNames.Name(int(n), "Nested") }

// ParseNested reads flatten or jsonb.
func ParseNested(s string) (Nested, error) {
	v, err := nestedNames.Parse(s)
	return Nested(v), err
}

func (n Nested) MarshalText() ([]byte, error) { return []byte(n.String()), nil }

func (n *Nested) UnmarshalText(b []byte) (err error) {
	*n, err = ParseNested(string(b))
	return err
}

func (md MetadataSpec) empty() bool {
	return md.Topic == "" && md.Partition == "" && md.Offset == "" && md.Timestamp == "" && md.TimestampType == "" &&
		md.Key == "" && md.KeyFormat == "" && md.Headers == "" && len(md.Header) == 0
}

func (m *RegistryMapper) names() []string {
	out := make([]string, len(m.cols))
	for i, c := range m.cols {
		out[i] = c.Name
	}
	return out
}

func (m *RegistryMapper) colIndex(name string) int {
	return slices.IndexFunc(m.cols, func(c regColumn) bool { return c.Name == name })
}

// compile turns one registered schema into a version of a part.
func (m *RegistryMapper) compile(part int, rs RegisteredSchema, h wireHeader) (*regVersion, error) {
	prefix := ""
	if part == partKey {
		prefix = "key"
	}
	c := map[Format]compiler{FormatAvro: compileAvro, FormatProtobuf: compileProtobuf, FormatJSONSchema: compileJSONSchema}[m.spec.Format]
	indexes := h.indexes
	if len(indexes) == 1 && indexes[0] == -1 {
		indexes = nil
	}
	v, err := c(rs, indexes, m.spec.Message, prefix, m.spec.Nested)
	if err != nil {
		return nil, err
	}
	v.id, v.part = rs.ID, part
	return v, nil
}

// fold merges version v of part into the table. It reports whether the
// table changed; a version that does not fit gets v.bad and changes
// nothing. The caller holds mu (or owns m).
func (m *RegistryMapper) fold(part int, v *regVersion) (changed bool, err error) {
	cols := slices.Clone(m.cols)
	seen := map[string]bool{}
	for _, f := range v.fields {
		seen[f.name] = true
		i := slices.IndexFunc(cols, func(c regColumn) bool { return c.Name == f.name })
		if i < 0 {
			nc := regColumn{Column: schema.Column{Name: f.name, Type: f.sqlType, NotNull: f.notNull}, part: part, def: f.def, field: f.field, what: f.what}
			// Records of the earlier versions have no value for it, and a
			// record may have no key at all (key columns in the upsert key
			// are made NOT NULL by NewRegistryMapper).
			if len(m.versions[part]) > 0 || part == partKey {
				nc.NotNull = false
			}
			cols = append(cols, nc)
			changed = true
			continue
		}
		c := &cols[i]
		if c.part != part {
			v.bad = fmt.Sprintf("field %s of the %s and %s of the %s both become column %q: rename one of the fields",
				f.field, partNames[part], c.field, partNameOf(c.part), c.Name)
			return false, nil
		}
		if c.Type != f.sqlType {
			have, err1 := parseType(c.Type)
			want, err2 := parseType(f.sqlType)
			switch {
			case err1 != nil || err2 != nil:
				return false, fmt.Errorf("column %q: %w", c.Name, errors.Join(err1, err2))
			case widens(want, have):
				// The column holds every value of the narrower field.
			case widens(have, want):
				c.Type, c.what = want.sql(), f.what
				changed = true
			default:
				v.bad = fmt.Sprintf("field %s changed type from %s (column %q %s) to %s (%s) in schema id %d, which is not a compatible widening: "+
					"register a schema that keeps the type (or widens it: int → long, float → double), write the new field under a new name, "+
					"or migrate the column and restart", f.field, c.what, c.Name, c.Type, f.what, f.sqlType, v.id)
				return false, nil
			}
		}
		if f.def != nil {
			c.def = f.def
		}
		if c.NotNull && !f.notNull && !m.isKey(c.Name) {
			c.NotNull = false
			changed = true
		}
	}
	for i := range cols {
		c := &cols[i]
		if c.part != part || seen[c.Name] {
			continue
		}
		if m.isKey(c.Name) && c.def == nil {
			v.bad = fmt.Sprintf("field %s, which makes the key column %q, is missing from schema id %d: key columns cannot be NULL; keep the field, or give it a default", c.field, c.Name, v.id)
			return false, nil
		}
		if c.NotNull && c.def == nil {
			c.NotNull = false
			changed = true
		}
	}
	if changed {
		m.cols = cols
		m.gen++
	}
	return changed, nil
}

func partNameOf(p int) string {
	if p < 0 {
		return "metadata"
	}
	return partNames[p]
}

func (m *RegistryMapper) isKey(name string) bool {
	return slices.Contains(m.spec.KeyColumns, name)
}

// Table is the table the rows fill now: the schema's columns in the order
// their fields first appeared (value, then key), the metadata columns, then
// the columns later versions added.
func (m *RegistryMapper) Table() schema.Table {
	m.mu.RLock()
	defer m.mu.RUnlock()
	t := schema.Table{Schema: m.spec.Schema, Name: m.spec.Table, PrimaryKey: slices.Clone(m.spec.KeyColumns), Columns: make([]schema.Column, len(m.cols))}
	for i, c := range m.cols {
		t.Columns[i] = c.Column
	}
	return t
}

// KeyColumns lists the upsert key columns; empty in append mode.
func (m *RegistryMapper) KeyColumns() []string { return slices.Clone(m.spec.KeyColumns) }

// IsTombstone reports whether r is a tombstone: a record with a null value.
func (m *RegistryMapper) IsTombstone(r *stream.Record) bool { return r.Value == nil }

// decodedPart is one part of a record, decoded.
type decodedPart struct {
	v      *regVersion
	values []any
}

// Row appends the row of r to dst[:0] in Table's column order.
func (m *RegistryMapper) Row(r *stream.Record, dst []any) ([]any, error) {
	return m.row(r, dst, nil)
}

// KeyRow returns the key columns' values of r, in KeyColumns order.
func (m *RegistryMapper) KeyRow(r *stream.Record) ([]any, error) {
	if len(m.keyIdx) == 0 {
		return nil, errors.New("key row: the mapping has no key columns (append mode)")
	}
	return m.row(r, nil, m.keyIdx)
}

// row builds the columns only (all when nil) of r.
func (m *RegistryMapper) row(r *stream.Record, dst []any, only []int) ([]any, error) {
	parts, err := m.decode(r)
	if err != nil {
		return nil, err
	}
	var meta []any
	if m.meta != nil {
		if meta, err = m.meta.Row(r, nil); err != nil {
			return nil, err
		}
	}
	m.mu.RLock()
	for !m.fresh(parts) {
		m.mu.RUnlock()
		m.mu.Lock()
		m.refresh(parts)
		m.mu.Unlock()
		m.mu.RLock()
	}
	defer m.mu.RUnlock()
	dst = dst[:0]
	col := func(i int) error {
		c := &m.cols[i]
		if c.part < 0 {
			dst = append(dst, meta[c.meta])
			return nil
		}
		v, err := m.value(r, parts[c.part], i)
		dst = append(dst, v)
		return err
	}
	if only != nil {
		for _, i := range only {
			if err := col(i); err != nil {
				return nil, err
			}
		}
		return dst, nil
	}
	for i := range m.cols {
		if err := col(i); err != nil {
			return nil, err
		}
	}
	return dst, nil
}

// fresh reports whether the parts' versions know the current columns. The
// caller holds mu for reading.
func (m *RegistryMapper) fresh(parts [2]decodedPart) bool {
	for _, p := range parts {
		if p.v != nil && (p.v.idxGen != m.gen || len(p.v.idx) != len(m.cols)) {
			return false
		}
	}
	return true
}

// refresh maps each table column to the field of the parts' versions. The
// caller holds mu.
func (m *RegistryMapper) refresh(parts [2]decodedPart) {
	for _, p := range parts {
		if p.v == nil || (p.v.idxGen == m.gen && len(p.v.idx) == len(m.cols)) {
			continue
		}
		p.v.idx = make([]int, len(m.cols))
		for j, col := range m.cols {
			p.v.idx[j] = -1
			if col.part == p.v.part {
				p.v.idx[j] = slices.IndexFunc(p.v.fields, func(f regField) bool { return f.name == col.Name })
			}
		}
		p.v.idxGen = m.gen
	}
}

// value is column i of r. The caller holds mu for reading, and the parts
// are fresh.
func (m *RegistryMapper) value(r *stream.Record, p decodedPart, i int) (any, error) {
	c := &m.cols[i]
	var v any
	if p.v != nil {
		if j := p.v.idx[i]; j >= 0 {
			v = p.values[j]
		} else {
			v = c.def
		}
	}
	if v == nil && c.NotNull {
		switch {
		case p.v == nil && c.part == partValue:
			return nil, badRecord(r, c.Name, KindTombstone, "the record is a tombstone (null value) and the column is NOT NULL: set delete_on_tombstone with a key")
		case p.v == nil:
			return nil, badRecord(r, c.Name, KindNullValue, "the record has no key and the column is NOT NULL (it is part of the key)")
		}
		return nil, badRecord(r, c.Name, KindNullValue, fmt.Sprintf("field %s is null in the %s and the column is NOT NULL", c.field, partNames[c.part]))
	}
	return v, nil
}

// decode decodes the value and (when the mapping has key fields) the key of
// r, folding unseen schema versions into the table first.
func (m *RegistryMapper) decode(r *stream.Record) ([2]decodedPart, error) {
	var parts [2]decodedPart
	for part, b := range [2][]byte{r.Value, r.Key} {
		if b == nil || (part == partKey && len(m.spec.Key) == 0) {
			continue
		}
		h, payload, err := parseWire(b, m.spec.Format == FormatProtobuf)
		if err != nil {
			return parts, badRecord(r, "", KindInvalidWireFormat, "the "+partNames[part]+" "+err.Error())
		}
		v, err := m.version(r, part, h)
		if err != nil {
			return parts, err
		}
		if v.bad != "" {
			return parts, badRecord(r, "", KindSchemaIncompatible, fmt.Sprintf("the %s's schema id %d: %s", partNames[part], h.id, v.bad))
		}
		out := make([]any, len(v.fields))
		if err := v.decode(payload, out); err != nil {
			var de *fieldError
			if errors.As(err, &de) {
				return parts, badRecord(r, de.column, de.kind, fmt.Sprintf("the %s (schema id %d): %s", partNames[part], h.id, de.msg))
			}
			return parts, badRecord(r, "", KindInvalidWireFormat, fmt.Sprintf("the %s does not decode with its schema id %d: %s", partNames[part], h.id, err.Error()))
		}
		parts[part] = decodedPart{v: v, values: out}
	}
	return parts, nil
}

// fieldError is a decoded value that does not fit its column.
type fieldError struct {
	column, kind, msg string
}

func (e *fieldError) Error() string { return e.msg }

// version returns the compiled version of a header, fetching and folding it
// when it is new.
func (m *RegistryMapper) version(r *stream.Record, part int, h wireHeader) (*regVersion, error) {
	key := h.key()
	if v, ok := m.seen(part, h, key); ok {
		return v, nil
	}
	rs, err := m.resolved.Get(h.id)
	if errors.Is(err, ErrSchemaNotFound) {
		return nil, badRecord(r, "", KindUnknownSchema, fmt.Sprintf("the %s's schema id %d is unknown to the schema registry: was the schema deleted, or the record written against another registry? %s", partNames[part], h.id, err.Error()))
	}
	if err != nil {
		return nil, fmt.Errorf("schema id %d of %s/%d@%d: %w", h.id, r.Topic, r.Partition, r.Offset, err)
	}
	v, err := m.compile(part, rs, h)
	if err != nil {
		v = &regVersion{id: h.id, bad: err.Error()}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if prev, ok := m.versions[part][key]; ok {
		return prev, nil
	}
	changed := false
	if v.bad == "" {
		if changed, err = m.fold(part, v); err != nil {
			return nil, err
		}
	}
	m.versions[part][key] = v
	if changed {
		return nil, fmt.Errorf("%s/%d@%d: the %s's schema id %d changes the table %s: %w", r.Topic, r.Partition, r.Offset, partNames[part], h.id, m.spec.Table, ErrTableChanged)
	}
	return v, nil
}

// seen returns the compiled version of a header (key is h.key()), if the
// mapper has one.
func (m *RegistryMapper) seen(part int, h wireHeader, key string) (*regVersion, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	v, ok := m.versions[part][key]
	if !ok && m.spec.Format == FormatProtobuf && len(h.indexes) == 1 && h.indexes[0] == 0 && m.spec.Message == "" {
		v, ok = m.versions[part][wireHeader{id: h.id, indexes: []int{-1}}.key()]
	}
	return v, ok
}

// ResolveSchemas fetches with ctx (through the spec's Lookup) the schemas
// of the ids records carry that the mapper has not seen, so that Row reads
// them without I/O; the writer calls it for each batch before its
// transaction. A record that is not in the wire format, or whose id the
// registry does not know, is not an error here: Row makes it a bad record.
// An error is the registry's (it cannot be reached): the batch waits.
func (m *RegistryMapper) ResolveSchemas(ctx context.Context, records []stream.Record) error {
	var asked map[int]bool
	// last is, per part, the last header the mapper has a version of: a
	// batch mostly carries one, which then costs no key and no lock a
	// record.
	var last [2]*wireHeader
	for i := range records {
		r := &records[i]
		for part, b := range [2][]byte{r.Value, r.Key} {
			if b == nil || (part == partKey && len(m.spec.Key) == 0) {
				continue
			}
			h, _, err := parseWire(b, m.spec.Format == FormatProtobuf)
			if err != nil || asked[h.id] {
				continue
			}
			if l := last[part]; l != nil && l.id == h.id && slices.Equal(l.indexes, h.indexes) {
				continue
			}
			if _, ok := m.seen(part, h, h.key()); ok {
				last[part] = &h
				continue
			}
			if asked == nil {
				asked = map[int]bool{}
			}
			asked[h.id] = true
			if err := m.resolved.Resolve(ctx, m.spec.Lookup, h.id); err != nil {
				return fmt.Errorf("look up schema id %d of %s/%d@%d: %w", h.id, r.Topic, r.Partition, r.Offset, err)
			}
		}
	}
	return nil
}
