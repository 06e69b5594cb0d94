package admin

import (
	"strings"
	"testing"

	"github.com/kafka2pg/kafka2pg/decode"
	"github.com/kafka2pg/kafka2pg/internal/pgtest"
	"github.com/kafka2pg/kafka2pg/sinks"
)

// TestPlanRewindTellsWhichTablesCanMoveBackWithoutDuplicates checks every
// way a reset can treat a table it moves back, against real tables.
func TestPlanRewindTellsWhichTablesCanMoveBackWithoutDuplicates(t *testing.T) {
	_, pool := pgtest.MigratedPool(t)
	col := sinks.Column{ColumnSpec: decode.ColumnSpec{Name: "id", Path: "id", Type: "bigint", NotNull: true}}
	meta := decode.MetadataSpec{Partition: "kafka_partition", Offset: "kafka_offset"}
	specs := []sinks.Sink{
		{Topic: "zero", Table: "zero"},
		{Topic: "typed", Table: "typed", Columns: []sinks.Column{col}, Metadata: meta},
		{Topic: "evolved", Table: "evolved", Columns: []sinks.Column{col}, Metadata: meta},
		{Topic: "bare", Table: "bare", Columns: []sinks.Column{col}},
		{Topic: "keyed", Table: "keyed", Columns: []sinks.Column{col}},
		{Topic: "upsert", Table: "upserted", Mode: "upsert", Key: []string{"id"}, Columns: []sinks.Column{col}},
		{Topic: "missing", Table: "missing", Columns: []sinks.Column{col}},
		{Topic: "a", Table: "shared", Columns: []sinks.Column{col}, Metadata: meta},
		{Topic: "b", Table: "shared", Columns: []sinks.Column{col}, Metadata: meta},
		{Topic: "routed", Table: "r_${value.kind}"},
		{Topic: "routed_upsert", Table: "u_${header.h}", Mode: "upsert", Key: []string{"id"}, Columns: []sinks.Column{col}},
	}
	for _, q := range []string{
		`CREATE TABLE zero (kafka_topic text NOT NULL, kafka_partition integer NOT NULL, kafka_offset bigint NOT NULL, kafka_timestamp timestamptz,
			kafka_key bytea, kafka_headers jsonb, value jsonb, PRIMARY KEY (kafka_partition, kafka_offset, kafka_topic))`,
		`CREATE TABLE typed (id bigint NOT NULL, kafka_partition integer NOT NULL, kafka_offset bigint NOT NULL)`,
		`CREATE TABLE evolved (id bigint NOT NULL, kafka_partition integer, kafka_offset bigint)`,
		`INSERT INTO evolved VALUES (1, NULL, NULL), (2, 0, 7)`,
		`CREATE TABLE bare (id bigint NOT NULL)`,
		`CREATE TABLE keyed (id bigint PRIMARY KEY)`,
		`CREATE TABLE upserted (id bigint PRIMARY KEY)`,
		`CREATE TABLE shared (id bigint NOT NULL, kafka_partition integer NOT NULL, kafka_offset bigint NOT NULL)`,
	} {
		if _, err := pool.Exec(t.Context(), q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	set, err := sinks.Config{Sinks: specs, Schema: "public"}.Build(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	fixed := set.Fixed
	cases := []struct {
		topic      string
		deleteRows bool
		gathered   []string
		want       RewindMode
		why        string // a substring of why
	}{
		{"zero", true, nil, RewindDelete, "deleted in the reset's transaction"},
		{"zero", false, nil, RewindUnique, "unique_violation"},
		{"typed", true, nil, RewindDelete, "deleted"},
		{"typed", false, nil, RewindRefused, "--delete-rewound-rows=false"},
		{"evolved", true, nil, RewindRefused, "1 of its rows have no partition or offset"},
		{"bare", true, nil, RewindRefused, "metadata: {partition: kafka_partition, offset: kafka_offset}"},
		{"keyed", true, nil, RewindUnique, "unique_violation"},
		{"upsert", true, nil, RewindUpsert, "upsert"},
		{"missing", true, nil, RewindNoTable, "does not exist"},
		{"a", true, []string{"b"}, RewindRefused, "gathers topics a and b and has no topic column"},
		{"routed", true, nil, RewindRefused, "routes by content into many tables"},
		{"routed_upsert", true, nil, RewindUpsert, "upsert"},
	}
	for _, c := range cases {
		got, err := planRewind(t.Context(), pool, specs, c.topic, fixed[c.topic], true, c.deleteRows, c.gathered)
		if err != nil {
			t.Fatalf("topic %s: %v", c.topic, err)
		}
		if got.Mode != c.want || !strings.Contains(got.Why, c.why) {
			t.Errorf("topic %s (delete rows %v): mode %d, %q; want mode %d saying %q", c.topic, c.deleteRows, got.Mode, got.Why, c.want, c.why)
		}
	}
	if got, _ := planRewind(t.Context(), pool, specs, "unknown", fixed["unknown"], false, true, nil); got.Mode != RewindRefused || !strings.Contains(got.Why, "--config") {
		t.Errorf("a topic without a sink: %+v, want refused, naming --config", got)
	}
	// The rows each table would lose: the zero-config table's by topic,
	// the typed one's without.
	for _, c := range []struct {
		topic string
		rows  int64
	}{{"zero", 2}, {"typed", 1}} {
		if _, err := pool.Exec(t.Context(), `INSERT INTO typed VALUES (1, 0, 6), (2, 0, 7), (3, 1, 9);
			INSERT INTO zero (kafka_topic, kafka_partition, kafka_offset) VALUES ('zero', 0, 7), ('zero', 0, 8), ('other', 0, 9), ('zero', 1, 9)`); err != nil {
			t.Fatal(err)
		}
		target, err := planRewind(t.Context(), pool, specs, c.topic, fixed[c.topic], true, true, nil)
		if err != nil {
			t.Fatal(err)
		}
		rows, letters, err := countRewound(t.Context(), pool, target, "g", c.topic, 0, 7)
		if err != nil || rows != c.rows || letters != 0 {
			t.Errorf("%s: rows of partition 0 at or past offset 7: %d rows, %d letters (%v); want %d and 0", c.topic, rows, letters, err, c.rows)
		}
		if _, err := pool.Exec(t.Context(), `TRUNCATE typed, zero`); err != nil {
			t.Fatal(err)
		}
	}
}
