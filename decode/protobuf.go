package decode

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/big"
	"strings"
	"time"

	"github.com/bufbuild/protocompile"
	"github.com/kafka2pg/kafka2pg/pgvalue"
	"github.com/kafka2pg/kafka2pg/schema"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"
)

// Protobuf schemas → columns. The registry holds .proto source text; it is
// compiled (with its references as imports, and the well-known types)
// into descriptors, and values are decoded with dynamicpb. Each field of
// the record's message becomes a column by its kind (protoKinds); the
// well-known types map to their meaning (protoWellKnown); other messages
// are flattened or jsonb like Avro records; repeated fields and maps are
// jsonb. A field with presence (optional, oneof members, messages,
// wrappers) is nullable; a proto3 scalar without presence reads as its
// zero value when absent, so its column is NOT NULL.

// protoKinds maps a scalar kind to its column type and converter.
var protoKinds = map[protoreflect.Kind]struct {
	sqlType string
	conv    func(protoreflect.Value) any
}{
	protoreflect.BoolKind:     {"boolean", func(v protoreflect.Value) any { return v.Bool() }},
	protoreflect.Int32Kind:    {"integer", func(v protoreflect.Value) any { return int32(v.Int()) }},
	protoreflect.Sint32Kind:   {"integer", func(v protoreflect.Value) any { return int32(v.Int()) }},
	protoreflect.Sfixed32Kind: {"integer", func(v protoreflect.Value) any { return int32(v.Int()) }},
	protoreflect.Int64Kind:    {"bigint", func(v protoreflect.Value) any { return v.Int() }},
	protoreflect.Sint64Kind:   {"bigint", func(v protoreflect.Value) any { return v.Int() }},
	protoreflect.Sfixed64Kind: {"bigint", func(v protoreflect.Value) any { return v.Int() }},
	protoreflect.Uint32Kind:   {"bigint", func(v protoreflect.Value) any { return int64(v.Uint()) }},
	protoreflect.Fixed32Kind:  {"bigint", func(v protoreflect.Value) any { return int64(v.Uint()) }},
	protoreflect.Uint64Kind:   {"numeric(20,0)", uint64Numeric},
	protoreflect.Fixed64Kind:  {"numeric(20,0)", uint64Numeric},
	protoreflect.FloatKind:    {"real", func(v protoreflect.Value) any { return float32(v.Float()) }},
	protoreflect.DoubleKind:   {"double precision", func(v protoreflect.Value) any { return v.Float() }},
	protoreflect.StringKind:   {"text", func(v protoreflect.Value) any { return v.String() }},
	protoreflect.BytesKind: {"bytea", func(v protoreflect.Value) any {
		if b := v.Bytes(); b != nil {
			return b
		}
		return []byte{} // proto3's default: empty, not NULL
	}},
}

func uint64Numeric(v protoreflect.Value) any {
	return pgvalue.Numeric{Int: new(big.Int).SetUint64(v.Uint())}
}

// protoWellKnown maps the well-known message types to a column type and a
// converter of the (set) message. Duration is bigint microseconds: the type
// table has no interval, and a number sums and compares in SQL.
var protoWellKnown = map[protoreflect.FullName]struct {
	sqlType string
	conv    func(protoreflect.Message) any
}{
	"google.protobuf.Timestamp": {"timestamp with time zone", func(m protoreflect.Message) any {
		return time.Unix(wktInt(m, "seconds"), wktInt(m, "nanos")).UTC()
	}},
	"google.protobuf.Duration": {"bigint", func(m protoreflect.Message) any {
		return wktInt(m, "seconds")*1e6 + wktInt(m, "nanos")/1e3
	}},
	"google.protobuf.DoubleValue": {"double precision", wrapped(protoKinds[protoreflect.DoubleKind].conv)},
	"google.protobuf.FloatValue":  {"real", wrapped(protoKinds[protoreflect.FloatKind].conv)},
	"google.protobuf.Int64Value":  {"bigint", wrapped(protoKinds[protoreflect.Int64Kind].conv)},
	"google.protobuf.UInt64Value": {"numeric(20,0)", wrapped(uint64Numeric)},
	"google.protobuf.Int32Value":  {"integer", wrapped(protoKinds[protoreflect.Int32Kind].conv)},
	"google.protobuf.UInt32Value": {"bigint", wrapped(protoKinds[protoreflect.Uint32Kind].conv)},
	"google.protobuf.BoolValue":   {"boolean", wrapped(protoKinds[protoreflect.BoolKind].conv)},
	"google.protobuf.StringValue": {"text", wrapped(protoKinds[protoreflect.StringKind].conv)},
	"google.protobuf.BytesValue":  {"bytea", wrapped(protoKinds[protoreflect.BytesKind].conv)},
}

func wktInt(m protoreflect.Message, field protoreflect.Name) int64 {
	return m.Get(m.Descriptor().Fields().ByName(field)).Int()
}

func wrapped(conv func(protoreflect.Value) any) func(protoreflect.Message) any {
	return func(m protoreflect.Message) any { return conv(m.Get(m.Descriptor().Fields().ByName("value"))) }
}

// protoOpaque are the messages that are jsonb even when nested messages
// are flattened: their fields mean nothing as columns.
var protoOpaque = map[protoreflect.FullName]bool{
	"google.protobuf.Struct": true, "google.protobuf.Value": true, "google.protobuf.ListValue": true, "google.protobuf.Any": true,
}

// protoColumn reads one column from a decoded message.
type protoColumn struct {
	path []protoreflect.FieldDescriptor // the fields from the top message
	conv func(protoreflect.Value) (any, error)
}

// compileProtobuf compiles the .proto text of rs (its references are its
// imports) and picks the message of indexes (nil: message names it, or the
// first).
func compileProtobuf(rs RegisteredSchema, indexes []int, message, prefix string, nested Nested) (*regVersion, error) {
	md, err := ProtobufMessage(rs, indexes, message)
	if err != nil {
		return nil, err
	}
	c := &protoCompiler{nested: nested, taken: map[string]bool{}}
	if err := c.message(md, nil, prefix, "", 0, false); err != nil {
		return nil, err
	}
	if len(c.fields) == 0 {
		return nil, fmt.Errorf("message %s of schema id %d has no field that can be a column", md.FullName(), rs.ID)
	}
	cols := c.cols
	return &regVersion{fields: c.fields, message: string(md.FullName()), decode: func(payload []byte, out []any) error {
		msg := dynamicpb.NewMessage(md)
		if err := UnmarshalProtobuf(payload, msg); err != nil {
			return err
		}
		for i, col := range cols {
			v, err := col.read(msg.ProtoReflect())
			if err != nil {
				var fe *fieldError
				if errors.As(err, &fe) {
					fe.column = c.fields[i].name
				}
				return err
			}
			out[i] = v
		}
		return nil
	}}, nil
}

// ProtobufMessage compiles the .proto text of rs (its references are its
// imports, with the well-known types and Confluent's own types, which
// Confluent's serializers do not register) and picks the message of
// indexes (nil: message names it, or the first).
func ProtobufMessage(rs RegisteredSchema, indexes []int, message string) (protoreflect.MessageDescriptor, error) {
	if t := strings.ToUpper(rs.Type); t != "PROTOBUF" {
		if t == "" {
			t = "AVRO"
		}
		return nil, fmt.Errorf("schema id %d is %s, not Protobuf: use format %s", rs.ID, t, strings.ToLower(t))
	}
	main := fmt.Sprintf("kafka2pg/registry/schema_%d.proto", rs.ID)
	srcs := map[string]string{main: rs.Text}
	for name, text := range confluentProtos {
		srcs[name] = text
	}
	for _, ref := range rs.References {
		srcs[ref.Name] = ref.Text
	}
	comp := protocompile.Compiler{
		Resolver: protocompile.WithStandardImports(&protocompile.SourceResolver{Accessor: protocompile.SourceAccessorFromMap(srcs)}),
	}
	// Compile only computes; its context cancels nothing here.
	files, err := comp.Compile(context.Background(), main)
	if err != nil {
		return nil, fmt.Errorf("schema id %d does not compile as Protobuf: %w", rs.ID, err)
	}
	md, err := pickMessage(files[0], indexes, message)
	if err != nil {
		return nil, fmt.Errorf("schema id %d: %w", rs.ID, err)
	}
	return md, nil
}

// UnmarshalProtobuf is proto.Unmarshal that refuses, instead of panicking
// on, the bytes that make google.golang.org/protobuf panic: a map entry
// that repeats its key with another wire type panics in the decoding of
// dynamic messages (v1.36).
func UnmarshalProtobuf(b []byte, m proto.Message) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("cannot parse invalid wire-format data: %v", p)
		}
	}()
	return proto.Unmarshal(b, m)
}

// ProtobufMessageName names the message that indexes pick in the schema
// rs (for `kafka2pg infer`, which writes it into the sink's message key).
func ProtobufMessageName(rs RegisteredSchema, indexes []int) (string, error) {
	v, err := compileProtobuf(rs, indexes, "", "", NestedJSONB)
	if err != nil {
		return "", err
	}
	return v.message, nil
}

// pickMessage finds the message of the indexes, or by name.
func pickMessage(fd protoreflect.FileDescriptor, indexes []int, name string) (protoreflect.MessageDescriptor, error) {
	if indexes == nil && name != "" {
		d, err := findMessage(fd.Messages(), protoreflect.FullName(name))
		if err != nil {
			return nil, fmt.Errorf("message %q is not in the schema: %w", name, err)
		}
		return d, nil
	}
	if indexes == nil {
		indexes = []int{0}
	}
	msgs := fd.Messages()
	var md protoreflect.MessageDescriptor
	for _, i := range indexes {
		if i < 0 || i >= msgs.Len() {
			return nil, fmt.Errorf("message index %v is not a message of the schema", indexes)
		}
		md = msgs.Get(i)
		msgs = md.Messages()
	}
	return md, nil
}

func findMessage(ms protoreflect.MessageDescriptors, name protoreflect.FullName) (protoreflect.MessageDescriptor, error) {
	var names []string
	for i := range ms.Len() {
		m := ms.Get(i)
		if m.FullName() == name {
			return m, nil
		}
		if d, err := findMessage(m.Messages(), name); err == nil {
			return d, nil
		}
		names = append(names, string(m.FullName()))
	}
	return nil, fmt.Errorf("top-level messages are %s", strings.Join(names, ", "))
}

type protoCompiler struct {
	nested Nested
	fields []regField
	cols   []protoColumn
	taken  map[string]bool
}

// message adds the fields of md, reached through path, flattened under
// prefix; null says a parent may be absent.
func (c *protoCompiler) message(md protoreflect.MessageDescriptor, path []protoreflect.FieldDescriptor, prefix, fpath string, depth int, null bool) error {
	fields := md.Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		p := append(append([]protoreflect.FieldDescriptor(nil), path...), fd)
		name := colName(prefix, string(fd.Name()))
		fp := fieldPath(fpath, string(fd.Name()))
		presence := null || fd.HasPresence() && fd.Cardinality() != protoreflect.Required
		var err error
		switch {
		case fd.IsList() || fd.IsMap():
			err = c.add(name, fp, "repeated "+protoKindName(fd), "jsonb", false, p, func(v protoreflect.Value) (any, error) {
				return protoJSONBytes(fd, v)
			})
		case fd.Kind() == protoreflect.MessageKind || fd.Kind() == protoreflect.GroupKind:
			sub := fd.Message()
			w, wellKnown := protoWellKnown[sub.FullName()]
			switch {
			case wellKnown:
				err = c.add(name, fp, string(sub.FullName()), w.sqlType, false, p, func(v protoreflect.Value) (any, error) {
					return w.conv(v.Message()), nil
				})
			case c.nested == NestedFlatten && depth < maxNesting && !protoOpaque[sub.FullName()]:
				err = c.message(sub, p, name, fp, depth+1, true)
			default:
				err = c.add(name, fp, string(sub.FullName()), "jsonb", false, p, func(v protoreflect.Value) (any, error) {
					return protoJSONBytes(fd, v)
				})
			}
		case fd.Kind() == protoreflect.EnumKind:
			err = c.add(name, fp, "enum "+string(fd.Enum().FullName()), "text", !presence, p, func(v protoreflect.Value) (any, error) {
				return enumName(fd, v), nil
			})
		default:
			k, ok := protoKinds[fd.Kind()]
			if !ok {
				return fmt.Errorf("field %s has kind %s, which kafka2pg does not map", fp, fd.Kind())
			}
			err = c.add(name, fp, fd.Kind().String(), k.sqlType, !presence, p, func(v protoreflect.Value) (any, error) {
				x := k.conv(v)
				if s, ok := x.(string); ok && strings.ContainsRune(s, 0) {
					return nil, &fieldError{kind: KindNULByte, msg: fmt.Sprintf("field %s: the string contains a NUL byte, which Postgres text cannot store", fp)}
				}
				return x, nil
			})
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// add appends one column, refusing a name two fields flatten to.
func (c *protoCompiler) add(name, fpath, what, sqlType string, notNull bool, path []protoreflect.FieldDescriptor, conv func(protoreflect.Value) (any, error)) error {
	if err := schema.ValidateIdent("column name", name); err != nil {
		return fmt.Errorf("field %s: %w: shorten the field names, or use nested: jsonb", fpath, err)
	}
	if c.taken[name] {
		return fmt.Errorf("two fields become column %q (one is %s): rename a field, or use nested: jsonb", name, fpath)
	}
	c.taken[name] = true
	c.fields = append(c.fields, regField{name: name, field: fpath, what: what, sqlType: sqlType, notNull: notNull})
	c.cols = append(c.cols, protoColumn{path: path, conv: conv})
	return nil
}

// read follows the column's path; an unset message or optional field on
// the way is NULL.
func (col protoColumn) read(m protoreflect.Message) (any, error) {
	for i, fd := range col.path {
		last := i == len(col.path)-1
		if !last || fd.HasPresence() {
			if !m.Has(fd) {
				return nil, nil
			}
		}
		v := m.Get(fd)
		if last {
			return col.conv(v)
		}
		m = v.Message()
	}
	return nil, nil
}

func protoKindName(fd protoreflect.FieldDescriptor) string {
	switch {
	case fd.IsMap():
		return "map"
	case fd.Message() != nil:
		return string(fd.Message().FullName())
	case fd.Enum() != nil:
		return string(fd.Enum().FullName())
	}
	return fd.Kind().String()
}

func enumName(fd protoreflect.FieldDescriptor, v protoreflect.Value) any {
	if ev := fd.Enum().Values().ByNumber(v.Enum()); ev != nil {
		return string(ev.Name())
	}
	return fmt.Sprint(int32(v.Enum())) // an unknown number: kept, as text
}

// protoJSONBytes renders a field value (list, map or message) as jsonb.
func protoJSONBytes(fd protoreflect.FieldDescriptor, v protoreflect.Value) (any, error) {
	x, err := protoJSON(fd, v, fd.IsList() || fd.IsMap())
	if err != nil {
		return nil, err
	}
	b, err := marshalJSONB(x)
	if err != nil {
		return nil, err
	}
	if kind, err := CheckJSON(b); err != nil {
		return nil, &fieldError{kind: kind, msg: fmt.Sprintf("field %s: %s", fd.Name(), err.Error())}
	}
	return b, nil
}

// protoJSON renders a value as protojson does, but with numbers as
// numbers; whole says v is the list or map of fd rather than an element.
func protoJSON(fd protoreflect.FieldDescriptor, v protoreflect.Value, whole bool) (any, error) {
	switch {
	case whole && fd.IsList():
		l := v.List()
		out := make([]any, l.Len())
		for i := range l.Len() {
			x, err := protoJSON(fd, l.Get(i), false)
			if err != nil {
				return nil, err
			}
			out[i] = x
		}
		return out, nil
	case whole && fd.IsMap():
		out := map[string]any{}
		var err error
		v.Map().Range(func(k protoreflect.MapKey, mv protoreflect.Value) bool {
			var x any
			x, err = protoJSON(fd.MapValue(), mv, false)
			out[k.String()] = x
			return err == nil
		})
		return out, err
	}
	switch fd.Kind() {
	case protoreflect.MessageKind, protoreflect.GroupKind:
		b, err := protojson.MarshalOptions{UseProtoNames: true}.Marshal(v.Message().Interface())
		return json.RawMessage(b), err
	case protoreflect.EnumKind:
		return enumName(fd, v), nil
	case protoreflect.BytesKind:
		return base64.StdEncoding.EncodeToString(v.Bytes()), nil
	case protoreflect.FloatKind, protoreflect.DoubleKind:
		f := v.Float()
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return fmt.Sprint(f), nil
		}
		return f, nil
	case protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		return json.Number(fmt.Sprint(v.Uint())), nil
	}
	return v.Interface(), nil
}
