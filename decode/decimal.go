package decode

import (
	"math/big"
	"math/bits"
	"strconv"
	"strings"

	"github.com/kafka2pg/kafka2pg/pgvalue"
)

// Exact decimal arithmetic for JSON numbers: enough to check integer
// ranges, round to a numeric scale and shift epoch units without ever
// going through float64.

// decimal is an exact decimal number: (-1)^neg × digits × 10^exp, with
// digits free of leading and trailing zeros ("" for zero).
type decimal struct {
	neg    bool
	digits string
	exp    int64
}

// maxExp bounds exponents so that arithmetic on them cannot overflow; any
// number beyond it is far out of every column's range.
const maxExp = 1 << 40

// parseDecimal reads a JSON number literal exactly.
func parseDecimal(s string) (decimal, bool) {
	var d decimal
	i := 0
	if i < len(s) && s[i] == '-' {
		d.neg = true
		i++
	}
	start := i
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	intPart := s[start:i]
	if intPart == "" || (len(intPart) > 1 && intPart[0] == '0') {
		return d, false
	}
	var frac string
	if i < len(s) && s[i] == '.' {
		i++
		fs := i
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
		frac = s[fs:i]
		if frac == "" {
			return d, false
		}
	}
	var exp int64
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		eneg := false
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			eneg = s[i] == '-'
			i++
		}
		es := i
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			if exp < maxExp {
				exp = exp*10 + int64(s[i]-'0')
			}
			i++
		}
		if i == es {
			return d, false
		}
		if eneg {
			exp = -exp
		}
	}
	if i != len(s) {
		return d, false
	}
	var digits string
	switch {
	case frac == "":
		digits = strings.TrimLeft(intPart, "0")
	case strings.TrimLeft(intPart, "0") == "":
		digits = strings.TrimLeft(frac, "0")
	default:
		digits = intPart + frac
	}
	exp -= int64(len(frac))
	d.digits, d.exp = digits, exp
	return d.normalize(), true
}

func (d decimal) normalize() decimal {
	t := strings.TrimRight(d.digits, "0")
	d.exp += int64(len(d.digits) - len(t))
	d.digits = t
	if d.digits == "" {
		return decimal{}
	}
	return d
}

// intDigits is the number of digits before the decimal point.
func (d decimal) intDigits() int64 {
	if d.digits == "" {
		return 0
	}
	return max(0, int64(len(d.digits))+d.exp)
}

// shift multiplies by 10^n.
func (d decimal) shift(n int64) decimal {
	if d.digits != "" {
		d.exp += n
	}
	return d
}

// round rounds to scale digits after the decimal point, half away from
// zero.
func (d decimal) round(scale int) decimal {
	drop := -d.exp - int64(scale)
	if d.digits == "" || drop <= 0 {
		return d
	}
	keep := int64(len(d.digits)) - drop
	if keep < 0 {
		return decimal{}
	}
	up := d.digits[keep] >= '5'
	kept := []byte(d.digits[:keep])
	if up {
		i := len(kept) - 1
		for ; i >= 0 && kept[i] == '9'; i-- {
			kept[i] = '0'
		}
		if i < 0 {
			kept = append([]byte{'1'}, kept...)
		} else {
			kept[i]++
		}
	}
	return decimal{neg: d.neg, digits: string(kept), exp: -int64(scale)}.normalize()
}

// toInt returns the integer value if it fits bits; callers write the
// messages, from the kind.
func (d decimal) toInt(bits int) (int64, *convError) {
	if d.digits == "" {
		return 0, nil
	}
	if d.exp < 0 {
		return 0, convErrorf(KindTypeMismatch, "is not a whole number")
	}
	if int64(len(d.digits))+d.exp > 20 {
		return 0, convErrorf(KindOutOfRange, "is out of the range")
	}
	if int64(len(d.digits))+d.exp <= 18 {
		// Below 10^18: exact in int64, no text to build.
		n := int64(d.uint64())
		for range d.exp {
			n *= 10
		}
		if d.neg {
			n = -n
		}
		if lim := int64(1) << (bits - 1); bits < 64 && (n < -lim || n >= lim) {
			return 0, convErrorf(KindOutOfRange, "is out of the range")
		}
		return n, nil
	}
	s := d.digits + strings.Repeat("0", int(d.exp))
	if d.neg {
		s = "-" + s
	}
	n, err := strconv.ParseInt(s, 10, bits)
	if err != nil {
		return 0, convErrorf(KindOutOfRange, "is out of the range")
	}
	return n, nil
}

// String is the literal, in a form strconv.ParseFloat reads.
func (d decimal) String() string {
	if d.digits == "" {
		return "0"
	}
	s := d.digits + "e" + strconv.FormatInt(d.exp, 10)
	if d.neg {
		s = "-" + s
	}
	return s
}

// uint64 is the value of digits; at most 19 of them.
func (d decimal) uint64() uint64 {
	var u uint64
	for i := 0; i < len(d.digits); i++ {
		u = u*10 + uint64(d.digits[i]-'0')
	}
	return u
}

// smallInt is a big.Int and the one word it needs, allocated together.
type smallInt struct {
	n big.Int
	w [1]big.Word
}

// numeric is the pgvalue value; the exponent fits int32 because callers
// bound it first.
func (d decimal) numeric() pgvalue.Numeric {
	var n *big.Int
	switch {
	case d.digits == "":
		n = new(big.Int)
	case len(d.digits) <= 19 && bits.UintSize == 64:
		// Most numbers fit a word: skip SetString's parsing and its
		// second allocation.
		s := new(smallInt)
		s.w[0] = big.Word(d.uint64())
		n = s.n.SetBits(s.w[:])
		if d.neg {
			n.Neg(n)
		}
	default:
		n = new(big.Int)
		n.SetString(d.digits, 10)
		if d.neg {
			n.Neg(n)
		}
	}
	return pgvalue.Numeric{Int: n, Exp: int32(d.exp)}
}

// shortNumeric is numericOf without building a decimal, for the literals
// most numbers are: -?(0|[1-9][0-9]*)(\.[0-9]+)? of at most 18 digits. It
// rounds to the column's scale, checks its precision and returns the value
// as (-1)^neg × abs × 10^exp, trailing zeros stripped as decimal.normalize
// strips them (so the bytes are the same). false leaves the literal to
// numericOf: longer ones (abs may have overflowed while they were read),
// other forms, and every error.
func (c *colType) shortNumeric(s string) (abs uint64, exp int32, neg, ok bool) {
	i := 0
	if i < len(s) && s[i] == '-' {
		neg = true
		i++
	}
	start := i
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		abs = abs*10 + uint64(s[i]-'0')
		i++
	}
	nint := i - start
	if nint == 0 || (nint > 1 && s[start] == '0') {
		return 0, 0, false, false
	}
	if i < len(s) && s[i] == '.' {
		i++
		fs := i
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			abs = abs*10 + uint64(s[i]-'0')
			i++
		}
		if i == fs {
			return 0, 0, false, false
		}
		exp = -int32(i - fs)
	}
	if i != len(s) || nint-int(exp) > 18 { // an exponent, or too long for a word
		return 0, 0, false, false
	}
	if c.precision > 0 {
		if drop := -exp - int32(c.scale); drop > 0 {
			// Half away from zero: the first digit dropped decides.
			p := pow10[drop]
			q, r := abs/p, abs%p
			if r >= p/2 {
				q++
			}
			abs, exp = q, exp+drop
		}
	}
	if abs == 0 {
		return 0, 0, false, true
	}
	for abs%10 == 0 {
		abs /= 10
		exp++
	}
	if c.precision > 0 && decimalDigits(abs)+int(exp) > c.precision-c.scale {
		return 0, 0, false, false // out of range: numericOf says so
	}
	return abs, exp, neg, true
}

// decimalDigits is the number of decimal digits of n > 0.
func decimalDigits(n uint64) int {
	d := 1
	for n >= 10 {
		n /= 10
		d++
	}
	return d
}

// pow10 are 10^0 to 10^19, the powers a uint64 holds.
var pow10 = [20]uint64{1, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9,
	1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19}
