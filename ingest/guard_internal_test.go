package ingest

import (
	"math/big"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/kafka2pg/kafka2pg/pgcopy"
	"github.com/kafka2pg/kafka2pg/pgvalue"
)

// compareVersions orders the binary fields of each version type as
// Postgres orders the values: numerics of different scales and signs,
// times before and after 2000, negative integers.
func TestCompareVersionsOrdersAsPostgres(t *testing.T) {
	t.Parallel()
	num := func(i int64, exp int32) pgvalue.Numeric { return pgvalue.Numeric{Int: big.NewInt(i), Exp: exp} }
	day := time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		oid    uint32
		values []any // ascending
	}{
		{pgtype.Int2OID, []any{int16(-5), int16(0), int16(7)}},
		{pgtype.Int4OID, []any{int32(-70000), int32(-1), int32(70000)}},
		{pgtype.Int8OID, []any{int64(-1 << 40), int64(3), int64(1 << 40)}},
		{pgtype.NumericOID, []any{num(-15, 2), num(-1, 0), num(5, -1), num(12, -1), num(2, 0), num(99999, 0), num(1, 20)}},
		{pgtype.TimestamptzOID, []any{day.Add(-time.Hour), day, day.Add(time.Microsecond), day.AddDate(30, 0, 0)}},
		{pgtype.DateOID, []any{day.AddDate(0, 0, -3), day, day.AddDate(5, 0, 0)}},
	} {
		enc := pgcopy.NewColumnEncoder(c.oid)
		m := pgtype.NewMap()
		fields := make([][]byte, len(c.values))
		for i, v := range c.values {
			b, err := enc.Append(m, nil, v)
			if err != nil {
				t.Fatalf("oid %d: encode %v: %v", c.oid, v, err)
			}
			f, null, _ := nextField(b)
			if null {
				t.Fatalf("oid %d: %v encoded as NULL", c.oid, v)
			}
			fields[i] = f
		}
		for i := range fields {
			for j := range fields {
				want := 0
				switch {
				case i < j:
					want = -1
				case i > j:
					want = 1
				}
				if got := compareVersions(c.oid, fields[i], fields[j]); got != want {
					t.Errorf("oid %d: compare %v and %v = %d, want %d", c.oid, c.values[i], c.values[j], got, want)
				}
			}
		}
	}
}
