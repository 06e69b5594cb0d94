package sinks_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/kafka2pg/kafka2pg/schema"
	"github.com/kafka2pg/kafka2pg/sinks"
)

func TestPartitionByMakesTheTablePartitionedByRange(t *testing.T) {
	set := build(t, `sinks:
  - topic: orders
    mode: upsert
    key: [id, created_at]
    partition_by: {column: created_at, interval: week}
    columns:
      - {name: id, type: bigint, not_null: true}
      - {name: created_at, type: timestamptz, not_null: true}
`)
	got := set.Fixed["orders"].Table.Partition
	want := schema.RangePartition{Column: "created_at", Interval: schema.Week, Premake: 3}
	if got == nil || *got != want {
		t.Fatalf("Table.Partition = %+v, want %+v", got, want)
	}
}

// Each mistake in partition_by is a FieldError naming its key and the fix.
func TestPartitionByMistakesNameTheirKey(t *testing.T) {
	cases := []struct {
		name, sink, field, want string
	}{
		{"an upsert key without the partition column", `mode: upsert
    key: [id]
    partition_by: {column: created_at}`, "sinks[0].key", "key [id] lacks created_at, the partition_by column: a unique index of a partitioned table must hold the partition key; add it: key: [id, created_at]"},
		{"a column the sink lacks", `partition_by: {column: placed_at}`, "sinks[0].partition_by.column", `partition_by's column "placed_at" is not a column of the sink`},
		{"a column that is not a time", `partition_by: {column: id}`, "sinks[0].partition_by.column", `partition_by's column "id" is bigint: it ranges over a date, timestamp or timestamptz column`},
		{"an unknown interval", `partition_by: {column: created_at, interval: hour}`, "sinks[0].partition_by.interval", `partition_by's interval "hour" is not one of day, week, month: choose one`},
		{"a negative premake", `partition_by: {column: created_at, premake: -1}`, "sinks[0].partition_by.premake", "partition_by's premake -1 is not between 0 and 1000"},
		{"no column", `partition_by: {interval: day}`, "sinks[0].partition_by.column", "partition_by needs column"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := load(t, `sinks:
  - topic: orders
    `+c.sink+`
    columns:
      - {name: id, type: bigint, not_null: true}
      - {name: created_at, type: timestamptz, not_null: true}
`)
			err := cfg.Validate()
			var fe *sinks.FieldError
			if !errors.As(err, &fe) || fe.Field != c.field || !strings.Contains(fe.Err.Error(), c.want) {
				t.Errorf("Validate = %v; want a FieldError of %s saying %q", err, c.field, c.want)
			}
		})
	}
}

func TestPartitionByIsRefusedWithoutTypedColumns(t *testing.T) {
	err := load(t, "sinks:\n  - topic: raw\n    partition_by: {column: kafka_timestamp}\n").Validate()
	var fe *sinks.FieldError
	if !errors.As(err, &fe) || fe.Field != "sinks[0].partition_by" {
		t.Errorf("Validate = %v; want a FieldError of sinks[0].partition_by", err)
	}
}
