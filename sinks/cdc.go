package sinks

import (
	"context"
	"errors"
	"fmt"

	"github.com/kafka2pg/kafka2pg/cdc"
	"github.com/kafka2pg/kafka2pg/decode"
	"github.com/kafka2pg/kafka2pg/ingest"
)

// The sink formats of Kafka Connect records (package cdc):
//
//   - debezium: Debezium's change events. The envelope says what each
//     record does, so the sink's behaviour is not configured: c (create),
//     r (snapshot read) and u (update) upsert the after row by its key (an
//     update that changes the key deletes the old key first); d deletes by
//     the key; t truncates the table; the tombstone after a delete and m
//     (a logical decoding message) change nothing. The table and its
//     primary key come from the events' Connect schema and the record
//     key's (key overrides the key), and the table evolves with the
//     schema; without a schema (schemas.enable=false) columns type the
//     after row's fields. value_format json (JsonConverter, default), avro
//     or protobuf (Confluent's converters, through the Schema Registry).
//   - connect_json: plain Kafka Connect records (a source connector's, or
//     Debezium's flattened by ExtractNewRecordState) with the JsonConverter:
//     a typed table from each record's schema, appended (mode append) or
//     upserted by key (mode upsert, delete_on_tombstone as for json).
const (
	formatDebezium    = "debezium"
	formatConnectJSON = "connect_json"
)

// changeFormat reports whether a sink format is read by package cdc.
func changeFormat(format string) bool {
	return format == formatDebezium || format == formatConnectJSON
}

// changeSink builds a debezium or connect_json sink for the table
// (schema-qualified by schemaName) routing gave its topic.
func (b builder) changeSink(sc Sink, schemaName, table string) (ingest.Sink, error) {
	if err := checkChangeSink(sc); err != nil {
		return ingest.Sink{}, err
	}
	cfg := cdc.Config{Schema: schemaName, Table: table, Key: sc.Key, UnavailableValue: sc.UnavailableValue,
		Source: sc.Source, Kafka: sc.Metadata}
	for _, c := range sc.Columns {
		cfg.Columns = append(cfg.Columns, cdc.Column{Name: c.Name, Type: c.Type, Connect: c.Connect, NotNull: c.NotNull})
	}
	noCreate := sc.Create != nil && !*sc.Create
	var deleted *ingest.Deleted
	if sc.Format == formatDebezium {
		var err error
		if deleted, err = debeziumGuard(sc); err != nil {
			return ingest.Sink{}, err
		}
		if deleted != nil {
			cfg.Deleted, cfg.DeletedFlag = deleted.Column, deleted.Flag
		}
		cfg.Version = sc.Version
	}
	if sc.Format == formatConnectJSON {
		m, err := cdc.NewConnectMapper(cfg)
		if err != nil {
			return ingest.Sink{}, err
		}
		sink := ingest.Sink{Table: m.Table(), Mapper: m, NoCreate: noCreate, Evolve: true}
		if sc.Mode == "upsert" {
			sink.Upsert = &ingest.Upsert{Key: m.KeyColumns(), DeleteOnTombstone: sc.DeleteOnTombstone}
		}
		return guardedConnect(sc, sink, m)
	}
	var later bool
	switch sc.ValueFormat {
	case "", "json":
	case decode.FormatAvro.String(), decode.FormatProtobuf.String():
		cfg.Format = sc.ValueFormat
		switch {
		case b.check:
			// Checked with a lookup that is never called.
			later = true
			cfg.Lookup = func(context.Context, int) (decode.RegisteredSchema, error) {
				return decode.RegisteredSchema{}, errRegistryLater
			}
		case b.reg == nil:
			return ingest.Sink{}, keyErr("value_format", errNoRegistry("value_format", sc.ValueFormat))
		default:
			cfg.Lookup = b.reg.Lookup()
		}
	default:
		return ingest.Sink{}, keyErr("value_format", fmt.Errorf("value_format %q is not json, avro or protobuf: the converter that wrote the events (JsonConverter, AvroConverter, ProtobufConverter)", sc.ValueFormat))
	}
	d, err := cdc.NewDecoder(cfg)
	if err != nil {
		return ingest.Sink{}, err
	}
	if later {
		return ingest.Sink{}, errRegistryLater
	}
	sink := ingest.Sink{Table: d.Table(), Changes: d, NoCreate: noCreate, Evolve: true, Deleted: deleted, Version: sc.Version}
	if sc.Transactions {
		topic, err := transactionTopic(sc)
		if err != nil {
			return ingest.Sink{}, err
		}
		sink.Transactions = &ingest.Transactions{Source: topic}
	}
	return sink, nil
}

// checkChangeSink refuses the keys a debezium or connect_json sink does
// not take, saying what the format does instead.
func checkChangeSink(sc Sink) error {
	var errs []error
	if sc.Subject != "" || sc.KeySubject != "" || sc.Nested != "" || sc.Message != "" {
		errs = append(errs, fmt.Errorf("subject, key_subject, nested and message are for formats avro, protobuf and json_schema: format %s finds each record's schema by its id, and maps nested structs to jsonb; remove them", sc.Format))
	}
	for j, c := range sc.Columns {
		col := fmt.Sprintf("columns[%d]", j)
		if c.Path != "" || c.From != "" || c.TimeUnit != "" || c.Default != nil || c.OnMissing != "" {
			errs = append(errs, keyErr(col, fmt.Errorf("column %q: format %s columns take name, type, connect and not_null: the field of the same name fills each (path, from, time_unit, default and on_missing are for format json)", c.Name, sc.Format)))
		}
		if c.Type == "" && c.Connect == "" {
			errs = append(errs, keyErr(col, fmt.Errorf("column %q: give its type (an SQL type) or connect (the Connect type of its values, e.g. io.debezium.time.MicroTimestamp), or both", c.Name)))
		}
	}
	errs = append(errs, checkTransactions(sc)...)
	switch sc.Format {
	case formatDebezium:
		if sc.Mode != "" && sc.Mode != "upsert" {
			errs = append(errs, keyErr("mode", fmt.Errorf("mode %q: format debezium applies each event as its op says (c, r and u upsert by key, d deletes, t truncates): remove mode", sc.Mode)))
		}
		if sc.DeleteOnTombstone {
			errs = append(errs, keyErr("delete_on_tombstone", errors.New("delete_on_tombstone: format debezium deletes on d events, and the tombstone after one changes nothing: remove it")))
		}
	case formatConnectJSON:
		if sc.ValueFormat != "" && sc.ValueFormat != "json" {
			errs = append(errs, keyErr("value_format", fmt.Errorf("value_format %q: format connect_json reads the JsonConverter's JSON; records of the AvroConverter or ProtobufConverter are format avro or protobuf", sc.ValueFormat)))
		}
		if sc.Source != (cdc.SourceColumns{}) {
			errs = append(errs, keyErr("source", errors.New("source: format connect_json has no envelope and no source block; a Debezium envelope is format debezium")))
		}
		switch sc.Mode {
		case "", "append":
			if len(sc.Key) > 0 || sc.DeleteOnTombstone {
				errs = append(errs, keyErr("mode", errors.New("key and delete_on_tombstone need mode: upsert")))
			}
		case "upsert":
			if len(sc.Key) == 0 {
				errs = append(errs, keyErr("key", errors.New("mode upsert needs key: the columns that identify a row")))
			}
			for _, k := range sc.Key {
				if !hasColumn(sc.Columns, k) {
					errs = append(errs, keyErr("key", fmt.Errorf("key column %q is not in columns: mode upsert of format connect_json creates the table and its key before the first record, so type the key columns in columns", k)))
				}
			}
		default:
			errs = append(errs, keyErr("mode", fmt.Errorf("mode %q is not append or upsert", sc.Mode)))
		}
	}
	return errors.Join(errs...)
}

func hasColumn(cols []Column, name string) bool {
	for _, c := range cols {
		if c.Name == name {
			return true
		}
	}
	return false
}
