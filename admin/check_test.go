package admin_test

import (
	"strings"
	"testing"

	"github.com/kafka2pg/kafka2pg/admin"
	"github.com/kafka2pg/kafka2pg/decode"
	"github.com/kafka2pg/kafka2pg/internal/pgtest"
	"github.com/kafka2pg/kafka2pg/sinks"
)

// TestCheckPostgresReportsThePlanEnsureTablesApplies checks each table
// case against real tables: the DDL run would execute, the columns it
// lacks with the statements that would fix them, the upsert key's unique
// index. It then applies nothing and finds the database as it was.
func TestCheckPostgresReportsThePlanEnsureTablesApplies(t *testing.T) {
	_, pool := pgtest.MigratedPool(t)
	id := sinks.Column{ColumnSpec: decode.ColumnSpec{Name: "id", Path: "id", Type: "bigint", NotNull: true}}
	note := sinks.Column{ColumnSpec: decode.ColumnSpec{Name: "note", Path: "note", Type: "text"}}
	set, err := sinks.Config{Schema: "public", Sinks: []sinks.Sink{
		{Topic: "a_new", Table: "fresh", Columns: []sinks.Column{id}},
		{Topic: "b_fits", Table: "fits", Columns: []sinks.Column{id, note}},
		{Topic: "c_lacks", Table: "lacks", Columns: []sinks.Column{id, note}},
		{Topic: "d_evolves", Table: "evolves", Columns: []sinks.Column{id, note}, Evolve: true},
		{Topic: "e_keyless", Table: "keyless", Mode: "upsert", Key: []string{"id"}, Columns: []sinks.Column{id}},
		{Topic: "f_keyed", Table: "keyed", Mode: "upsert", Key: []string{"id"}, Columns: []sinks.Column{id},
			Children: []sinks.ChildTable{{Path: "items", Table: "keyed_items", Columns: []sinks.Column{note}}}},
		{Topic: "g_routed", Table: "ev_${value.type}", Columns: []sinks.Column{id}},
	}}.Build(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(t.Context(), `CREATE TABLE fits (id bigint NOT NULL, note text);
		CREATE TABLE lacks (id bigint NOT NULL);
		CREATE TABLE evolves (id bigint NOT NULL);
		CREATE TABLE keyless (id bigint NOT NULL);
		CREATE TABLE keyed (id bigint PRIMARY KEY)`); err != nil {
		t.Fatal(err)
	}
	fs := admin.CheckPostgres(t.Context(), pool, admin.PostgresCheck{Group: "g", Migrate: true, CreateTables: true}, set)
	got := findingsText(fs)
	for _, want := range []string{
		"ok postgres: connected (read only)\n",
		`ok table "public"."fresh" for topic "a_new" does not exist; run will create it:` + "\n  DDL CREATE TABLE",
		`ok table "public"."fits" for topic "b_fits" exists with the columns the mapping writes` + "\n",
		`FAIL table "public"."lacks" for topic "c_lacks" lacks column(s) "note" that kafka2pg writes` +
			": add them, or set evolve: true in the sink\n  FIX ALTER TABLE \"public\".\"lacks\" ADD COLUMN IF NOT EXISTS \"note\" text\n",
		`ok table "public"."evolves" for topic "d_evolves" exists; run will evolve it (evolve: true):` + "\n  DDL ALTER TABLE",
		`FAIL table "public"."keyless" for topic "e_keyless" has no unique index on the upsert key (id)`,
		`ok table "public"."keyed" for topic "f_keyed" has a unique index on the upsert key (id)` + "\n",
		`note tables "public"."ev_${value.type}" for topic "g_routed": routed by content, each created (and evolved) on its first record`,
		`ok table "public"."keyed_items" for topic "f_keyed" does not exist; run will create it:` + "\n  DDL CREATE TABLE",
		`PRIMARY KEY ("id", "index")`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the findings lack %q:\n%s", want, got)
		}
	}
	if n := admin.Failed(fs); n != 2 {
		t.Errorf("Failed = %d, want 2:\n%s", n, got)
	}
	var fresh, note2 bool
	if err := pool.QueryRow(t.Context(), `SELECT to_regclass('public.fresh') IS NOT NULL,
		EXISTS (SELECT FROM information_schema.columns WHERE table_name = 'evolves' AND column_name = 'note')`).Scan(&fresh, &note2); err != nil {
		t.Fatal(err)
	}
	if fresh || note2 {
		t.Errorf("check changed the database: table fresh exists %v, evolves.note exists %v", fresh, note2)
	}
}

// findingsText is fs as lines of level and message, each followed by its
// DDL and Fix statements.
func findingsText(fs []admin.Finding) string {
	var b strings.Builder
	for _, f := range fs {
		b.WriteString(f.Level.String() + " " + f.Message + "\n")
		for _, s := range f.DDL {
			b.WriteString("  DDL " + s + "\n")
		}
		for _, s := range f.Fix {
			b.WriteString("  FIX " + s + "\n")
		}
	}
	return b.String()
}

// A sink with transactions brings its transaction topic, which check
// names as such rather than planning a table for it.
func TestCheckPostgresNamesTheTransactionTopicOfASinkWithTransactions(t *testing.T) {
	t.Parallel()
	_, pool := pgtest.MigratedPool(t)
	set, err := sinks.Config{Sinks: []sinks.Sink{{Topic: "shop.public.a", Format: "debezium", Transactions: true}}}.Build(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var got strings.Builder
	for _, f := range admin.CheckPostgres(t.Context(), pool, admin.PostgresCheck{Group: "g", Migrate: true, CreateTables: true}, set) {
		got.WriteString(f.Level.String() + " " + f.Message + "\n")
	}
	want := `note topic "shop.transaction": the transaction topic of the sinks with transactions: true; its END records are staged in "kafka2pg"."cdc_tx_ends"`
	if !strings.Contains(got.String(), want) || strings.Contains(got.String(), "FAIL") {
		t.Fatalf("check said:\n%s\nwant %q and no FAIL", got.String(), want)
	}
}
