package pgvalue

import (
	"encoding/hex"
	"fmt"
	"math/big"
	"strings"
)

// Numeric is an exact decimal, Int × 10^Exp: a finite value of Postgres'
// numeric (pgtype.Numeric without NULL, NaN and the infinities; a nil
// value is NULL). Int is never nil.
type Numeric struct {
	Int *big.Int
	Exp int32
}

// String is n in plain decimal notation, as Postgres prints it: 1.50 for
// Int 150, Exp -2; 1500 for Int 15, Exp 2.
func (n Numeric) String() string {
	s := n.Int.String()
	if n.Exp == 0 {
		return s
	}
	digits := strings.TrimPrefix(s, "-")
	var b strings.Builder
	if n.Exp > 0 {
		b.Grow(len(s) + int(n.Exp))
		b.WriteString(s)
		for range n.Exp {
			b.WriteByte('0')
		}
		return b.String()
	}
	scale := int(-n.Exp)
	b.Grow(len(s) - len(digits) + max(len(digits), scale+1) + 1)
	b.WriteString(s[:len(s)-len(digits)]) // the sign
	if len(digits) <= scale {             // 0.00ddd
		b.WriteString("0.")
		for range scale - len(digits) {
			b.WriteByte('0')
		}
		b.WriteString(digits)
		return b.String()
	}
	b.WriteString(digits[:len(digits)-scale])
	b.WriteByte('.')
	b.WriteString(digits[len(digits)-scale:])
	return b.String()
}

// Time is a time of day without time zone, in microseconds since
// midnight: 0 to 86,400,000,000 (24:00:00, which Postgres allows).
type Time struct {
	Microseconds int64
}

// String is t as Postgres prints it, with all six fraction digits:
// 13:04:05.000250.
func (t Time) String() string {
	us := t.Microseconds
	return fmt.Sprintf("%02d:%02d:%02d.%06d", us/3600e6, us/60e6%60, us/1e6%60, us%1e6)
}

// UUID is a uuid's 16 bytes.
type UUID [16]byte

// ParseUUID reads a UUID in its canonical form, 8-4-4-4-12 hex digits in
// either case (123e4567-e89b-12d3-a456-426614174000), as String writes it;
// false for anything else. Callers that take other forms (braces, no
// hyphens) bring them to this one first.
func ParseUUID[T string | []byte](s T) (UUID, bool) {
	var u UUID
	if len(s) != 36 || s[8] != '-' || s[13] != '-' || s[18] != '-' || s[23] != '-' {
		return u, false
	}
	j := 0
	for i := 0; i < 36; {
		if i == 8 || i == 13 || i == 18 || i == 23 {
			i++
			continue
		}
		hi, ok1 := unhex(s[i])
		lo, ok2 := unhex(s[i+1])
		if !ok1 || !ok2 {
			return UUID{}, false
		}
		u[j] = hi<<4 | lo
		i, j = i+2, j+1
	}
	return u, true
}

// unhex is the value of the hex digit c.
func unhex(c byte) (byte, bool) {
	switch {
	case c >= '0' && c <= '9':
		return c - '0', true
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10, true
	case c >= 'A' && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// String is u in its canonical form, 123e4567-e89b-12d3-a456-426614174000.
func (u UUID) String() string {
	var b [36]byte
	hex.Encode(b[0:8], u[0:4])
	b[8] = '-'
	hex.Encode(b[9:13], u[4:6])
	b[13] = '-'
	hex.Encode(b[14:18], u[6:8])
	b[18] = '-'
	hex.Encode(b[19:23], u[8:10])
	b[23] = '-'
	hex.Encode(b[24:], u[10:])
	return string(b[:])
}

// TimeTZ is a time of day with time zone (timetz): the time and the
// offset east of UTC it was written at.
type TimeTZ struct {
	Microseconds  int64 // past midnight, 0 to 24h inclusive
	OffsetSeconds int32 // east of UTC
}

// String is t as Postgres prints it, the fraction without trailing zeros:
// 10:15:30.5+01:00.
func (t TimeTZ) String() string {
	us := t.Microseconds
	s := fmt.Sprintf("%02d:%02d:%02d", us/3600e6, us/60e6%60, us/1e6%60)
	if f := us % 1e6; f != 0 {
		s = strings.TrimRight(s+fmt.Sprintf(".%06d", f), "0")
	}
	off, sign := t.OffsetSeconds, byte('+')
	if off < 0 {
		off, sign = -off, '-'
	}
	s += fmt.Sprintf("%c%02d:%02d", sign, off/3600, off/60%60)
	if off%60 != 0 {
		s += fmt.Sprintf(":%02d", off%60)
	}
	return s
}

// Interval is an interval: months, days and microseconds, kept apart as
// Postgres keeps them (a month is not a fixed number of days, nor a day
// of microseconds across a change of daylight saving time).
type Interval struct {
	Months       int32
	Days         int32
	Microseconds int64
}

// String is iv in ISO 8601's form with designators, each part signed and
// the seconds exact: P14M-3DT3723.000004S.
func (iv Interval) String() string {
	us := iv.Microseconds
	sign := ""
	abs := uint64(us)
	if us < 0 {
		sign, abs = "-", -abs
	}
	s := fmt.Sprintf("P%dM%dDT%s%d", iv.Months, iv.Days, sign, abs/1e6)
	if f := abs % 1e6; f != 0 {
		s = strings.TrimRight(s+fmt.Sprintf(".%06d", f), "0")
	}
	return s + "S"
}

// Bits is a bit string (bit(n), bit varying): Len bits, the first in the
// highest bit of Bytes[0]; the bits of the last byte past Len are zero.
type Bits struct {
	Bytes []byte
	Len   int32
}

// String is b's bits, the first one first: 0101.
func (b Bits) String() string {
	var s strings.Builder
	s.Grow(int(b.Len))
	for i := range int(b.Len) {
		s.WriteByte('0' + (b.Bytes[i/8]>>(7-i%8))&1)
	}
	return s.String()
}

// Infinity is Postgres' infinity, or -infinity when Negative, of a date,
// timestamp or timestamptz column: the values time.Time has no form for.
type Infinity struct {
	Negative bool
}

// String is infinity or -infinity, as Postgres prints them.
func (i Infinity) String() string {
	if i.Negative {
		return "-infinity"
	}
	return "infinity"
}
