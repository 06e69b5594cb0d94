package cdc

import (
	"database/sql/driver"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5/pgtype"
)

// TimeTZ is a time with time zone value: a time of day and the offset
// east of UTC it was written at. pgx has no codec for Postgres' timetz;
// RegisterTimeTZ installs one on a connection's type map, so that a
// TimeTZ the decoder returns is written in binary COPY like any value.
type TimeTZ struct {
	Microseconds  int64 // past midnight, 0 to 24h inclusive
	OffsetSeconds int32 // east of UTC
	Valid         bool
}

// String is the value in Postgres' text form, e.g. 10:15:30.5+01.
func (t TimeTZ) String() string {
	us := t.Microseconds
	s := fmt.Sprintf("%02d:%02d:%02d", us/3600e6, us/60e6%60, us/1e6%60)
	if f := us % 1e6; f != 0 {
		s += fmt.Sprintf(".%06d", f)
		for s[len(s)-1] == '0' {
			s = s[:len(s)-1]
		}
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

// TimeTZOID and TimeTZArrayOID are Postgres' type OIDs of timetz and
// timetz[].
const (
	TimeTZOID      = 1266
	TimeTZArrayOID = 1270
)

// RegisterTimeTZ registers the timetz and timetz[] codecs on m (for pgx,
// in a pool's AfterConnect).
func RegisterTimeTZ(m *pgtype.Map) {
	t := &pgtype.Type{Name: "timetz", OID: TimeTZOID, Codec: TimeTZCodec{}}
	m.RegisterType(t)
	m.RegisterType(&pgtype.Type{Name: "_timetz", OID: TimeTZArrayOID, Codec: &pgtype.ArrayCodec{ElementType: t}})
}

// TimeTZCodec is the pgx codec of timetz: binary is the microseconds
// (int64) and the zone in seconds west of UTC (int32).
type TimeTZCodec struct{}

func (TimeTZCodec) FormatSupported(f int16) bool {
	return f == pgtype.BinaryFormatCode || f == pgtype.TextFormatCode
}

func (TimeTZCodec) PreferredFormat() int16 { return pgtype.BinaryFormatCode }

func (TimeTZCodec) PlanEncode(_ *pgtype.Map, _ uint32, format int16, value any) pgtype.EncodePlan {
	if _, ok := value.(TimeTZ); !ok {
		return nil
	}
	if format == pgtype.BinaryFormatCode {
		return timeTZBinaryEncoder{}
	}
	return timeTZTextEncoder{}
}

type timeTZBinaryEncoder struct{}

func (timeTZBinaryEncoder) Encode(value any, buf []byte) ([]byte, error) {
	t := value.(TimeTZ)
	if !t.Valid {
		return nil, nil
	}
	buf = binary.BigEndian.AppendUint64(buf, uint64(t.Microseconds))
	return binary.BigEndian.AppendUint32(buf, uint32(-t.OffsetSeconds)), nil
}

type timeTZTextEncoder struct{}

func (timeTZTextEncoder) Encode(value any, buf []byte) ([]byte, error) {
	t := value.(TimeTZ)
	if !t.Valid {
		return nil, nil
	}
	return append(buf, t.String()...), nil
}

func (TimeTZCodec) PlanScan(_ *pgtype.Map, _ uint32, format int16, target any) pgtype.ScanPlan {
	if _, ok := target.(*TimeTZ); ok && format == pgtype.BinaryFormatCode {
		return timeTZBinaryScanner{}
	}
	return nil
}

type timeTZBinaryScanner struct{}

func (timeTZBinaryScanner) Scan(src []byte, target any) error {
	t := target.(*TimeTZ)
	if src == nil {
		*t = TimeTZ{}
		return nil
	}
	if len(src) != 12 {
		return fmt.Errorf("timetz: %d bytes, want 12", len(src))
	}
	*t = TimeTZ{
		Microseconds:  int64(binary.BigEndian.Uint64(src)),
		OffsetSeconds: -int32(binary.BigEndian.Uint32(src[8:])),
		Valid:         true,
	}
	return nil
}

func (c TimeTZCodec) DecodeDatabaseSQLValue(m *pgtype.Map, oid uint32, format int16, src []byte) (driver.Value, error) {
	v, err := c.DecodeValue(m, oid, format, src)
	if err != nil || v == nil {
		return nil, err
	}
	return v.(TimeTZ).String(), nil
}

func (TimeTZCodec) DecodeValue(_ *pgtype.Map, _ uint32, format int16, src []byte) (any, error) {
	if src == nil {
		return nil, nil
	}
	if format != pgtype.BinaryFormatCode {
		return nil, errors.New("timetz: only the binary format decodes")
	}
	var t TimeTZ
	err := timeTZBinaryScanner{}.Scan(src, &t)
	return t, err
}
