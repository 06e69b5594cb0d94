package decode

import (
	"errors"
	"fmt"

	"github.com/kafka2pg/kafka2pg/schema"
)

// The converters of the type table. schema's type table names each SQL
// type a mapped column may have; converters gives each its converter from
// a JSON value and its binary writer, by the type's name. Adding a type is
// adding it to schema's table and its converters here.

// sqlType is an entry of schema's type table with its converters.
type sqlType struct {
	*schema.SQLType
	converter
}

// converter is what decode does with a type's values.
type converter struct {
	// convert turns a JSON value (never null: nulls are handled by the
	// caller) into the type's GoType, or says why it cannot.
	convert func(c *colType, v jsonValue) (any, *convError)
	// appendField, when set, writes what convert would return straight in
	// the binary format of the type's OID (binary.go); arrays never use it.
	appendField appendFunc
	// quick is which of its values AppendRow writes without appendField
	// (appendQuick); quickNone: none.
	quick quickKind
}

var converters = map[string]converter{
	"text":                        {convertText, appendTextField, quickText},
	"character varying":           {convertText, appendTextField, quickText},
	"smallint":                    {convertInt16, appendInt16Field, quickInt},
	"integer":                     {convertInt32, appendInt32Field, quickInt},
	"bigint":                      {convertInt64, appendInt64Field, quickInt},
	"numeric":                     {convertNumeric, appendNumericField, quickNumeric},
	"real":                        {convertFloat32, appendFloat32Field, quickNone},
	"double precision":            {convertFloat64, appendFloat64Field, quickNone},
	"boolean":                     {convertBool, appendBoolField, quickNone},
	"timestamp with time zone":    {convertTimestamptz, appendTimestamptzField, quickTimestamptz},
	"timestamp without time zone": {convertTimestamp, appendTimestampField, quickNone},
	"date":                        {convertDate, appendDateField, quickNone},
	"time without time zone":      {convertTime, nil, quickNone},
	"uuid":                        {convertUUID, nil, quickNone},
	"jsonb":                       {convertJSONB, appendJSONBField, quickNone},
	"bytea":                       {convertBytea, nil, quickNone},
	"inet":                        {convertInet, nil, quickNone},
}

// typeByName is schema's type table with the converters, by the types'
// names.
var typeByName = func() map[string]*sqlType {
	m := map[string]*sqlType{}
	for _, t := range schema.Types() {
		c, ok := converters[t.Name]
		if !ok {
			panic("decode: no converters for type " + t.Name)
		}
		m[t.Name] = &sqlType{SQLType: t, converter: c}
	}
	return m
}()

// CheckString reports why a column of type typ (a type a ColumnSpec may
// name: "timestamptz", "uuid", "numeric(10,2)") refuses the JSON string
// s, by the converter the mapping runs, without a column's options (no
// time_unit); kind is the DecodeError kind the mapping would give. It
// answers package infer's questions with the mapping's own rules.
func CheckString(typ, s string) (kind string, err error) {
	c, err := parseType(typ)
	if err != nil {
		return KindTypeMismatch, err
	}
	if c.array {
		return KindTypeMismatch, fmt.Errorf("column type %s is an array: it takes a JSON array, not a string", typ)
	}
	if _, cerr := c.base.convert(&c, jsonValue{kind: kindString, text: s}); cerr != nil {
		return cerr.kind, errors.New(cerr.msg)
	}
	return "", nil
}

// colType is a parsed column type: an entry of the table and its modifiers.
type colType struct {
	base      *sqlType
	length    int // varchar(n); 0 = unbounded
	precision int // numeric(p,s); 0 = unbounded
	scale     int
	array     bool
	// unitNanos is the epoch unit of the column in nanoseconds (time types);
	// 0 when none is declared. Set by the mapping, not by parseType.
	unitNanos int64
}

// parseType is schema.ParseType with the type's converters.
func parseType(s string) (colType, error) {
	ct, err := schema.ParseType(s)
	if err != nil {
		return colType{}, err
	}
	return colType{base: typeByName[ct.Base.Name], length: ct.Length, precision: ct.Precision, scale: ct.Scale, array: ct.Array}, nil
}

// schemaType is c as schema's ColumnType.
func (c colType) schemaType() schema.ColumnType {
	return schema.ColumnType{Base: c.base.SQLType, Length: c.length, Precision: c.precision, Scale: c.scale, Array: c.array}
}

// sql is the type as format_type() prints it, used in planned DDL.
func (c colType) sql() string { return c.schemaType().SQL() }

// widens is schema.Widens.
func widens(from, to colType) bool { return schema.Widens(from.schemaType(), to.schemaType()) }

// convError is a conversion failure before the mapper adds the column and
// the record's coordinates.
type convError struct {
	kind string
	msg  string
}

func convErrorf(kind, format string, args ...any) *convError {
	return &convError{kind: kind, msg: fmt.Sprintf(format, args...)}
}
