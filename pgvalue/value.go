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
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	switch {
	case n.Exp > 0:
		s += strings.Repeat("0", int(n.Exp))
	case n.Exp < 0:
		scale := int(-n.Exp)
		if len(s) <= scale {
			s = strings.Repeat("0", scale-len(s)+1) + s
		}
		s = s[:len(s)-scale] + "." + s[len(s)-scale:]
	}
	if neg {
		s = "-" + s
	}
	return s
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
