package decode

import (
	"errors"
	"fmt"
	"math"
	"math/big"
	"strings"
	"time"

	"github.com/hamba/avro/v2"

	"github.com/kafka2pg/kafka2pg/pgvalue"
	"github.com/kafka2pg/kafka2pg/schema"
)

// Avro schemas → columns. The Avro type of each field picks its column
// type from avroTypes (logical types first); records are flattened into
// parent_child columns (or one jsonb column, Nested jsonb); arrays, maps,
// unions other than [null, T] and anything inside them become jsonb. The
// values are decoded straight from the wire into the Go types pgx encodes
// (int32, int64, float32, float64, string, bool, []byte, time.Time,
// pgvalue.Time, pgvalue.Numeric, pgvalue.UUID), with the writer's schema: the
// Confluent wire format names it.

// avroScalar is one entry of the Avro type table.
type avroScalar struct {
	sqlType string
	read    func(r *avro.Reader, s avro.Schema) (any, error)
}

// avroTypes maps "type" or "type/logicalType" to its column type and reader.
// Decimal is handled apart: its column type carries precision and scale.
var avroTypes = map[string]avroScalar{
	"boolean": {"boolean", func(r *avro.Reader, _ avro.Schema) (any, error) { return r.ReadBool(), nil }},
	"int":     {"integer", func(r *avro.Reader, _ avro.Schema) (any, error) { return r.ReadInt(), nil }},
	"long":    {"bigint", func(r *avro.Reader, _ avro.Schema) (any, error) { return r.ReadLong(), nil }},
	"float":   {"real", func(r *avro.Reader, _ avro.Schema) (any, error) { return r.ReadFloat(), nil }},
	"double":  {"double precision", func(r *avro.Reader, _ avro.Schema) (any, error) { return r.ReadDouble(), nil }},
	"string":  {"text", readAvroText},
	"bytes":   {"bytea", func(r *avro.Reader, _ avro.Schema) (any, error) { return r.ReadBytes(), nil }},
	"fixed":   {"bytea", readAvroFixed},
	"enum":    {"text", readAvroEnum},
	"string/uuid": {"uuid", func(r *avro.Reader, s avro.Schema) (any, error) {
		return parseUUIDText(r.ReadString())
	}},
	"fixed/uuid": {"uuid", func(r *avro.Reader, s avro.Schema) (any, error) {
		b, err := readAvroFixed(r, s)
		if err != nil {
			return nil, err
		}
		if len(b.([]byte)) != 16 {
			return nil, errors.New("a uuid fixed must have 16 bytes")
		}
		return pgvalue.UUID(b.([]byte)), nil
	}},
	"int/date": {"date", func(r *avro.Reader, _ avro.Schema) (any, error) {
		return time.Unix(int64(r.ReadInt())*86400, 0).UTC(), nil
	}},
	"int/time-millis": {"time without time zone", func(r *avro.Reader, _ avro.Schema) (any, error) {
		return timeOfDay(int64(r.ReadInt()) * 1000)
	}},
	"long/time-micros": {"time without time zone", func(r *avro.Reader, _ avro.Schema) (any, error) {
		return timeOfDay(r.ReadLong())
	}},
	"long/timestamp-millis": {"timestamp with time zone", func(r *avro.Reader, _ avro.Schema) (any, error) {
		return time.UnixMilli(r.ReadLong()).UTC(), nil
	}},
	"long/timestamp-micros": {"timestamp with time zone", func(r *avro.Reader, _ avro.Schema) (any, error) {
		return time.UnixMicro(r.ReadLong()).UTC(), nil
	}},
	"long/local-timestamp-millis": {"timestamp without time zone", func(r *avro.Reader, _ avro.Schema) (any, error) {
		return time.UnixMilli(r.ReadLong()).UTC(), nil
	}},
	"long/local-timestamp-micros": {"timestamp without time zone", func(r *avro.Reader, _ avro.Schema) (any, error) {
		return time.UnixMicro(r.ReadLong()).UTC(), nil
	}},
}

func timeOfDay(us int64) (any, error) {
	if us < 0 || us > microsPerDay {
		return nil, &fieldError{kind: KindOutOfRange, msg: fmt.Sprintf("time of day %dµs is not within one day", us)}
	}
	return pgvalue.Time{Microseconds: us}, nil
}

func readAvroText(r *avro.Reader, _ avro.Schema) (any, error) {
	b := r.ReadBytes()
	if kind, err := CheckText(b); err != nil {
		return nil, &fieldError{kind: kind, msg: err.Error()}
	}
	return string(b), nil
}

func readAvroFixed(r *avro.Reader, s avro.Schema) (any, error) {
	b := make([]byte, s.(*avro.FixedSchema).Size())
	r.Read(b)
	return b, nil
}

func readAvroEnum(r *avro.Reader, s avro.Schema) (any, error) {
	i := r.ReadInt()
	sym, ok := s.(*avro.EnumSchema).Symbol(int(i))
	if !ok {
		return nil, fmt.Errorf("enum index %d is not a symbol of %s", i, s.(*avro.EnumSchema).FullName())
	}
	return sym, nil
}

// parseUUIDText reads the 36-character hyphenated form.
func parseUUIDText(s string) (any, error) {
	u, ok := pgvalue.ParseUUID(s)
	if !ok {
		return nil, &fieldError{kind: KindInvalidUUID, msg: fmt.Sprintf("%q is not a UUID", s)}
	}
	return u, nil
}

// avroDecimal reads a decimal (bytes or fixed: a big-endian two's complement
// unscaled integer) as an exact numeric.
func avroDecimal(r *avro.Reader, s avro.Schema, scale int) (any, error) {
	var b []byte
	if f, ok := s.(*avro.FixedSchema); ok {
		b = make([]byte, f.Size())
		r.Read(b)
	} else {
		b = r.ReadBytes()
	}
	n := new(big.Int).SetBytes(b)
	if len(b) > 0 && b[0]&0x80 != 0 {
		n.Sub(n, new(big.Int).Lsh(big.NewInt(1), uint(8*len(b))))
	}
	return pgvalue.Numeric{Int: n, Exp: int32(-scale)}, nil
}

// ParseAvro parses an Avro schema of the registry, with the schemas it
// references.
func ParseAvro(rs RegisteredSchema) (avro.Schema, error) {
	if t := strings.ToUpper(rs.Type); t != "" && t != "AVRO" {
		return nil, fmt.Errorf("schema id %d is %s, not Avro: use format %s", rs.ID, rs.Type, strings.ToLower(t))
	}
	cache := &avro.SchemaCache{}
	for _, ref := range rs.References {
		if _, err := avro.ParseWithCache(ref.Text, "", cache); err != nil {
			return nil, fmt.Errorf("referenced schema %s does not parse: %w", ref.Name, err)
		}
	}
	s, err := avro.ParseWithCache(rs.Text, "", cache)
	if err != nil {
		return nil, fmt.Errorf("schema id %d does not parse as Avro: %w", rs.ID, err)
	}
	return s, nil
}

// avroCompiler builds the columns and the decoder of one schema.
type avroCompiler struct {
	nested Nested
	fields []regField
	taken  map[string]bool
}

// avroNode decodes one schema node into out.
type avroNode func(r *avro.Reader, out []any) error

// compileAvro compiles an Avro schema (with its references) for a part;
// prefix names the columns of a key ("key", "key_<field>").
func compileAvro(rs RegisteredSchema, _ []int, _, prefix string, nested Nested) (*regVersion, error) {
	s, err := ParseAvro(rs)
	if err != nil {
		return nil, err
	}
	c := &avroCompiler{nested: nested, taken: map[string]bool{}}
	var node avroNode
	if rec, ok := deref(s).(*avro.RecordSchema); ok {
		node, err = c.record(rec, prefix, "", 0)
	} else {
		name := prefix
		if name == "" {
			name = "value"
		}
		node, err = c.field(name, name, s, nil, 0)
	}
	if err != nil {
		return nil, err
	}
	if len(c.fields) == 0 {
		return nil, fmt.Errorf("schema id %d has no field that can be a column", rs.ID)
	}
	return &regVersion{fields: c.fields, decode: func(payload []byte, out []any) error {
		r := avro.NewReader(nil, 0).Reset(payload)
		err := node(r, out)
		if err == nil && r.Error != nil {
			err = r.Error
		}
		return err
	}}, nil
}

func deref(s avro.Schema) avro.Schema {
	if ref, ok := s.(*avro.RefSchema); ok {
		return ref.Schema()
	}
	return s
}

// maxNesting bounds flattening; deeper records are jsonb.
const maxNesting = 8

func colName(prefix, name string) string {
	if prefix == "" {
		return name
	}
	return prefix + "_" + name
}

func fieldPath(parent, name string) string {
	if parent == "" {
		return name
	}
	return parent + "." + name
}

// record compiles the fields of a record, flattened under prefix.
func (c *avroCompiler) record(rec *avro.RecordSchema, prefix, path string, depth int) (avroNode, error) {
	var nodes []avroNode
	for _, f := range rec.Fields() {
		var def any
		if f.HasDefault() {
			def = f.Default()
		}
		n, err := c.field(colName(prefix, f.Name()), fieldPath(path, f.Name()), f.Type(), def, depth)
		if err != nil {
			return nil, err
		}
		nodes = append(nodes, n)
	}
	return func(r *avro.Reader, out []any) error {
		for _, n := range nodes {
			if err := n(r, out); err != nil {
				return err
			}
			if r.Error != nil {
				return r.Error
			}
		}
		return nil
	}, nil
}

// nullable splits [null, T] and [T, null] unions.
func nullable(s avro.Schema) (inner avro.Schema, nullIndex int, ok bool) {
	u, isUnion := s.(*avro.UnionSchema)
	if !isUnion || len(u.Types()) != 2 {
		return s, -1, false
	}
	ts := u.Types()
	switch {
	case ts[0].Type() == avro.Null && ts[1].Type() != avro.Null:
		return ts[1], 0, true
	case ts[1].Type() == avro.Null && ts[0].Type() != avro.Null:
		return ts[0], 1, true
	}
	return s, -1, false
}

// field compiles one field into its column(s).
func (c *avroCompiler) field(name, path string, s avro.Schema, def any, depth int) (avroNode, error) {
	s = deref(s)
	inner, nullIdx, isNullable := nullable(s)
	inner = deref(inner)
	if isNullable {
		first := len(c.fields)
		n, err := c.nonNull(name, path, inner, def, depth, true)
		if err != nil {
			return nil, err
		}
		last := len(c.fields)
		return func(r *avro.Reader, out []any) error {
			i := r.ReadLong()
			switch {
			case i == int64(nullIdx):
				for j := first; j < last; j++ {
					out[j] = nil
				}
				return nil
			case i == int64(1-nullIdx):
				return n(r, out)
			}
			return fmt.Errorf("field %s: union index %d is out of range", path, i)
		}, nil
	}
	if s.Type() == avro.Null {
		return func(*avro.Reader, []any) error { return nil }, nil
	}
	return c.nonNull(name, path, s, def, depth, false)
}

// nonNull compiles a field of a type other than a [null, T] union.
func (c *avroCompiler) nonNull(name, path string, s avro.Schema, def any, depth int, null bool) (avroNode, error) {
	if rec, ok := s.(*avro.RecordSchema); ok && c.nested == NestedFlatten && depth < maxNesting {
		first := len(c.fields)
		n, err := c.record(rec, name, path, depth+1)
		if err != nil {
			return nil, err
		}
		if null {
			for j := first; j < len(c.fields); j++ {
				c.fields[j].notNull = false
			}
		}
		return n, nil
	}
	col, err := c.add(name, path)
	if err != nil {
		return nil, err
	}
	f := &c.fields[col]
	f.notNull = !null
	key := string(s.Type())
	var lt avro.LogicalSchema
	if l, ok := s.(avro.LogicalTypeSchema); ok && l.Logical() != nil {
		lt = l.Logical()
	}
	if lt != nil && lt.Type() == avro.Decimal {
		d := lt.(*avro.DecimalLogicalSchema)
		f.sqlType, f.what = "numeric", fmt.Sprintf("%s (decimal(%d,%d))", key, d.Precision(), d.Scale())
		if d.Precision() >= 1 && d.Precision() <= schema.MaxNumericPrecision && d.Scale() >= 0 && d.Scale() <= d.Precision() {
			f.sqlType = fmt.Sprintf("numeric(%d,%d)", d.Precision(), d.Scale())
		}
		scale := d.Scale()
		return func(r *avro.Reader, out []any) error {
			v, err := avroDecimal(r, s, scale)
			out[col] = v
			return err
		}, nil
	}
	if lt != nil {
		if sc, ok := avroTypes[key+"/"+string(lt.Type())]; ok {
			f.sqlType, f.what = sc.sqlType, key+" ("+string(lt.Type())+")"
			f.def = avroDefault(sc.sqlType, def)
			return c.scalarNode(col, path, s, sc.read), nil
		}
	}
	if sc, ok := avroTypes[key]; ok {
		f.sqlType, f.what = sc.sqlType, key
		f.def = avroDefault(sc.sqlType, def)
		return c.scalarNode(col, path, s, sc.read), nil
	}
	// Records (with nested jsonb), arrays, maps and other unions.
	f.sqlType, f.what = "jsonb", key
	if u, ok := s.(*avro.UnionSchema); ok && u.Contains(avro.Null) {
		f.notNull = false
	}
	return func(r *avro.Reader, out []any) error {
		v, err := avroJSON(r, s, 0)
		if err != nil {
			return fmt.Errorf("field %s: %w", path, err)
		}
		if v == nil { // the null branch of a union: SQL NULL, not JSON null
			out[col] = nil
			return nil
		}
		b, err := marshalJSONB(v)
		if err != nil {
			return fmt.Errorf("field %s: %w", path, err)
		}
		if kind, err := CheckJSON(b); err != nil {
			return &fieldError{column: c.fields[col].name, kind: kind, msg: fmt.Sprintf("field %s: %s", path, err.Error())}
		}
		out[col] = b
		return nil
	}, nil
}

func (c *avroCompiler) scalarNode(col int, path string, s avro.Schema, read func(*avro.Reader, avro.Schema) (any, error)) avroNode {
	name := c.fields[col].name
	return func(r *avro.Reader, out []any) error {
		v, err := read(r, s)
		if r.Error != nil {
			return r.Error
		}
		if err != nil {
			var fe *fieldError
			if errors.As(err, &fe) {
				fe.column, fe.msg = name, "field "+path+": "+fe.msg
				return fe
			}
			return fmt.Errorf("field %s: %w", path, err)
		}
		out[col] = v
		return nil
	}
}

// add appends a column, refusing a name two fields flatten to.
func (c *avroCompiler) add(name, path string) (int, error) {
	if err := schema.ValidateIdent("column name", name); err != nil {
		return 0, fmt.Errorf("field %s: %w: shorten the field names, or use nested: jsonb", path, err)
	}
	if c.taken[name] {
		return 0, fmt.Errorf("two fields become column %q (one is %s): rename a field, or use nested: jsonb", name, path)
	}
	c.taken[name] = true
	c.fields = append(c.fields, regField{name: name, field: path})
	return len(c.fields) - 1, nil
}

// avroDefault converts a field's default to the column's Go type; nil when
// it has none or it does not convert (a default on a logical type).
func avroDefault(sqlType string, def any) any {
	if def == nil {
		return nil
	}
	var f float64
	isNum := true
	switch x := def.(type) {
	case int:
		f = float64(x)
	case int32:
		f = float64(x)
	case int64:
		f = float64(x)
	case float32:
		f = float64(x)
	case float64:
		f = x
	default:
		isNum = false
	}
	switch sqlType {
	case "integer":
		if isNum && f == math.Trunc(f) && f >= math.MinInt32 && f <= math.MaxInt32 {
			return int32(f)
		}
	case "bigint":
		if isNum && f == math.Trunc(f) && math.Abs(f) < 1<<53 {
			return int64(f)
		}
	case "real":
		if isNum {
			return float32(f)
		}
	case "double precision":
		if isNum {
			return f
		}
	case "boolean":
		if b, ok := def.(bool); ok {
			return b
		}
	case "text":
		if s, ok := def.(string); ok && !strings.ContainsRune(s, 0) {
			return s
		}
	}
	return nil
}
