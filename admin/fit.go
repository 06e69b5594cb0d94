package admin

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/kafka2pg/kafka2pg/ingest"
	"github.com/kafka2pg/kafka2pg/schema"
)

// TableFit is how an existing table meets a sink's mapping, beyond what
// the writer checks at start (ingest.TablePlan.Err): what would make rows
// fail once they come. Check reports it, and `kafka2pg infer` uses it to
// avoid proposing a table that would refuse every row (the zero-config
// table of the quick start, say, whose kafka_topic is NOT NULL and which a
// typed sink of the same topic would not write).
type TableFit struct {
	// Columns are the table's, as the catalog has them; none: no table.
	Columns []schema.ExistingColumn
	// Problems make rows fail, whatever evolve says: each names the
	// column, why and the fix.
	Problems []string
	// Missing are the mapping's columns the table lacks; Narrow are the
	// columns whose type cannot hold every value the mapping writes (a
	// safe widening would); Nullable are NOT NULL columns the mapping may
	// leave null. Evolving the table (Plan) fixes all three. Names are
	// quoted.
	Missing, Narrow, Nullable []string
	// Plan is schema.PlanEvolve's statements.
	Plan []string
}

// Exists says the table exists.
func (f TableFit) Exists() bool { return len(f.Columns) > 0 }

// Fits says rows go in without evolving the table first.
func (f TableFit) Fits() bool {
	return len(f.Problems) == 0 && len(f.Missing) == 0 && len(f.Narrow) == 0
}

// ReadFit reads the table of sink in q (ingest.ReadCatalog) and fits it
// (Fit); a table that does not exist fits nothing and has no columns.
func ReadFit(ctx context.Context, q ingest.Querier, sink ingest.Sink, suggest string) (TableFit, error) {
	c, err := ingest.ReadCatalog(ctx, q, sink.Table.QualifiedName())
	if err != nil || !c.Exists() {
		return TableFit{}, err
	}
	return Fit(sink, c.Columns, suggest), nil
}

// Fit compares the table of sink, whose columns are have (not empty),
// with what the sink writes. suggest is a table name to offer in fixes
// that say "write to another table".
func Fit(sink ingest.Sink, have []schema.ExistingColumn, suggest string) TableFit {
	t := sink.Table
	f := TableFit{Columns: have}
	written := t.ColumnNames()
	var unwritten []string
	for _, c := range have {
		switch {
		case c.Generated && slices.Contains(written, c.Name):
			f.Problems = append(f.Problems, fmt.Sprintf("column %s is generated (GENERATED ALWAYS AS), so no row can give it a value, and the mapping writes it: drop it from the mapping, or write to another table (table: %s)",
				schema.QuoteIdent(c.Name), suggest))
		case c.NotNull && !c.Filled && !slices.Contains(written, c.Name):
			unwritten = append(unwritten, schema.QuoteIdent(c.Name))
		}
	}
	if len(unwritten) > 0 {
		f.Problems = append(f.Problems, fmt.Sprintf("column(s) %s are NOT NULL without a default and the mapping does not write them, so every row would fail (not_null_violation): "+
			"write to another table (table: %s), map them (as columns, or metadata such as {topic: kafka_topic}), give them a DEFAULT, or DROP NOT NULL (ALTER TABLE %s ALTER COLUMN %s DROP NOT NULL)",
			strings.Join(unwritten, ", "), suggest, t.QualifiedName(), unwritten[0]))
	}
	plan, err := schema.PlanEvolve(t, have)
	if err != nil {
		f.Problems = append(f.Problems, err.Error())
		return f
	}
	f.Plan = plan
	// What each column's part of the plan does: PlanEvolve of the table
	// with that column alone.
	for _, c := range t.Columns {
		one := t
		one.Columns = []schema.Column{c}
		stmts, _ := schema.PlanEvolve(one, have)
		name := schema.QuoteIdent(c.Name)
		for _, s := range stmts {
			switch {
			case strings.Contains(s, " ADD COLUMN "):
				f.Missing = append(f.Missing, name)
			case strings.HasSuffix(s, " DROP NOT NULL"):
				f.Nullable = append(f.Nullable, name)
			default: // ALTER COLUMN ... TYPE: a safe widening
				f.Narrow = append(f.Narrow, name)
			}
		}
	}
	return f
}

// TypedName is the name offered for a typed sink whose topic's table is
// taken: <name>_typed, cut to Postgres' 63 bytes.
func TypedName(name string) string {
	const suffix = "_typed"
	if len(name)+len(suffix) > 63 {
		name = name[:63-len(suffix)]
	}
	return name + suffix
}
