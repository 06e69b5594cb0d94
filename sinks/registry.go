package sinks

import (
	"context"
	"errors"
	"fmt"

	"github.com/kafka2pg/kafka2pg/decode"
	"github.com/kafka2pg/kafka2pg/ingest"
	"github.com/kafka2pg/kafka2pg/registry"
)

// registryFormat reports whether a sink format reads the Confluent wire
// format with schemas from the registry.
func registryFormat(format string) bool {
	_, err := decode.ParseFormat(format)
	return err == nil
}

// versions fetches every version of a subject with ctx, naming the sink's
// key in its error.
func (b builder) versions(ctx context.Context, subject, key string) ([]decode.RegisteredSchema, error) {
	vs, err := b.reg.Versions(ctx, subject)
	switch {
	case errors.Is(err, registry.ErrSubjectNotFound):
		return nil, fmt.Errorf("%s %q is not in the schema registry: register the schema first, or set the sink's %s", key, subject, key)
	case err != nil:
		return nil, fmt.Errorf("%s %q: %w", key, subject, err)
	case len(vs) == 0:
		return nil, fmt.Errorf("%s %q has no versions: register a schema first", key, subject)
	}
	return vs, nil
}

// registrySink builds the sink of a format avro, protobuf or json_schema
// sink: its table is the fold of the subject's versions (<topic>-value,
// or subject), its key columns come from <topic>-key (or key_subject) in
// upsert mode or when key_subject is set. A check (b.check) checks the
// config alone and returns errRegistryLater.
func (b builder) registrySink(ctx context.Context, sc Sink, schemaName, table, mode string, noCreate bool) (ingest.Sink, error) {
	switch {
	case len(sc.Columns) > 0:
		return ingest.Sink{}, keyErr("columns", fmt.Errorf("columns with format %s: the columns come from the registry's schema; drop columns (metadata columns stay allowed)", sc.Format))
	case mode == "upsert" && len(sc.Key) == 0:
		return ingest.Sink{}, keyErr("key", errors.New("mode upsert needs key: the columns that identify a row (the key's fields are key_<field>, or key)"))
	case mode != "upsert" && (len(sc.Key) > 0 || sc.DeleteOnTombstone):
		return ingest.Sink{}, keyErr("mode", errors.New("key and delete_on_tombstone need mode: upsert"))
	}
	deleted, err := deletedOf(sc)
	if err != nil {
		return ingest.Sink{}, err
	}
	if err := checkGuardMode(sc, mode, deleted); err != nil {
		return ingest.Sink{}, err
	}
	format, _ := decode.ParseFormat(sc.Format) // a registry format: the caller asked registryFormat
	var nested decode.Nested
	if sc.Nested != "" {
		var err error
		if nested, err = decode.ParseNested(sc.Nested); err != nil {
			return ingest.Sink{}, keyErr("nested", fmt.Errorf("nested %q is not flatten or jsonb", sc.Nested))
		}
	}
	if sc.Message != "" && format != decode.FormatProtobuf {
		return ingest.Sink{}, keyErr("message", fmt.Errorf("message %q is for format protobuf: remove it", sc.Message))
	}
	switch {
	case b.check:
		return ingest.Sink{}, errRegistryLater
	case b.reg == nil:
		return ingest.Sink{}, keyErr("format", errNoRegistry("format", sc.Format))
	}
	subject := sc.Subject
	if subject == "" {
		subject = sc.Topic + "-value"
	}
	value, err := b.versions(ctx, subject, "subject")
	if err != nil {
		return ingest.Sink{}, keyErr("subject", err)
	}
	var key []decode.RegisteredSchema
	if mode == "upsert" || sc.KeySubject != "" {
		ks := sc.KeySubject
		if ks == "" {
			ks = sc.Topic + "-key"
		}
		if key, err = b.versions(ctx, ks, "key_subject"); err != nil {
			return ingest.Sink{}, keyErr("key_subject", err)
		}
	}
	m, err := decode.NewRegistryMapper(decode.RegistryMappingSpec{Format: format, Schema: schemaName, Table: table,
		Value: value, Key: key, Message: sc.Message, Nested: nested, KeyColumns: sc.Key, DeleteOnTombstone: sc.DeleteOnTombstone,
		Lookup: b.reg.Lookup(), Metadata: sc.Metadata})
	if err != nil {
		return ingest.Sink{}, fmt.Errorf("subject %q: %w", subject, err)
	}
	sink := ingest.Sink{Table: m.Table(), Mapper: m, NoCreate: noCreate, Evolve: true}
	if mode == "upsert" {
		sink.Upsert = &ingest.Upsert{Key: m.KeyColumns(), DeleteOnTombstone: sc.DeleteOnTombstone}
	}
	return guardedRegistry(sc, sink, m, deleted)
}
