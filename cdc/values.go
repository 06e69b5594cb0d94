package cdc

import (
	"bytes"
	"encoding/base64"
	"math"
	"math/big"
	"strconv"
	"strings"

	"github.com/kafka2pg/kafka2pg/decode"
	"github.com/kafka2pg/kafka2pg/pgvalue"
)

// The decoders of the type table's scalar entries. Each reads one non-null
// value at r and returns the entry's column type's value as the mappers
// make them (Go's types and package pgvalue's), or why it cannot.

func readInt(r *reader, n *node, bits int) (int64, *convError) {
	if c := r.peek(); c != '-' && (c < '0' || c > '9') {
		return 0, mismatch(n, what(r))
	}
	num := r.number()
	if r.err != nil {
		return 0, nil // the caller reports r.err
	}
	v, err := parseInt(num, bits)
	if err != nil {
		if errIsRange(err) {
			return 0, convErrorf(decode.KindOutOfRange, "%s does not fit %s", num, n.s.describe())
		}
		return 0, convErrorf(decode.KindTypeMismatch, "%s is not an integer, and the schema says %s", num, n.s.describe())
	}
	return v, nil
}

// parseInt is strconv.ParseInt for the text of a JSON number, without its
// cost for the common case: at most 18 digits, no fraction or exponent.
func parseInt(num []byte, bits int) (int64, error) {
	digits := num
	if len(digits) > 0 && digits[0] == '-' {
		digits = digits[1:]
	}
	if len(digits) == 0 || len(digits) > 18 {
		return strconv.ParseInt(string(num), 10, bits)
	}
	var v int64
	for _, c := range digits {
		if c < '0' || c > '9' {
			return strconv.ParseInt(string(num), 10, bits)
		}
		v = v*10 + int64(c-'0')
	}
	if len(digits) < len(num) {
		v = -v
	}
	if bits < 64 && (v >= 1<<(bits-1) || v < -1<<(bits-1)) {
		return strconv.ParseInt(string(num), 10, bits) // the range error
	}
	return v, nil
}

func errIsRange(err error) bool {
	ne, ok := err.(*strconv.NumError)
	return ok && ne.Err == strconv.ErrRange
}

// Connect's int8 has no Postgres type of its size; smallint holds it.
func decodeInt8(r *reader, n *node) (any, *convError) {
	v, cerr := readInt(r, n, 8)
	return int16(v), cerr
}

func decodeInt16(r *reader, n *node) (any, *convError) {
	v, cerr := readInt(r, n, 16)
	return int16(v), cerr
}

func decodeInt32(r *reader, n *node) (any, *convError) {
	v, cerr := readInt(r, n, 32)
	return int32(v), cerr
}

func decodeInt64(r *reader, n *node) (any, *convError) {
	return readInt(r, n, 64)
}

// readFloat reads a number, or the strings Jackson writes for the values
// JSON has no number for ("NaN", "Infinity", "-Infinity"); Postgres' real
// and double precision store all three.
func readFloat(r *reader, n *node, bits int) (float64, *convError) {
	if r.peek() == '"' {
		switch s := string(r.str()); s {
		case "NaN":
			return math.NaN(), nil
		case "Infinity":
			return math.Inf(1), nil
		case "-Infinity":
			return math.Inf(-1), nil
		default:
			return 0, convErrorf(decode.KindTypeMismatch, "the string %q is not a number (nor NaN, Infinity or -Infinity), and the schema says %s", s, n.s.describe())
		}
	}
	if c := r.peek(); c != '-' && (c < '0' || c > '9') {
		return 0, mismatch(n, what(r))
	}
	num := r.number()
	if r.err != nil {
		return 0, nil
	}
	v, err := strconv.ParseFloat(string(num), bits)
	if err != nil {
		return 0, convErrorf(decode.KindOutOfRange, "%s does not fit %s", num, n.s.describe())
	}
	return v, nil
}

func decodeFloat32(r *reader, n *node) (any, *convError) {
	v, cerr := readFloat(r, n, 32)
	return float32(v), cerr
}

func decodeFloat64(r *reader, n *node) (any, *convError) {
	return readFloat(r, n, 64)
}

func decodeBool(r *reader, n *node) (any, *convError) {
	if c := r.peek(); c != 't' && c != 'f' {
		return nil, mismatch(n, what(r))
	}
	return r.boolean(), nil
}

// readString reads a string value; a value of another kind is a mismatch.
func readString(r *reader, n *node) ([]byte, *convError) {
	if r.peek() != '"' {
		return nil, mismatch(n, what(r))
	}
	s := r.str()
	if r.err != nil {
		return nil, &convError{kind: r.err.kind, msg: "the value " + r.err.msg}
	}
	return s, nil
}

// decodeText reads a string for text, xml and enum columns: Postgres text
// has no NUL.
func decodeText(r *reader, n *node) (any, *convError) {
	s, cerr := readString(r, n)
	if cerr != nil {
		return nil, cerr
	}
	if i := bytes.IndexByte(s, 0); i >= 0 {
		return nil, convErrorf(decode.KindNULByte, "the string has a NUL character at byte %d, which Postgres text cannot store", i)
	}
	return r.keep(s), nil
}

// readBase64 decodes a bytes value: the JsonConverter writes bytes in
// standard base64 with padding.
func readBase64(r *reader, n *node) ([]byte, *convError) {
	s, cerr := readString(r, n)
	if cerr != nil {
		return nil, cerr
	}
	out := make([]byte, base64.StdEncoding.DecodedLen(len(s)))
	k, err := base64.StdEncoding.Decode(out, s)
	if err != nil {
		return nil, convErrorf(decode.KindInvalidValue, "the bytes of %s are not standard base64: %s", n.s.describe(), err.Error())
	}
	return out[:k], nil
}

func decodeBytes(r *reader, n *node) (any, *convError) {
	b, cerr := readBase64(r, n)
	if cerr != nil {
		return nil, cerr
	}
	return b, nil
}

// decodeDecimal reads a Connect Decimal: the unscaled value as a
// big-endian two's complement integer in base64 (decimal.format BASE64,
// the default), or a JSON number (decimal.format NUMERIC).
func decodeDecimal(r *reader, n *node) (any, *convError) {
	var num pgvalue.Numeric
	if r.peek() == '"' {
		b, cerr := readBase64(r, n)
		if cerr != nil {
			return nil, cerr
		}
		num = pgvalue.Numeric{Int: twosComplement(b), Exp: int32(-n.scale)}
	} else {
		if c := r.peek(); c != '-' && (c < '0' || c > '9') {
			return nil, mismatch(n, what(r))
		}
		text := r.number()
		if r.err != nil {
			return nil, nil
		}
		var ok bool
		if num, ok = parseDecimal(text); !ok {
			return nil, convErrorf(decode.KindOutOfRange, "the decimal %s has an exponent Postgres' numeric cannot hold", text)
		}
	}
	return num, checkPrecision(n, num)
}

// twosComplement reads a big-endian two's complement integer.
func twosComplement(b []byte) *big.Int {
	if len(b) <= 8 && len(b) > 0 {
		var u uint64
		for _, c := range b {
			u = u<<8 | uint64(c)
		}
		shift := 64 - 8*uint(len(b))
		return big.NewInt(int64(u<<shift) >> shift) // sign-extend
	}
	x := new(big.Int).SetBytes(b)
	if len(b) > 0 && b[0]&0x80 != 0 {
		x.Sub(x, new(big.Int).Lsh(big.NewInt(1), uint(8*len(b))))
	}
	return x
}

// parseDecimal reads a JSON number exactly.
func parseDecimal(text []byte) (pgvalue.Numeric, bool) {
	s := string(text)
	exp := 0
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		e, err := strconv.Atoi(s[i+1:])
		if err != nil || e > maxNumericExp || e < -maxNumericExp {
			return pgvalue.Numeric{}, false
		}
		exp, s = e, s[:i]
	}
	if i := strings.IndexByte(s, '.'); i >= 0 {
		exp -= len(s) - i - 1
		s = s[:i] + s[i+1:]
	}
	x, ok := new(big.Int).SetString(s, 10)
	if !ok {
		return pgvalue.Numeric{}, false
	}
	return pgvalue.Numeric{Int: x, Exp: int32(exp)}, true
}

// maxNumericExp bounds decimal exponents far beyond what Postgres' numeric
// holds (131072 digits before the point, 16383 after), so that no value
// makes the decoder build a huge integer.
const maxNumericExp = 200000

// checkPrecision refuses a value a numeric(p,s) column would reject, so
// that it is a bad record with a reason rather than a row Postgres refuses.
func checkPrecision(n *node, num pgvalue.Numeric) *convError {
	p, s := n.precision, n.scale
	if p == 0 || num.Int == nil || num.Int.Sign() == 0 {
		return nil
	}
	digits := decimalDigits(num.Int)
	// The value has digits+Exp digits before the point; the column keeps
	// p-s. Digits after the point beyond s are rounded by Postgres.
	if intDigits := digits + int(num.Exp); intDigits > p-s {
		return convErrorf(decode.KindOutOfRange, "the decimal has %d digits before the point, and numeric(%d,%d) holds %d", intDigits, p, s, p-s)
	}
	return nil
}

// decimalDigits counts the digits of x, without printing it when it fits
// an int64.
func decimalDigits(x *big.Int) int {
	if !x.IsInt64() {
		return len(new(big.Int).Abs(x).String())
	}
	v := x.Int64()
	u := uint64(v)
	if v < 0 {
		u = uint64(-v) // -MinInt64 wraps to itself, whose uint64 is 2^63: right
	}
	d := 1
	for ; u >= 10; u /= 10 {
		d++
	}
	return d
}

// decodeVariableScaleDecimal reads Debezium's {"scale": s, "value":
// base64} form of a numeric without a declared scale.
func decodeVariableScaleDecimal(r *reader, n *node) (any, *convError) {
	if r.peek() != '{' {
		return nil, mismatch(n, what(r))
	}
	var (
		scale     int64
		unscaled  []byte
		haveScale bool
		haveValue bool
	)
	r.object()
	for first := true; ; first = false {
		key, ok := r.member(first)
		if !ok {
			break
		}
		switch string(key) {
		case "scale":
			if r.null() {
				continue
			}
			v, cerr := readInt(r, n, 32)
			if cerr != nil {
				return nil, cerr
			}
			scale, haveScale = v, true
		case "value":
			if r.null() {
				continue
			}
			b, cerr := readBase64(r, n)
			if cerr != nil {
				return nil, cerr
			}
			unscaled, haveValue = b, true
		default:
			r.skip()
		}
	}
	if r.err != nil {
		return nil, nil
	}
	if !haveScale || !haveValue {
		return nil, convErrorf(decode.KindInvalidValue, "a VariableScaleDecimal needs both scale and value")
	}
	if scale > maxNumericScale || scale < -maxNumericScale {
		return nil, convErrorf(decode.KindOutOfRange, "the scale %d is beyond Postgres' numeric (at most %d digits after the point)", scale, maxNumericScale)
	}
	return pgvalue.Numeric{Int: twosComplement(unscaled), Exp: int32(-scale)}, nil
}

// maxNumericScale is Postgres' limit on the digits after a numeric's point.
const maxNumericScale = 16383

// decodeJSONText reads io.debezium.data.Json: a string holding a JSON
// document, stored as jsonb when jsonb accepts it.
func decodeJSONText(r *reader, n *node) (any, *convError) {
	s, cerr := readString(r, n)
	if cerr != nil {
		return nil, cerr
	}
	if kind, err := decode.CheckJSON(s); err != nil {
		return nil, convErrorf(kind, "the Json field's text %s", strings.TrimPrefix(err.Error(), "the value "))
	}
	return bytes.Clone(s), nil
}

func decodeUUID(r *reader, n *node) (any, *convError) {
	s, cerr := readString(r, n)
	if cerr != nil {
		return nil, cerr
	}
	u, ok := parseUUID(s)
	if !ok {
		return nil, convErrorf(decode.KindInvalidUUID, "%q is not a UUID", s)
	}
	return u, nil
}

// parseUUID reads the hyphenated form, in either case.
func parseUUID(s []byte) (pgvalue.UUID, bool) {
	return pgvalue.ParseUUID(s)
}

// decodeEnumSet reads a MySQL SET (io.debezium.data.EnumSet): its members
// joined by commas, which a member cannot contain. It becomes text[].
func decodeEnumSet(r *reader, n *node) (any, *convError) {
	v, cerr := decodeText(r, n)
	if cerr != nil {
		return nil, cerr
	}
	s := v.(string)
	if s == "" {
		return []string{}, nil
	}
	return strings.Split(s, ","), nil
}

// decodeBits reads io.debezium.data.Bits: the bits as a little-endian byte
// array (bit 0 is the lowest bit of the first byte, and the rightmost bit
// of the bit string). With a length, the value has exactly that many bits,
// the leading ones zero when the bytes stop short; without one, or from a
// bit varying source column, as many as the highest set bit needs.
func decodeBits(r *reader, n *node) (any, *convError) {
	b, cerr := readBase64(r, n)
	if cerr != nil {
		return nil, cerr
	}
	length := n.bits
	if length == 0 || n.varbit {
		length = 8 * len(b)
		for length > 0 && b[(length-1)/8]&(1<<((length-1)%8)) == 0 {
			length--
		}
		if n.bits > 0 && length > n.bits {
			return nil, convErrorf(decode.KindOutOfRange, "bit %d is set, and the column holds %d bits", length-1, n.bits)
		}
	}
	out := pgvalue.Bits{Bytes: make([]byte, (length+7)/8), Len: int32(length)}
	for k := 0; k < 8*len(b); k++ {
		if b[k/8]&(1<<(k%8)) == 0 {
			continue
		}
		if k >= length {
			return nil, convErrorf(decode.KindOutOfRange, "bit %d is set, and the column holds %d bits", k, length)
		}
		pos := length - 1 - k // position in the bit string, from the left
		out.Bytes[pos/8] |= 0x80 >> (pos % 8)
	}
	return out, nil
}
