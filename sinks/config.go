package sinks

import (
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/kafka2pg/kafka2pg/cdc"
	"github.com/kafka2pg/kafka2pg/decode"
	"github.com/kafka2pg/kafka2pg/stream"
)

// Config is a set of sinks as YAML writes it:
//
//	sinks:
//	  - topic: orders
//	    mode: upsert
//	    key: [id]
//	    columns:
//	      - {name: id, type: bigint, not_null: true}
//	      - {name: total, type: numeric}
//	  - topic_regex: 'shop\.public\..+'
//	    format: debezium
//	    table: ${topic.-1}
type Config struct {
	// Sinks are the topics' sinks: one per topic, and one per topic
	// pattern, the first pattern that matches a topic winning.
	Sinks []Sink `yaml:"sinks"`
	// Schema is the Postgres schema of the tables of the sinks that name
	// none. Default public.
	Schema string `yaml:"schema"`
}

// Sink is one topic's (or one topic pattern's) table and mapping. The
// zero-config sink, a topic and nothing else, writes the record's
// coordinates, key, headers and value (jsonb) into a table named after
// the topic.
type Sink struct {
	// Line is the line of the sink in the YAML it was decoded from, for
	// messages; 0 when it was not decoded.
	Line int `yaml:"-"`
	// Topic is the topic the sink reads; TopicRegex instead is a pattern
	// (Go's RE2 syntax, anchored) of the topics it reads, each into the
	// table its templates name. One of the two.
	Topic      string `yaml:"topic"`
	TopicRegex string `yaml:"topic_regex"`
	// Table and Schema name the sink's table. Both are templates of the
	// topic's name (${topic}, ${topic.N}, the named groups of TopicRegex)
	// and of the record (${value.FIELD}, ${header.KEY}: the sink is then
	// routed by content, each record into the table it names): see the
	// package doc. Table defaults to ${topic}, Schema to Config.Schema.
	Table  string `yaml:"table"`
	Schema string `yaml:"schema"`
	// Format is how the values are written: json (default), text or
	// bytes; avro, protobuf or json_schema (the Confluent wire format,
	// columns from a schema registry); debezium or connect_json (Kafka
	// Connect records, package cdc).
	Format string `yaml:"format"`
	// Mode is append (default) or upsert (by Key).
	Mode string `yaml:"mode"`
	// Key names the primary key's columns in upsert mode.
	Key []string `yaml:"key"`
	// DeleteOnTombstone makes a record without a value delete its key's row.
	DeleteOnTombstone bool `yaml:"delete_on_tombstone"`
	// Delete is hard (default: a delete removes the key's row) or soft:
	// a delete marks the row in DeletedAt's column, or DeletedFlag's, and
	// a later upsert of the key clears the mark. Upsert sinks with
	// delete_on_tombstone, and format debezium.
	Delete string `yaml:"delete"`
	// DeletedAt names the timestamptz column of delete soft, which takes
	// the delete's Kafka timestamp. Default deleted_at.
	DeletedAt string `yaml:"deleted_at"`
	// DeletedFlag, instead of DeletedAt, names a boolean column of delete
	// soft: true when deleted, false when not.
	DeletedFlag string `yaml:"deleted_flag"`
	// Version names the column that orders the changes of a key: a change
	// applies only when its version is greater than the stored row's.
	// Upsert sinks: one of the columns (of the subject's schema, with a
	// registry format; of columns, with connect_json), an integer,
	// numeric, timestamp or date; with
	// delete_on_tombstone it needs delete soft, whose rows keep the
	// version of deleted keys. Format debezium: a numeric column that
	// kafka2pg fills from the event's source position (docs/CDC.md); it
	// needs delete soft.
	Version string `yaml:"version"`
	// Where keeps only the records for which the expression is true
	// (expr-lang's language, decode.FilterSpec): value is the record's
	// value decoded as JSON (a debezium or connect_json value's payload),
	// key the key as a string, headers each header's last value:
	// `value.type == "order"`. Dropped records are not written, and their
	// offsets advance with their batch's. The deletes bypass it, so that
	// a row that stops matching can still be removed: tombstones of an
	// upsert sink with delete_on_tombstone, and debezium's deletes,
	// truncates and tombstones. A record it cannot evaluate (a value that
	// is not JSON, an error such as a field of null) is a bad record of
	// kind filter. Formats json, debezium and connect_json (value_format
	// json) only.
	Where string `yaml:"where"`
	// whereLine is the line of the where key, for messages.
	whereLine int
	// Create false refuses to create a missing table. Default true.
	Create *bool `yaml:"create"`
	// Evolve adds the columns a record brings that the table lacks.
	Evolve bool `yaml:"evolve"`
	// Columns are a typed sink's data columns, in row order.
	Columns []Column `yaml:"columns"`
	// Metadata names the columns that receive the record's Kafka metadata.
	Metadata decode.MetadataSpec `yaml:"metadata"`
	// PartitionBy makes the table partitioned by range of a time column
	// (typed JSON sinks): see PartitionBy.
	PartitionBy PartitionBy `yaml:"partition_by"`
	// Children map arrays of the value to child tables written with the
	// sink's rows (ChildTable). Format json with columns only.
	Children []ChildTable `yaml:"children"`
	// childrenLine is the line of the children key, for messages.
	childrenLine int

	// Formats avro, protobuf and json_schema only.
	Subject    string `yaml:"subject"`     // the value's subject; default <topic>-value
	KeySubject string `yaml:"key_subject"` // the key's subject; default <topic>-key in upsert mode
	Nested     string `yaml:"nested"`      // flatten (default) or jsonb
	Message    string `yaml:"message"`     // the Protobuf message; default the first

	// Formats debezium and connect_json only.
	ValueFormat      string            `yaml:"value_format"`      // debezium: json (default), avro or protobuf
	Source           cdc.SourceColumns `yaml:"source"`            // debezium: columns of the envelope's source block
	UnavailableValue string            `yaml:"unavailable_value"` // the connector's unavailable.value.placeholder

	// Format debezium only: transaction-consistent apply (transactions.go).
	Transactions      bool   `yaml:"transactions"`       // apply each source transaction whole, in commit order
	TransactionTopic  string `yaml:"transaction_topic"`  // default <topic.prefix>.transaction
	OnIncomplete      string `yaml:"on_incomplete"`      // wait (default) or apply
	IncompleteTimeout string `yaml:"incomplete_timeout"` // on_incomplete apply: how long to wait; default 5m
	RetainEnds        int64  `yaml:"retain_ends"`        // transaction topic offsets an applied END is kept for; default 1000000
	OrphanAfter       string `yaml:"orphan_after"`       // how long an event waits for its END before it is a dead letter; default 1h
}

// Column is a column of a typed sink: a JSON column (decode.ColumnSpec),
// or, for formats debezium and connect_json, a column of records without
// a Connect schema (name, type, connect and not_null).
type Column struct {
	decode.ColumnSpec `yaml:",inline"`
	// Connect is the Connect type of a debezium or connect_json column's
	// values in records without a schema (io.debezium.time.MicroTimestamp).
	Connect string `yaml:"connect"`
}

// UnmarshalYAML decodes a sink, refusing the keys it does not know (at
// any depth) with their line, and records the sink's Line.
func (s *Sink) UnmarshalYAML(n *yaml.Node) error {
	if err := checkKeys(n, reflect.TypeFor[Sink](), ""); err != nil {
		return err
	}
	type plain Sink // without this method
	var p plain
	if err := n.Decode(&p); err != nil {
		return fmt.Errorf("sink at line %d: %w", n.Line, err)
	}
	*s = Sink(p)
	s.Line = n.Line
	for i := 0; i+1 < len(n.Content); i += 2 {
		switch n.Content[i].Value {
		case "where":
			s.whereLine = n.Content[i+1].Line
		case "children":
			s.childrenLine = n.Content[i].Line
		}
	}
	return nil
}

// keys are the YAML keys of a struct type of the configuration (Sink,
// Column, decode.MetadataSpec, cdc.SourceColumns), in field order, with
// the fields of inlined structs in their place.
func keys(t reflect.Type) []string {
	var out []string
	for f := range fields(t) {
		out = append(out, f.key)
	}
	return out
}

type field struct {
	key string
	reflect.StructField
}

// fields are the yaml-tagged fields of t, inlined ones flattened.
func fields(t reflect.Type) func(yield func(field) bool) {
	return func(yield func(field) bool) {
		for i := range t.NumField() {
			f := t.Field(i)
			tag := strings.Split(f.Tag.Get("yaml"), ",")
			if f.Anonymous && slices.Contains(tag[1:], "inline") {
				for g := range fields(f.Type) {
					if !yield(g) {
						return
					}
				}
				continue
			}
			if tag[0] == "" || tag[0] == "-" {
				continue
			}
			if !yield(field{tag[0], f}) {
				return
			}
		}
	}
}

// checkKeys refuses keys of a mapping node that the struct type does not
// know, naming the line, and recurses into nested structs and lists of
// structs; at is the path of n's keys ("", or "columns[2].").
func checkKeys(n *yaml.Node, t reflect.Type, at string) error {
	if n.Kind != yaml.MappingNode {
		return &FieldError{Field: strings.TrimSuffix(at, "."), Line: n.Line, Err: errors.New("a mapping (key: value) is expected")}
	}
	known := map[string]reflect.Type{}
	for f := range fields(t) {
		known[f.key] = f.Type
	}
	var errs []error
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		ft, ok := known[k.Value]
		if !ok {
			errs = append(errs, &FieldError{Field: at + k.Value, Line: k.Line,
				Err: fmt.Errorf("unknown key %q: use one of %s", k.Value, strings.Join(keys(t), ", "))})
			continue
		}
		switch {
		case ft.Kind() == reflect.Struct:
			errs = append(errs, checkKeys(v, ft, at+k.Value+"."))
		case ft.Kind() == reflect.Slice && ft.Elem().Kind() == reflect.Struct && v.Kind == yaml.SequenceNode:
			for j, item := range v.Content {
				errs = append(errs, checkKeys(item, ft.Elem(), fmt.Sprintf("%s%s[%d].", at, k.Value, j)))
			}
		}
	}
	return errors.Join(errs...)
}

// FieldError is a configuration error: Field is the path of what is
// wrong ("sinks[2]", "sinks[2].columns[0].nullable"), Line the line of the
// sink or key in the YAML it was decoded from (0: it was not), and Err
// says what is wrong and what to do. It is the error every package
// validating a configuration returns (stream.FieldError).
type FieldError = stream.FieldError

// Topics are the subscription of c's sinks, as reader.Config.Topics
// takes it: with no TopicRegex, the topics; with one, every topic a
// pattern (regex true): literal topics quoted, every pattern anchored.
func (c Config) Topics() (topics []string, regex bool) {
	for _, s := range c.Sinks {
		regex = regex || s.TopicRegex != ""
	}
	add := func(t string) {
		if t != "" && !slices.Contains(topics, t) {
			topics = append(topics, t)
		}
	}
	for _, s := range c.Sinks {
		t := s.Topic
		switch {
		case s.TopicRegex != "":
			t = "^(?:" + s.TopicRegex + ")$"
		case regex && t != "":
			t = "^" + regexp.QuoteMeta(t) + "$"
		}
		add(t)
	}
	for _, t := range c.transactionTopics() {
		if regex {
			t = "^" + regexp.QuoteMeta(t) + "$"
		}
		add(t)
	}
	return topics, regex
}

// Groups are the named groups of the sink's TopicRegex: the names its
// Table and Schema templates may use besides topic.
func (s Sink) Groups() []string { return groupNames(s.TopicRegex) }

// NeedsRegistry reports whether building the sink reads a schema
// registry: formats avro, protobuf and json_schema, and debezium's
// value_format avro and protobuf.
func (s Sink) NeedsRegistry() bool {
	return registryFormat(s.Format) || (changeFormat(s.Format) && registryFormat(s.ValueFormat))
}

// NeedsRegistry reports whether any of c's sinks needs a registry.
func (c Config) NeedsRegistry() bool {
	return slices.ContainsFunc(c.Sinks, Sink.NeedsRegistry)
}

func metadataEmpty(m decode.MetadataSpec) bool {
	return m.Topic == "" && m.Partition == "" && m.Offset == "" && m.Timestamp == "" && m.TimestampType == "" &&
		m.Key == "" && m.KeyFormat == "" && m.Headers == "" && len(m.Header) == 0
}
