package schema

import (
	"fmt"
	"strings"
	"time"
	"unicode/utf8"
)

// Interval is the span of one partition of a table partitioned by range
// of a time column.
type Interval string

const (
	Day   Interval = "day"
	Week  Interval = "week" // ISO weeks, Monday to Monday, as date_trunc('week', ...)
	Month Interval = "month"
)

// Intervals are the Intervals a RangePartition takes, in the order
// messages list them.
var Intervals = []Interval{Day, Week, Month}

// RangePartition is how a table is partitioned: by range of Column, a
// date, timestamp or timestamptz column, one partition per Interval, whose
// bounds are midnights in UTC. Premake is how many partitions after the
// current one are created ahead.
type RangePartition struct {
	Column   string
	Interval Interval
	Premake  int
}

// TimeTypes are the column types a RangePartition's column may have, as
// the catalog and JSONMapper name them.
var TimeTypes = []string{"timestamp with time zone", "timestamp without time zone", "date"}

// Start is the start of the partition that holds t: t's day, Monday or
// first of the month, at midnight UTC.
func (p RangePartition) Start(t time.Time) time.Time {
	t = t.UTC()
	day := time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, time.UTC)
	switch p.Interval {
	case Week:
		return day.AddDate(0, 0, -(int(day.Weekday())+6)%7)
	case Month:
		return time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, time.UTC)
	}
	return day
}

// End is the end, exclusive, of the partition starting at start.
func (p RangePartition) End(start time.Time) time.Time {
	switch p.Interval {
	case Week:
		return start.AddDate(0, 0, 7)
	case Month:
		return start.AddDate(0, 1, 0)
	}
	return start.AddDate(0, 0, 1)
}

// Ahead are the starts of the partitions a table keeps ready at now: the
// current one and the Premake after it.
func (p RangePartition) Ahead(now time.Time) []time.Time {
	starts := []time.Time{p.Start(now)}
	for range p.Premake {
		starts = append(starts, p.End(starts[len(starts)-1]))
	}
	return starts
}

// PartitionName is the name of t's partition starting at start: t's name
// and _pYYYYMMDD (_pYYYYMM by month), the table's part cut so that the
// whole fits Postgres' 63 bytes.
func (t Table) PartitionName(start time.Time) string {
	layout := "_p20060102"
	if t.Partition != nil && t.Partition.Interval == Month {
		layout = "_p200601"
	}
	suffix := start.Format(layout)
	name := t.Name
	for len(name)+len(suffix) > maxIdentLen {
		_, size := utf8.DecodeLastRuneInString(name)
		name = name[:len(name)-size]
	}
	return name + suffix
}

// PartitionQualifiedName is PartitionName quoted and qualified with t's
// schema, as to_regclass takes it.
func (t Table) PartitionQualifiedName(start time.Time) string {
	return Table{Schema: t.Schema, Name: t.PartitionName(start)}.QualifiedName()
}

// PartitionSQL plans the creation of t's partition starting at start,
// when it is missing. Its bounds are literals of the column's type:
// midnight UTC for a timestamptz column, the date for the others.
func (t Table) PartitionSQL(start time.Time) string {
	p := t.Partition
	layout := "2006-01-02"
	for _, c := range t.Columns {
		if c.Name == p.Column && (c.Type == "timestamptz" || c.Type == "timestamp with time zone") {
			layout = "2006-01-02 15:04:05+00"
		}
	}
	return fmt.Sprintf("CREATE TABLE IF NOT EXISTS %s PARTITION OF %s FOR VALUES FROM ('%s') TO ('%s')",
		t.PartitionQualifiedName(start), t.QualifiedName(), start.Format(layout), p.End(start).Format(layout))
}

// PlanPartitions plans the partitions t keeps ready at now (Ahead), each
// created where missing. None when t is not partitioned.
func PlanPartitions(t Table, now time.Time) []string {
	if t.Partition == nil {
		return nil
	}
	var stmts []string
	for _, start := range t.Partition.Ahead(now) {
		stmts = append(stmts, t.PartitionSQL(start))
	}
	return stmts
}

// partitionClause is CREATE TABLE's PARTITION BY of t, or "".
func (t Table) partitionClause() string {
	if t.Partition == nil {
		return ""
	}
	return " PARTITION BY RANGE (" + QuoteIdent(t.Partition.Column) + ")"
}

// IsPartitionSQL says stmt is one of PlanPartitions' statements.
func IsPartitionSQL(stmt string) bool {
	return strings.HasPrefix(stmt, "CREATE TABLE IF NOT EXISTS ") && strings.Contains(stmt, " PARTITION OF ")
}
