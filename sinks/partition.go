package sinks

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/kafka2pg/kafka2pg/ingest"
	"github.com/kafka2pg/kafka2pg/schema"
)

// PartitionBy makes a typed JSON sink's table partitioned by range of a
// time column (declarative partitioning), one partition per interval:
//
//	partition_by: {column: created_at, interval: month, premake: 3}
//
// kafka2pg creates the table PARTITION BY RANGE (column) when it creates
// it, the current partition and Premake after it at every start, and the
// partition of a row outside them when the row comes (ingest.Sink's
// Table.Partition). An upsert key must hold the column. The zero value,
// no column, is a table as it is.
type PartitionBy struct {
	// Column is a date, timestamp or timestamptz column of the sink.
	Column string `yaml:"column"`
	// Interval is each partition's span: day, week (Monday to Monday) or
	// month (default), its bounds midnights in UTC.
	Interval string `yaml:"interval"`
	// Premake is how many partitions after the current one are created
	// ahead at every start. Default 3.
	Premake *int `yaml:"premake"`
}

// defaultPremake is PartitionBy.Premake's default.
const defaultPremake = 3

// maxPremake bounds PartitionBy.Premake: each start creates that many
// tables.
const maxPremake = 1000

// checkPartitionBy checks what of sc's partition_by the sink's YAML alone
// tells: the format, the column among the columns, the interval, premake
// and that an upsert key holds the column.
func checkPartitionBy(sc Sink) error {
	p := sc.PartitionBy
	if p == (PartitionBy{}) {
		return nil
	}
	if sc.Format != "" && sc.Format != "json" || len(sc.Columns) == 0 {
		return keyErr("partition_by", errors.New("partition_by partitions a table of typed JSON columns: declare the columns (format json), or drop partition_by and partition the table yourself"))
	}
	var errs []error
	if p.Column == "" {
		errs = append(errs, keyErr("partition_by.column", errors.New("partition_by needs column: the date, timestamp or timestamptz column whose range picks a row's partition")))
	} else if !slices.ContainsFunc(sc.Columns, func(c Column) bool { return c.Name == p.Column }) {
		errs = append(errs, keyErr("partition_by.column", fmt.Errorf("partition_by's column %q is not a column of the sink: name one of its date, timestamp or timestamptz columns", p.Column)))
	}
	if p.Interval != "" && !slices.Contains(schema.Intervals, schema.Interval(p.Interval)) {
		errs = append(errs, keyErr("partition_by.interval", fmt.Errorf("partition_by's interval %q is not one of %s: choose one", p.Interval, intervalList())))
	}
	if p.Premake != nil && (*p.Premake < 0 || *p.Premake > maxPremake) {
		errs = append(errs, keyErr("partition_by.premake", fmt.Errorf("partition_by's premake %d is not between 0 and %d: give how many partitions after the current one to create ahead", *p.Premake, maxPremake)))
	}
	if sc.Mode == "upsert" && p.Column != "" && len(sc.Key) > 0 && !slices.Contains(sc.Key, p.Column) {
		errs = append(errs, keyErr("key", fmt.Errorf("key [%s] lacks %s, the partition_by column: a unique index of a partitioned table must hold the partition key; add it: key: [%s, %s]",
			strings.Join(sc.Key, ", "), p.Column, strings.Join(sc.Key, ", "), p.Column)))
	}
	return errors.Join(errs...)
}

// partitioned is sink with sc's partition_by (checkPartitionBy checked
// it): its table's Partition, once the column's type is known to be a
// time type.
func partitioned(sc Sink, sink ingest.Sink) (ingest.Sink, error) {
	p := sc.PartitionBy
	if p == (PartitionBy{}) {
		return sink, nil
	}
	i := slices.Index(sink.Table.ColumnNames(), p.Column)
	if i < 0 {
		return sink, keyErr("partition_by.column", fmt.Errorf("partition_by's column %q is not a column of the sink's table", p.Column))
	}
	if typ := sink.Table.Columns[i].Type; !slices.Contains(schema.TimeTypes, typ) {
		return sink, keyErr("partition_by.column", fmt.Errorf("partition_by's column %q is %s: it ranges over a date, timestamp or timestamptz column", p.Column, typ))
	}
	premake := defaultPremake
	if p.Premake != nil {
		premake = *p.Premake
	}
	sink.Table.Partition = &schema.RangePartition{Column: p.Column, Interval: schema.Interval(p.Interval), Premake: premake}
	if p.Interval == "" {
		sink.Table.Partition.Interval = schema.Month
	}
	return sink, nil
}

func intervalList() string {
	var s []string
	for _, i := range schema.Intervals {
		s = append(s, string(i))
	}
	return strings.Join(s, ", ")
}
