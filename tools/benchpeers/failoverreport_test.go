package main

import (
	"strings"
	"testing"
)

// TestFailoverVerdict: a kafka2pg failover that lost or duplicated a
// record, or never wrote again, fails the run and is marked in the report;
// a peer's loss is only reported.
func TestFailoverVerdict(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		r    failoverResult
		fail bool
	}{
		{"kafka2pg with nothing lost passes", failoverResult{System: "kafka2pg", Variant: variantFlowing, Records: 100, Rows: 100}, false},
		{"kafka2pg losing a record fails", failoverResult{System: "kafka2pg", Variant: variantIdle, Records: 100, Rows: 99, Lost: 1}, true},
		{"kafka2pg duplicating a record fails", failoverResult{System: "kafka2pg", Variant: variantKilled, Records: 100, Rows: 101, Duplicates: 1}, true},
		{"kafka2pg never writing again fails", failoverResult{System: "kafka2pg", Variant: variantFlowing, Failed: "waited"}, true},
		{"a peer losing records passes", failoverResult{System: "Debezium JDBC sink", Variant: variantFlowing, Records: 100, Rows: 90, Lost: 10}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rep := &report{failovers: []failoverResult{tc.r}}
			if err := failoverVerdict(rep); (err != nil) != tc.fail {
				t.Errorf("failoverVerdict(%+v) = %v; want failure %t", tc.r, err, tc.fail)
			}
			md := failoverMarkdown(options{failoverRate: 1000}, rep)
			if wrong := strings.Contains(md, "WRONG"); wrong != (tc.fail && tc.r.Failed == "") {
				t.Errorf("the report marks WRONG: %t; want %t:\n%s", wrong, tc.fail && tc.r.Failed == "", md)
			}
		})
	}
}

// TestParseVariantsNamesTheFlag: an unknown variant is refused, naming
// the flag, the value and the values it takes.
func TestParseVariantsNamesTheFlag(t *testing.T) {
	t.Parallel()
	if vs, err := parseVariants("failover", "flowing, idle,"); err != nil || len(vs) != 2 {
		t.Fatalf("parseVariants(\"flowing, idle,\") = %v, %v", vs, err)
	}
	_, err := parseVariants("failover-peers", "flowing,crash")
	if err == nil || !strings.Contains(err.Error(), "-failover-peers") || !strings.Contains(err.Error(), `"crash"`) || !strings.Contains(err.Error(), "flowing,killed,idle") {
		t.Fatalf("parseVariants with an unknown variant: %v", err)
	}
}
