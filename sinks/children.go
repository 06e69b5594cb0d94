package sinks

import (
	"cmp"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/kafka2pg/kafka2pg/decode"
	"github.com/kafka2pg/kafka2pg/ingest"
	"github.com/kafka2pg/kafka2pg/schema"
	"github.com/kafka2pg/kafka2pg/stream"
)

// ChildTable maps an array of each record's value to the rows of a child
// table, written in the same transaction as the record's row:
//
//	children:
//	  - path: items
//	    table: order_items
//	    index_column: item_index
//	    columns:
//	      - {name: sku, type: text}
//	      - {name: qty, type: integer}
//
// Each child row holds the parent's key columns (mode upsert: named and
// typed like the parent's; the child table's primary key is them and the
// index), or in mode append the record's coordinates, in the columns the
// sink's metadata names for topic, partition and offset (which append
// mode then requires, so children join their parent); then the element's
// index in the array; then the element's columns. In mode upsert a record
// replaces its key's children, and a delete deletes them. A record with
// an element that does not fit is a bad record whole: neither its row
// nor its children are written.
type ChildTable struct {
	// Line is the line of the child table in the YAML it was decoded
	// from, for messages; 0 when it was not decoded.
	Line int `yaml:"-"`
	// Path is the array in the value (decode.ColumnSpec's path syntax).
	Path string `yaml:"path"`
	// Table and Schema name the child table, templates as the sink's
	// are. Schema defaults to the sink's schema.
	Table  string `yaml:"table"`
	Schema string `yaml:"schema"`
	// IndexColumn names the column of the element's index, from 0.
	// Default index.
	IndexColumn string `yaml:"index_column"`
	// Columns are the element's columns, paths relative to the element.
	Columns []Column `yaml:"columns"`
}

// UnmarshalYAML decodes a child table and records its Line; the sink's
// UnmarshalYAML has checked its keys.
func (c *ChildTable) UnmarshalYAML(n *yaml.Node) error {
	type plain ChildTable // without this method
	var p plain
	if err := n.Decode(&p); err != nil {
		return err
	}
	*c = ChildTable(p)
	c.Line = n.Line
	return nil
}

// childSinks builds the children of the typed sink sc, whose table is
// parent, keyed by key in mode upsert (nil: mode append); re and groups
// are its topic_regex's, for the templates of the child tables' names.
func childSinks(sc Sink, parent schema.Table, key []string, re *regexp.Regexp, groups []string) ([]ingest.Child, error) {
	if len(sc.Children) == 0 {
		return nil, nil
	}
	upsert := len(key) > 0
	var cols []schema.Column
	if upsert {
		cols = keyColumns(parent, key)
	} else {
		md := sc.Metadata
		if md.Topic == "" || md.Partition == "" || md.Offset == "" {
			return nil, &keyError{key: "children", line: sc.childrenLine, err: errors.New("in mode append a child row joins its parent by the record's topic, partition and offset: name their columns in metadata (metadata: {topic: kafka_topic, partition: kafka_partition, offset: kafka_offset}), or use mode upsert")}
		}
		cols = []schema.Column{{Name: md.Topic, Type: "text", NotNull: true},
			{Name: md.Partition, Type: "integer", NotNull: true}, {Name: md.Offset, Type: "bigint", NotNull: true}}
	}
	return buildChildren(sc, parent, cols, upsert, re, groups, func(cm *decode.ChildMapper) ingest.Child {
		return ingest.Child{Table: cm.Table(), Mapper: cm}
	})
}

// keyColumns are the columns of t named key, in key's order, NOT NULL.
func keyColumns(t schema.Table, key []string) []schema.Column {
	var cols []schema.Column
	for _, k := range key {
		for _, c := range t.Columns {
			if c.Name == k {
				cols = append(cols, schema.Column{Name: c.Name, Type: c.Type, NotNull: true})
			}
		}
	}
	return cols
}

// debeziumUnavailable is Debezium's default
// unavailable.value.placeholder: the value of an unchanged TOASTed
// column it leaves out of an event.
const debeziumUnavailable = "__debezium_unavailable_value"

// changeChildren builds the children of the debezium sink sc, whose
// table, schemaName.table, and key the events tell: each is checked now
// against a stand-in key, and bound to the table's key when the writer
// knows it (ingest.Child.Bind). The path is relative to the after image.
func changeChildren(sc Sink, schemaName, table string, re *regexp.Regexp, groups []string) ([]ingest.Child, error) {
	if len(sc.Children) == 0 {
		return nil, nil
	}
	if sc.ValueFormat != "" && sc.ValueFormat != "json" {
		return nil, &keyError{key: "children", line: sc.childrenLine, err: fmt.Errorf("children read the after image as JSON, and value_format %s is not: remove children, or use value_format json", sc.ValueFormat)}
	}
	parent := schema.Table{Schema: schemaName, Name: table}
	return buildChildren(sc, parent, standInKey, true, re, groups, func(cm *decode.ChildMapper) ingest.Child {
		return ingest.Child{Bind: func(t schema.Table) (ingest.Child, error) {
			if len(t.PrimaryKey) == 0 {
				return ingest.Child{}, fmt.Errorf("table %s has no primary key, which its children's rows start with: give the source table one, or set key in the sink", t.QualifiedName())
			}
			bound, err := cm.WithParent(keyColumns(t, t.PrimaryKey))
			if err != nil {
				return ingest.Child{}, err
			}
			return ingest.Child{Table: bound.Table(), Mapper: bound}, nil
		}}
	})
}

// standInKey stands in for the parent's key of children checked before
// the parent's table is known.
var standInKey = []schema.Column{{Name: "kafka2pg parent key", Type: "text", NotNull: true}}

// registryChildren builds the children of the registry sink sc, built as
// sink: each reads its array from the parent's row, the first member of
// its path naming the jsonb column the registry's mapper writes the
// array to (decode.ChildSpec.Row).
func registryChildren(sc Sink, sink ingest.Sink, re *regexp.Regexp, groups []string) ([]ingest.Child, error) {
	if len(sc.Children) == 0 {
		return nil, nil
	}
	tm := sink.Mapper.(ingest.TableMapper)
	row := func(r *stream.Record) ([]any, schema.Table, error) {
		t := tm.Table() // before the row: a change it needs makes the row fail
		row, err := tm.Row(r, nil)
		return row, t, err
	}
	for i, c := range sc.Children {
		first, _, _ := strings.Cut(strings.TrimPrefix(strings.TrimPrefix(c.Path, "$"), "."), ".")
		first, _, _ = strings.Cut(first, "[")
		j := slices.IndexFunc(sink.Table.Columns, func(col schema.Column) bool { return col.Name == first })
		if j < 0 || sink.Table.Columns[j].Type != "jsonb" {
			return nil, &keyError{key: fmt.Sprintf("children[%d].path", i), line: c.Line,
				err: fmt.Errorf("path %q: with format %s a child's path starts with the jsonb column of the parent that holds the array (an array field), and %s has no jsonb column %q", c.Path, sc.Format, sink.Table.QualifiedName(), first)}
		}
	}
	children, err := childSinks(sc, sink.Table, keyOf(sink), re, groups)
	if err != nil {
		return nil, err
	}
	for i := range children {
		cm := children[i].Mapper.(*decode.ChildMapper)
		bound, err := cm.FromRow(row)
		if err != nil {
			return nil, &keyError{key: fmt.Sprintf("children[%d]", i), line: sc.Children[i].Line, err: err}
		}
		children[i].Mapper = bound
	}
	return children, nil
}

// keyOf is the upsert key of sink, nil in append mode.
func keyOf(sink ingest.Sink) []string {
	if sink.Upsert == nil {
		return nil
	}
	return sink.Upsert.Key
}

// buildChildren builds the child tables of sc, whose table is parent,
// each row starting with the columns cols (keyed: the child table's
// primary key is them and the index), each child made by child.
func buildChildren(sc Sink, parent schema.Table, cols []schema.Column, keyed bool, re *regexp.Regexp, groups []string, child func(*decode.ChildMapper) ingest.Child) ([]ingest.Child, error) {
	switch {
	case sc.Version != "":
		return nil, &keyError{key: "children", line: sc.childrenLine, err: errors.New("children with version: a change the version guard skips would still replace its key's children; remove version or children")}
	case sc.Delete == "soft":
		return nil, &keyError{key: "children", line: sc.childrenLine, err: errors.New("children with delete: soft: a soft delete keeps the parent's row, and what becomes of its children is not decided yet; remove delete: soft or children")}
	}
	var out []ingest.Child
	var errs []error
	tables := map[string]bool{parent.QualifiedName(): true}
	for i, c := range sc.Children {
		at := func(key string, err error) error {
			return &keyError{key: fmt.Sprintf("children[%d]%s", i, key), line: c.Line, err: err}
		}
		if c.Table == "" {
			errs = append(errs, at(".table", errors.New("table is missing: name the child table")))
			continue
		}
		table, err := routeName("table", c.Table, sc.Topic, re, groups)
		if err != nil {
			errs = append(errs, at(".table", err))
			continue
		}
		schemaName := parent.Schema
		if c.Schema != "" {
			if schemaName, err = routeName("schema", c.Schema, sc.Topic, re, groups); err != nil {
				errs = append(errs, at(".schema", err))
				continue
			}
		}
		spec := decode.ChildSpec{Path: c.Path, Schema: schemaName, Table: table, IndexColumn: c.IndexColumn,
			Parent: cols, Key: keyed, Envelope: sc.Format == formatDebezium}
		if spec.Envelope {
			spec.UnavailableValue = cmp.Or(sc.UnavailableValue, debeziumUnavailable)
		}
		if c.Path == "" {
			errs = append(errs, at(".path", errors.New("path is missing: name the array of the value whose elements become the child rows")))
			continue
		}
		for j, col := range c.Columns {
			if col.Connect != "" {
				errs = append(errs, at(fmt.Sprintf(".columns[%d].connect", j), fmt.Errorf("column %q: connect is for the columns of format debezium and connect_json: remove it", col.Name)))
			}
			spec.Columns = append(spec.Columns, col.ColumnSpec)
		}
		cm, err := decode.NewChildMapper(spec)
		if err != nil {
			errs = append(errs, at("", err))
			continue
		}
		t := cm.Table()
		if tables[t.QualifiedName()] {
			errs = append(errs, at(".table", fmt.Errorf("table %s is written twice by this sink: give each child table a name of its own", t.QualifiedName())))
			continue
		}
		tables[t.QualifiedName()] = true
		out = append(out, child(cm))
	}
	return out, errors.Join(errs...)
}

// noChildren refuses children on a sink of a format that cannot have
// them, saying which can.
func noChildren(sc Sink, why string) error {
	if len(sc.Children) == 0 {
		return nil
	}
	return &keyError{key: "children", line: sc.childrenLine, err: fmt.Errorf("children read an array of a typed JSON mapping or of a Debezium after image, and %s: remove children, or use format json with columns, or format debezium", cmp.Or(why, "this sink has none"))}
}
