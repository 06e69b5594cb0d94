package admin

import (
	"slices"
	"strings"
	"testing"

	"github.com/kafka2pg/kafka2pg/decode"
	"github.com/kafka2pg/kafka2pg/schema"
	"github.com/kafka2pg/kafka2pg/sinks"
)

func TestFitTableFindsWhatWouldRefuseEveryRow(t *testing.T) {
	set, err := sinks.Config{Sinks: []sinks.Sink{{Topic: "orders", Table: "orders", Columns: []sinks.Column{
		{ColumnSpec: decode.ColumnSpec{Name: "id", Path: "id", Type: "bigint", NotNull: true}},
		{ColumnSpec: decode.ColumnSpec{Name: "note", Path: "note", Type: "text"}},
	}}}}.Build(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	sink := set.Fixed["orders"]
	col := func(name, typ string, notNull, filled, generated bool) schema.ExistingColumn {
		return schema.ExistingColumn{Name: name, Type: typ, NotNull: notNull, Filled: filled, Generated: generated}
	}
	var zeroConfig []schema.ExistingColumn
	for _, c := range decode.RawTable("public", "orders", decode.ValueJSON).Columns {
		zeroConfig = append(zeroConfig, col(c.Name, c.Type, c.NotNull, false, false))
	}
	cases := []struct {
		name                      string
		have                      []schema.ExistingColumn
		fits                      bool
		problems                  []string // substrings, one per problem
		missing, narrow, nullable []string
	}{
		{
			name:     "the zero-config table of the topic",
			have:     zeroConfig,
			problems: []string{`column(s) "kafka_topic", "kafka_partition", "kafka_offset" are NOT NULL without a default`},
			missing:  []string{`"id"`, `"note"`},
		},
		{
			name: "the table the mapping creates",
			have: []schema.ExistingColumn{col("id", "bigint", true, false, false), col("note", "text", false, false, false)},
			fits: true,
		},
		{
			name: "more NOT NULL columns, each with a default, an identity or a generation",
			have: []schema.ExistingColumn{col("id", "bigint", true, false, false), col("note", "text", false, false, false),
				col("seq", "bigint", true, true, false), col("at", "timestamp with time zone", true, true, false), col("len", "integer", true, true, true)},
			fits: true,
		},
		{
			name:   "an integer column for the mapping's bigint",
			have:   []schema.ExistingColumn{col("id", "integer", true, false, false), col("note", "text", false, false, false)},
			narrow: []string{`"id"`},
		},
		{
			name:     "a NOT NULL column the mapping may leave null",
			have:     []schema.ExistingColumn{col("id", "bigint", true, false, false), col("note", "text", true, false, false)},
			fits:     true,
			nullable: []string{`"note"`},
		},
		{
			name:     "a generated column the mapping writes",
			have:     []schema.ExistingColumn{col("id", "bigint", true, false, false), col("note", "text", false, true, true)},
			fits:     false,
			problems: []string{`"note" is generated`},
		},
		{
			name:     "a type the mapping's cannot become",
			have:     []schema.ExistingColumn{col("id", "text", true, false, false), col("note", "text", false, false, false)},
			problems: []string{`"id" has type text and the mapping wants bigint`},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := Fit(sink, tc.have, "orders_typed")
			if f.Fits() != tc.fits {
				t.Errorf("fits() = %v, want %v: %+v", f.Fits(), tc.fits, f)
			}
			if len(f.Problems) != len(tc.problems) {
				t.Fatalf("problems = %q, want %d naming %q", f.Problems, len(tc.problems), tc.problems)
			}
			for i, want := range tc.problems {
				if !strings.Contains(f.Problems[i], want) {
					t.Errorf("problem %q does not say %q", f.Problems[i], want)
				}
			}
			if strings.Contains(tc.name, "zero-config") && !strings.Contains(f.Problems[0], "table: orders_typed") {
				t.Errorf("the fix does not offer another table: %q", f.Problems[0])
			}
			for _, c := range []struct {
				what      string
				got, want []string
			}{{"missing", f.Missing, tc.missing}, {"narrow", f.Narrow, tc.narrow}, {"nullable", f.Nullable, tc.nullable}} {
				if !slices.Equal(c.got, c.want) {
					t.Errorf("%s = %q, want %q", c.what, c.got, c.want)
				}
			}
		})
	}
}
