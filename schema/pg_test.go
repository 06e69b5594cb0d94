package schema_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/kafka2pg/kafka2pg/internal/pgtest"
	"github.com/kafka2pg/kafka2pg/schema"
)

// TestPlanEvolveAppliesToARealTable creates an older, narrower table, applies
// the evolve plan, and checks the catalog then matches the mapping.
func TestPlanEvolveAppliesToARealTable(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	conn := pgtest.Conn(t)
	old := `CREATE SCHEMA sales; CREATE TABLE sales."Orders" (id bigint PRIMARY KEY, customer varchar(50) NOT NULL,
		total numeric(10,2), ratio real, qty smallint NOT NULL, tags text[], extra money NOT NULL DEFAULT 0)`
	if _, err := conn.Exec(ctx, old); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `INSERT INTO sales."Orders" (id, customer, total, ratio, qty) VALUES (1, 'x', 12345678.91, 1.5, 3)`); err != nil {
		t.Fatal(err)
	}
	want := ordersTable(t, []string{"id"})
	existing := func() []schema.ExistingColumn {
		rows, err := conn.Query(ctx, schema.ExistingColumnsSQL, want.QualifiedName())
		if err != nil {
			t.Fatal(err)
		}
		have, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (schema.ExistingColumn, error) {
			var c schema.ExistingColumn
			err := row.Scan(&c.Name, &c.Type, &c.NotNull, &c.Filled, &c.Generated)
			return c, err
		})
		if err != nil {
			t.Fatal(err)
		}
		return have
	}
	plan, err := schema.PlanEvolve(want, existing())
	if err != nil {
		t.Fatal(err)
	}
	for _, stmt := range plan {
		if _, err := conn.Exec(ctx, stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	again, err := schema.PlanEvolve(want, existing())
	if err != nil || len(again) != 0 {
		t.Errorf("after applying %q, PlanEvolve = %q, %v; want nothing to do", plan, again, err)
	}
	var total string
	if err := conn.QueryRow(ctx, `SELECT total::text FROM sales."Orders"`).Scan(&total); err != nil || total != "12345678.9100" {
		t.Errorf("total after widening = %q, %v", total, err)
	}
}
