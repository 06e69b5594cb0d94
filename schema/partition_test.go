package schema_test

import (
	"strings"
	"testing"
	"time"

	"github.com/kafka2pg/kafka2pg/schema"
)

func TestPlanCreatePartitionedMatchesGolden(t *testing.T) {
	tbl := ordersTable(t, []string{"id", "placed_at"})
	tbl.Partition = &schema.RangePartition{Column: "placed_at", Interval: schema.Month, Premake: 2}
	now := time.Date(2026, 12, 6, 2, 30, 0, 0, time.UTC)
	plan := append(schema.PlanCreate(tbl), schema.PlanPartitions(tbl, now)...)
	checkGolden(t, "create_partitioned", schema.PlanSQL(plan))
}

func TestRangePartitionPeriods(t *testing.T) {
	at := time.Date(2026, 12, 31, 23, 59, 59, 0, time.FixedZone("", -5*3600)) // 2027-01-01 04:59:59 UTC
	cases := []struct {
		interval   schema.Interval
		start, end string
	}{
		{schema.Day, "2027-01-01", "2027-01-02"},
		{schema.Week, "2026-12-28", "2027-01-04"}, // a Monday
		{schema.Month, "2027-01-01", "2027-02-01"},
	}
	for _, c := range cases {
		p := schema.RangePartition{Column: "at", Interval: c.interval}
		start := p.Start(at)
		if got := start.Format(time.DateOnly); got != c.start {
			t.Errorf("%s: Start(%s) = %s, want %s", c.interval, at, got, c.start)
		}
		if got := p.End(start).Format(time.DateOnly); got != c.end {
			t.Errorf("%s: End(%s) = %s, want %s", c.interval, start, got, c.end)
		}
	}
}

func TestPartitionNameFitsPostgresLimit(t *testing.T) {
	tbl := schema.Table{Name: strings.Repeat("é", 40), Partition: &schema.RangePartition{Column: "at", Interval: schema.Day}}
	name := tbl.PartitionName(time.Date(2026, 12, 6, 0, 0, 0, 0, time.UTC))
	if len(name) > 63 || !strings.HasSuffix(name, "_p20261206") {
		t.Errorf("PartitionName = %q (%d bytes), want at most 63 bytes ending in _p20261206", name, len(name))
	}
	if err := schema.ValidateIdent("partition", name); err != nil {
		t.Error(err)
	}
}

// The bounds are literals of the column's type: an instant in UTC for
// timestamptz, a date for date and timestamp.
func TestPartitionSQLBoundsFollowTheColumnType(t *testing.T) {
	start := time.Date(2026, 12, 7, 0, 0, 0, 0, time.UTC)
	cases := map[string]string{
		"timestamp with time zone":    `FOR VALUES FROM ('2026-12-07 00:00:00+00') TO ('2026-12-14 00:00:00+00')`,
		"timestamp without time zone": `FOR VALUES FROM ('2026-12-07') TO ('2026-12-14')`,
		"date":                        `FOR VALUES FROM ('2026-12-07') TO ('2026-12-14')`,
	}
	for typ, want := range cases {
		tbl := schema.Table{Schema: "s", Name: "t", Columns: []schema.Column{{Name: "at", Type: typ}},
			Partition: &schema.RangePartition{Column: "at", Interval: schema.Week}}
		got := tbl.PartitionSQL(start)
		if !strings.HasPrefix(got, `CREATE TABLE IF NOT EXISTS "s"."t_p20261207" PARTITION OF "s"."t" `) || !strings.HasSuffix(got, want) {
			t.Errorf("%s: PartitionSQL = %s, want it to end in %s", typ, got, want)
		}
	}
}
