package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// The example of docs/MAPPING.md's soft deletes and version loads, and
// each sink gets what it says.
func TestTheSoftDeleteAndVersionExampleIsValid(t *testing.T) {
	t.Setenv("DATABASE_URL", "postgres://app@127.0.0.1:1/shop")
	sinks := exampleSinks(t, mappingExample(t, "## Soft deletes and the version guard"))
	prices, carts, customers := sinks["prices"], sinks["carts"], sinks["shop.public.customers"]
	switch {
	case prices.Deleted == nil || prices.Deleted.Column != "deleted_at" || prices.Deleted.Flag || prices.Version != "revision":
		t.Errorf("prices: deleted %+v, version %q: want deleted_at and revision", prices.Deleted, prices.Version)
	case carts.Deleted == nil || carts.Deleted.Column != "is_deleted" || !carts.Deleted.Flag || carts.Version != "":
		t.Errorf("carts: deleted %+v, version %q: want the flag is_deleted and no version", carts.Deleted, carts.Version)
	case customers.Deleted == nil || customers.Version != "src_version" || customers.Changes == nil:
		t.Errorf("shop.public.customers: deleted %+v, version %q: want a debezium sink with deleted_at and src_version", customers.Deleted, customers.Version)
	}
	if cols := prices.Table.ColumnNames(); cols[len(cols)-1] != "deleted_at" {
		t.Errorf("prices' table has columns %v: want deleted_at last", cols)
	}
}

// run and check refuse soft deletes and a version that mean nothing,
// naming the sink's key, before they read anything.
func TestRunAndCheckRefuseABadSoftDeleteOrVersion(t *testing.T) {
	t.Setenv("KAFKA2PG_PG_URL", "")
	t.Setenv("DATABASE_URL", "")
	head := "kafka-brokers: [127.0.0.1:1]\nkafka-group: g\npg-url: postgres://x@127.0.0.1:1/db\nsinks:\n"
	// upsert is a sink of t by id with a bigint revision, keys between.
	upsert := func(keys string) string {
		return "  - topic: t\n    mode: upsert\n    key: [id]\n" + keys +
			"    columns:\n      - {name: id, type: bigint, from: key, path: id, not_null: true}\n      - {name: revision, type: bigint}\n      - {name: note, type: text}\n"
	}
	cases := []struct{ name, sink, want string }{
		{"a version naming no column", upsert("    version: revison\n"), `sink of topic "t" at line 5: version "revison" is not in columns`},
		{"delete soft on an append sink", "  - {topic: t, delete: soft, columns: [{name: id, type: bigint}]}\n",
			"sink of topic \"t\" at line 5: delete: soft marks the rows an upsert sink's tombstones delete: set mode: upsert"},
		{"a version with hard deletes", upsert("    delete_on_tombstone: true\n    version: revision\n"), "sink of topic \"t\" at line 5: version with hard deletes"},
		{"a debezium version with hard deletes", "  - {topic: t, format: debezium, version: v}\n", "sink of topic \"t\" at line 5: version with hard deletes"},
		{"a version of type text", upsert("    version: note\n"), `sink of topic "t" at line 5: version "note" is of type text`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			text := head + c.sink
			code, stderr := runWithConfig(t, text, "--metrics-addr=")
			if code != exitUsage || !strings.Contains(stderr, c.want) {
				t.Errorf("run: exit %d, stderr:\n%s\nwant exit %d and %q", code, stderr, exitUsage, c.want)
			}
			var stdout, errs bytes.Buffer
			code = dispatch(context.Background(), []string{"check", "--config", writeConfig(t, text)}, &stdout, &errs)
			if code != exitUsage || !strings.Contains(errs.String(), c.want) {
				t.Errorf("check: exit %d, stderr:\n%s\nwant exit %d and %q", code, errs.String(), exitUsage, c.want)
			}
		})
	}
}
