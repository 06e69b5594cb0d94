package cdc

import (
	"errors"
	"fmt"

	"github.com/kafka2pg/kafka2pg/decode"
	"github.com/kafka2pg/kafka2pg/schema"
	"github.com/kafka2pg/kafka2pg/stream"
)

// ConnectMapper maps plain Kafka Connect records (format connect_json: the
// JsonConverter's {"schema": ..., "payload": ...} of a source connector,
// or a Debezium event flattened by ExtractNewRecordState) to rows of a
// typed table derived from the payload's struct schema. It is an ingest
// TableMapper and KeyMapper: Row returns an error wrapping
// decode.ErrTableChanged when a record's schema grows the table. Records
// without a schema take the configured columns. The table's primary key is
// Config.Key's columns, none without it. Safe for concurrent use.
type ConnectMapper struct {
	t *table
}

// NewConnectMapper checks cfg (see Config).
func NewConnectMapper(cfg Config) (*ConnectMapper, error) {
	if cfg.Format != "" && cfg.Format != FormatJSON {
		return nil, fmt.Errorf("format %q: a ConnectMapper reads the JsonConverter's JSON; Avro and Protobuf records are the registry mappers' (package schema)", cfg.Format)
	}
	t, err := newTable(cfg)
	if err != nil {
		return nil, err
	}
	return &ConnectMapper{t: t}, nil
}

// Table is the target table now.
func (m *ConnectMapper) Table() schema.Table { return m.t.Table() }

// KeyColumns lists the primary key columns: Config.Key (the record key is
// not read for them).
func (m *ConnectMapper) KeyColumns() []string { return m.t.KeyColumns() }

// IsTombstone reports whether r is a tombstone: a record with a null value.
func (m *ConnectMapper) IsTombstone(r *stream.Record) bool { return r.Value == nil }

// Row appends the row of r to dst[:0] in Table's column order.
func (m *ConnectMapper) Row(rec *stream.Record, dst []any) ([]any, error) {
	var ch stream.Change
	ch.Row = dst[:0]
	if err := m.decode(rec, &ch); err != nil {
		return nil, err
	}
	if len(ch.Unavailable) > 0 {
		return nil, bad(rec, m.t.cur.Load().cols[ch.Unavailable[0]].Name, decode.KindInvalidValue, "the value is Debezium's unavailable-value placeholder, which a plain row cannot keep: use format debezium")
	}
	return ch.Row, nil
}

// KeyRow returns the key columns' values of r, from the record key, in
// KeyColumns order, for a delete on tombstone.
func (m *ConnectMapper) KeyRow(rec *stream.Record) ([]any, error) {
	l := m.t.cur.Load()
	if len(l.key) == 0 {
		return nil, errors.New("key row: the mapping has no key columns")
	}
	if rec.Key == nil {
		return nil, bad(rec, "", KindNoKey, "the record has no key")
	}
	v := m.t.fixed
	if v == nil {
		// The key's values take the types of the table's last schema
		// with the key fields.
		v = m.lastVersion(l)
		if v == nil {
			return nil, bad(rec, "", KindNoKey, "no record with a schema came before this tombstone, so the key's types are unknown")
		}
	}
	rs := m.t.getState()
	defer m.t.putState(rs)
	return m.t.recordKey(rec, &rs.kr, v, l, nil)
}

func (m *ConnectMapper) lastVersion(l *layout) *version {
	var found *version
	m.t.versions.Range(func(_, x any) bool {
		v := x.(*version)
		for _, k := range l.key {
			if v.row.field(k) == nil {
				return true
			}
		}
		found = v
		return false
	})
	return found
}

// decode maps a record's value into ch.Row.
func (m *ConnectMapper) decode(rec *stream.Record, ch *stream.Change) error {
	t := m.t
	if rec.Value == nil {
		return bad(rec, "", decode.KindTombstone, "the record is a tombstone (null value): set delete_on_tombstone with key columns")
	}
	rs := t.getState()
	defer t.putState(rs)
	r := &rs.r
	schemaText, v, payloadAt, rerr := wrapperParts(r, rec.Value, t)
	if rerr != nil {
		return bad(rec, "", rerr.kind, "the value %s", rerr.msg)
	}
	switch {
	case v != nil:
	case payloadAt >= 0 && schemaText != nil:
		var err error
		if v, err = t.version(schemaText, payloadRow); err != nil {
			return bad(rec, "", KindInvalidSchema, "%s", err.Error())
		}
	case t.fixed != nil:
		v = t.fixed
	default:
		return bad(rec, "", KindInvalidSchema, "the record has no Connect schema (schemas.enable=false) and the mapping configures no columns: configure the columns, or enable schemas on the converter")
	}
	r.reset(rec.Value)
	if payloadAt >= 0 {
		r.i = payloadAt
	}
	n := len(v.row.fields)
	rs.vals, rs.unavail = grow(rs.vals, n), growBool(rs.unavail, n)
	if field, cerr := t.readRow(r, v, rs.vals, rs.unavail, nil); cerr != nil {
		return bad(rec, field, cerr.kind, "%s", cerr.msg)
	}
	if !v.folded.Load() {
		// The key is Config.Key's alone: a plain record's key (often a
		// string) says nothing of the table's, and appended rows must not
		// get a primary key they may repeat.
		changed, err := t.fold(v, nil)
		if err != nil {
			return err
		}
		if v.bad == "" {
			v.folded.Store(true)
		}
		if changed {
			return fmt.Errorf("%s/%d@%d: the record's schema changes the table %s: %w", rec.Topic, rec.Partition, rec.Offset, t.cfg.Table, decode.ErrTableChanged)
		}
	}
	if v.bad != "" {
		return bad(rec, "", decode.KindSchemaIncompatible, "%s", v.bad)
	}
	l := t.cur.Load()
	var kafka []any
	if t.kafka != nil {
		var err error
		if kafka, err = t.kafka.Row(rec, nil); err != nil {
			return err
		}
	}
	ch.Op = stream.OpUpsert
	// A plain record has no envelope: its source columns are NULL.
	ch.Row = t.assemble(ch.Row, l, v, rs.vals, rs.unavail, rec, &envelope{}, kafka, ch)
	return checkNotNull(rec, l, ch.Row, ch)
}

// payloadRow is the row struct of a connect_json schema: the schema itself.
func payloadRow(s *connectSchema) (*connectSchema, error) {
	if s.Type != typeStruct {
		return nil, fmt.Errorf("the record's schema is %s, not a struct: a table needs named fields", s.describe())
	}
	return s, nil
}
