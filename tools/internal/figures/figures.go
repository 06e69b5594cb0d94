// Package figures summarizes and prints what the tools measured: the
// median and range of a figure over the repetitions of a run, and numbers
// with thousands separators, as the pages in bench/ and docs/ show them.
//
// No goroutines, no I/O; it imports only the standard library.
package figures

import (
	"fmt"
	"math"
	"slices"
	"strings"
)

// Spread is the median and the range of one figure over the repetitions.
type Spread struct {
	Med, Lo, Hi float64
	N           int // the values it summarizes
}

// SpreadOf summarizes vs, ignoring NaNs; the median of an even count is
// the mean of the middle two. Without values, every figure is NaN.
func SpreadOf(vs []float64) Spread {
	var s []float64
	for _, v := range vs {
		if !math.IsNaN(v) {
			s = append(s, v)
		}
	}
	if len(s) == 0 {
		return Spread{Med: math.NaN(), Lo: math.NaN(), Hi: math.NaN()}
	}
	slices.Sort(s)
	med := s[len(s)/2]
	if len(s)%2 == 0 {
		med = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return Spread{Med: med, Lo: s[0], Hi: s[len(s)-1], N: len(s)}
}

// SpreadOver is the spread of f over xs.
func SpreadOver[T any](xs []T, f func(T) float64) Spread {
	vs := make([]float64, len(xs))
	for i, x := range xs {
		vs[i] = f(x)
	}
	return SpreadOf(vs)
}

// Format prints "med (lo–hi)" with digits decimals (Num), or med alone for
// one value or none.
func (s Spread) Format(digits int) string {
	return s.FormatWith(func(v float64) string { return Num(v, digits) })
}

// FormatWith is Format with f printing each value.
func (s Spread) FormatWith(f func(float64) string) string {
	if s.N <= 1 || s.Lo == s.Hi {
		return f(s.Med)
	}
	return fmt.Sprintf("%s (%s–%s)", f(s.Med), f(s.Lo), f(s.Hi))
}

// Num formats v with digits decimals and thousands separators: 1234567.8
// with 1 digit is "1,234,567.8". NaN and the infinities are "n/a".
func Num(v float64, digits int) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return "n/a"
	}
	s := fmt.Sprintf("%.*f", digits, v)
	intPart, frac, _ := strings.Cut(s, ".")
	var b strings.Builder
	for i, c := range intPart {
		if i > 0 && (len(intPart)-i)%3 == 0 && intPart[i-1] != '-' {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if frac != "" {
		b.WriteString("." + frac)
	}
	return b.String()
}
