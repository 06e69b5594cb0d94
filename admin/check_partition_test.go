package admin_test

import (
	"strings"
	"testing"
	"time"

	"github.com/kafka2pg/kafka2pg/admin"
	"github.com/kafka2pg/kafka2pg/decode"
	"github.com/kafka2pg/kafka2pg/internal/pgtest"
	"github.com/kafka2pg/kafka2pg/sinks"
)

// TestCheckPostgresReportsPartitionedTables checks partitioned targets:
// the partitions run would create with a table it creates and those
// missing ahead in one it partitions, and the refusal of an upsert key that lacks an
// existing table's partition key, which names the key and the fix.
func TestCheckPostgresReportsPartitionedTables(t *testing.T) {
	t.Parallel()
	_, pool := pgtest.MigratedPool(t)
	id := sinks.Column{ColumnSpec: decode.ColumnSpec{Name: "id", Type: "bigint", NotNull: true}}
	at := sinks.Column{ColumnSpec: decode.ColumnSpec{Name: "created_at", Type: "timestamptz", NotNull: true}}
	premake := 1
	byDay := sinks.PartitionBy{Column: "created_at", Interval: "day", Premake: &premake}
	set, err := sinks.Config{Schema: "public", Sinks: []sinks.Sink{
		{Topic: "a_new", Table: "fresh", Mode: "upsert", Key: []string{"id", "created_at"}, Columns: []sinks.Column{id, at}, PartitionBy: byDay},
		{Topic: "b_ahead", Table: "ahead", Columns: []sinks.Column{id, at}, PartitionBy: byDay},
		{Topic: "c_lacks", Table: "lacks", Mode: "upsert", Key: []string{"id"}, Columns: []sinks.Column{id, at}},
	}}.Build(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	today := time.Now().UTC().Format("20060102")
	if _, err := pool.Exec(t.Context(), `CREATE TABLE ahead (id bigint NOT NULL, created_at timestamptz NOT NULL) PARTITION BY RANGE (created_at);
		CREATE TABLE ahead_p`+today+` PARTITION OF ahead FOR VALUES FROM ('`+today+`Z') TO ('`+today+`Z'::timestamptz + interval '1 day');
		CREATE TABLE lacks (id bigint NOT NULL, created_at timestamptz NOT NULL, PRIMARY KEY (id, created_at)) PARTITION BY RANGE (created_at)`); err != nil {
		t.Fatal(err)
	}
	fs := admin.CheckPostgres(t.Context(), pool, admin.PostgresCheck{Group: "g", Migrate: true, CreateTables: true}, set)
	got := findingsText(fs)
	for _, want := range []string{
		`ok table "public"."fresh" for topic "a_new" does not exist; run will create it:`,
		`    PRIMARY KEY ("id", "created_at")` + "\n) PARTITION BY RANGE (\"created_at\")\n  DDL CREATE TABLE IF NOT EXISTS \"public\".\"fresh_p",
		`ok table "public"."ahead" for topic "b_ahead" is partitioned by RANGE (created_at); run will create the partitions it keeps ready that are missing:` +
			"\n  DDL CREATE TABLE IF NOT EXISTS \"public\".\"ahead_p",
		`FAIL table "public"."lacks" for topic "c_lacks" is partitioned by RANGE (created_at), and the upsert key (id) lacks created_at: ` +
			"a unique index of a partitioned table must hold the partition key; add created_at to the sink's key\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the findings lack %q:\n%s", want, got)
		}
	}
	if n := admin.Failed(fs); n != 1 {
		t.Errorf("Failed = %d, want 1:\n%s", n, got)
	}
	if n := strings.Count(got, "DDL CREATE TABLE IF NOT EXISTS \"public\".\"fresh_p"); n != 2 {
		t.Errorf("check plans %d partitions of fresh, want 2 (today and premake 1):\n%s", n, got)
	}
	if n := strings.Count(got, "DDL CREATE TABLE IF NOT EXISTS \"public\".\"ahead_p"); n != 1 || strings.Contains(got, "ahead_p"+today+"\"") {
		t.Errorf("check plans %d partitions of ahead, want 1 (tomorrow: today's exists):\n%s", n, got)
	}
}
