package decode

import (
	"encoding/base64"
	"encoding/json"
	"math"
	"net/netip"
	"reflect"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/kafka2pg/kafka2pg/pgvalue"
)

// The converters of the type table: a JSON value (never null) to the Go
// value pgx v5 encodes to the column's type in binary COPY.
// Dates, times and timestamps are in datetime.go, numerics in decimal.go.

// More kinds of DecodeError, for typed columns.
const (
	KindTypeMismatch     = "type_mismatch"     // a JSON value of the wrong kind (a string for an integer)
	KindOutOfRange       = "out_of_range"      // too large, too long, too precise for the column
	KindMissingValue     = "missing_value"     // the path is missing and on_missing is error
	KindNullValue        = "null_value"        // null (or missing) in a NOT NULL column without default
	KindInvalidTimestamp = "invalid_timestamp" // not an RFC 3339 / ISO date, time or timestamp
	KindInvalidUUID      = "invalid_uuid"
	KindInvalidInet      = "invalid_inet"
	KindInvalidBase64    = "invalid_base64"
	KindTombstone        = "tombstone" // a tombstone where a NOT NULL column needs the value
)

// maxShown is how much of a value an error message shows.
const maxShown = 64

// jsonValue is one JSON value as the converters see it.
type jsonValue struct {
	kind valueKind // never kindNull or kindAbsent
	text string    // kindString: the text; kindNumber: the literal
	raw  []byte    // kindObject, kindArray: the value as sent, valid JSON
	// buf, when set, is the row's buffer: converters put the bytes they
	// return there instead of allocating.
	buf *rowBuffer
	// noNUL says text has no NUL byte: AppendRow's strings written without
	// escapes (the scanner refused control characters in them) and numbers.
	noNUL bool
}

// jsonText is a string or number value with text s, as the converters get
// the JSON number inside a string (protobuf's 64-bit integers).
func jsonNumber(s string) jsonValue { return jsonValue{kind: kindNumber, text: s} }

// describe renders a value for an error message, truncated.
func describe(v jsonValue) string {
	var s string
	switch v.kind {
	case kindString:
		return describeString(v.text)
	case kindNumber:
		s = v.text
	case kindTrue:
		s = "true"
	case kindFalse:
		s = "false"
	default:
		// As encoding/json marshals the decoded value, HTML escapes and
		// all: messages stay as they were before the scanner.
		tree, err := decodeJSON(v.raw)
		if err != nil {
			return jsonKind(v)
		}
		b, err := json.Marshal(tree)
		if err != nil {
			return jsonKind(v)
		}
		s = string(b)
	}
	if len(s) > maxShown {
		return s[:maxShown] + "…"
	}
	return s
}

// describeString renders a string for an error message, truncated.
func describeString(s string) string {
	if len(s) > maxShown {
		cut := maxShown
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		return strconv.Quote(s[:cut]) + "…"
	}
	return strconv.Quote(s)
}

// jsonKind names the JSON kind of a value.
func jsonKind(v jsonValue) string { return kindName(v.kind) }

func kindName(k valueKind) string {
	switch k {
	case kindString:
		return "a string"
	case kindNumber:
		return "a number"
	case kindTrue, kindFalse:
		return "a boolean"
	case kindObject:
		return "an object"
	case kindArray:
		return "an array"
	case kindNull:
		return "null"
	}
	return "an unknown value"
}

// boxed returns a conversion's value as convert returns it.
func boxed[T any](x T, cerr *convError) (any, *convError) {
	if cerr != nil {
		return nil, cerr
	}
	return x, nil
}

func mismatch(v jsonValue, want string) *convError {
	return convErrorf(KindTypeMismatch, "%s is %s: %s", describe(v), jsonKind(v), want)
}

func convertText(c *colType, v jsonValue) (any, *convError) { return boxed(textOf(c, v)) }

// textOf is convertText's string.
func textOf(c *colType, v jsonValue) (string, *convError) {
	var s string
	switch v.kind {
	case kindString, kindNumber:
		s = v.text
	case kindTrue:
		s = "true"
	case kindFalse:
		s = "false"
	default:
		return "", mismatch(v, "a text column takes a string, number or boolean; map objects and arrays to jsonb")
	}
	if !v.noNUL {
		if i := strings.IndexByte(s, 0); i >= 0 {
			return "", convErrorf(KindNULByte, "%s has a NUL character at byte %d, which Postgres text cannot store", describeString(s), i)
		}
	}
	if c.length > 0 {
		if n := utf8.RuneCountInString(s); n > c.length {
			return "", convErrorf(KindOutOfRange, "%s is %d characters long: %s holds at most %d; use a longer varchar or text", describeString(s), n, c.sql(), c.length)
		}
	}
	return s, nil
}

// numberOf returns the decimal a JSON number, or a string holding one (as
// protobuf's JSON mapping writes 64-bit integers), stands for.
func numberOf(v jsonValue, typeName string) (decimal, *convError) {
	var lit string
	switch v.kind {
	case kindNumber, kindString:
		lit = v.text
	default:
		return decimal{}, mismatch(v, "a "+typeName+" column takes a number (or a string holding one)")
	}
	d, ok := parseDecimal(lit)
	if !ok {
		return decimal{}, convErrorf(KindTypeMismatch, "%s is not a number: a %s column takes a JSON number (or a string holding one)", describe(v), typeName)
	}
	return d, nil
}

func convertInt(v jsonValue, bits int, typeName string) (int64, *convError) {
	if v.kind == kindNumber {
		if n, ok := plainInt(v.text); ok && n >= -1<<(bits-1) && n <= 1<<(bits-1)-1 {
			return n, nil
		}
	}
	d, cerr := numberOf(v, typeName)
	if cerr != nil {
		return 0, cerr
	}
	n, cerr := d.toInt(bits)
	switch {
	case cerr == nil:
		return n, nil
	case cerr.kind == KindOutOfRange:
		return 0, convErrorf(KindOutOfRange, "%s is out of the range of %s: use a wider integer type or numeric", describe(v), typeName)
	}
	return 0, convErrorf(KindTypeMismatch, "%s is not a whole number: a %s column takes integers; use numeric or double precision for fractions", describe(v), typeName)
}

// plainInt reads an integer of at most 18 digits written as JSON writes
// it: an optional minus and digits, without a leading zero. Anything else
// is for parseDecimal, which says what is wrong with it.
func plainInt(s string) (int64, bool) {
	digits := s
	if len(digits) > 0 && digits[0] == '-' {
		digits = digits[1:]
	}
	if len(digits) == 0 || len(digits) > 18 || (digits[0] == '0' && len(digits) > 1) {
		return 0, false
	}
	var n int64
	for i := 0; i < len(digits); i++ {
		c := digits[i] - '0'
		if c > 9 {
			return 0, false
		}
		n = n*10 + int64(c)
	}
	if len(digits) < len(s) {
		n = -n
	}
	return n, true
}

func convertInt16(_ *colType, v jsonValue) (any, *convError) {
	n, err := convertInt(v, 16, "smallint")
	if err != nil {
		return nil, err
	}
	return int16(n), nil
}

func convertInt32(_ *colType, v jsonValue) (any, *convError) {
	n, err := convertInt(v, 32, "integer")
	if err != nil {
		return nil, err
	}
	return int32(n), nil
}

func convertInt64(_ *colType, v jsonValue) (any, *convError) {
	n, err := convertInt(v, 64, "bigint")
	if err != nil {
		return nil, err
	}
	return n, nil
}

// Postgres' limits of unconstrained numeric.
const (
	maxNumericIntDigits  = 131072
	maxNumericFracDigits = 16383
)

func convertNumeric(c *colType, v jsonValue) (any, *convError) {
	d, cerr := numericOf(c, v)
	if cerr != nil {
		return nil, cerr
	}
	return d.numeric(), nil
}

// numericOf is convertNumeric's value, as a decimal.
func numericOf(c *colType, v jsonValue) (decimal, *convError) {
	d, cerr := numberOf(v, "numeric")
	if cerr != nil {
		return decimal{}, cerr
	}
	if c.precision > 0 {
		// Postgres rounds to the scale (half away from zero) before it
		// checks the precision; do the same, and send the rounded value.
		d = d.round(c.scale)
		if n := d.intDigits(); n > int64(c.precision-c.scale) {
			return decimal{}, convErrorf(KindOutOfRange, "%s, rounded to %d decimal places, has %d digits before the decimal point: %s allows %d; use a larger precision", describe(v), c.scale, n, c.sql(), c.precision-c.scale)
		}
	} else {
		if n := d.intDigits(); n > maxNumericIntDigits {
			return decimal{}, convErrorf(KindOutOfRange, "%s has %d digits before the decimal point: numeric allows %d", describe(v), n, maxNumericIntDigits)
		}
		if -d.exp > maxNumericFracDigits {
			d = d.round(maxNumericFracDigits)
		}
	}
	return d, nil
}

func convertFloat(v jsonValue, bits int, typeName string) (float64, *convError) {
	if v.kind == kindString {
		switch s := v.text; s {
		case "NaN", "Infinity", "-Infinity":
			f, _ := strconv.ParseFloat(s, bits)
			return f, nil
		}
	}
	d, cerr := numberOf(v, typeName)
	if cerr != nil {
		return 0, cerr
	}
	lit := d.String()
	f, err := strconv.ParseFloat(lit, bits)
	if err != nil {
		return 0, convErrorf(KindOutOfRange, "%s is out of the range of %s: use numeric", describe(v), typeName)
	}
	if f == 0 && strings.HasPrefix(strings.TrimSpace(v.text), "-") {
		// The decimal has no negative zero, but floating point has, and
		// Postgres keeps it (float8send of '-0' is 0x8000000000000000).
		f = math.Copysign(0, -1)
	}
	return f, nil
}

func convertFloat32(_ *colType, v jsonValue) (any, *convError) {
	f, err := convertFloat(v, 32, "real")
	if err != nil {
		return nil, err
	}
	return float32(f), nil
}

func convertFloat64(_ *colType, v jsonValue) (any, *convError) {
	f, err := convertFloat(v, 64, "double precision")
	if err != nil {
		return nil, err
	}
	return f, nil
}

func convertBool(_ *colType, v jsonValue) (any, *convError) {
	switch v.kind {
	case kindTrue:
		return true, nil
	case kindFalse:
		return false, nil
	}
	return nil, mismatch(v, "a boolean column takes only true or false")
}

// convertUUID accepts the canonical 8-4-4-4-12 form, 32 hex digits, either
// within braces, in any case.
func convertUUID(_ *colType, v jsonValue) (any, *convError) {
	if v.kind != kindString {
		return nil, mismatch(v, "a uuid column takes a string like 123e4567-e89b-12d3-a456-426614174000")
	}
	h := v.text
	if strings.HasPrefix(h, "{") && strings.HasSuffix(h, "}") {
		h = h[1 : len(h)-1]
	}
	switch len(h) {
	case 32:
		h = h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
	case 36:
		if h[8] != '-' || h[13] != '-' || h[18] != '-' || h[23] != '-' {
			return nil, convErrorf(KindInvalidUUID, "%s is not a UUID: the hyphens are misplaced", describe(v))
		}
	default:
		return nil, convErrorf(KindInvalidUUID, "%s is not a UUID: want 32 hex digits, as in 123e4567-e89b-12d3-a456-426614174000", describe(v))
	}
	u, ok := pgvalue.ParseUUID(h)
	if !ok {
		return nil, convErrorf(KindInvalidUUID, "%s is not a UUID: it has a character that is not a hex digit", describe(v))
	}
	return u, nil
}

// convertJSONB writes the value as encoding/json writes it once decoded
// (see scan_jsonb.go): numbers keep their literal; jsonb normalizes key
// order and spacing anyway.
func convertJSONB(_ *colType, v jsonValue) (any, *convError) { return boxed(jsonbOf(v)) }

// jsonbOf is convertJSONB's bytes.
func jsonbOf(v jsonValue) ([]byte, *convError) {
	buf := v.buf
	if buf == nil {
		buf = &rowBuffer{}
	}
	b := buf.appendJSON(v)
	if buf.jw.nul {
		if kind, err := CheckJSON(b); err != nil {
			return nil, convErrorf(kind, "%s", err.Error())
		}
	}
	return b, nil
}

// convertBytea decodes standard base64, with or without padding.
func convertBytea(_ *colType, v jsonValue) (any, *convError) {
	if v.kind != kindString {
		return nil, mismatch(v, "a bytea column takes a base64 string")
	}
	s := v.text
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil && !strings.HasSuffix(s, "=") {
		b, err = base64.RawStdEncoding.DecodeString(s)
	}
	if err != nil {
		return nil, convErrorf(KindInvalidBase64, "%s is not standard base64: %s", describe(v), err.Error())
	}
	return b, nil
}

// convertInet accepts an address ("10.0.0.1", "2001:db8::1") or an address
// with a prefix length ("10.0.0.1/24", host bits kept as inet does).
func convertInet(_ *colType, v jsonValue) (any, *convError) {
	if v.kind != kindString {
		return nil, mismatch(v, "an inet column takes a string like 192.0.2.1 or 2001:db8::/32")
	}
	s := v.text
	if strings.Contains(s, "%") {
		return nil, convErrorf(KindInvalidInet, "%s has an IPv6 zone, which inet cannot store", describe(v))
	}
	if strings.Contains(s, "/") {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return nil, convErrorf(KindInvalidInet, "%s is not an IP address with prefix length: %s", describe(v), err.Error())
		}
		return p, nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return nil, convErrorf(KindInvalidInet, "%s is not an IP address: %s", describe(v), err.Error())
	}
	return netip.PrefixFrom(a, a.BitLen()), nil
}

// convertArray maps a JSON array of scalars to a slice of the element type,
// or of pointers to it when an element is null. Nested arrays are refused.
func convertArray(c *colType, v jsonValue) (any, *convError) {
	if v.kind != kindArray {
		return nil, mismatch(v, "an array column ("+c.sql()+") takes a JSON array")
	}
	hasNull := false
	var vals []any
	raw := v.raw
	for i, n := skipSpaceAt(raw, 1), 0; raw[i] != ']'; n++ {
		end := skipValue(raw, i)
		e := v.buf.element(raw[i:end])
		if i = skipSpaceAt(raw, end); raw[i] == ',' {
			i = skipSpaceAt(raw, i+1)
		}
		switch e.kind {
		case kindNull:
			hasNull = true
			vals = append(vals, nil)
			continue
		case kindArray:
			return nil, convErrorf(KindTypeMismatch, "element %d of %s is an array: only one-dimensional arrays are supported; map it to jsonb", n, describe(v))
		}
		x, cerr := c.base.convert(c, e)
		if cerr != nil {
			cerr.msg = "element " + strconv.Itoa(n) + ": " + cerr.msg
			return nil, cerr
		}
		vals = append(vals, x)
	}
	et := c.base.GoType
	if hasNull {
		et = reflect.PointerTo(et)
	}
	out := reflect.MakeSlice(reflect.SliceOf(et), len(vals), len(vals))
	for i, x := range vals {
		if x == nil {
			continue
		}
		xv := reflect.ValueOf(x)
		if hasNull {
			p := reflect.New(c.base.GoType)
			p.Elem().Set(xv)
			xv = p
		}
		out.Index(i).Set(xv)
	}
	return out.Interface(), nil
}
