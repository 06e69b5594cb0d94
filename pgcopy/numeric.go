package pgcopy

import (
	"encoding/binary"
	"math/bits"

	"github.com/jackc/pgx/v5/pgtype"
)

// NumericCodec is pgx's numeric codec with a cheaper binary encoder for the
// pgtype.Numeric values the mappers make. pgtype's encoder divides big.Ints,
// which allocates for every value, even the small ones nearly every numeric
// column holds; for an Int that fits 64 bits this one computes the same
// base-10000 digits with machine words and writes byte for byte what
// pgtype writes. Other values, and scanning, are pgtype's.
//
// A connection uses it once it is registered on its type map:
//
//	conn.TypeMap().RegisterType(&pgtype.Type{Name: "numeric", OID: pgtype.NumericOID, Codec: pgcopy.NumericCodec{}})
type NumericCodec struct {
	pgtype.NumericCodec
}

// PlanEncode implements pgtype.Codec.
func (c NumericCodec) PlanEncode(m *pgtype.Map, oid uint32, format int16, value any) pgtype.EncodePlan {
	if _, ok := value.(pgtype.Numeric); ok && format == pgtype.BinaryFormatCode {
		return encodePlanNumericWords{next: c.NumericCodec.PlanEncode(m, oid, format, value)}
	}
	return c.NumericCodec.PlanEncode(m, oid, format, value)
}

type encodePlanNumericWords struct {
	next pgtype.EncodePlan // pgtype's plan, for the values this one leaves
}

func (p encodePlanNumericWords) Encode(value any, buf []byte) ([]byte, error) {
	n := value.(pgtype.Numeric)
	if out, ok := AppendNumeric(buf, n); ok {
		return out, nil
	}
	return p.next.Encode(value, buf)
}

// Exponents beyond this take pgtype's path (they are rare, and pgtype
// checks the limits of the format).
const maxWordsExp = 64

// AppendNumeric appends n in the binary format exactly as pgtype's
// encodeNumericBinary does, or reports false if n is not a finite value
// whose Int fits 64 bits with an exponent within ±maxWordsExp (then encode
// it with pgtype).
//
// pgtype's layout: the exponent is lowered to a multiple of 4 (the Int
// multiplied to match), the Int split at that exponent into a whole part
// and -exp/4 fraction digits (zeros kept), each in base-10000 digits, most
// significant first; weight counts whole digits, dscale is -Exp.
func AppendNumeric(buf []byte, n pgtype.Numeric) ([]byte, bool) {
	if !n.Valid || n.NaN || n.InfinityModifier != pgtype.Finite || n.Int == nil || bits.UintSize != 64 {
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

// RegisterNumericCodec makes a connection's type map encode numeric with
// NumericCodec; call it from pgxpool.Config.AfterConnect (or on a pgx.Conn
// before its first COPY).
func RegisterNumericCodec(m *pgtype.Map) {
	m.RegisterType(&pgtype.Type{Name: "numeric", OID: pgtype.NumericOID, Codec: NumericCodec{}})
}
