package cdc

import (
	"math"
	"math/big"
	"strconv"
	"testing"
)

// FuzzParseIntMatchesStrconv: the fast integer path reads every text as
// strconv.ParseInt does, value, error and range error alike.
func FuzzParseIntMatchesStrconv(f *testing.F) {
	for _, s := range []string{"0", "-0", "7", "-128", "127", "128", "-129", "32767", "-32769", "2147483647", "2147483648",
		"-2147483648", "999999999999999999", "-999999999999999999", "1000000000000000000", "9223372036854775807",
		"9223372036854775808", "-9223372036854775808", "1.5", "1e3", "-", "", "01", "12a"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for _, bits := range []int{8, 16, 32, 64} {
			got, gerr := parseInt([]byte(s), bits)
			want, werr := strconv.ParseInt(s, 10, bits)
			if got != want || (gerr == nil) != (werr == nil) || errIsRange(gerr) != errIsRange(werr) {
				t.Fatalf("parseInt(%q, %d) = %d, %v; strconv says %d, %v", s, bits, got, gerr, want, werr)
			}
		}
	})
}

func TestDecimalDigitsCountsEveryWidth(t *testing.T) {
	for _, x := range []*big.Int{big.NewInt(0), big.NewInt(9), big.NewInt(-10), big.NewInt(math.MaxInt64), big.NewInt(math.MinInt64),
		new(big.Int).Lsh(big.NewInt(1), 64), new(big.Int).Neg(new(big.Int).Lsh(big.NewInt(1), 70))} {
		if got, want := decimalDigits(x), len(new(big.Int).Abs(x).String()); got != want {
			t.Errorf("decimalDigits(%s) = %d, want %d", x, got, want)
		}
	}
}
