package cdc

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/kafka2pg/kafka2pg/decode"
)

// The type table. Every Connect schema a field may have maps to one entry
// of connectTypes: by its name (a Connect logical type or a Debezium
// semantic type) when the table knows the name and the name is on the
// primitive type it belongs to, else by its primitive type. An entry gives
// the column type (as Postgres' format_type() prints it, so that a planned
// column and an existing one compare as strings) and the decoder of one
// non-null value into that column's value (Go's types and package
// pgvalue's, as every mapper makes them). Adding a
// type is adding an entry here; no other file switches on type names.

// connectType is one entry of the type table.
type connectType struct {
	// base is the Connect type the entry decodes; a name on another type
	// falls back to that type's entry.
	base string
	// sql is the column type of a field of schema n.
	sql func(n *node) string
	// decode reads one value (never null: the caller handles null).
	decode func(r *reader, n *node) (any, *convError)
	// element says whether a Connect array of this type may become a
	// Postgres array of its column type (else the array is jsonb).
	element bool
}

func fixed(t string) func(*node) string { return func(*node) string { return t } }

var connectTypes map[string]*connectType

func init() {
	// Assigned in init: the entries of struct, array and map decode nested
	// values through the table itself.
	connectTypes = map[string]*connectType{
		// Connect primitives.
		typeInt8:    {base: typeInt8, sql: fixed("smallint"), decode: decodeInt8, element: true},
		typeInt16:   {base: typeInt16, sql: fixed("smallint"), decode: decodeInt16, element: true},
		typeInt32:   {base: typeInt32, sql: fixed("integer"), decode: decodeInt32, element: true},
		typeInt64:   {base: typeInt64, sql: fixed("bigint"), decode: decodeInt64, element: true},
		typeFloat32: {base: typeFloat32, sql: fixed("real"), decode: decodeFloat32, element: true},
		typeFloat64: {base: typeFloat64, sql: fixed("double precision"), decode: decodeFloat64, element: true},
		typeBoolean: {base: typeBoolean, sql: fixed("boolean"), decode: decodeBool, element: true},
		typeString:  {base: typeString, sql: fixed("text"), decode: decodeText, element: true},
		typeBytes:   {base: typeBytes, sql: fixed("bytea"), decode: decodeBytes, element: true},
		typeStruct:  {base: typeStruct, sql: fixed("jsonb"), decode: decodeAsJSONB},
		typeMap:     {base: typeMap, sql: fixed("jsonb"), decode: decodeAsJSONB},
		typeArray:   {base: typeArray, sql: arraySQL, decode: decodeArray},

		// Kafka Connect logical types.
		"org.apache.kafka.connect.data.Decimal":   {base: typeBytes, sql: decimalSQL, decode: decodeDecimal, element: true},
		"org.apache.kafka.connect.data.Date":      {base: typeInt32, sql: fixed("date"), decode: decodeEpochDays, element: true},
		"org.apache.kafka.connect.data.Time":      {base: typeInt32, sql: fixed("time without time zone"), decode: timeOfDayIn(1000), element: true},
		"org.apache.kafka.connect.data.Timestamp": {base: typeInt64, sql: fixed("timestamp without time zone"), decode: timestampIn(1000), element: true},

		// Debezium semantic types: time.
		"io.debezium.time.Date":           {base: typeInt32, sql: fixed("date"), decode: decodeEpochDays, element: true},
		"io.debezium.time.Time":           {base: typeInt32, sql: fixed("time without time zone"), decode: timeOfDayIn(1000), element: true},
		"io.debezium.time.MicroTime":      {base: typeInt64, sql: fixed("time without time zone"), decode: timeOfDayIn(1), element: true},
		"io.debezium.time.NanoTime":       {base: typeInt64, sql: fixed("time without time zone"), decode: timeOfDayIn(-1000), element: true},
		"io.debezium.time.Timestamp":      {base: typeInt64, sql: fixed("timestamp without time zone"), decode: timestampIn(1000), element: true},
		"io.debezium.time.MicroTimestamp": {base: typeInt64, sql: fixed("timestamp without time zone"), decode: timestampIn(1), element: true},
		"io.debezium.time.NanoTimestamp":  {base: typeInt64, sql: fixed("timestamp without time zone"), decode: timestampIn(-1000), element: true},
		"io.debezium.time.ZonedTimestamp": {base: typeString, sql: fixed("timestamp with time zone"), decode: decodeZonedTimestamp, element: true},
		"io.debezium.time.ZonedTime":      {base: typeString, sql: fixed("time with time zone"), decode: decodeZonedTime, element: true},
		"io.debezium.time.IsoDate":        {base: typeString, sql: fixed("date"), decode: decodeIsoDate, element: true},
		"io.debezium.time.IsoTime":        {base: typeString, sql: fixed("time without time zone"), decode: decodeIsoTime, element: true},
		"io.debezium.time.IsoTimestamp":   {base: typeString, sql: fixed("timestamp without time zone"), decode: decodeIsoTimestamp, element: true},
		"io.debezium.time.Year":           {base: typeInt32, sql: fixed("integer"), decode: decodeInt32, element: true},
		"io.debezium.time.MicroDuration":  {base: typeInt64, sql: fixed("interval"), decode: durationIn(1), element: true},
		"io.debezium.time.NanoDuration":   {base: typeInt64, sql: fixed("interval"), decode: durationIn(-1000), element: true},
		"io.debezium.time.Interval":       {base: typeString, sql: fixed("interval"), decode: decodeISOInterval, element: true},

		// Debezium semantic types: data.
		"io.debezium.data.VariableScaleDecimal": {base: typeStruct, sql: fixed("numeric"), decode: decodeVariableScaleDecimal, element: true},
		"io.debezium.data.Json":                 {base: typeString, sql: fixed("jsonb"), decode: decodeJSONText, element: true},
		"io.debezium.data.Uuid":                 {base: typeString, sql: fixed("uuid"), decode: decodeUUID, element: true},
		"io.debezium.data.Enum":                 {base: typeString, sql: fixed("text"), decode: decodeText, element: true},
		"io.debezium.data.EnumSet":              {base: typeString, sql: fixed("text[]"), decode: decodeEnumSet},
		"io.debezium.data.Bits":                 {base: typeBytes, sql: bitsSQL, decode: decodeBits},
		"io.debezium.data.Xml":                  {base: typeString, sql: fixed("xml"), decode: decodeText, element: true},

		// Geometries as (E)WKB in bytea: see geometry.go.
		"io.debezium.data.geometry.Geometry":  {base: typeStruct, sql: fixed("bytea"), decode: decodeGeometry, element: true},
		"io.debezium.data.geometry.Geography": {base: typeStruct, sql: fixed("bytea"), decode: decodeGeometry, element: true},
		"io.debezium.data.geometry.Point":     {base: typeStruct, sql: fixed("bytea"), decode: decodePoint, element: true},
	}
}

// lookupType picks the entry of a schema.
func lookupType(s *connectSchema) *connectType {
	if s.Name != "" {
		if t, ok := connectTypes[s.Name]; ok && t.base == s.Type {
			return t
		}
	}
	return connectTypes[s.Type]
}

// node is a compiled Connect schema: its entry of the type table, its
// column type, the parameters its decoder needs, and its compiled parts.
type node struct {
	s       *connectSchema
	t       *connectType
	sqlType string
	scale   int // Decimal
	// precision is a Decimal column's numeric(p,s) precision; 0 for a
	// numeric without one.
	precision int
	bits      int // Bits: the column's length in bits; 0 = unbounded
	// varbit is a Bits of a bit varying source column: its values are
	// as long as their highest set bit needs, not padded to bits.
	varbit bool
	items  *node
	keys   *node
	values *node
	fields []*node
	byName map[string]int // fields by name
}

// compile compiles s and everything it nests.
func compile(s *connectSchema) (*node, error) {
	n := &node{s: s, t: lookupType(s)}
	var err error
	switch s.Type {
	case typeArray:
		if n.items, err = compile(s.Items); err != nil {
			return nil, err
		}
	case typeMap:
		if n.keys, err = compile(s.Keys); err != nil {
			return nil, err
		}
		if n.values, err = compile(s.Values); err != nil {
			return nil, err
		}
	case typeStruct:
		n.byName = make(map[string]int, len(s.Fields))
		for i, f := range s.Fields {
			fn, err := compile(f)
			if err != nil {
				return nil, err
			}
			n.fields = append(n.fields, fn)
			n.byName[f.Field] = i
		}
	}
	switch s.Name {
	case "org.apache.kafka.connect.data.Decimal":
		scale, ok := s.intParam("scale")
		if !ok && n.t.base == s.Type {
			return nil, fmt.Errorf("field %q is a Decimal without a scale parameter", s.Field)
		}
		n.scale = scale
	case "io.debezium.data.Bits":
		if l, ok := s.intParam("length"); ok && l > 0 && l < maxBitLength {
			n.bits = l
		}
		// The length is a bit(n)'s and a bit varying(n)'s alike, and a
		// varying value's own length is not sent: only with the source
		// type (column.propagate.source.type) is a varying value known
		// to have no leading zeros to restore.
		n.varbit = s.Parameters[sourceColumnType] == "VARBIT"
	}
	n.sqlType = n.t.sql(n)
	if p, _, ok := numericMods(n.sqlType); ok {
		n.precision = p
	}
	return n, nil
}

// sourceColumnType is the parameter of a field's source column type,
// which Debezium adds with column.propagate.source.type.
const sourceColumnType = "__debezium.source.column.type"

// maxBitLength is Debezium's length for a bit varying without one
// (2^31-1), and above Postgres' limit for bit varying(n).
const maxBitLength = 83886080

// field returns the compiled field of a struct node, or nil.
func (n *node) field(name string) *node {
	if i, ok := n.byName[name]; ok {
		return n.fields[i]
	}
	return nil
}

// decode reads one value of n: nil for a JSON null.
func (n *node) decode(r *reader) (any, *convError) {
	if r.null() {
		return nil, nil
	}
	v, cerr := n.t.decode(r, n)
	if cerr == nil && r.err != nil {
		cerr = &convError{kind: r.err.kind, msg: "the value " + r.err.msg}
	}
	return v, cerr
}

// arraySQL is T[] when the items map to a column type Postgres arrays
// hold, else jsonb (arrays of structs, maps, arrays, bit strings).
func arraySQL(n *node) string {
	if n.items.t.element && !strings.HasSuffix(n.items.sqlType, "[]") {
		return n.items.sqlType + "[]"
	}
	return "jsonb"
}

// decimalSQL is numeric(p,s) when the Decimal carries a precision
// (connect.decimal.precision, which Debezium sets) that Postgres accepts,
// else numeric.
func decimalSQL(n *node) string {
	p, ok := n.s.intParam("connect.decimal.precision")
	if ok && p >= 1 && p <= maxNumericPrecision && n.scale >= 0 && n.scale <= p {
		return fmt.Sprintf("numeric(%d,%d)", p, n.scale)
	}
	return "numeric"
}

// maxNumericPrecision is Postgres' limit on numeric(p,s).
const maxNumericPrecision = 1000

func bitsSQL(n *node) string {
	if n.bits > 0 {
		return fmt.Sprintf("bit varying(%d)", n.bits)
	}
	return "bit varying"
}

// convError is a value its column cannot take, before the decoder adds the
// field and the record's coordinates.
type convError struct {
	kind string
	msg  string
}

func convErrorf(kind, format string, args ...any) *convError {
	return &convError{kind: kind, msg: fmt.Sprintf(format, args...)}
}

func mismatch(n *node, got string) *convError {
	return convErrorf(decode.KindTypeMismatch, "the schema says %s, and the value is %s", n.s.describe(), got)
}

// what names the JSON value the reader is at, for messages.
func what(r *reader) string {
	switch r.peek() {
	case '{':
		return "an object"
	case '[':
		return "an array"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	case 0:
		return "missing"
	}
	return "a number"
}

// widens reports whether a column of type have holds every value of a
// field whose column type is want, so that a later schema's field of type
// want can fill it; and whether the column must be altered to want first
// (false when have is already at least as wide).
func widens(have, want string) (ok, alter bool) {
	if have == want {
		return true, false
	}
	rank := map[string]int{"smallint": 1, "integer": 2, "bigint": 3}
	if rank[have] > 0 && rank[want] > 0 {
		return true, rank[want] > rank[have]
	}
	switch have + "→" + want {
	case "real→double precision":
		return true, true
	case "double precision→real":
		return true, false
	}
	if strings.HasPrefix(have, "numeric") && strings.HasPrefix(want, "numeric") {
		hp, hs, hok := numericMods(have)
		wp, ws, wok := numericMods(want)
		switch {
		case !hok:
			return true, false // numeric holds any numeric
		case !wok:
			return true, true
		case hs >= ws && hp-hs >= wp-ws:
			return true, false
		}
		// Widen to hold both; the column's own values must still fit.
		if ws >= hs && wp-ws >= hp-hs {
			return true, true
		}
		return false, false
	}
	return false, false
}

func numericMods(t string) (p, s int, ok bool) {
	mods, found := strings.CutPrefix(t, "numeric(")
	if mods, found = strings.CutSuffix(mods, ")"); !found {
		return 0, 0, false
	}
	ps, ss, found := strings.Cut(mods, ",")
	p, err1 := strconv.Atoi(ps)
	s, err2 := strconv.Atoi(ss)
	return p, s, found && err1 == nil && err2 == nil
}
