package decode

import (
	"math"
	"testing"
)

func TestANegativeZeroStaysNegativeInFloatColumns(t *testing.T) {
	for _, tc := range []struct {
		text     string
		kind     valueKind
		negative bool
	}{
		{"-0.0", kindNumber, true},
		{"-0", kindNumber, true},
		{"-0e10", kindNumber, true},
		{"0.0", kindNumber, false},
		{"-1e-400", kindNumber, true}, // underflows to zero, keeps its sign
		{"-0.0", kindString, true},
	} {
		v := jsonValue{kind: tc.kind, text: tc.text}
		f8, err := convertFloat64(nil, v)
		if err != nil {
			t.Fatalf("double precision %q: %+v", tc.text, *err)
		}
		f4, err := convertFloat32(nil, v)
		if err != nil {
			t.Fatalf("real %q: %+v", tc.text, *err)
		}
		if f8.(float64) != 0 {
			t.Fatalf("double precision %q = %v, want a zero", tc.text, f8)
		}
		if got := math.Signbit(f8.(float64)); got != tc.negative {
			t.Errorf("double precision %q: sign bit %v, want %v", tc.text, got, tc.negative)
		}
		if got := math.Signbit(float64(f4.(float32))); got != tc.negative {
			t.Errorf("real %q: sign bit %v, want %v", tc.text, got, tc.negative)
		}
	}
}
