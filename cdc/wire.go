package cdc

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/kafka2pg/kafka2pg/decode"
	"github.com/kafka2pg/kafka2pg/stream"
)

// Records of Confluent's AvroConverter and ProtobufConverter (Config.Format
// avro, protobuf) carry the Confluent wire format: a schema id, and the
// record encoded with the registry's schema of that id. That schema is the
// record's Kafka Connect schema in Avro's or Protobuf's terms; the
// decoder reads it back into the Connect schema (the Avro connect.name,
// connect.parameters and connect.type properties and logical types; the
// Protobuf well-known and Confluent types, see wire_protobuf.go), and
// turns each record into the JSON the JsonConverter would have written
// for it, which the JSON path then decodes. So an Avro or Protobuf event
// becomes the same Change as its JSON twin, with the same type table and
// the same checks, and each schema id is compiled once.

// The formats of Config.Format.
const (
	FormatJSON     = "json"
	FormatAvro     = "avro"
	FormatProtobuf = "protobuf"
)

// wireSchema is one registry schema (and Protobuf message) compiled for
// the decoder.
type wireSchema struct {
	// connect is the Connect schema as the JsonConverter writes it.
	connect []byte
	// transcode appends the JsonConverter's JSON of an encoded value.
	transcode func(dst, payload []byte) ([]byte, error)
	// bad says why the schema cannot be read; its records are bad records.
	bad string
	// row is the table's version of connect, once a record found it.
	row atomic.Pointer[version]
}

// wireSchemas caches the compiled schemas of a table by wire header.
type wireSchemas struct {
	format string
	lookup decode.SchemaLookup
	mu     sync.Mutex
	byKey  map[string]*wireSchema
	// resolved holds what resolve fetched, for schemaOf; its lock and mu
	// are never held together.
	resolved decode.ResolvedSchemas
}

// headerKey names the (schema, message) pair of a header, for byKey.
func headerKey(id int, indexes []int) string {
	key := strconv.Itoa(id)
	for _, i := range indexes {
		key += "." + strconv.Itoa(i)
	}
	return key
}

// resolve fetches with ctx the schemas of the ids records carry (values,
// and keys) that w.resolved does not hold, for schemaOf to read. It asks
// resolved, not byKey, which schemaOf may clear in the middle of a batch.
func (w *wireSchemas) resolve(ctx context.Context, records []stream.Record) error {
	w.resolved.Forget(maxVersions)
	var asked map[int]bool
	for i := range records {
		rec := &records[i]
		for _, b := range [2][]byte{rec.Value, rec.Key} {
			if b == nil {
				continue
			}
			id, _, _, err := decode.WirePayload(b, w.format == FormatProtobuf)
			if err != nil || asked[id] {
				continue
			}
			if asked == nil {
				asked = map[int]bool{}
			}
			asked[id] = true
			if err := w.resolved.Resolve(ctx, w.lookup, id); err != nil {
				return fmt.Errorf("look up schema id %d of %s/%d@%d: %w", id, rec.Topic, rec.Partition, rec.Offset, err)
			}
		}
	}
	return nil
}

// ResolveSchemas fetches with ctx (through Config.Lookup) the schemas of
// the ids records carry that d has not seen, so that Decode reads them
// without I/O; the writer calls it for each batch before its transaction.
// It does nothing for format json. A record not in the wire format, or of
// an id the registry does not know, is not an error here: Decode makes it
// a bad record. An error is the registry's (it cannot be reached).
func (d *Decoder) ResolveSchemas(ctx context.Context, records []stream.Record) error {
	if d.wire == nil {
		return nil
	}
	return d.wire.resolve(ctx, records)
}

func newWireSchemas(cfg Config) (*wireSchemas, error) {
	switch cfg.Format {
	case "", FormatJSON:
		return nil, nil
	case FormatAvro, FormatProtobuf:
	default:
		return nil, fmt.Errorf("format %q is not json, avro or protobuf", cfg.Format)
	}
	if cfg.Lookup == nil {
		return nil, fmt.Errorf("format %s reads its schemas from a Schema Registry: give a Lookup", cfg.Format)
	}
	return &wireSchemas{format: cfg.Format, lookup: cfg.Lookup, byKey: map[string]*wireSchema{}}, nil
}

// schemaOf returns the compiled schema of the wire-format bytes b (the key
// or the value: what) and its encoded value.
func (w *wireSchemas) schemaOf(rec *stream.Record, what string, b []byte) (*wireSchema, []byte, error) {
	id, indexes, payload, err := decode.WirePayload(b, w.format == FormatProtobuf)
	if err != nil {
		return nil, nil, bad(rec, "", decode.KindInvalidWireFormat, "the %s %s", what, err.Error())
	}
	key := headerKey(id, indexes)
	w.mu.Lock()
	ws, ok := w.byKey[key]
	w.mu.Unlock()
	if !ok {
		rs, err := w.resolved.Get(id)
		switch {
		case errors.Is(err, decode.ErrSchemaNotFound):
			return nil, nil, bad(rec, "", decode.KindUnknownSchema, "the %s's schema id %d is unknown to the schema registry: was the schema deleted, or the record written against another registry? %s", what, id, err.Error())
		case err != nil:
			return nil, nil, fmt.Errorf("schema id %d of %s/%d@%d: %w", id, rec.Topic, rec.Partition, rec.Offset, err)
		}
		if w.format == FormatAvro {
			ws = compileAvro(rs)
		} else {
			ws = compileProtobuf(rs, indexes)
		}
		w.mu.Lock()
		if len(w.byKey) >= maxVersions {
			clear(w.byKey)
		}
		w.byKey[key] = ws
		w.mu.Unlock()
	}
	if ws.bad != "" {
		return nil, nil, bad(rec, "", KindInvalidSchema, "the %s's schema id %d: %s", what, id, ws.bad)
	}
	return ws, payload, nil
}

// decodeWire decodes a record of format avro or protobuf.
func (d *Decoder) decodeWire(rec *stream.Record, ch *stream.Change, env *envelope) error {
	ws, payload, err := d.wire.schemaOf(rec, "value", rec.Value)
	if err != nil {
		return err
	}
	rs := d.t.getState()
	defer d.t.putState(rs)
	if rs.wireValue, err = ws.transcode(rs.wireValue[:0], payload); err != nil {
		return bad(rec, "", decode.KindInvalidWireFormat, "the value does not decode with its schema: %s", err.Error())
	}
	v := ws.row.Load()
	if v == nil {
		if v, err = d.t.version(ws.connect, envelopeRow); err != nil {
			return bad(rec, "", KindInvalidSchema, "%s", err.Error())
		}
		ws.row.Store(v)
	}
	jrec := *rec
	jrec.Value, jrec.Key = rs.wireValue, nil
	if rec.Key != nil {
		if jrec.Key, err = d.wireKey(rec, rs); err != nil {
			return err
		}
	}
	return d.decode(&jrec, ch, env, rs, v)
}

// wireKey is the record key as the JsonConverter writes it with its schema.
func (d *Decoder) wireKey(rec *stream.Record, rs *rowState) ([]byte, error) {
	ws, payload, err := d.wire.schemaOf(rec, "key", rec.Key)
	if err != nil {
		return nil, err
	}
	out := append(rs.wireKey[:0], `{"schema":`...)
	out = append(out, ws.connect...)
	out = append(out, `,"payload":`...)
	if out, err = ws.transcode(out, payload); err != nil {
		return nil, bad(rec, "", decode.KindInvalidWireFormat, "the key does not decode with its schema: %s", err.Error())
	}
	rs.wireKey = append(out, '}')
	return rs.wireKey, nil
}

// appendJSON writes s as the JsonConverter writes a schema.
func (s *connectSchema) appendJSON(dst []byte) []byte {
	dst = append(dst, `{"type":`...)
	dst = appendJSONString(dst, []byte(s.Type))
	dst = append(dst, `,"optional":`...)
	dst = strconv.AppendBool(dst, s.Optional)
	if s.Name != "" {
		dst = append(dst, `,"name":`...)
		dst = appendJSONString(dst, []byte(s.Name))
	}
	if len(s.Parameters) > 0 {
		dst = append(dst, `,"parameters":{`...)
		for i, k := range slices.Sorted(maps.Keys(s.Parameters)) {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendJSONString(dst, []byte(k))
			dst = append(dst, ':')
			dst = appendJSONString(dst, []byte(s.Parameters[k]))
		}
		dst = append(dst, '}')
	}
	if s.Field != "" {
		dst = append(dst, `,"field":`...)
		dst = appendJSONString(dst, []byte(s.Field))
	}
	switch s.Type {
	case typeStruct:
		dst = append(dst, `,"fields":[`...)
		for i, f := range s.Fields {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = f.appendJSON(dst)
		}
		dst = append(dst, ']')
	case typeArray:
		dst = append(dst, `,"items":`...)
		dst = s.Items.appendJSON(dst)
	case typeMap:
		dst = append(dst, `,"keys":`...)
		dst = s.Keys.appendJSON(dst)
		dst = append(dst, `,"values":`...)
		dst = s.Values.appendJSON(dst)
	}
	return append(dst, '}')
}
