package decode

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/kafka2pg/kafka2pg/schema"
	"github.com/kafka2pg/kafka2pg/stream"
)

// JSON Schema → columns (format json_schema). The records are JSON
// documents after the wire-format header, so a version compiles into a
// JSONMapper over the schema's properties: the same converters as typed
// JSON columns, the same error kinds. Each property maps by its type
// (jsonSchemaTypes); an object with properties is flattened (or jsonb, as
// Nested says); arrays, unions of several types, $ref, oneOf and anything
// else are jsonb. A property listed in required is NOT NULL, unless its
// type allows null.

// jsonSchemaTypes maps "type" or "type/format" to a column type.
var jsonSchemaTypes = map[string]string{
	"integer":          "bigint",
	"number":           "numeric",
	"boolean":          "boolean",
	"string":           "text",
	"string/date-time": "timestamptz",
	"string/date":      "date",
	"string/time":      "time",
	"string/uuid":      "uuid",
}

// jsonSchemaNode is the part of a JSON Schema the mapping reads.
type jsonSchemaNode struct {
	Type       json.RawMessage `json:"type"`
	Format     string          `json:"format"`
	Properties json.RawMessage `json:"properties"`
	Required   []string        `json:"required"`
}

// types reads "type": a string or a list of strings.
func (n jsonSchemaNode) types() (types []string, null bool) {
	var one string
	if json.Unmarshal(n.Type, &one) == nil {
		return []string{one}, one == "null"
	}
	var many []string
	_ = json.Unmarshal(n.Type, &many)
	for _, t := range many {
		if t == "null" {
			null = true
		} else {
			types = append(types, t)
		}
	}
	return types, null
}

func compileJSONSchema(rs RegisteredSchema, _ []int, _, prefix string, nested Nested) (*regVersion, error) {
	if t := strings.ToUpper(rs.Type); t != "JSON" {
		if t == "" {
			t = "AVRO"
		}
		return nil, fmt.Errorf("schema id %d is %s, not JSON Schema: use format %s", rs.ID, t, strings.ToLower(t))
	}
	var root jsonSchemaNode
	if err := json.Unmarshal([]byte(rs.Text), &root); err != nil {
		return nil, fmt.Errorf("schema id %d is not a JSON Schema document: %w", rs.ID, err)
	}
	c := &jsonSchemaCompiler{nested: nested, taken: map[string]bool{}}
	if types, _ := root.types(); len(types) == 1 && types[0] == "object" && len(root.Properties) > 0 {
		if err := c.object(root, prefix, nil, 0, false); err != nil {
			return nil, err
		}
	} else {
		name := prefix
		if name == "" {
			name = "value"
		}
		if err := c.property(root, name, nil, 0, true, false); err != nil {
			return nil, err
		}
	}
	if len(c.specs) == 0 {
		return nil, fmt.Errorf("schema id %d has no property that can be a column", rs.ID)
	}
	jm, err := NewJSONMapper(MappingSpec{Table: "json_schema", Columns: c.specs})
	if err != nil {
		return nil, fmt.Errorf("schema id %d: %w", rs.ID, err)
	}
	cols := jm.Table().Columns
	for i := range c.fields {
		c.fields[i].sqlType = cols[i].Type
	}
	return &regVersion{fields: c.fields, decode: func(payload []byte, out []any) error {
		row, err := jm.Row(&stream.Record{Value: payload}, nil)
		var de *DecodeError
		if errors.As(err, &de) {
			return &fieldError{column: de.Column, kind: de.Kind, msg: de.Err.Error()}
		}
		if err != nil {
			return err
		}
		copy(out, row)
		return nil
	}}, nil
}

type jsonSchemaCompiler struct {
	nested Nested
	specs  []ColumnSpec
	fields []regField
	taken  map[string]bool
}

// object adds the properties of n, flattened under prefix, in the order the
// schema lists them.
func (c *jsonSchemaCompiler) object(n jsonSchemaNode, prefix string, path []string, depth int, null bool) error {
	names, raws, err := orderedMembers(n.Properties)
	if err != nil {
		return fmt.Errorf("properties of %s: %w", pathText(path), err)
	}
	required := map[string]bool{}
	for _, r := range n.Required {
		required[r] = true
	}
	for i, name := range names {
		var p jsonSchemaNode
		if err := json.Unmarshal(raws[i], &p); err != nil {
			return fmt.Errorf("property %s: %w", pathText(append(path, name)), err)
		}
		if err := c.property(p, colName(prefix, name), append(append([]string(nil), path...), name), depth, !required[name] || null, true); err != nil {
			return err
		}
	}
	return nil
}

// property adds the column(s) of one property.
func (c *jsonSchemaCompiler) property(p jsonSchemaNode, name string, path []string, depth int, null, member bool) error {
	types, canBeNull := p.types()
	null = null || canBeNull
	if len(types) == 1 && types[0] == "object" && len(p.Properties) > 0 && c.nested == NestedFlatten && depth < maxNesting {
		return c.object(p, name, path, depth+1, null)
	}
	sqlType := "jsonb"
	what := "any"
	if len(types) == 1 {
		what = types[0]
		if t, ok := jsonSchemaTypes[types[0]+"/"+p.Format]; ok && p.Format != "" {
			sqlType, what = t, types[0]+" ("+p.Format+")"
		} else if t, ok := jsonSchemaTypes[types[0]]; ok {
			sqlType = t
		}
	}
	if err := schema.ValidateIdent("column name", name); err != nil {
		return fmt.Errorf("property %s: %w: shorten the property names, or use nested: jsonb", pathText(path), err)
	}
	if c.taken[name] {
		return fmt.Errorf("two properties become column %q (one is %s): rename one, or use nested: jsonb", name, pathText(path))
	}
	c.taken[name] = true
	jp := "$"
	for _, s := range path {
		q, _ := json.Marshal(s)
		jp += "[" + string(q) + "]"
	}
	c.specs = append(c.specs, ColumnSpec{Name: name, Path: jp, Type: sqlType, NotNull: !null && member})
	c.fields = append(c.fields, regField{name: name, field: pathText(path), what: what, notNull: !null && member})
	return nil
}

func pathText(path []string) string {
	if len(path) == 0 {
		return "the document"
	}
	return strings.Join(path, ".")
}

// orderedMembers splits a JSON object into its member names and values, in
// document order.
func orderedMembers(raw json.RawMessage) ([]string, []json.RawMessage, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, nil, errors.New("is not an object")
	}
	var names []string
	var values []json.RawMessage
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, nil, err
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, nil, err
		}
		names = append(names, t.(string))
		values = append(values, v)
	}
	return names, values, nil
}
