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
// it: its name as Postgres' format_type() prints it (which is also the
// name the planned DDL uses, so a planned column and an existing one
// compare as strings), the spellings a user may write, the type parameters
// it takes, the Go type a decoder makes for it (which package pgcopy
// encodes) and its OID. Adding a type is adding an entry here and its
// converters in package decode; no other file switches on type names.

// ParamKind says which modifiers a type takes in parentheses.
type ParamKind uint8

const (
	ParamNone           ParamKind = iota
	ParamLength                   // varchar(n)
	ParamPrecisionScale           // numeric(p[,s])
)

// SQLType is one entry of the type table.
type SQLType struct {
	Name    string   // format_type() spelling without modifiers
	Aliases []string // other spellings accepted in a mapping (lower case)
	Params  ParamKind
	// GoType is the Go type a decoder makes for a value of the type
	// (pgvalue's where Go has none); arrays are slices of it.
	GoType reflect.Type
	// Array says whether Name[] is allowed.
	Array bool
	OID   uint32 // 0: none a mapper writes natively
}

// ColumnType is a parsed column type: an entry of the table and its
// modifiers.
type ColumnType struct {
	Base      *SQLType
	Length    int // varchar(n); 0 = unbounded
	Precision int // numeric(p,s); 0 = unbounded
	Scale     int
	Array     bool
}

// Types is the type table, in the order error messages list it. It is
// read-only.
func Types() []*SQLType { return sqlTypes }

var sqlTypes = []*SQLType{
	{Name: "text", GoType: reflect.TypeFor[string](), Array: true, OID: pgvalue.TextOID},
	{Name: "character varying", Aliases: []string{"varchar"}, Params: ParamLength, GoType: reflect.TypeFor[string](), Array: true, OID: pgvalue.VarcharOID},
	{Name: "smallint", Aliases: []string{"int2"}, GoType: reflect.TypeFor[int16](), Array: true, OID: pgvalue.Int2OID},
	{Name: "integer", Aliases: []string{"int", "int4"}, GoType: reflect.TypeFor[int32](), Array: true, OID: pgvalue.Int4OID},
	{Name: "bigint", Aliases: []string{"int8"}, GoType: reflect.TypeFor[int64](), Array: true, OID: pgvalue.Int8OID},
	{Name: "numeric", Aliases: []string{"decimal"}, Params: ParamPrecisionScale, GoType: reflect.TypeFor[pgvalue.Numeric](), Array: true, OID: pgvalue.NumericOID},
	{Name: "real", Aliases: []string{"float4"}, GoType: reflect.TypeFor[float32](), Array: true, OID: pgvalue.Float4OID},
	{Name: "double precision", Aliases: []string{"float8", "double"}, GoType: reflect.TypeFor[float64](), Array: true, OID: pgvalue.Float8OID},
	{Name: "boolean", Aliases: []string{"bool"}, GoType: reflect.TypeFor[bool](), Array: true, OID: pgvalue.BoolOID},
	{Name: "timestamp with time zone", Aliases: []string{"timestamptz"}, GoType: reflect.TypeFor[time.Time](), Array: true, OID: pgvalue.TimestamptzOID},
	{Name: "timestamp without time zone", Aliases: []string{"timestamp"}, GoType: reflect.TypeFor[time.Time](), Array: true, OID: pgvalue.TimestampOID},
	{Name: "date", GoType: reflect.TypeFor[time.Time](), Array: true, OID: pgvalue.DateOID},
	{Name: "time without time zone", Aliases: []string{"time"}, GoType: reflect.TypeFor[pgvalue.Time](), Array: true},
	{Name: "uuid", GoType: reflect.TypeFor[pgvalue.UUID](), Array: true},
	{Name: "jsonb", GoType: reflect.TypeFor[[]byte](), OID: pgvalue.JSONBOID},
	{Name: "bytea", GoType: reflect.TypeFor[[]byte](), Array: true},
	{Name: "inet", GoType: reflect.TypeFor[netip.Prefix](), Array: true},
}

// typeByName indexes sqlTypes by every spelling.
var typeByName = func() map[string]*SQLType {
	m := map[string]*SQLType{}
	for _, t := range sqlTypes {
		m[t.Name] = t
		for _, a := range t.Aliases {
			m[a] = t
		}
	}
	return m
}()

// Postgres' limits on type modifiers.
const (
	maxVarcharLength    = 10485760
	MaxNumericPrecision = 1000 // numeric(p,s) takes p from 1 to this
)

// typeNames lists the accepted spellings for error messages.
func typeNames() string {
	names := make([]string, 0, len(sqlTypes))
	for _, t := range sqlTypes {
		names = append(names, t.Name)
	}
	return strings.Join(names, ", ") + ", varchar(n), numeric(p,s) and arrays (type[]) of all but jsonb"
}

// ParseType reads a type as a user writes it or as format_type() prints it:
// case and spacing are free, "varchar(20)", "numeric(10, 2)", "bigint[]".
func ParseType(s string) (ColumnType, error) {
	t := strings.Join(strings.Fields(strings.ToLower(s)), " ")
	var ct ColumnType
	if rest, ok := strings.CutSuffix(t, "[]"); ok {
		ct.Array = true
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
	ct.Base = base
	if ct.Array && !base.Array {
		return ct, fmt.Errorf("type %q: arrays of %s are not supported: map the whole array to one %s column", s, base.Name, base.Name)
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
	switch base.Params {
	case ParamLength:
		if len(nums) != 1 || nums[0] < 1 || nums[0] > maxVarcharLength {
			return ct, fmt.Errorf("type %q: the length of %s must be one number from 1 to %d, as in varchar(255); or use text", s, base.Name, maxVarcharLength)
		}
		ct.Length = nums[0]
	case ParamPrecisionScale:
		if len(nums) > 2 || nums[0] < 1 || nums[0] > MaxNumericPrecision {
			return ct, fmt.Errorf("type %q: the precision of numeric must be from 1 to %d, as in numeric(12,2); or use numeric without modifiers", s, MaxNumericPrecision)
		}
		ct.Precision = nums[0]
		if len(nums) == 2 {
			if nums[1] < 0 || nums[1] > nums[0] {
				return ct, fmt.Errorf("type %q: the scale of numeric must be from 0 to the precision %d, as in numeric(%d,2)", s, nums[0], nums[0])
			}
			ct.Scale = nums[1]
		}
	default:
		return ct, fmt.Errorf("type %q: %s takes no modifiers: write %s", s, base.Name, base.Name)
	}
	return ct, nil
}

// SQL is the type as format_type() prints it, used in planned DDL.
func (c ColumnType) SQL() string {
	s := c.Base.Name
	switch {
	case c.Length > 0:
		s = fmt.Sprintf("%s(%d)", s, c.Length)
	case c.Precision > 0:
		s = fmt.Sprintf("%s(%d,%d)", s, c.Precision, c.Scale)
	}
	if c.Array {
		s += "[]"
	}
	return s
}

// Widens reports whether every value of from fits in to without change, so
// that a column of type from may be altered to to (or left as to).
func Widens(from, to ColumnType) bool {
	if from.Array != to.Array {
		return false
	}
	f, t := from.Base.Name, to.Base.Name
	if f == t {
		switch from.Base.Params {
		case ParamLength:
			return to.Length == 0 || (from.Length > 0 && to.Length >= from.Length)
		case ParamPrecisionScale:
			if to.Precision == 0 {
				return true
			}
			if from.Precision == 0 {
				return false
			}
			return to.Scale >= from.Scale && to.Precision-to.Scale >= from.Precision-from.Scale
		}
		return true
	}
	switch f + "→" + t {
	case "smallint→integer", "smallint→bigint", "integer→bigint",
		"real→double precision",
		"character varying→text":
		return true
	case "text→character varying":
		return to.Length == 0 // the same values, another name
	}
	return false
}
