package cdc

import (
	"fmt"
	"strconv"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"

	"github.com/kafka2pg/kafka2pg/decode"
)

// Protobuf, as Confluent's ProtobufConverter writes a Connect schema: a
// struct is a message, int8 and int16 an int32 whose field option
// (confluent.field_meta) says connect.type, and Decimal, Date, Time and
// Timestamp are confluent.type.Decimal, google.type.Date,
// google.type.TimeOfDay and google.protobuf.Timestamp. The converter keeps
// no other schema name: a Debezium semantic type of a primitive (a
// MicroTimestamp, a Json) arrives as its primitive (bigint, text), which
// Debezium's time.precision.mode=connect avoids for the times; its struct
// types keep their message's name (VariableScaleDecimal, Point, Geometry).
// A proto3 field without presence cannot say null: unless the converter
// sets optional.for.nullables or wrapper.for.nullables, a NULL arrives as
// the zero value. Such fields map to nullable columns all the same (the
// zero is a value, and a later schema may add presence); a field with
// presence (optional, a message, a wrapper, a oneof member) is null when
// it is not set. A Decimal takes its scale from each value, so its column
// is numeric.

// compileProtobuf compiles a registered Protobuf schema's message.
func compileProtobuf(rs decode.RegisteredSchema, indexes []int) *wireSchema {
	md, err := decode.ProtobufMessage(rs, indexes, "")
	if err != nil {
		return &wireSchema{bad: err.Error()}
	}
	c := &protoConnect{inProgress: map[protoreflect.FullName]bool{}}
	cs, tr, err := c.message(md, "", 0)
	if err != nil {
		return &wireSchema{bad: err.Error()}
	}
	return &wireSchema{connect: cs.appendJSON(nil), transcode: func(dst, payload []byte) ([]byte, error) {
		m := dynamicpb.NewMessage(md)
		if err := decode.UnmarshalProtobuf(payload, m); err != nil {
			return nil, err
		}
		return tr(m, dst), nil
	}}
}

// protoMessageTranscoder appends the JsonConverter's JSON of a message;
// protoValueTranscoder of one value.
type (
	protoMessageTranscoder func(m protoreflect.Message, dst []byte) []byte
	protoValueTranscoder   func(v protoreflect.Value, dst []byte) []byte
)

type protoConnect struct {
	inProgress map[protoreflect.FullName]bool
}

// protoStructNames are the Debezium struct types whose messages keep only
// their simple name through the ProtobufConverter.
var protoStructNames = map[protoreflect.Name]string{
	"VariableScaleDecimal": "io.debezium.data.VariableScaleDecimal",
	"Geometry":             "io.debezium.data.geometry.Geometry",
	"Geography":            "io.debezium.data.geometry.Geography",
	"Point":                "io.debezium.data.geometry.Point",
}

// message converts a message into a Connect struct (field names the
// field).
func (c *protoConnect) message(md protoreflect.MessageDescriptor, field string, depth int) (*connectSchema, protoMessageTranscoder, error) {
	if depth > maxSchemaDepth {
		return nil, nil, fmt.Errorf("the Protobuf schema nests deeper than %d levels at %s", maxSchemaDepth, field)
	}
	if c.inProgress[md.FullName()] {
		return nil, nil, fmt.Errorf("message %s contains itself, which no Kafka Connect struct can", md.FullName())
	}
	c.inProgress[md.FullName()] = true
	defer delete(c.inProgress, md.FullName())
	cs := &connectSchema{Type: typeStruct, Name: string(md.FullName()), Field: field}
	if n, ok := protoStructNames[md.Name()]; ok {
		cs.Name = n
	}
	fields := md.Fields()
	names := make([][]byte, fields.Len())
	trs := make([]protoValueTranscoder, fields.Len())
	for i := range fields.Len() {
		fd := fields.Get(i)
		fs, tr, err := c.field(fd, depth+1)
		if err != nil {
			return nil, nil, err
		}
		cs.Fields = append(cs.Fields, fs)
		names[i], trs[i] = appendJSONString(nil, []byte(fd.Name())), tr
	}
	return cs, func(m protoreflect.Message, dst []byte) []byte {
		dst = append(dst, '{')
		for i := range fields.Len() {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = append(append(dst, names[i]...), ':')
			fd := fields.Get(i)
			if fd.HasPresence() && !m.Has(fd) {
				dst = append(dst, "null"...)
				continue
			}
			dst = trs[i](m.Get(fd), dst)
		}
		return append(dst, '}')
	}, nil
}

// field converts a field: a list is an array, a map a map, a value with
// presence optional.
func (c *protoConnect) field(fd protoreflect.FieldDescriptor, depth int) (*connectSchema, protoValueTranscoder, error) {
	name := string(fd.Name())
	switch {
	case fd.IsMap():
		keys, ktr, err := c.value(fd.MapKey(), "", depth)
		if err != nil {
			return nil, nil, err
		}
		values, vtr, err := c.value(fd.MapValue(), "", depth)
		if err != nil {
			return nil, nil, err
		}
		cs := &connectSchema{Type: typeMap, Optional: true, Field: name, Keys: keys, Values: values}
		stringKeys := keys.Type == typeString
		return cs, func(v protoreflect.Value, dst []byte) []byte {
			// A map with string keys is an object, any other an array of
			// [key, value] pairs, as the JsonConverter writes them.
			open, kv, end := byte('{'), byte(':'), byte('}')
			if !stringKeys {
				open, kv, end = '[', ',', ']'
			}
			dst = append(dst, open)
			first := true
			v.Map().Range(func(k protoreflect.MapKey, x protoreflect.Value) bool {
				if !first {
					dst = append(dst, ',')
				}
				first = false
				if !stringKeys {
					dst = append(dst, '[')
				}
				dst = append(ktr(k.Value(), dst), kv)
				dst = vtr(x, dst)
				if !stringKeys {
					dst = append(dst, ']')
				}
				return true
			})
			return append(dst, end)
		}, nil
	case fd.IsList():
		items, tr, err := c.value(fd, "", depth)
		if err != nil {
			return nil, nil, err
		}
		items.Optional = false
		return &connectSchema{Type: typeArray, Optional: true, Field: name, Items: items}, func(v protoreflect.Value, dst []byte) []byte {
			dst = append(dst, '[')
			l := v.List()
			for i := range l.Len() {
				if i > 0 {
					dst = append(dst, ',')
				}
				dst = tr(l.Get(i), dst)
			}
			return append(dst, ']')
		}, nil
	}
	cs, tr, err := c.value(fd, name, depth)
	if err != nil {
		return nil, nil, err
	}
	cs.Optional = true // see the comment at the top
	if p := connectTypeOption(fd); fd.Kind() == protoreflect.Int32Kind && (p == typeInt8 || p == typeInt16) {
		cs.Type = p
	}
	return cs, tr, nil
}

// value converts one value of a field's kind.
func (c *protoConnect) value(fd protoreflect.FieldDescriptor, field string, depth int) (*connectSchema, protoValueTranscoder, error) {
	cs := &connectSchema{Field: field}
	num := func(v protoreflect.Value, dst []byte) []byte { return strconv.AppendInt(dst, v.Int(), 10) }
	switch fd.Kind() {
	case protoreflect.BoolKind:
		cs.Type = typeBoolean
		return cs, func(v protoreflect.Value, dst []byte) []byte { return strconv.AppendBool(dst, v.Bool()) }, nil
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
		cs.Type = typeInt32
		return cs, num, nil
	case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		cs.Type = typeInt64
		return cs, num, nil
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind, protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		// A uint64 past int64 is refused as out of range, not wrapped.
		cs.Type = typeInt64
		return cs, func(v protoreflect.Value, dst []byte) []byte { return strconv.AppendUint(dst, v.Uint(), 10) }, nil
	case protoreflect.FloatKind:
		cs.Type = typeFloat32
		return cs, func(v protoreflect.Value, dst []byte) []byte { return appendJSONFloat(dst, v.Float(), 32) }, nil
	case protoreflect.DoubleKind:
		cs.Type = typeFloat64
		return cs, func(v protoreflect.Value, dst []byte) []byte { return appendJSONFloat(dst, v.Float(), 64) }, nil
	case protoreflect.StringKind:
		cs.Type = typeString
		return cs, func(v protoreflect.Value, dst []byte) []byte { return appendJSONString(dst, []byte(v.String())) }, nil
	case protoreflect.BytesKind:
		cs.Type = typeBytes
		return cs, func(v protoreflect.Value, dst []byte) []byte { return appendBase64(dst, v.Bytes()) }, nil
	case protoreflect.EnumKind:
		cs.Type = typeString
		values := fd.Enum().Values()
		return cs, func(v protoreflect.Value, dst []byte) []byte {
			if ev := values.ByNumber(v.Enum()); ev != nil {
				return appendJSONString(dst, []byte(ev.Name()))
			}
			return strconv.AppendInt(dst, int64(v.Enum()), 10) // unknown: a type mismatch later
		}, nil
	case protoreflect.MessageKind, protoreflect.GroupKind:
		md := fd.Message()
		if wk, ok := protoWellKnown[md.FullName()]; ok {
			cs.Type, cs.Name = wk.typ, wk.name
			if wk.fields != nil {
				cs.Fields = wk.fields()
			}
			return cs, func(v protoreflect.Value, dst []byte) []byte { return wk.transcode(v.Message(), dst) }, nil
		}
		s, tr, err := c.message(md, field, depth)
		if err != nil {
			return nil, nil, err
		}
		return s, func(v protoreflect.Value, dst []byte) []byte { return tr(v.Message(), dst) }, nil
	}
	return nil, nil, fmt.Errorf("field %q: the Protobuf kind %s has no Kafka Connect type", fd.Name(), fd.Kind())
}

// protoWellKnown are the messages that stand for one Connect value.
var protoWellKnown = map[protoreflect.FullName]struct {
	typ, name string
	fields    func() []*connectSchema
	transcode func(m protoreflect.Message, dst []byte) []byte
}{
	"google.protobuf.Timestamp": {typ: typeInt64, name: "io.debezium.time.MicroTimestamp", transcode: func(m protoreflect.Message, dst []byte) []byte {
		return strconv.AppendInt(dst, msgInt(m, "seconds")*1e6+msgInt(m, "nanos")/1e3, 10)
	}},
	"google.type.Date": {typ: typeInt32, name: "io.debezium.time.Date", transcode: func(m protoreflect.Message, dst []byte) []byte {
		y, mo, d := int(msgInt(m, "year")), int(msgInt(m, "month")), int(msgInt(m, "day"))
		if mo < 1 || mo > 12 || d < 1 || d > daysIn(y, mo) {
			// No date (a year or month alone): the decoder refuses a
			// string where it reads days.
			return appendJSONString(dst, fmt.Appendf(nil, "google.type.Date %04d-%02d-%02d", y, mo, d))
		}
		return strconv.AppendInt(dst, epochDays(y, time.Month(mo), d), 10)
	}},
	"google.type.TimeOfDay": {typ: typeInt64, name: "io.debezium.time.MicroTime", transcode: func(m protoreflect.Message, dst []byte) []byte {
		us := ((msgInt(m, "hours")*60+msgInt(m, "minutes"))*60+msgInt(m, "seconds"))*1e6 + msgInt(m, "nanos")/1e3
		return strconv.AppendInt(dst, us, 10)
	}},
	"confluent.type.Decimal": {typ: typeStruct, name: "io.debezium.data.VariableScaleDecimal",
		fields: func() []*connectSchema {
			return []*connectSchema{{Type: typeInt32, Field: "scale"}, {Type: typeBytes, Field: "value"}}
		},
		transcode: func(m protoreflect.Message, dst []byte) []byte {
			dst = strconv.AppendInt(append(dst, `{"scale":`...), msgInt(m, "scale"), 10)
			dst = appendBase64(append(dst, `,"value":`...), m.Get(m.Descriptor().Fields().ByName("value")).Bytes())
			return append(dst, '}')
		}},
	"google.protobuf.Struct":    {typ: typeString, name: "io.debezium.data.Json", transcode: protoJSONText},
	"google.protobuf.Value":     {typ: typeString, name: "io.debezium.data.Json", transcode: protoJSONText},
	"google.protobuf.ListValue": {typ: typeString, name: "io.debezium.data.Json", transcode: protoJSONText},
	"google.protobuf.DoubleValue": {typ: typeFloat64, transcode: func(m protoreflect.Message, dst []byte) []byte {
		return appendJSONFloat(dst, wrappedValue(m).Float(), 64)
	}},
	"google.protobuf.FloatValue": {typ: typeFloat32, transcode: func(m protoreflect.Message, dst []byte) []byte {
		return appendJSONFloat(dst, wrappedValue(m).Float(), 32)
	}},
	"google.protobuf.Int64Value": {typ: typeInt64, transcode: func(m protoreflect.Message, dst []byte) []byte {
		return strconv.AppendInt(dst, wrappedValue(m).Int(), 10)
	}},
	"google.protobuf.UInt64Value": {typ: typeInt64, transcode: func(m protoreflect.Message, dst []byte) []byte {
		return strconv.AppendUint(dst, wrappedValue(m).Uint(), 10)
	}},
	"google.protobuf.Int32Value": {typ: typeInt32, transcode: func(m protoreflect.Message, dst []byte) []byte {
		return strconv.AppendInt(dst, wrappedValue(m).Int(), 10)
	}},
	"google.protobuf.UInt32Value": {typ: typeInt64, transcode: func(m protoreflect.Message, dst []byte) []byte {
		return strconv.AppendUint(dst, wrappedValue(m).Uint(), 10)
	}},
	"google.protobuf.BoolValue": {typ: typeBoolean, transcode: func(m protoreflect.Message, dst []byte) []byte {
		return strconv.AppendBool(dst, wrappedValue(m).Bool())
	}},
	"google.protobuf.StringValue": {typ: typeString, transcode: func(m protoreflect.Message, dst []byte) []byte {
		return appendJSONString(dst, []byte(wrappedValue(m).String()))
	}},
	"google.protobuf.BytesValue": {typ: typeBytes, transcode: func(m protoreflect.Message, dst []byte) []byte {
		return appendBase64(dst, wrappedValue(m).Bytes())
	}},
}

func msgInt(m protoreflect.Message, field protoreflect.Name) int64 {
	return m.Get(m.Descriptor().Fields().ByName(field)).Int()
}

func wrappedValue(m protoreflect.Message) protoreflect.Value {
	return m.Get(m.Descriptor().Fields().ByName("value"))
}

// protoJSONText writes a google.protobuf.Struct, Value or ListValue as the
// text of its JSON (io.debezium.data.Json: a jsonb column).
func protoJSONText(m protoreflect.Message, dst []byte) []byte {
	b, err := protojson.Marshal(m.Interface())
	if err != nil {
		return append(dst, "null"...)
	}
	return appendJSONString(dst, b)
}

// connectTypeOption is the connect.type parameter of a field's
// confluent.field_meta option: int8 or int16 for the Connect types that
// Protobuf has no type of; "" without one.
func connectTypeOption(fd protoreflect.FieldDescriptor) string {
	opts := fd.Options()
	if opts == nil {
		return ""
	}
	var out string
	opts.ProtoReflect().Range(func(ext protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		if ext.FullName() != "confluent.field_meta" || ext.Kind() != protoreflect.MessageKind {
			return true
		}
		meta := v.Message()
		params := meta.Descriptor().Fields().ByName("params")
		if params == nil || !params.IsMap() {
			return false
		}
		if x := meta.Get(params).Map().Get(protoreflect.ValueOfString("connect.type").MapKey()); x.IsValid() {
			out = x.String()
		}
		return false
	})
	return out
}
