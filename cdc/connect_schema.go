package cdc

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// connectSchema is a Kafka Connect schema as the JsonConverter writes it
// with schemas.enable=true: a type, whether it is optional, a name that
// gives the type a meaning (a logical or semantic type), parameters, and the
// parts of a struct (fields), an array (items) or a map (keys, values).
type connectSchema struct {
	Type       string
	Optional   bool
	Name       string
	Parameters map[string]string
	Field      string // the field's name, for a schema inside a struct
	Fields     []*connectSchema
	Items      *connectSchema
	Keys       *connectSchema
	Values     *connectSchema
}

// The Connect types, as the JsonConverter spells them.
const (
	typeInt8    = "int8"
	typeInt16   = "int16"
	typeInt32   = "int32"
	typeInt64   = "int64"
	typeFloat32 = "float"
	typeFloat64 = "double"
	typeBoolean = "boolean"
	typeString  = "string"
	typeBytes   = "bytes"
	typeArray   = "array"
	typeMap     = "map"
	typeStruct  = "struct"
)

// typeAliases maps other spellings (Connect's enum names, which some
// documentation shows) to the JsonConverter's.
var typeAliases = map[string]string{"float32": typeFloat32, "float64": typeFloat64}

// rawSchema is the JSON form, decoded leniently: Connect documentation
// shows "optional": "false" and numbers as strings, and a decoder that
// refused them would refuse records a JsonConverter never made.
type rawSchema struct {
	Type       string                     `json:"type"`
	Optional   json.RawMessage            `json:"optional"`
	Name       string                     `json:"name"`
	Parameters map[string]json.RawMessage `json:"parameters"`
	Field      string                     `json:"field"`
	Fields     []*rawSchema               `json:"fields"`
	Items      *rawSchema                 `json:"items"`
	Keys       *rawSchema                 `json:"keys"`
	Values     *rawSchema                 `json:"values"`
}

// parseConnectSchema reads the "schema" member of a record.
func parseConnectSchema(b []byte) (*connectSchema, error) {
	var raw rawSchema
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&raw); err != nil {
		return nil, fmt.Errorf("the Connect schema does not decode: %w", err)
	}
	return raw.convert("schema", 0)
}

func (r *rawSchema) convert(path string, depth int) (*connectSchema, error) {
	if depth > maxSchemaDepth {
		return nil, fmt.Errorf("the Connect schema nests deeper than %d levels at %s", maxSchemaDepth, path)
	}
	t := strings.ToLower(r.Type)
	if a, ok := typeAliases[t]; ok {
		t = a
	}
	s := &connectSchema{Type: t, Name: r.Name, Field: r.Field}
	switch t {
	case typeInt8, typeInt16, typeInt32, typeInt64, typeFloat32, typeFloat64, typeBoolean, typeString, typeBytes, typeArray, typeMap, typeStruct:
	case "":
		return nil, fmt.Errorf("%s has no type", path)
	default:
		return nil, fmt.Errorf("%s has type %q, which is not a Kafka Connect type", path, r.Type)
	}
	opt, err := lenientBool(r.Optional)
	if err != nil {
		return nil, fmt.Errorf("%s: optional: %w", path, err)
	}
	s.Optional = opt
	if len(r.Parameters) > 0 {
		s.Parameters = make(map[string]string, len(r.Parameters))
		for k, v := range r.Parameters {
			var str string
			if json.Unmarshal(v, &str) != nil {
				str = string(bytes.TrimSpace(v)) // a number or a literal
			}
			s.Parameters[k] = str
		}
	}
	sub := func(what string, x *rawSchema) (*connectSchema, error) {
		if x == nil {
			return nil, fmt.Errorf("%s is a %s without %s", path, t, what)
		}
		return x.convert(path+"."+what, depth+1)
	}
	switch t {
	case typeStruct:
		seen := make(map[string]bool, len(r.Fields))
		for i, f := range r.Fields {
			if f == nil {
				return nil, fmt.Errorf("%s.fields[%d] is null", path, i)
			}
			if f.Field == "" {
				return nil, fmt.Errorf("%s.fields[%d] has no field name", path, i)
			}
			if seen[f.Field] {
				return nil, fmt.Errorf("%s has two fields named %q", path, f.Field)
			}
			seen[f.Field] = true
			fs, err := f.convert(path+"."+f.Field, depth+1)
			if err != nil {
				return nil, err
			}
			s.Fields = append(s.Fields, fs)
		}
	case typeArray:
		if s.Items, err = sub("items", r.Items); err != nil {
			return nil, err
		}
	case typeMap:
		if s.Keys, err = sub("keys", r.Keys); err != nil {
			return nil, err
		}
		if s.Values, err = sub("values", r.Values); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// maxSchemaDepth bounds the nesting of a Connect schema.
const maxSchemaDepth = 64

func lenientBool(b json.RawMessage) (bool, error) {
	switch strings.Trim(string(bytes.TrimSpace(b)), `"`) {
	case "", "null", "false":
		return false, nil
	case "true":
		return true, nil
	}
	return false, errors.New(string(b) + " is not true or false")
}

// field returns the struct field named name, or nil.
func (s *connectSchema) field(name string) *connectSchema {
	for _, f := range s.Fields {
		if f.Field == name {
			return f
		}
	}
	return nil
}

// intParam reads an integer parameter; ok is false when it is missing or
// not a number.
func (s *connectSchema) intParam(name string) (int, bool) {
	v, ok := s.Parameters[name]
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(v)
	return n, err == nil
}

// describe names the schema for messages: "int32 (io.debezium.time.Date)".
func (s *connectSchema) describe() string {
	if s.Name != "" {
		return s.Type + " (" + s.Name + ")"
	}
	return s.Type
}
