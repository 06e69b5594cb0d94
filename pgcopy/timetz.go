package pgcopy

import (
	"database/sql/driver"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/kafka2pg/kafka2pg/pgvalue"
)

// timeTZArrayOID is Postgres' OID of timetz[].
const timeTZArrayOID = 1270

// RegisterTimeTZ makes a connection's type map encode pgvalue.TimeTZ as
// timetz and timetz[] (pgx has no codec for timetz); call it from
// pgxpool.Config.AfterConnect, as RegisterNumericCodec.
func RegisterTimeTZ(m *pgtype.Map) {
	t := &pgtype.Type{Name: "timetz", OID: pgvalue.TimeTZOID, Codec: TimeTZCodec{}}
	m.RegisterType(t)
	m.RegisterType(&pgtype.Type{Name: "_timetz", OID: timeTZArrayOID, Codec: &pgtype.ArrayCodec{ElementType: t}})
}

// TimeTZCodec is the pgx codec of timetz for pgvalue.TimeTZ: binary is
// pgvalue.AppendTimeTZ's layout, text the value's String. It scans the
// binary format into a *pgvalue.TimeTZ.
type TimeTZCodec struct{}

func (TimeTZCodec) FormatSupported(f int16) bool {
	return f == pgtype.BinaryFormatCode || f == pgtype.TextFormatCode
}

func (TimeTZCodec) PreferredFormat() int16 { return pgtype.BinaryFormatCode }

func (TimeTZCodec) PlanEncode(_ *pgtype.Map, _ uint32, format int16, value any) pgtype.EncodePlan {
	if _, ok := value.(pgvalue.TimeTZ); !ok {
		return nil
	}
	if format == pgtype.BinaryFormatCode {
		return timeTZBinaryEncoder{}
	}
	return timeTZTextEncoder{}
}

type timeTZBinaryEncoder struct{}

func (timeTZBinaryEncoder) Encode(value any, buf []byte) ([]byte, error) {
	return pgvalue.AppendTimeTZ(buf, value.(pgvalue.TimeTZ)), nil
}

type timeTZTextEncoder struct{}

func (timeTZTextEncoder) Encode(value any, buf []byte) ([]byte, error) {
	return append(buf, value.(pgvalue.TimeTZ).String()...), nil
}

func (TimeTZCodec) PlanScan(_ *pgtype.Map, _ uint32, format int16, target any) pgtype.ScanPlan {
	if _, ok := target.(*pgvalue.TimeTZ); ok && format == pgtype.BinaryFormatCode {
		return timeTZBinaryScanner{}
	}
	return nil
}

type timeTZBinaryScanner struct{}

// Scan reads a timetz; NULL is the zero TimeTZ.
func (timeTZBinaryScanner) Scan(src []byte, target any) error {
	t := target.(*pgvalue.TimeTZ)
	if src == nil {
		*t = pgvalue.TimeTZ{}
		return nil
	}
	if len(src) != 12 {
		return fmt.Errorf("timetz: %d bytes, want 12", len(src))
	}
	*t = pgvalue.TimeTZ{
		Microseconds:  int64(binary.BigEndian.Uint64(src)),
		OffsetSeconds: -int32(binary.BigEndian.Uint32(src[8:])),
	}
	return nil
}

func (c TimeTZCodec) DecodeDatabaseSQLValue(m *pgtype.Map, oid uint32, format int16, src []byte) (driver.Value, error) {
	v, err := c.DecodeValue(m, oid, format, src)
	if err != nil || v == nil {
		return nil, err
	}
	return v.(pgvalue.TimeTZ).String(), nil
}

func (TimeTZCodec) DecodeValue(_ *pgtype.Map, _ uint32, format int16, src []byte) (any, error) {
	if src == nil {
		return nil, nil
	}
	if format != pgtype.BinaryFormatCode {
		return nil, errors.New("timetz: only the binary format decodes")
	}
	var t pgvalue.TimeTZ
	err := timeTZBinaryScanner{}.Scan(src, &t)
	return t, err
}
