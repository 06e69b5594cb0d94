package cdc

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/kafka2pg/kafka2pg/decode"
	"github.com/kafka2pg/kafka2pg/schema"
)

// Config configures a Decoder or a ConnectMapper: the target table and the
// columns beyond those the records' schemas give.
type Config struct {
	Schema string // "" means the search_path
	Table  string // required
	// Columns types the fields of records that carry no Connect schema
	// (JsonConverter with schemas.enable=false): the table has these
	// columns and no others. Records with a schema ignore it.
	Columns []Column
	// Key names the primary key columns. Empty: for a Decoder, the fields
	// of the record key's schema (Debezium puts the source table's primary
	// key there), or the members of the first record key without one; for
	// a ConnectMapper, no key.
	Key []string
	// Source names optional columns of the envelope's source metadata.
	Source SourceColumns
	// Kafka names optional columns of the record's Kafka metadata, as the
	// JSON mapper has them.
	Kafka decode.MetadataSpec
	// Format is how the records are written: json ("" too: the
	// JsonConverter), avro or protobuf (Confluent's converters: the
	// Confluent wire format, with the schemas in a Schema Registry, which
	// Lookup reads). A Decoder only; a ConnectMapper reads JSON.
	Format string
	Lookup decode.SchemaLookup
	// UnavailableValue is the connector's unavailable.value.placeholder,
	// which stands for an unchanged TOASTed value; "" is Debezium's
	// default, __debezium_unavailable_value.
	UnavailableValue string
	// Deleted names the column of soft deletes, which the decoder fills
	// in every upserted row: NULL in a timestamptz column, or false in a
	// boolean one (DeletedFlag). The writer sets it on a delete. "": none.
	Deleted     string
	DeletedFlag bool
	// Version names a numeric column that takes each change's version, a
	// number that grows with the source's position (version.go), also
	// set in Change.Version. "": none.
	Version string
}

// Column is a typed column for records without a schema.
type Column struct {
	Name string
	// Connect is the Connect type or semantic type name of the field's
	// values (int64, string, io.debezium.time.MicroTimestamp,
	// org.apache.kafka.connect.data.Decimal, ...). "" derives it from Type.
	Connect string
	// Type is the column's SQL type; "" derives it from Connect. One of the
	// two is required.
	Type string
	// Scale is a Decimal's scale; Precision makes the column numeric(p,s).
	// Both zero take them from a Type of numeric(p,s).
	Scale, Precision int
	NotNull          bool
}

// SourceColumns names the columns that receive the envelope's source
// metadata; "" leaves a column out.
type SourceColumns struct {
	Table     string `yaml:"table"`     // text: schema.table (Postgres) or db.table (MySQL)
	Position  string `yaml:"position"`  // text: the LSN as pg_lsn prints it, or binlog file:pos
	TxID      string `yaml:"txid"`      // text: Postgres' txId, else the GTID, else transaction.id
	Timestamp string `yaml:"timestamp"` // timestamptz: source.ts_ms, when the source made the change
	Op        string `yaml:"op"`        // text: the op letter (c, r, u, d)
}

// connectOf derives a schemaless column's Connect type from its SQL type,
// as Debezium's default modes write each (adaptive time precision, precise
// decimals).
var connectOf = map[string]string{
	"smallint": typeInt16, "integer": typeInt32, "bigint": typeInt64,
	"real": typeFloat32, "double precision": typeFloat64, "boolean": typeBoolean,
	"text": typeString, "bytea": typeBytes, "xml": "io.debezium.data.Xml",
	"jsonb": "io.debezium.data.Json", "uuid": "io.debezium.data.Uuid",
	"date":                        "io.debezium.time.Date",
	"time without time zone":      "io.debezium.time.MicroTime",
	"timestamp without time zone": "io.debezium.time.MicroTimestamp",
	"timestamp with time zone":    "io.debezium.time.ZonedTimestamp",
	"time with time zone":         "io.debezium.time.ZonedTime",
	"interval":                    "io.debezium.time.MicroDuration",
	"numeric":                     "org.apache.kafka.connect.data.Decimal",
}

var sqlAliases = map[string]string{
	"int2": "smallint", "int4": "integer", "int": "integer", "int8": "bigint",
	"float4": "real", "float8": "double precision", "bool": "boolean",
	"timestamp": "timestamp without time zone", "timestamptz": "timestamp with time zone",
	"time": "time without time zone", "timetz": "time with time zone", "decimal": "numeric",
}

// schemaOfColumns is the struct schema the configured columns describe.
func schemaOfColumns(cols []Column) (*connectSchema, error) {
	s := &connectSchema{Type: typeStruct}
	for i, c := range cols {
		if c.Name == "" {
			return nil, fmt.Errorf("columns[%d]: the name is empty", i)
		}
		typ := strings.ToLower(strings.TrimSpace(c.Type))
		elem, isArray := strings.CutSuffix(typ, "[]")
		if !isArray {
			f, err := fieldOfColumn(c, typ)
			if err != nil {
				return nil, err
			}
			s.Fields = append(s.Fields, f)
			continue
		}
		// An array's connect, when given, is its items' (the JsonConverter
		// writes a Connect array as a JSON array of its items).
		items, err := fieldOfColumn(c, strings.TrimSpace(elem))
		if err != nil {
			return nil, err
		}
		items.Field, items.Optional = "", true
		s.Fields = append(s.Fields, &connectSchema{Field: c.Name, Optional: !c.NotNull, Type: typeArray, Items: items})
	}
	return s, nil
}

// fieldOfColumn is the field schema of a configured column of SQL type typ
// (lower case, not an array).
func fieldOfColumn(c Column, typ string) (*connectSchema, error) {
	conn := c.Connect
	base, mods, hasMods := strings.Cut(typ, "(")
	if a, ok := sqlAliases[strings.TrimSpace(base)]; ok {
		base, typ = a, a
		if hasMods {
			typ += "(" + mods
		}
	}
	if conn == "" {
		if conn = connectOf[strings.TrimSpace(base)]; conn == "" {
			return nil, fmt.Errorf("column %q: type %q has no Connect type to read it from: set connect (the field's Connect type, e.g. int64 or io.debezium.time.MicroTimestamp; an array's items' type)", c.Name, c.Type)
		}
	}
	f := &connectSchema{Field: c.Name, Optional: !c.NotNull, Type: conn}
	if t, ok := connectTypes[conn]; ok && t.base != conn {
		f.Type, f.Name = t.base, conn
	} else if !ok {
		return nil, fmt.Errorf("column %q: connect %q is neither a Connect type nor a logical or semantic type kafka2pg knows", c.Name, c.Connect)
	}
	if f.Type == typeArray {
		return nil, fmt.Errorf("column %q: connect array needs its items' type: give type as T[] (e.g. integer[]) and connect as the items' Connect type, or leave connect out", c.Name)
	}
	switch f.Name {
	case "org.apache.kafka.connect.data.Decimal":
		scale, precision := c.Scale, c.Precision
		if p, s, ok := numericMods(typ); ok && scale == 0 && precision == 0 {
			scale, precision = s, p
		}
		f.Parameters = map[string]string{"scale": fmt.Sprint(scale)}
		if precision > 0 {
			f.Parameters["connect.decimal.precision"] = fmt.Sprint(precision)
		}
	case "io.debezium.data.Bits":
		// bit(n) and bit varying(n): the length the values are padded to.
		if _, n, ok := strings.Cut(typ, "("); ok {
			f.Parameters = map[string]string{"length": strings.TrimSuffix(n, ")")}
		}
	}
	return f, nil
}

// colKind says where a table column's value comes from.
type colKind uint8

const (
	colData colKind = iota
	colSource
	colKafka
)

// sourceField identifies a source metadata column.
type sourceField uint8

const (
	srcTable sourceField = iota
	srcPosition
	srcTxID
	srcTimestamp
	srcOp
	srcDeletedAt   // NULL: Config.Deleted of a live row
	srcDeletedFlag // false: the same, with DeletedFlag
	srcVersion     // Change.Version
)

// column is one column of the table.
type column struct {
	schema.Column
	kind  colKind
	meta  int    // colSource: a sourceField; colKafka: the index in the Kafka metadata row
	field string // colData: the schema's description, for messages
}

// layout is the table as rows fill it now; replaced whole on a change,
// read without locks.
type layout struct {
	cols   []column
	key    []string // nil: not known yet; empty: no key
	keyIdx []int
	gen    int
}

// version is one compiled row schema (an envelope's before/after struct,
// a connect_json payload, or the configured columns).
type version struct {
	row *node
	// text is the schema's JSON text, as records carry it ("" for the
	// configured columns).
	text string
	bad  string // why its records do not fit the table; "" when they do
	// folded is set once the version is in the table: folding it again
	// could not change the table.
	folded atomic.Bool
	// idx maps each column of a layout to the row field that fills it (-1:
	// none), for the layout of generation gen.
	idx atomic.Pointer[versionIndex]
}

type versionIndex struct {
	gen       int
	idx       []int
	keyFields []int
}

// table is the state a Decoder and a ConnectMapper share: the fold of the
// row schemas seen into the target table, and the compiled schemas by
// their JSON text. Safe for concurrent use; mu serializes folds.
type table struct {
	cfg       Config
	kafka     *decode.JSONMapper // the Kafka metadata columns; nil without any
	fixed     *version           // the configured columns; nil without any
	mu        sync.Mutex
	cur       atomic.Pointer[layout]
	versions  sync.Map // string(schema JSON) → *version
	nversions atomic.Int32
	// last is the version a record named last: the records of a topic
	// repeat one schema, so a record whose bytes start with its text has
	// it, which costs a comparison instead of a scan of the schema.
	last   atomic.Pointer[version]
	keys   sync.Map // string(key schema JSON) → []string (key field names) or error
	folded bool     // a version was folded (under mu)
	phOnce sync.Once
	ph     [][]byte  // placeholders()
	states sync.Pool // of *rowState
}

// maxVersions bounds the schema cache; past it the cache starts over.
const maxVersions = 1024

func newTable(cfg Config) (*table, error) {
	if cfg.Schema != "" {
		if err := schema.ValidateIdent("schema", cfg.Schema); err != nil {
			return nil, err
		}
	}
	if err := schema.ValidateIdent("table", cfg.Table); err != nil {
		return nil, err
	}
	t := &table{cfg: cfg}
	if t.cfg.UnavailableValue == "" {
		t.cfg.UnavailableValue = defaultUnavailable
	}
	l := &layout{}
	if len(cfg.Key) > 0 {
		l.key = slices.Clone(cfg.Key)
	}
	if len(cfg.Columns) > 0 {
		s, err := schemaOfColumns(cfg.Columns)
		if err != nil {
			return nil, err
		}
		row, err := compile(s)
		if err != nil {
			return nil, err
		}
		t.fixed = &version{row: row}
		if l, err = t.foldInto(l, t.fixed); err != nil {
			return nil, err
		}
		if t.fixed.bad != "" {
			return nil, errors.New(t.fixed.bad)
		}
		t.folded = true
	}
	src := cfg.Source
	for _, m := range []struct {
		name, what, sqlType string
		f                   sourceField
	}{
		{src.Table, "source table", "text", srcTable},
		{src.Position, "source position", "text", srcPosition},
		{src.TxID, "source txid", "text", srcTxID},
		{src.Timestamp, "source timestamp", "timestamp with time zone", srcTimestamp},
		{src.Op, "source op", "text", srcOp},
		{cfg.Deleted, "deleted column", deletedType(cfg), deletedField(cfg)},
		{cfg.Version, "version column", "numeric", srcVersion},
	} {
		if m.name == "" {
			continue
		}
		if err := schema.ValidateIdent(m.what+" column name", m.name); err != nil {
			return nil, err
		}
		l.cols = append(l.cols, column{Column: schema.Column{Name: m.name, Type: m.sqlType}, kind: colSource, meta: int(m.f)})
	}
	if k := cfg.Kafka; k.Topic != "" || k.Partition != "" || k.Offset != "" || k.Timestamp != "" || k.TimestampType != "" ||
		k.Key != "" || k.KeyFormat != "" || k.Headers != "" || len(k.Header) > 0 {
		jm, err := decode.NewJSONMapper(decode.MappingSpec{Schema: cfg.Schema, Table: cfg.Table, Metadata: cfg.Kafka})
		if err != nil {
			return nil, err
		}
		t.kafka = jm
		for i, c := range jm.Table().Columns {
			l.cols = append(l.cols, column{Column: c, kind: colKafka, meta: i})
		}
	}
	seen := map[string]bool{}
	for _, c := range l.cols {
		if seen[c.Name] {
			return nil, fmt.Errorf("column %q is defined twice: rename a metadata column", c.Name)
		}
		seen[c.Name] = true
	}
	if l.key != nil && len(cfg.Columns) > 0 {
		var err error
		if l, err = withKey(l, l.key); err != nil {
			return nil, err
		}
	}
	t.cur.Store(l)
	return t, nil
}

const defaultUnavailable = "__debezium_unavailable_value"

// Table is the table rows fill now: the data columns in the order their
// fields first appeared, then the source and Kafka metadata columns, then
// the columns later schemas added; its primary key is the key columns.
func (t *table) Table() schema.Table {
	l := t.cur.Load()
	out := schema.Table{Schema: t.cfg.Schema, Name: t.cfg.Table, PrimaryKey: slices.Clone(l.key), Columns: make([]schema.Column, len(l.cols))}
	for i, c := range l.cols {
		out.Columns[i] = c.Column
	}
	return out
}

// hasColumns reports whether cols are the table's columns, as Table
// lists them, without building the table.
func (t *table) hasColumns(cols []schema.Column) bool {
	l := t.cur.Load()
	if len(l.cols) != len(cols) {
		return false
	}
	for i := range l.cols {
		if l.cols[i].Column != cols[i] {
			return false
		}
	}
	return true
}

// KeyColumns lists the primary key columns; empty for a table without a
// key, or before the first record told.
func (t *table) KeyColumns() []string { return slices.Clone(t.cur.Load().key) }

// version returns the compiled version of a row schema's JSON text.
func (t *table) version(text []byte, rowOf func(*connectSchema) (*connectSchema, error)) (*version, error) {
	if v, ok := t.versions.Load(string(text)); ok {
		v := v.(*version)
		t.last.Store(v)
		return v, nil
	}
	v := &version{text: string(text)}
	s, err := parseConnectSchema(text)
	if err == nil {
		s, err = rowOf(s)
	}
	if err == nil {
		v.row, err = compile(s)
	}
	if err != nil {
		return nil, err
	}
	if t.nversions.Add(1) > maxVersions {
		t.versions.Clear()
		t.nversions.Store(1)
	}
	t.versions.Store(v.text, v)
	t.last.Store(v)
	return v, nil
}

// lastVersionAt returns the version whose schema text doc has at i, if it
// is the last one named, and the index after the text. A version's text
// is one whole JSON object the reader checked, and an object ends where
// its text says, so the bytes that follow it do not change what it is.
func (t *table) lastVersionAt(doc []byte, i int) (*version, int) {
	v := t.last.Load()
	if v == nil || v.text == "" || len(doc)-i < len(v.text) || string(doc[i:i+len(v.text)]) != v.text {
		return nil, i
	}
	return v, i + len(v.text)
}

// fold merges v into the table and sets the key when it is not known yet;
// changed says the layout changed. Records of a version that does not fit
// get v.bad.
func (t *table) fold(v *version, key []string) (changed bool, err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	old := t.cur.Load()
	l, err := t.foldInto(old, v)
	if err != nil || v.bad != "" {
		return false, err
	}
	if l.key == nil && key != nil {
		if l, err = withKey(l, key); err != nil {
			v.bad = err.Error()
			return false, nil
		}
	}
	t.folded = true
	if l == old {
		return false, nil
	}
	l.gen = old.gen + 1
	t.cur.Store(l)
	return true, nil
}

// foldInto returns the layout with v's fields, or l itself when nothing
// changes. The caller holds mu (or owns t).
func (t *table) foldInto(l *layout, v *version) (*layout, error) {
	if v.row.s.Type != typeStruct {
		v.bad = "the row schema is " + v.row.s.describe() + ", not a struct"
		return l, nil
	}
	cols := slices.Clone(l.cols)
	changed := false
	dataSeen := 0
	for _, c := range cols {
		if c.kind == colData {
			dataSeen++
		}
	}
	first := dataSeen == 0 && !t.folded
	seen := map[string]bool{}
	for _, f := range v.row.fields {
		name := f.s.Field
		seen[name] = true
		if err := schema.ValidateIdent("column name", name); err != nil {
			v.bad = fmt.Sprintf("field %q cannot be a column: %s", name, err.Error())
			return l, nil
		}
		i := slices.IndexFunc(cols, func(c column) bool { return c.Name == name })
		if i < 0 {
			nc := column{Column: schema.Column{Name: name, Type: f.sqlType, NotNull: first && !f.s.Optional}, kind: colData, field: f.s.describe()}
			if first {
				// Data columns come before the metadata columns.
				at := slices.IndexFunc(cols, func(c column) bool { return c.kind != colData })
				if at < 0 {
					at = len(cols)
				}
				cols = slices.Insert(cols, at, nc)
			} else {
				cols = append(cols, nc)
			}
			changed = true
			continue
		}
		c := &cols[i]
		if c.kind != colData {
			v.bad = fmt.Sprintf("field %q has the name of a metadata column: rename the metadata column", name)
			return l, nil
		}
		if c.Type != f.sqlType {
			ok, alter := widens(c.Type, f.sqlType)
			if !ok {
				v.bad = fmt.Sprintf("field %q changed from %s (column %s) to %s (%s), which the column cannot hold: "+
					"migrate the column to %s yourself and restart, or write the new field under a new name", name, c.field, c.Type, f.s.describe(), f.sqlType, f.sqlType)
				return l, nil
			}
			if alter {
				c.Type, c.field = f.sqlType, f.s.describe()
				changed = true
			}
		}
		if c.NotNull && f.s.Optional && !slices.Contains(l.key, name) {
			c.NotNull = false
			changed = true
		}
	}
	for i := range cols {
		c := &cols[i]
		if c.kind != colData || seen[c.Name] {
			continue
		}
		if slices.Contains(l.key, c.Name) {
			v.bad = fmt.Sprintf("the schema has no field %q, which is a key column: key columns cannot be NULL", c.Name)
			return l, nil
		}
		if c.NotNull {
			c.NotNull = false
			changed = true
		}
	}
	if !changed {
		return l, nil
	}
	nl := *l
	nl.cols = cols
	if nl.key != nil {
		kl, err := withKey(&nl, nl.key)
		if err != nil {
			v.bad = err.Error()
			return l, nil
		}
		return kl, nil
	}
	return &nl, nil
}

// withKey sets the key columns of l, which must be data columns.
func withKey(l *layout, key []string) (*layout, error) {
	nl := *l
	nl.cols = slices.Clone(l.cols)
	nl.key = slices.Clone(key)
	nl.keyIdx = nl.keyIdx[:0:0]
	for _, k := range key {
		i := slices.IndexFunc(nl.cols, func(c column) bool { return c.Name == k })
		switch {
		case i < 0:
			return nil, fmt.Errorf("key column %q is not a field of the rows: name fields of the row (after) as the key", k)
		case nl.cols[i].kind != colData:
			return nil, fmt.Errorf("key column %q is a metadata column: the key must be fields of the rows", k)
		case slices.Contains(nl.keyIdx, i):
			return nil, fmt.Errorf("key column %q is listed twice: remove one", k)
		}
		nl.cols[i].NotNull = true
		nl.keyIdx = append(nl.keyIdx, i)
	}
	return &nl, nil
}

// index maps the columns of l to v's row fields.
func (v *version) index(l *layout) []int { return v.indexOf(l).idx }

// keyFields are the fields of v that hold the key columns of l (nil: all,
// while the key is not known).
func (v *version) keyFields(l *layout) []int { return v.indexOf(l).keyFields }

func (v *version) indexOf(l *layout) *versionIndex {
	if x := v.idx.Load(); x != nil && x.gen == l.gen && len(x.idx) == len(l.cols) {
		return x
	}
	x := &versionIndex{gen: l.gen, idx: make([]int, len(l.cols))}
	for i, c := range l.cols {
		x.idx[i] = -1
		if c.kind == colData {
			if j, ok := v.row.byName[c.Name]; ok {
				x.idx[i] = j
			}
		}
	}
	if l.key != nil {
		x.keyFields = make([]int, 0, len(l.key))
		for _, k := range l.key {
			if j, ok := v.row.byName[k]; ok {
				x.keyFields = append(x.keyFields, j)
			}
		}
	}
	v.idx.Store(x)
	return x
}

// deletedType and deletedField describe cfg's column of soft deletes.
func deletedType(cfg Config) string {
	if cfg.DeletedFlag {
		return "boolean"
	}
	return "timestamp with time zone"
}

func deletedField(cfg Config) sourceField {
	if cfg.DeletedFlag {
		return srcDeletedFlag
	}
	return srcDeletedAt
}
