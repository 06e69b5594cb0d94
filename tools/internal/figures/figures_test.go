package figures

import (
	"math"
	"testing"
)

func TestSpreadIgnoresNaNAndAveragesTheMiddleTwo(t *testing.T) {
	s := SpreadOf([]float64{4, math.NaN(), 1, 3, 2})
	if s.Med != 2.5 || s.Lo != 1 || s.Hi != 4 || s.N != 4 {
		t.Errorf("SpreadOf = %+v, want median 2.5, range 1–4, n 4", s)
	}
	if got := s.Format(1); got != "2.5 (1.0–4.0)" {
		t.Errorf("Format = %q", got)
	}
	if got := SpreadOf([]float64{7, 7}).Format(0); got != "7" {
		t.Errorf("Format of equal values = %q, want the value alone", got)
	}
	none := SpreadOf([]float64{math.NaN()})
	if !math.IsNaN(none.Med) || !math.IsNaN(none.Lo) || !math.IsNaN(none.Hi) || none.N != 0 || none.Format(0) != "n/a" {
		t.Errorf("SpreadOf of no values = %+v, %q; want NaNs, n 0, n/a", none, none.Format(0))
	}
	if got := SpreadOf([]float64{3, 1, 2}); got.Med != 2 {
		t.Errorf("median of 3, 1, 2 = %v, want 2", got.Med)
	}
}

func TestNumGroupsThousands(t *testing.T) {
	for _, c := range []struct {
		v      float64
		digits int
		want   string
	}{
		{0, 0, "0"}, {999, 0, "999"}, {1000, 0, "1,000"}, {1234567.89, 1, "1,234,567.9"},
		{-1234, 0, "-1,234"}, {-123, 0, "-123"}, {-123456, 2, "-123,456.00"}, {0.7496, 4, "0.7496"},
		{9_007_199_254_740_992, 0, "9,007,199,254,740,992"},
		{math.NaN(), 0, "n/a"}, {math.Inf(1), 0, "n/a"}, {math.Inf(-1), 2, "n/a"},
	} {
		if got := Num(c.v, c.digits); got != c.want {
			t.Errorf("Num(%v, %d) = %q, want %q", c.v, c.digits, got, c.want)
		}
	}
}

func TestSpreadOverAppliesF(t *testing.T) {
	type run struct{ rows, secs float64 }
	s := SpreadOver([]run{{100, 1}, {300, 1}, {1, 0}}, func(r run) float64 {
		if r.secs == 0 {
			return math.NaN()
		}
		return r.rows / r.secs
	})
	if s.Med != 200 || s.Lo != 100 || s.Hi != 300 || s.N != 2 {
		t.Errorf("SpreadOver = %+v, want median 200 of two", s)
	}
}
