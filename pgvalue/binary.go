package pgvalue

import (
	"encoding/binary"
	"math"
	"math/bits"
	"time"
)

// The binary formats: what a binary COPY (and pgx's binary encoding) writes
// for a value, byte for byte as pgx writes it.

// FieldEncoder appends v, a value as a mapper's Row returns it for column
// col, as that column's whole field of a binary COPY tuple: its length (-1
// for NULL), then its bytes. v may share memory the caller reuses: it is
// valid during the call only. Package pgcopy makes them.
type FieldEncoder func(col int, dst []byte, v any) ([]byte, error)

// Postgres counts time from 2000-01-01 00:00:00 UTC.
const (
	pgEpochUnix   = 946684800
	secondsPerDay = 86400
)

// AppendTimestamptz appends t in timestamptz's binary format: microseconds
// since 2000-01-01 UTC, the nanoseconds truncated as pgx truncates them.
func AppendTimestamptz(buf []byte, t time.Time) []byte {
	return binary.BigEndian.AppendUint64(buf, uint64((t.Unix()-pgEpochUnix)*1_000_000+int64(t.Nanosecond())/1000))
}

// AppendTimestamp appends t's wall clock in its location in timestamp's
// binary format, as pgx does.
func AppendTimestamp(buf []byte, t time.Time) []byte {
	return AppendTimestamptz(buf, time.Date(t.Year(), t.Month(), t.Day(), t.Hour(), t.Minute(), t.Second(), t.Nanosecond(), time.UTC))
}

// AppendDate appends t's day in date's binary format: days since
// 2000-01-01.
func AppendDate(buf []byte, t time.Time) []byte {
	day := time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, time.UTC).Unix()
	return binary.BigEndian.AppendUint32(buf, uint32(int32((day-pgEpochUnix)/secondsPerDay)))
}

// AppendBytesField appends b as a whole field: its length, then its bytes.
func AppendBytesField[T string | []byte](dst []byte, b T) []byte {
	return append(binary.BigEndian.AppendUint32(dst, uint32(len(b))), b...)
}

// AppendNull appends a NULL field.
func AppendNull(dst []byte) []byte { return binary.BigEndian.AppendUint32(dst, math.MaxUint32) }

// AppendBytesOrNull appends b as a whole field, NULL for nil (as pgx
// writes a nil []byte); empty is an empty value.
func AppendBytesOrNull(dst, b []byte) []byte {
	if b == nil {
		return AppendNull(dst)
	}
	return AppendBytesField(dst, b)
}

// AppendInt4Field appends v as a whole int4 field.
func AppendInt4Field(dst []byte, v int32) []byte {
	return binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint32(dst, 4), uint32(v))
}

// AppendInt8Field appends v as a whole int8 field.
func AppendInt8Field(dst []byte, v int64) []byte {
	return binary.BigEndian.AppendUint64(binary.BigEndian.AppendUint32(dst, 8), uint64(v))
}

// AppendTimestamptzField appends t as a whole timestamptz field
// (AppendTimestamptz).
func AppendTimestamptzField(dst []byte, t time.Time) []byte {
	return AppendTimestamptz(binary.BigEndian.AppendUint32(dst, 8), t)
}

// AppendJSONBField appends json, JSON text, as a whole jsonb field: its
// binary format is version 1, then the text.
func AppendJSONBField[T string | []byte](dst []byte, json T) []byte {
	return append(append(binary.BigEndian.AppendUint32(dst, uint32(1+len(json))), 1), json...)
}

// Exponents beyond this take pgtype's path (they are rare, and pgtype
// checks the limits of the format).
const maxWordsExp = 64

// AppendNumeric appends n in numeric's binary format exactly as pgx's
// pgtype (encodeNumericBinary) writes it, or reports false if n's Int does
// not fit 64 bits or its exponent is beyond ±maxWordsExp (then encode it
// with pgtype).
//
// pgtype's layout: the exponent is lowered to a multiple of 4 (the Int
// multiplied to match), the Int split at that exponent into a whole part
// and -exp/4 fraction digits (zeros kept), each in base-10000 digits, most
// significant first; weight counts whole digits, dscale is -Exp.
func AppendNumeric(buf []byte, n Numeric) ([]byte, bool) {
	if n.Int == nil || bits.UintSize != 64 {
		return buf, false
	}
	words := n.Int.Bits()
	var abs uint64
	switch len(words) {
	case 0:
	case 1:
		abs = uint64(words[0])
	default:
		return buf, false
	}
	return AppendDecimal(buf, abs, n.Int.Sign() < 0, n.Exp)
}

// AppendDecimal is AppendNumeric of (-1)^neg × abs × 10^exp10, for a
// decoder that has the digits as a word already.
func AppendDecimal(buf []byte, abs uint64, neg bool, exp10 int32) ([]byte, bool) {
	if exp10 < -maxWordsExp || exp10 > maxWordsExp {
		return buf, false
	}
	exp := exp10 - (exp10%4+4)%4 // down to a multiple of 4
	hi, lo := bits.Mul64(abs, powersOf10[exp10-exp])
	if hi != 0 {
		return buf, false
	}
	// Fraction digits, least significant first, then whole digits.
	var digits [24]int16
	nd := 0
	if exp < 0 {
		for range -exp / 4 {
			digits[nd] = int16(lo % 10000)
			lo /= 10000
			nd++
		}
	}
	nfrac := nd
	for lo != 0 {
		digits[nd] = int16(lo % 10000)
		lo /= 10000
		nd++
	}
	nwhole := nd - nfrac
	var weight int32
	if nwhole > 0 {
		weight = int32(nwhole - 1)
		if exp > 0 {
			weight += exp / 4
		}
	} else {
		weight = exp/4 - 1 + int32(nfrac)
	}
	var sign uint16
	if neg && abs != 0 {
		sign = 0x4000
	}
	var dscale uint16
	if exp10 < 0 {
		dscale = uint16(-exp10)
	}
	buf = binary.BigEndian.AppendUint16(buf, uint16(nd))
	buf = binary.BigEndian.AppendUint16(buf, uint16(int16(weight)))
	buf = binary.BigEndian.AppendUint16(buf, sign)
	buf = binary.BigEndian.AppendUint16(buf, dscale)
	for i := nd - 1; i >= 0; i-- {
		buf = binary.BigEndian.AppendUint16(buf, uint16(digits[i]))
	}
	return buf, true
}

// powersOf10 are 10^0 to 10^19, the powers a uint64 holds.
var powersOf10 = func() (t [20]uint64) {
	t[0] = 1
	for i := 1; i < len(t); i++ {
		t[i] = t[i-1] * 10
	}
	return t
}()

// AppendTimeTZ appends t in timetz's binary format: the microseconds past
// midnight, then the offset in seconds west of UTC (Postgres' sign).
func AppendTimeTZ(buf []byte, t TimeTZ) []byte {
	buf = binary.BigEndian.AppendUint64(buf, uint64(t.Microseconds))
	return binary.BigEndian.AppendUint32(buf, uint32(-t.OffsetSeconds))
}

// AppendInterval appends iv in interval's binary format: microseconds,
// days, months.
func AppendInterval(buf []byte, iv Interval) []byte {
	buf = binary.BigEndian.AppendUint64(buf, uint64(iv.Microseconds))
	buf = binary.BigEndian.AppendUint32(buf, uint32(iv.Days))
	return binary.BigEndian.AppendUint32(buf, uint32(iv.Months))
}

// AppendBits appends b in the binary format of bit and bit varying: the
// number of bits, then the bytes that hold them.
func AppendBits(buf []byte, b Bits) []byte {
	return append(binary.BigEndian.AppendUint32(buf, uint32(b.Len)), b.Bytes...)
}

// AppendDateInfinity appends i in date's binary format: the largest and
// the smallest int32 stand for infinity and -infinity.
func AppendDateInfinity(buf []byte, i Infinity) []byte {
	if i.Negative {
		return binary.BigEndian.AppendUint32(buf, 1<<31) // math.MinInt32
	}
	return binary.BigEndian.AppendUint32(buf, math.MaxInt32)
}

// AppendTimestampInfinity appends i in the binary format of timestamp and
// timestamptz: the largest and the smallest int64 stand for infinity and
// -infinity.
func AppendTimestampInfinity(buf []byte, i Infinity) []byte {
	if i.Negative {
		return binary.BigEndian.AppendUint64(buf, 1<<63) // math.MinInt64
	}
	return binary.BigEndian.AppendUint64(buf, math.MaxInt64)
}
