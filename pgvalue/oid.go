package pgvalue

// The OIDs of the built-in types kafka2pg writes, fixed by Postgres
// (pg_type.dat), named as pgx's pgtype names them.
const (
	BoolOID        = 16
	ByteaOID       = 17
	Int8OID        = 20
	Int2OID        = 21
	Int4OID        = 23
	TextOID        = 25
	JSONOID        = 114
	Float4OID      = 700
	Float8OID      = 701
	InetOID        = 869
	VarcharOID     = 1043
	DateOID        = 1082
	TimeOID        = 1083
	TimestampOID   = 1114
	TimestamptzOID = 1184
	IntervalOID    = 1186
	TimeTZOID      = 1266
	BitOID         = 1560
	VarbitOID      = 1562
	NumericOID     = 1700
	UUIDOID        = 2950
	JSONBOID       = 3802
)
