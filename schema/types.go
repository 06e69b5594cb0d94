package schema

import (
	"fmt"
	"net/netip"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/kafka2pg/kafka2pg/pgvalue"
)

// The type table. Every SQL type a mapped column may have is one entry of
// sqlTypes: its name as Postgres' format_type() prints it (which is also the
// name the planned DDL uses, so a planned column and an existing one compare
// as strings), the spellings a user may write, the type parameters it takes,
// the Go type pgx v5 encodes to it in binary COPY, and the converter from a
// JSON value. Adding a type is adding an entry here; no other file
// switches on type names.

// paramKind says which modifiers a type takes in parentheses.
type paramKind uint8

const (
	paramNone           paramKind = iota
	paramLength                   // varchar(n)
	paramPrecisionScale           // numeric(p[,s])
)

// sqlType is one entry of the type table.
type sqlType struct {
	name    string   // format_type() spelling without modifiers
	aliases []string // other spellings accepted in a mapping (lower case)
	params  paramKind
	// goType is the Go type convert returns; arrays are slices of it.
	goType reflect.Type
	// array says whether name[] is allowed.
	array bool
	// convert turns a JSON value (never null: nulls are handled by the
	// caller) into goType, or says why it cannot.
	convert func(c *colType, v jsonValue) (any, *convError)
	// appendField, when set, writes what convert would return straight in
	// the binary format of oid (binary.go); arrays never use it.
	appendField appendFunc
	// quick is which of its values AppendRow writes without appendField
	// (appendQuick); quickNone: none.
	quick quickKind
	oid   uint32
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

// convError is a conversion failure before the mapper adds the column and
// the record's coordinates.
type convError struct {
	kind string
	msg  string
}

func convErrorf(kind, format string, args ...any) *convError {
	return &convError{kind: kind, msg: fmt.Sprintf(format, args...)}
}

var sqlTypes = []*sqlType{
	{name: "text", goType: reflect.TypeFor[string](), array: true, convert: convertText, appendField: appendTextField, quick: quickText, oid: pgvalue.TextOID},
	{name: "character varying", aliases: []string{"varchar"}, params: paramLength, goType: reflect.TypeFor[string](), array: true, convert: convertText, appendField: appendTextField, quick: quickText, oid: pgvalue.VarcharOID},
	{name: "smallint", aliases: []string{"int2"}, goType: reflect.TypeFor[int16](), array: true, convert: convertInt16, appendField: appendInt16Field, quick: quickInt, oid: pgvalue.Int2OID},
	{name: "integer", aliases: []string{"int", "int4"}, goType: reflect.TypeFor[int32](), array: true, convert: convertInt32, appendField: appendInt32Field, quick: quickInt, oid: pgvalue.Int4OID},
	{name: "bigint", aliases: []string{"int8"}, goType: reflect.TypeFor[int64](), array: true, convert: convertInt64, appendField: appendInt64Field, quick: quickInt, oid: pgvalue.Int8OID},
	{name: "numeric", aliases: []string{"decimal"}, params: paramPrecisionScale, goType: reflect.TypeFor[pgvalue.Numeric](), array: true, convert: convertNumeric, appendField: appendNumericField, quick: quickNumeric, oid: pgvalue.NumericOID},
	{name: "real", aliases: []string{"float4"}, goType: reflect.TypeFor[float32](), array: true, convert: convertFloat32, appendField: appendFloat32Field, oid: pgvalue.Float4OID},
	{name: "double precision", aliases: []string{"float8", "double"}, goType: reflect.TypeFor[float64](), array: true, convert: convertFloat64, appendField: appendFloat64Field, oid: pgvalue.Float8OID},
	{name: "boolean", aliases: []string{"bool"}, goType: reflect.TypeFor[bool](), array: true, convert: convertBool, appendField: appendBoolField, oid: pgvalue.BoolOID},
	{name: "timestamp with time zone", aliases: []string{"timestamptz"}, goType: reflect.TypeFor[time.Time](), array: true, convert: convertTimestamptz, appendField: appendTimestamptzField, quick: quickTimestamptz, oid: pgvalue.TimestamptzOID},
	{name: "timestamp without time zone", aliases: []string{"timestamp"}, goType: reflect.TypeFor[time.Time](), array: true, convert: convertTimestamp, appendField: appendTimestampField, oid: pgvalue.TimestampOID},
	{name: "date", goType: reflect.TypeFor[time.Time](), array: true, convert: convertDate, appendField: appendDateField, oid: pgvalue.DateOID},
	{name: "time without time zone", aliases: []string{"time"}, goType: reflect.TypeFor[pgvalue.Time](), array: true, convert: convertTime},
	{name: "uuid", goType: reflect.TypeFor[pgvalue.UUID](), array: true, convert: convertUUID},
	{name: "jsonb", goType: reflect.TypeFor[[]byte](), convert: convertJSONB, appendField: appendJSONBField, oid: pgvalue.JSONBOID},
	{name: "bytea", goType: reflect.TypeFor[[]byte](), array: true, convert: convertBytea},
	{name: "inet", goType: reflect.TypeFor[netip.Prefix](), array: true, convert: convertInet},
}

// typeByName indexes sqlTypes by every spelling.
var typeByName = func() map[string]*sqlType {
	m := map[string]*sqlType{}
	for _, t := range sqlTypes {
		m[t.name] = t
		for _, a := range t.aliases {
			m[a] = t
		}
	}
	return m
}()

// Postgres' limits on type modifiers.
const (
	maxVarcharLength    = 10485760
	maxNumericPrecision = 1000
)

// typeNames lists the accepted spellings for error messages.
func typeNames() string {
	names := make([]string, 0, len(sqlTypes))
	for _, t := range sqlTypes {
		names = append(names, t.name)
	}
	return strings.Join(names, ", ") + ", varchar(n), numeric(p,s) and arrays (type[]) of all but jsonb"
}

// parseType reads a type as a user writes it or as format_type() prints it:
// case and spacing are free, "varchar(20)", "numeric(10, 2)", "bigint[]".
func parseType(s string) (colType, error) {
	t := strings.Join(strings.Fields(strings.ToLower(s)), " ")
	var ct colType
	if rest, ok := strings.CutSuffix(t, "[]"); ok {
		ct.array = true
		t = strings.TrimSpace(rest)
	}
	var mods []string
	if i := strings.IndexByte(t, '('); i >= 0 {
		if !strings.HasSuffix(t, ")") {
			return ct, fmt.Errorf("type %q has an unclosed parenthesis", s)
		}
		mods = strings.Split(t[i+1:len(t)-1], ",")
		t = strings.TrimSpace(t[:i])
	}
	base, ok := typeByName[t]
	if !ok {
		return ct, fmt.Errorf("type %q is not supported: use one of %s", s, typeNames())
	}
	ct.base = base
	if ct.array && !base.array {
		return ct, fmt.Errorf("type %q: arrays of %s are not supported: map the whole array to one %s column", s, base.name, base.name)
	}
	if len(mods) == 0 {
		return ct, nil
	}
	nums := make([]int, len(mods))
	for i, m := range mods {
		n, err := strconv.Atoi(strings.TrimSpace(m))
		if err != nil {
			return ct, fmt.Errorf("type %q: modifier %q is not a number", s, strings.TrimSpace(m))
		}
		nums[i] = n
	}
	switch base.params {
	case paramLength:
		if len(nums) != 1 || nums[0] < 1 || nums[0] > maxVarcharLength {
			return ct, fmt.Errorf("type %q: the length of %s must be one number from 1 to %d, as in varchar(255); or use text", s, base.name, maxVarcharLength)
		}
		ct.length = nums[0]
	case paramPrecisionScale:
		if len(nums) > 2 || nums[0] < 1 || nums[0] > maxNumericPrecision {
			return ct, fmt.Errorf("type %q: the precision of numeric must be from 1 to %d, as in numeric(12,2); or use numeric without modifiers", s, maxNumericPrecision)
		}
		ct.precision = nums[0]
		if len(nums) == 2 {
			if nums[1] < 0 || nums[1] > nums[0] {
				return ct, fmt.Errorf("type %q: the scale of numeric must be from 0 to the precision %d, as in numeric(%d,2)", s, nums[0], nums[0])
			}
			ct.scale = nums[1]
		}
	default:
		return ct, fmt.Errorf("type %q: %s takes no modifiers: write %s", s, base.name, base.name)
	}
	return ct, nil
}

// sql is the type as format_type() prints it, used in planned DDL.
func (c colType) sql() string {
	s := c.base.name
	switch {
	case c.length > 0:
		s = fmt.Sprintf("%s(%d)", s, c.length)
	case c.precision > 0:
		s = fmt.Sprintf("%s(%d,%d)", s, c.precision, c.scale)
	}
	if c.array {
		s += "[]"
	}
	return s
}

// widens reports whether every value of from fits in to without change, so
// that a column of type from may be altered to to (or left as to).
func widens(from, to colType) bool {
	if from.array != to.array {
		return false
	}
	f, t := from.base.name, to.base.name
	if f == t {
		switch from.base.params {
		case paramLength:
			return to.length == 0 || (from.length > 0 && to.length >= from.length)
		case paramPrecisionScale:
			if to.precision == 0 {
				return true
			}
			if from.precision == 0 {
				return false
			}
			return to.scale >= from.scale && to.precision-to.scale >= from.precision-from.scale
		}
		return true
	}
	switch f + "→" + t {
	case "smallint→integer", "smallint→bigint", "integer→bigint",
		"real→double precision",
		"character varying→text":
		return true
	case "text→character varying":
		return to.length == 0 // the same values, another name
	}
	return false
}
