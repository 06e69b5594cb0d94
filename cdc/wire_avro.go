package cdc

import (
	"encoding/base64"
	"fmt"
	"strconv"

	"github.com/hamba/avro/v2"

	"github.com/kafka2pg/kafka2pg/decode"
)

// Avro, as Confluent's AvroConverter writes a Connect schema: a struct is a
// record, an optional field a union of null and its type, int8 and int16
// an int with connect.type, and the schema's name and parameters the
// connect.name and connect.parameters properties; Decimal is also bytes of
// logicalType decimal, and Date, Time and Timestamp are int date, int
// time-millis and long timestamp-millis. An Avro schema that no Connect
// schema made reads the same way: its logical types take the Connect or
// Debezium type of the same meaning, a record's full name is its name.

// compileAvro compiles a registered Avro schema.
func compileAvro(rs decode.RegisteredSchema) *wireSchema {
	s, err := decode.ParseAvro(rs)
	if err != nil {
		return &wireSchema{bad: err.Error()}
	}
	c := &avroConnect{}
	cs, tr, err := c.convert(s, "", 0)
	if err != nil {
		return &wireSchema{bad: err.Error()}
	}
	return &wireSchema{connect: cs.appendJSON(nil), transcode: func(dst, payload []byte) ([]byte, error) {
		r := &avroIn{Reader: avro.NewReader(nil, 0).Reset(payload), items: len(payload)}
		dst = tr(r, dst)
		if r.Error != nil {
			return nil, r.Error
		}
		return dst, nil
	}}
}

// avroIn reads one value. items bounds the array and map items it may
// still read: a block's count is the writer's word, and a count past the
// bytes left could only be read by looping without end.
type avroIn struct {
	*avro.Reader
	items int
}

// blocks reads the blocks of an array or map, calling item for each item
// until an error.
func (r *avroIn) blocks(item func()) {
	for r.Error == nil {
		n, _ := r.ReadBlockHeader()
		if n == 0 || r.Error != nil {
			return
		}
		if n > int64(r.items) {
			r.ReportError("read block", "the block has more items than the value has bytes")
			return
		}
		r.items -= int(n)
		for range n {
			if item(); r.Error != nil {
				return
			}
		}
	}
}

// avroTranscoder appends the JsonConverter's JSON of the value r is at.
type avroTranscoder func(r *avroIn, dst []byte) []byte

type avroConnect struct {
	// records are the transcoders of the named records being converted,
	// for the ones that refer to themselves.
	records map[string]*avroTranscoder
}

// convert converts an Avro schema into its Connect schema (field names the
// field) and its transcoder.
func (c *avroConnect) convert(s avro.Schema, field string, depth int) (*connectSchema, avroTranscoder, error) {
	if depth > maxSchemaDepth {
		return nil, nil, fmt.Errorf("the Avro schema nests deeper than %d levels at %s", maxSchemaDepth, field)
	}
	if ref, ok := s.(*avro.RefSchema); ok {
		s = ref.Schema()
	}
	cs := &connectSchema{Field: field}
	if p, ok := s.(interface{ Prop(string) any }); ok {
		if name, ok := p.Prop("connect.name").(string); ok {
			cs.Name = name
		}
		if params, ok := p.Prop("connect.parameters").(map[string]any); ok {
			cs.Parameters = make(map[string]string, len(params))
			for k, v := range params {
				cs.Parameters[k] = fmt.Sprint(v)
			}
		}
	}
	switch s := s.(type) {
	case *avro.RecordSchema:
		return c.record(s, cs, depth)
	case *avro.UnionSchema:
		return c.union(s, field, depth)
	case *avro.ArraySchema:
		items, tr, err := c.convert(s.Items(), "", depth+1)
		if err != nil {
			return nil, nil, err
		}
		cs.Type, cs.Items = typeArray, items
		return cs, func(r *avroIn, dst []byte) []byte {
			dst = append(dst, '[')
			first := true
			r.blocks(func() {
				if !first {
					dst = append(dst, ',')
				}
				first = false
				dst = tr(r, dst)
			})
			return append(dst, ']')
		}, nil
	case *avro.MapSchema:
		values, tr, err := c.convert(s.Values(), "", depth+1)
		if err != nil {
			return nil, nil, err
		}
		cs.Type, cs.Keys, cs.Values = typeMap, &connectSchema{Type: typeString}, values
		return cs, func(r *avroIn, dst []byte) []byte {
			dst = append(dst, '{')
			first := true
			r.blocks(func() {
				if !first {
					dst = append(dst, ',')
				}
				first = false
				dst = appendJSONString(dst, r.ReadBytes())
				dst = append(dst, ':')
				dst = tr(r, dst)
			})
			return append(dst, '}')
		}, nil
	case *avro.EnumSchema:
		cs.Type = typeString
		return cs, func(r *avroIn, dst []byte) []byte {
			sym, ok := s.Symbol(int(r.ReadInt()))
			if !ok {
				r.ReportError("read enum", "the index is no symbol of "+s.FullName())
				return dst
			}
			return appendJSONString(dst, []byte(sym))
		}, nil
	case *avro.FixedSchema:
		cs.Type = typeBytes
		if d, ok := s.Logical().(*avro.DecimalLogicalSchema); ok && d != nil {
			decimalOf(cs, d)
		}
		size := s.Size()
		return cs, func(r *avroIn, dst []byte) []byte {
			b := make([]byte, size)
			r.Read(b)
			return appendBase64(dst, b)
		}, nil
	case *avro.PrimitiveSchema:
		return c.primitive(s, cs)
	}
	return nil, nil, fmt.Errorf("field %q: the Avro type %s has no Kafka Connect type", field, s.Type())
}

func (c *avroConnect) record(s *avro.RecordSchema, cs *connectSchema, depth int) (*connectSchema, avroTranscoder, error) {
	if cs.Name == "" {
		cs.Name = s.FullName()
	}
	cs.Type = typeStruct
	if c.records == nil {
		c.records = map[string]*avroTranscoder{}
	}
	if _, ok := c.records[s.FullName()]; ok {
		return nil, nil, fmt.Errorf("record %s contains itself, which no Kafka Connect struct can", s.FullName())
	}
	self := new(avroTranscoder)
	c.records[s.FullName()] = self
	defer delete(c.records, s.FullName())
	names := make([][]byte, len(s.Fields()))
	trs := make([]avroTranscoder, len(s.Fields()))
	for i, f := range s.Fields() {
		fs, tr, err := c.convert(f.Type(), f.Name(), depth+1)
		if err != nil {
			return nil, nil, err
		}
		cs.Fields = append(cs.Fields, fs)
		names[i] = appendJSONString(nil, []byte(f.Name()))
		trs[i] = tr
	}
	*self = func(r *avroIn, dst []byte) []byte {
		dst = append(dst, '{')
		for i, tr := range trs {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = append(append(dst, names[i]...), ':')
			if dst = tr(r, dst); r.Error != nil {
				return dst
			}
		}
		return append(dst, '}')
	}
	return cs, *self, nil
}

// union converts [null, T] (either order) into an optional T; any other
// union into a struct of one optional field per branch, as the
// AvroConverter does, of which a value sets one.
func (c *avroConnect) union(s *avro.UnionSchema, field string, depth int) (*connectSchema, avroTranscoder, error) {
	types := s.Types()
	if s.Nullable() && len(types) == 2 {
		null, typ := s.Indices()
		cs, tr, err := c.convert(types[typ], field, depth+1)
		if err != nil {
			return nil, nil, err
		}
		cs.Optional = true
		return cs, func(r *avroIn, dst []byte) []byte {
			switch i := r.ReadLong(); {
			case i == int64(null):
				return append(dst, "null"...)
			case i == int64(typ):
				return tr(r, dst)
			}
			r.ReportError("read union", "the branch index is not in the union")
			return dst
		}, nil
	}
	cs := &connectSchema{Type: typeStruct, Name: "io.confluent.connect.avro.Union", Field: field}
	trs := make([]avroTranscoder, len(types))
	names := make([][]byte, len(types))
	for i, t := range types {
		if t.Type() == avro.Null {
			continue
		}
		name := string(t.Type())
		if n, ok := t.(avro.NamedSchema); ok {
			name = n.FullName()
		}
		fs, tr, err := c.convert(t, name, depth+1)
		if err != nil {
			return nil, nil, err
		}
		fs.Optional = true
		cs.Fields = append(cs.Fields, fs)
		trs[i], names[i] = tr, appendJSONString(nil, []byte(name))
	}
	cs.Optional = s.Nullable()
	return cs, func(r *avroIn, dst []byte) []byte {
		i := r.ReadLong()
		switch {
		case i < 0 || i >= int64(len(types)):
			r.ReportError("read union", "the branch index is not in the union")
			return dst
		case trs[i] == nil:
			return append(dst, "null"...)
		}
		dst = append(append(append(dst, '{'), names[i]...), ':')
		return append(trs[i](r, dst), '}')
	}, nil
}

// avroLogical maps the Avro logical types that no Connect schema carries
// to the Connect or Debezium type of their meaning.
var avroLogical = map[string]string{
	"int/date":                    "org.apache.kafka.connect.data.Date",
	"int/time-millis":             "org.apache.kafka.connect.data.Time",
	"long/timestamp-millis":       "org.apache.kafka.connect.data.Timestamp",
	"long/time-micros":            "io.debezium.time.MicroTime",
	"long/timestamp-micros":       "io.debezium.time.MicroTimestamp",
	"long/local-timestamp-millis": "io.debezium.time.Timestamp",
	"long/local-timestamp-micros": "io.debezium.time.MicroTimestamp",
	"string/uuid":                 "io.debezium.data.Uuid",
}

func (c *avroConnect) primitive(s *avro.PrimitiveSchema, cs *connectSchema) (*connectSchema, avroTranscoder, error) {
	if l := s.Logical(); l != nil && cs.Name == "" {
		if d, ok := l.(*avro.DecimalLogicalSchema); ok {
			decimalOf(cs, d)
		} else {
			cs.Name = avroLogical[string(s.Type())+"/"+string(l.Type())]
		}
	} else if d, ok := l.(*avro.DecimalLogicalSchema); ok && cs.Parameters["scale"] == "" {
		decimalOf(cs, d)
	}
	switch s.Type() {
	case avro.Int:
		cs.Type = typeInt32
		if p, _ := s.Prop("connect.type").(string); p == typeInt8 || p == typeInt16 {
			cs.Type = p
		}
		return cs, func(r *avroIn, dst []byte) []byte { return strconv.AppendInt(dst, int64(r.ReadInt()), 10) }, nil
	case avro.Long:
		cs.Type = typeInt64
		return cs, func(r *avroIn, dst []byte) []byte { return strconv.AppendInt(dst, r.ReadLong(), 10) }, nil
	case avro.Float:
		cs.Type = typeFloat32
		return cs, func(r *avroIn, dst []byte) []byte { return appendJSONFloat(dst, float64(r.ReadFloat()), 32) }, nil
	case avro.Double:
		cs.Type = typeFloat64
		return cs, func(r *avroIn, dst []byte) []byte { return appendJSONFloat(dst, r.ReadDouble(), 64) }, nil
	case avro.Boolean:
		cs.Type = typeBoolean
		return cs, func(r *avroIn, dst []byte) []byte { return strconv.AppendBool(dst, r.ReadBool()) }, nil
	case avro.String:
		cs.Type = typeString
		return cs, func(r *avroIn, dst []byte) []byte { return appendJSONString(dst, r.ReadBytes()) }, nil
	case avro.Bytes:
		cs.Type = typeBytes
		return cs, func(r *avroIn, dst []byte) []byte { return appendBase64(dst, r.ReadBytes()) }, nil
	}
	return nil, nil, fmt.Errorf("field %q: the Avro type %s has no Kafka Connect type", cs.Field, s.Type())
}

// decimalOf makes cs a Connect Decimal of an Avro decimal's scale and
// precision.
func decimalOf(cs *connectSchema, d *avro.DecimalLogicalSchema) {
	cs.Name = "org.apache.kafka.connect.data.Decimal"
	if cs.Parameters == nil {
		cs.Parameters = map[string]string{}
	}
	cs.Parameters["scale"] = strconv.Itoa(d.Scale())
	if _, ok := cs.Parameters["connect.decimal.precision"]; !ok && d.Precision() > 0 {
		cs.Parameters["connect.decimal.precision"] = strconv.Itoa(d.Precision())
	}
}

// appendBase64 writes bytes as the JsonConverter does: standard base64.
func appendBase64(dst, b []byte) []byte {
	dst = append(dst, '"')
	dst = base64.StdEncoding.AppendEncode(dst, b)
	return append(dst, '"')
}
