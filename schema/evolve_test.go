package schema

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// checkGolden compares got with testdata/<name>.sql, rewriting it with -update.
func checkGolden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name+".sql")
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read golden file (run go test ./schema -update to create it): %v", err)
	}
	if got != string(want) {
		t.Errorf("plan =\n%s\nwant (%s)\n%s", got, path, want)
	}
}

// ordersTable is the typed table the plan tests evolve.
func ordersTable(t *testing.T, key []string) Table {
	t.Helper()
	m, err := NewJSONMapper(MappingSpec{Schema: "sales", Table: "Orders", Key: key,
		Columns: []ColumnSpec{
			{Name: "id", From: "key", Path: "id", Type: "bigint"},
			{Name: "customer", Path: "customer.name", Type: "varchar(200)", NotNull: true},
			{Name: "total", Type: "numeric(14,4)"},
			{Name: "ratio", Type: "double precision"},
			{Name: "qty", Type: "integer"},
			{Name: "tags", Type: "text[]"},
			{Name: "placed_at", Type: "timestamptz", TimeUnit: "ms"},
			{Name: "payload", Path: "$", Type: "jsonb"},
			{Name: `we"ird name`, Type: "uuid"},
		},
		Metadata: MetadataSpec{Topic: "kafka_topic", Offset: "kafka_offset", Header: map[string]string{"trace": "trace-id"}}})
	if err != nil {
		t.Fatal(err)
	}
	return m.Table()
}

func TestPlanCreateMatchesGolden(t *testing.T) {
	checkGolden(t, "create_upsert", PlanSQL(PlanCreate(ordersTable(t, []string{"id"}))))
	checkGolden(t, "create_append", PlanSQL(PlanCreate(ordersTable(t, nil))))
}

func TestPlanEvolveMatchesGolden(t *testing.T) {
	want := ordersTable(t, []string{"id"})
	cases := []struct {
		name string
		have []ExistingColumn
	}{
		{"evolve_nothing_to_do", []ExistingColumn{
			{"id", "bigint", true}, {"customer", "character varying(200)", true}, {"total", "numeric(14,4)", false},
			{"ratio", "double precision", false}, {"qty", "integer", false}, {"tags", "text[]", false},
			{"placed_at", "timestamp with time zone", false}, {"payload", "jsonb", false}, {`we"ird name`, "uuid", false},
			{"kafka_topic", "text", true}, {"kafka_offset", "bigint", true}, {"trace", "text", false}, {"unmapped", "money", true}}},
		{"evolve_adds_and_widens", []ExistingColumn{
			{"id", "bigint", true}, {"customer", "character varying(50)", true}, {"total", "numeric(10,2)", false},
			{"ratio", "real", false}, {"qty", "smallint", true}, {"tags", "text[]", false}}},
		{"evolve_keeps_wider_columns", []ExistingColumn{
			{"id", "bigint", true}, {"customer", "text", false}, {"total", "numeric", false},
			{"ratio", "double precision", false}, {"qty", "bigint", false}, {"tags", "text[]", false},
			{"placed_at", "timestamp with time zone", false}, {"payload", "jsonb", false}, {`we"ird name`, "uuid", false},
			{"kafka_topic", "text", true}, {"kafka_offset", "bigint", true}, {"trace", "character varying", false}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			plan, err := PlanEvolve(want, c.have)
			if err != nil {
				t.Fatal(err)
			}
			checkGolden(t, c.name, PlanSQL(plan))
		})
	}
}

func TestPlanEvolveRefusesIncompatibleTypesNamingBoth(t *testing.T) {
	want := ordersTable(t, []string{"id"})
	cases := []struct {
		name string
		have ExistingColumn
	}{
		{"bigint narrowed to integer is not widened back silently", ExistingColumn{"id", "integer", true}},
		{"text is not jsonb", ExistingColumn{"payload", "text", false}},
		{"timestamp is not timestamptz", ExistingColumn{"placed_at", "timestamp without time zone", false}},
		{"fewer integer digits", ExistingColumn{"total", "numeric(16,8)", false}},
		{"an array is not a scalar", ExistingColumn{"tags", "text", false}},
		{"an unknown existing type", ExistingColumn{"qty", "money", false}},
		{"a wider varchar is not narrowed", ExistingColumn{"customer", "character varying(10)[]", false}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			plan, err := PlanEvolve(want, []ExistingColumn{c.have})
			if c.name == "bigint narrowed to integer is not widened back silently" {
				// integer → bigint is a widening: planned, not refused.
				if err != nil || len(plan) == 0 || !strings.Contains(plan[0], `ALTER COLUMN "id" TYPE bigint`) {
					t.Errorf("plan = %q, %v; want the widening to bigint", plan, err)
				}
				return
			}
			if err == nil {
				t.Fatalf("PlanEvolve with %+v = %q, want an error", c.have, plan)
			}
			for _, s := range []string{c.have.Name, c.have.Type, "sales"} {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not name %q", err, s)
				}
			}
		})
	}
}

func TestTypeWideningTable(t *testing.T) {
	cases := []struct {
		from, to string
		widens   bool
	}{
		{"smallint", "integer", true}, {"integer", "bigint", true}, {"smallint", "bigint", true}, {"bigint", "integer", false},
		{"real", "double precision", true}, {"double precision", "real", false},
		{"varchar(10)", "varchar(20)", true}, {"varchar(20)", "varchar(10)", false}, {"varchar(10)", "text", true},
		{"varchar(10)", "varchar", true}, {"varchar", "varchar(10)", false}, {"text", "varchar(10)", false}, {"text", "varchar", true},
		{"numeric(10,2)", "numeric(12,4)", true}, {"numeric(10,2)", "numeric(11,3)", true}, {"numeric(10,2)", "numeric(10,3)", false},
		{"numeric(10,2)", "numeric", true}, {"numeric", "numeric(1000,0)", false},
		{"integer[]", "bigint[]", true}, {"integer[]", "bigint", false}, {"timestamp", "timestamptz", false}, {"text", "jsonb", false},
	}
	for _, c := range cases {
		from, err1 := parseType(c.from)
		to, err2 := parseType(c.to)
		if err1 != nil || err2 != nil {
			t.Fatalf("parse %s, %s: %v %v", c.from, c.to, err1, err2)
		}
		if got := widens(from, to); got != c.widens {
			t.Errorf("widens(%s, %s) = %v, want %v", c.from, c.to, got, c.widens)
		}
	}
}

func TestParseTypeReadsFormatTypeOutput(t *testing.T) {
	for in, want := range map[string]string{
		"character varying(20)": "character varying(20)", "VARCHAR( 20 )": "character varying(20)",
		"numeric(10, 2)": "numeric(10,2)", "decimal(5)": "numeric(5,0)", "int8[]": "bigint[]",
		"timestamp  with time zone": "timestamp with time zone", "timestamptz": "timestamp with time zone",
		"time": "time without time zone", "float4": "real", "bool[]": "boolean[]",
	} {
		ct, err := parseType(in)
		if err != nil || ct.sql() != want {
			t.Errorf("parseType(%q) = %q, %v; want %q", in, ct.sql(), err, want)
		}
	}
}
