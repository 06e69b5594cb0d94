package sinks

import (
	"reflect"
	"slices"
	"strings"

	"github.com/kafka2pg/kafka2pg/cdc"
	"github.com/kafka2pg/kafka2pg/decode"
)

// KeyGroup is one mapping of the YAML a Config decodes: a sink, one of
// its columns, its metadata, its source block.
type KeyGroup struct {
	Title  string // what the mapping is, in Markdown
	Prefix string // the keys' prefix in KeyDocs: "", "columns.", "metadata.", "source."
	Keys   []Key
}

// Key is one key of a mapping of the YAML.
type Key struct {
	Name string // as the YAML writes it
	Type string // the YAML it takes: string, bool, int, list, mapping, list of mappings
	Doc  string // what it means, in Markdown
}

// Keys lists the keys of a sink's YAML, each mapping's in the order of its
// type's fields, with their meaning: the reference of the sink model, from
// the types' yaml tags themselves.
func Keys() []KeyGroup {
	groups := []struct {
		prefix, title string
		typ           reflect.Type
	}{
		{"", "A sink (an item of `sinks`)", reflect.TypeFor[Sink]()},
		{"columns.", "A column (an item of a sink's `columns`)", reflect.TypeFor[Column]()},
		{"metadata.", "A sink's `metadata`: each key names the column that receives it", reflect.TypeFor[decode.MetadataSpec]()},
		{"source.", "A debezium sink's `source`: each key names the column that receives it", reflect.TypeFor[cdc.SourceColumns]()},
		{"partition_by.", "A sink's `partition_by`: its table partitioned by range of a time column", reflect.TypeFor[PartitionBy]()},
		{"children.", "A child table (an item of a sink's `children`)", reflect.TypeFor[ChildTable]()},
	}
	var out []KeyGroup
	for _, g := range groups {
		kg := KeyGroup{Title: g.title, Prefix: g.prefix}
		for _, f := range yamlFields(g.typ) {
			name := strings.Split(f.Tag.Get("yaml"), ",")[0]
			kg.Keys = append(kg.Keys, Key{Name: name, Type: yamlType(f.Type), Doc: KeyDocs[g.prefix+name]})
		}
		out = append(out, kg)
	}
	return out
}

// yamlFields lists the fields of t that the YAML sets, in field order,
// with the fields of an inlined struct in its place.
func yamlFields(t reflect.Type) []reflect.StructField {
	var out []reflect.StructField
	for i := range t.NumField() {
		f := t.Field(i)
		tag := strings.Split(f.Tag.Get("yaml"), ",")
		switch {
		case f.Anonymous && slices.Contains(tag[1:], "inline"):
			out = append(out, yamlFields(f.Type)...)
		case tag[0] != "" && tag[0] != "-":
			out = append(out, f)
		}
	}
	return out
}

// yamlType names the YAML a field takes.
func yamlType(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Pointer:
		return yamlType(t.Elem())
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Struct {
			return "list of mappings"
		}
		return "list"
	case reflect.Struct, reflect.Map:
		return "mapping"
	}
	return t.Kind().String()
}

// KeyDocs says what each key of a sink's YAML means, by its path in Keys
// (columns.path); a test fails when a key has none.
var KeyDocs = map[string]string{
	"topic":               "the topic this sink reads",
	"topic_regex":         "instead of topic: every topic the pattern matches (anchored), including topics created later",
	"table":               "the target table, a template of the topic: `${topic}` is its sanitized name (the default), `${topic.N}` its N-th dot-separated part as it is (1 the first, -1 the last), `${NAME}` what topic_regex's group `(?P<NAME>...)` matched; `${value.FIELD}` a field of the JSON value and `${header.KEY}` a header route each record to a table of its own, created on first use (docs/MAPPING.md, Routing by content)",
	"schema":              "the target table's schema (default: the Config's `schema`, then `public`); a template as table is",
	"format":              "`json` (default), `text` or `bytes` without columns; `avro`, `protobuf` or `json_schema` with a Schema Registry; `debezium` (change events) or `connect_json` (Kafka Connect records with their schema)",
	"mode":                "`append` (default; binary COPY) or `upsert` (the last record of each key wins); format debezium: each event's op decides",
	"key":                 "upsert: the columns that identify a row; debezium: the primary key instead of the record key's fields",
	"delete_on_tombstone": "upsert: a record with a null value deletes its key's row",
	"delete":              "`hard` (default) or `soft`: a delete marks the row (deleted_at, or deleted_flag) instead of removing it, and a later upsert of the key clears the mark; upsert with delete_on_tombstone, and debezium",
	"deleted_at":          "delete soft: the timestamptz column that takes the delete's Kafka timestamp (default `deleted_at`)",
	"deleted_flag":        "delete soft, instead of deleted_at: a boolean column, true when deleted",
	"version":             "the column that orders the changes of a key: a change applies only when its version is greater than the row's; upsert (json, registry formats, connect_json): one of the columns, or of the subject's with a registry format (integer, numeric, timestamp or date); debezium: a numeric column filled from the source position; needs delete soft when deletes happen",
	"where":               "write only the records for which the expression is true, as `value.type == \"order\"`: `value` (the JSON value; debezium's and connect_json's payload), `key` (a string) and `headers` (name → last value); deletes (tombstones of delete_on_tombstone, debezium's d and t) bypass it; formats json, debezium and connect_json",
	"create":              "create the table when missing (default true)",
	"evolve":              "add columns that appear, widen types safely; never drop or narrow",
	"columns":             "the typed columns, each `{name, path, type}` and the keys below; none: the zero-config table. debezium and connect_json: the columns of records without a Connect schema, each `{name, type}` (the field of that name fills it)",
	"metadata":            "columns for the record's Kafka metadata, each key naming its column (keys below)",
	"partition_by":        "typed JSON sinks: the table kafka2pg creates is partitioned by range of a time column, one partition per interval, made ahead and as rows need them (keys below); an upsert key must hold the column",
	"children":            "child tables, each the rows of an array of the value (keys below), written in the record's transaction; formats json with columns, avro, protobuf, json_schema and debezium (value_format json)",
	"subject":             "registry formats: the value's subject (default `<topic>-value`)",
	"key_subject":         "registry formats: the key's subject (default `<topic>-key` in upsert mode)",
	"nested":              "registry formats: nested records as `flatten` (default) columns or one `jsonb` column",
	"message":             "protobuf: the message of the schema to read (default: its first)",
	"value_format":        "debezium: the converter that wrote the events: `json` (JsonConverter, default), `avro` or `protobuf` (with a Schema Registry)",
	"source":              "debezium: columns for the envelope's source metadata, each key naming its column (keys below)",
	"unavailable_value":   "debezium, connect_json: the connector's `unavailable.value.placeholder`, which stands for an unchanged TOASTed value (default `__debezium_unavailable_value`)",
	"transactions":        "debezium: apply each source transaction whole, in the source's commit order, from Debezium's transaction metadata (`provide.transaction.metadata=true`); see docs/CDC.md",
	"transaction_topic":   "transactions: the connector's transaction topic (default `<topic.prefix>.transaction`, the prefix read from topic or topic_regex); one partition",
	"on_incomplete":       "transactions: a transaction whose events do not all arrive: `wait` (default; it and every later one wait, reported) or `apply` (after incomplete_timeout, what arrived; later events become dead letters)",
	"incomplete_timeout":  "transactions, on_incomplete apply: how long to wait (default `5m`)",
	"retain_ends":         "transactions: how many offsets of the transaction topic an applied END is kept for (default `1000000`), to know the copies a restarted connector sends again",
	"orphan_after":        "transactions: how long an event may stay staged without its transaction's END before it becomes a dead letter of kind `transaction_end_missing` (default `1h`)",

	"columns.name":       "the column's name",
	"columns.path":       "where the value is: `a.b`, `items[0].sku`, `$` for the whole document (default: the name)",
	"columns.type":       "the column's type: text, varchar(n), smallint, integer, bigint, numeric(p,s), real, double precision, boolean, timestamptz, timestamp, date, time, uuid, jsonb, bytea, inet, or an array of a scalar",
	"columns.from":       "`value` (default) or `key`: read the path in the JSON Kafka key",
	"columns.time_unit":  "for epoch numbers in time columns: `s`, `ms`, `us` or `ns`",
	"columns.not_null":   "the column is NOT NULL; a record without the value is a bad record",
	"columns.default":    "a JSON literal taken when the value is missing or null",
	"columns.on_missing": "a missing field: `null` (default), `default` (takes default) or `error` (a bad record)",
	"columns.connect":    "debezium and connect_json: the Connect type of the field's values, as `int64` or `io.debezium.time.MicroTimestamp` (default: from type)",

	"children.path":         "the array: a path of the value (debezium: of the after image; avro, protobuf and json_schema: starting with the jsonb column of the array field); a JSON string holding an array is read as that array",
	"children.table":        "the child table, a template as table is",
	"children.schema":       "the child table's schema (default: the sink's)",
	"children.index_column": "the column of the element's index in the array, from 0 (default `index`)",
	"children.columns":      "the element's typed columns, as columns are, paths relative to the element (`$`: the element itself)",

	"metadata.topic":          "column of the topic name (text)",
	"metadata.partition":      "column of the partition (integer)",
	"metadata.offset":         "column of the offset (bigint)",
	"metadata.timestamp":      "column of the record's timestamp (timestamptz)",
	"metadata.timestamp_type": "column of the timestamp's type: `CreateTime` or `LogAppendTime` (text)",
	"metadata.key":            "column of the Kafka key",
	"metadata.key_format":     "the key column's type: `text`, `bytes` or `json`",
	"metadata.headers":        "column of every header (jsonb)",
	"metadata.header":         "one column per header: header name → column name",

	"partition_by.column":   "the date, timestamp or timestamptz column whose range picks a row's partition",
	"partition_by.interval": "each partition's span: `day`, `week` (Monday to Monday) or `month` (default), bounds at midnight UTC",
	"partition_by.premake":  "how many partitions after the current one are created at every start (default 3)",

	"source.table":     "column of the source table: `schema.table` (Postgres, SQL Server) or `db.table` (MySQL) (text)",
	"source.position":  "column of the change's position in the source's log: the LSN as pg_lsn prints it, or the binlog's `file:pos` (text)",
	"source.txid":      "column of the source transaction: Postgres' txId, else MySQL's GTID, else the transaction block's id (text)",
	"source.timestamp": "column of when the source made the change, `source.ts_ms` (timestamptz)",
	"source.op":        "column of the event's op: `c`, `r`, `u` or `d` (text)",
}
