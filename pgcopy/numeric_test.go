package pgcopy

import (
	"bytes"
	"math"
	"math/big"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgtype"
)

// num is the numeric of a decimal literal such as "-1.005" or "1.2e23".
func num(s string) pgtype.Numeric {
	mant, e, _ := strings.Cut(s, "e")
	exp := 0
	if e != "" {
		var err error
		if exp, err = strconv.Atoi(e); err != nil {
			panic(s)
		}
	}
	whole, frac, _ := strings.Cut(mant, ".")
	i, ok := new(big.Int).SetString(whole+frac, 10)
	if !ok {
		panic(s)
	}
	return pgtype.Numeric{Int: i, Exp: int32(exp - len(frac)), Valid: true}
}

// pgtypeNumericBytes is what pgtype's own codec writes for n.
func pgtypeNumericBytes(t testing.TB, n pgtype.Numeric) []byte {
	t.Helper()
	b, err := pgtype.NewMap().Encode(pgtype.NumericOID, pgtype.BinaryFormatCode, n, nil)
	if err != nil {
		t.Fatalf("pgtype encode %v: %v", n, err)
	}
	return b
}

func numericCodecBytes(t testing.TB, n pgtype.Numeric) []byte {
	t.Helper()
	m := pgtype.NewMap()
	m.RegisterType(&pgtype.Type{Name: "numeric", OID: pgtype.NumericOID, Codec: NumericCodec{}})
	b, err := m.Encode(pgtype.NumericOID, pgtype.BinaryFormatCode, n, nil)
	if err != nil {
		t.Fatalf("NumericCodec encode %v: %v", n, err)
	}
	return b
}

func TestNumericCodecWritesWhatPgtypeWrites(t *testing.T) {
	var cases []pgtype.Numeric
	for _, s := range []string{"0", "1", "-1", "0.5", "-1.005", "12.34", "9999.9999", "10000", "0.0001", "0.00001", "1e-30",
		"1.2e23", "18446744073709551615", "18446744073709551616", "-18446744073709551615", "999999999999999999.99",
		"1844674407370955.1615", "123456789e60", "1e-64", "1e-65", "5e64", "5e65"} {
		cases = append(cases, num(s))
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 20000 {
		i := new(big.Int).SetUint64(rng.Uint64() >> rng.UintN(64))
		if rng.IntN(2) == 0 {
			i.Neg(i)
		}
		cases = append(cases, pgtype.Numeric{Int: i, Exp: int32(rng.IntN(161) - 80), Valid: true})
	}
	cases = append(cases, pgtype.Numeric{}, pgtype.Numeric{NaN: true, Valid: true}, pgtype.Numeric{InfinityModifier: pgtype.NegativeInfinity, Valid: true},
		pgtype.Numeric{Int: big.NewInt(math.MinInt64), Exp: -2, Valid: true})
	for _, n := range cases {
		if got, want := numericCodecBytes(t, n), pgtypeNumericBytes(t, n); !bytes.Equal(got, want) {
			t.Fatalf("%v (Int %v, Exp %d): NumericCodec wrote %x, pgtype %x", n, n.Int, n.Exp, got, want)
		}
	}
}

// BenchmarkNumericEncode: one numeric(12,2) value as binary COPY encodes it.
func BenchmarkNumericEncode(b *testing.B) {
	n := num("123.45")
	for _, c := range []struct {
		name  string
		codec pgtype.Codec
	}{{"pgtype", pgtype.NumericCodec{}}, {"NumericCodec", NumericCodec{}}} {
		b.Run(c.name, func(b *testing.B) {
			m := pgtype.NewMap()
			m.RegisterType(&pgtype.Type{Name: "numeric", OID: pgtype.NumericOID, Codec: c.codec})
			plan := m.PlanEncode(pgtype.NumericOID, pgtype.BinaryFormatCode, n)
			buf := make([]byte, 0, 64)
			b.ReportAllocs()
			for b.Loop() {
				var err error
				if buf, err = plan.Encode(n, buf[:0]); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
