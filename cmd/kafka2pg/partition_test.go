package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/kafka2pg/kafka2pg/schema"
)

// The example of docs/MAPPING.md's partitioned tables loads, its sinks
// partitioned as it says; the same config with an upsert key that lacks
// the partition column stops run and check with exit 2, naming the key
// and the fix.
func TestThePartitionedTablesExampleAndAKeyWithoutItsColumn(t *testing.T) {
	example := mappingExample(t, "## Partitioned tables")
	t.Setenv("DATABASE_URL", "postgres://app@127.0.0.1:1/shop")
	sinks := exampleSinks(t, example)
	orders, clicks := sinks["orders"].Table.Partition, sinks["clicks"].Table.Partition
	if orders == nil || *orders != (schema.RangePartition{Column: "created_at", Interval: schema.Month, Premake: 3}) {
		t.Errorf("MAPPING.md example: orders is partitioned by %+v, want created_at by month, 3 ahead", orders)
	}
	if clicks == nil || *clicks != (schema.RangePartition{Column: "at", Interval: schema.Day, Premake: 3}) {
		t.Errorf("MAPPING.md example: clicks is partitioned by %+v, want at by day, 3 ahead", clicks)
	}

	keyless := strings.Replace(example, "key: [id, created_at]", "key: [id]", 1)
	if keyless == example {
		t.Fatal("the example has no orders key to break")
	}
	want := "key [id] lacks created_at, the partition_by column: a unique index of a partitioned table must hold the partition key; add it: key: [id, created_at]"
	code, stderr := runWithConfig(t, keyless, "--metrics-addr=")
	if code != exitUsage || !strings.Contains(stderr, want) || !strings.Contains(stderr, `sink of topic "orders"`) {
		t.Errorf("run: exit %d, stderr:\n%s\nwant exit %d and %q", code, stderr, exitUsage, want)
	}
	t.Setenv("KAFKA2PG_PG_URL", "")
	var stdout, errOut bytes.Buffer
	code = dispatch(context.Background(), []string{"check", "--config", writeConfig(t, keyless)}, &stdout, &errOut)
	if code != exitUsage || !strings.Contains(errOut.String(), want) {
		t.Errorf("check: exit %d, stderr:\n%s\nwant exit %d and %q", code, errOut.String(), exitUsage, want)
	}
}
