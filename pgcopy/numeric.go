package pgcopy

import (
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/kafka2pg/kafka2pg/pgvalue"
)

// NumericCodec is pgx's numeric codec with a cheaper binary encoder for
// pgtype.Numeric values (PgxValue makes them of pgvalue's, for the
// values no fast encoder takes: an array's elements, a query's
// arguments). pgtype's encoder divides big.Ints, which allocates for
// every value, even the small ones nearly every numeric column holds; for an Int that fits 64 bits this one computes the same
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
	if out, ok := appendPgtypeNumeric(buf, value.(pgtype.Numeric)); ok {
		return out, nil
	}
	return p.next.Encode(value, buf)
}

// appendPgtypeNumeric is pgvalue.AppendNumeric of a pgtype.Numeric: false
// for NULL, NaN and the infinities too.
func appendPgtypeNumeric(buf []byte, n pgtype.Numeric) ([]byte, bool) {
	if !n.Valid || n.NaN || n.InfinityModifier != pgtype.Finite {
		return buf, false
	}
	return pgvalue.AppendNumeric(buf, pgvalue.Numeric{Int: n.Int, Exp: n.Exp})
}

// RegisterNumericCodec makes a connection's type map encode numeric with
// NumericCodec; call it from pgxpool.Config.AfterConnect (or on a pgx.Conn
// before its first COPY).
func RegisterNumericCodec(m *pgtype.Map) {
	m.RegisterType(&pgtype.Type{Name: "numeric", OID: pgtype.NumericOID, Codec: NumericCodec{}})
}
