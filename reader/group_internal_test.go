package reader

import "testing"

func TestPartitionsReadInALogLineSorted(t *testing.T) {
	got := fmtPartitions(map[string][]int32{"payments": {3}, "orders": {2, 0, 1}})
	if want := "orders:0,1,2 payments:3"; got != want {
		t.Errorf("fmtPartitions = %q, want %q", got, want)
	}
	if got := fmtPartitions(nil); got != "" {
		t.Errorf("fmtPartitions(nil) = %q, want empty", got)
	}
}
