package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/kafka2pg/kafka2pg/bridge"
	"github.com/kafka2pg/kafka2pg/decode"
	"github.com/kafka2pg/kafka2pg/ingest"
	"github.com/kafka2pg/kafka2pg/internal/redact"
	"github.com/kafka2pg/kafka2pg/schema"
)

// Whether an existing table can take a sink's rows, as `check` reports it
// and `infer` uses it to avoid proposing a table that would refuse every
// row: the zero-config table of the quick start, say, whose kafka_topic is
// NOT NULL and which a typed sink of the same topic would not write.

// catalogColumn is a column of an existing table, as the catalog says.
type catalogColumn struct {
	schema.ExistingColumn
	// Filled says an INSERT that leaves the column out still gives it a
	// value: it has a default, is an identity or is generated.
	Filled    bool
	Generated bool // GENERATED ALWAYS AS (...) STORED: nobody writes it
}

// catalogColumnsSQL is schema.ExistingColumnsSQL plus what fills a column
// an INSERT leaves out. $1 is the table's QualifiedName; no rows when the
// table does not exist.
const catalogColumnsSQL = `SELECT a.attname, format_type(a.atttypid, a.atttypmod), a.attnotnull,
       a.atthasdef OR a.attidentity <> '' OR a.attgenerated <> '', a.attgenerated <> ''
FROM pg_attribute a
WHERE a.attrelid = to_regclass($1) AND a.attnum > 0 AND NOT a.attisdropped
ORDER BY a.attnum`

// queryer is what readCatalogColumns needs: a pgx.Tx, *pgx.Conn or pool.
type queryer interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// readCatalogColumns reads the columns of the table called name (quoted,
// qualified); none when it does not exist.
func readCatalogColumns(ctx context.Context, q queryer, name string) ([]catalogColumn, error) {
	rows, err := q.Query(ctx, catalogColumnsSQL, name)
	if err != nil {
		return nil, fmt.Errorf("read the columns of %s: %w", name, err)
	}
	cols, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (catalogColumn, error) {
		var c catalogColumn
		err := row.Scan(&c.Name, &c.Type, &c.NotNull, &c.Filled, &c.Generated)
		return c, err
	})
	if err != nil {
		return nil, fmt.Errorf("read the columns of %s: %w", name, err)
	}
	return cols, nil
}

// tableFit is how an existing table meets a sink's mapping.
type tableFit struct {
	// problems make rows fail, whatever evolve says: each names the
	// column, why and the fix.
	problems []string
	// missing are the mapping's columns the table lacks; narrow are the
	// columns whose type cannot hold every value the mapping writes (a
	// safe widening would); nullable are NOT NULL columns the mapping may
	// leave null. evolve (the plan) fixes all three.
	missing, narrow, nullable []string
	plan                      []string // schema.PlanEvolve's statements
}

// fits says whether rows go in without evolving the table first.
func (f tableFit) fits() bool {
	return len(f.problems) == 0 && len(f.missing) == 0 && len(f.narrow) == 0
}

// fitTable compares the table of sink, whose columns are have (not empty),
// with what the sink writes. suggest is a table name to offer in fixes
// that say "write to another table".
func fitTable(sink ingest.Sink, have []catalogColumn, suggest string) tableFit {
	t := sink.Table
	var f tableFit
	written := t.ColumnNames()
	existing := make([]schema.ExistingColumn, len(have))
	var unwritten []string
	for i, c := range have {
		existing[i] = c.ExistingColumn
		switch {
		case c.Generated && slices.Contains(written, c.Name):
			f.problems = append(f.problems, fmt.Sprintf("column %s is generated (GENERATED ALWAYS AS), so no row can give it a value, and the mapping writes it: drop it from the mapping, or write to another table (table: %s)",
				pgx.Identifier{c.Name}.Sanitize(), suggest))
		case c.NotNull && !c.Filled && !slices.Contains(written, c.Name):
			unwritten = append(unwritten, pgx.Identifier{c.Name}.Sanitize())
		}
	}
	if len(unwritten) > 0 {
		f.problems = append(f.problems, fmt.Sprintf("column(s) %s are NOT NULL without a default and the mapping does not write them, so every row would fail (not_null_violation): "+
			"write to another table (table: %s), map them (as columns, or metadata such as {topic: kafka_topic}), give them a DEFAULT, or DROP NOT NULL (ALTER TABLE %s ALTER COLUMN %s DROP NOT NULL)",
			strings.Join(unwritten, ", "), suggest, t.QualifiedName(), unwritten[0]))
	}
	plan, err := schema.PlanEvolve(t, existing)
	if err != nil {
		f.problems = append(f.problems, err.Error())
		return f
	}
	f.plan = plan
	// What each column's part of the plan does: PlanEvolve of the table
	// with that column alone.
	for _, c := range t.Columns {
		one := t
		one.Columns = []schema.Column{c}
		stmts, _ := schema.PlanEvolve(one, existing)
		name := pgx.Identifier{c.Name}.Sanitize()
		for _, s := range stmts {
			switch {
			case strings.Contains(s, " ADD COLUMN "):
				f.missing = append(f.missing, name)
			case strings.HasSuffix(s, " DROP NOT NULL"):
				f.nullable = append(f.nullable, name)
			default: // ALTER COLUMN ... TYPE: a safe widening
				f.narrow = append(f.narrow, name)
			}
		}
	}
	return f
}

// typedName is the name infer and the fixes offer for a typed sink whose
// topic's table is taken: <name>_typed, cut to Postgres' 63 bytes.
func typedName(name string) string {
	const suffix = "_typed"
	if len(name)+len(suffix) > 63 {
		name = name[:63-len(suffix)]
	}
	return name + suffix
}

// renderAvoidingTakenTables renders infer's config (render builds it for
// o.table) so that its table is one run can write: missing, or existing
// with columns that take the sink's rows. A table that exists with others
// (the zero-config table of the topic, whose kafka_topic is NOT NULL)
// makes infer pick <table>_typed, and a new default group with it (the
// offsets of the table's own group would skip what it already read); with
// --pg-table given, or when <table>_typed is taken too, it fails naming a name
// to choose. What it found goes into the header (o.tableNote) and stderr.
func (o *inferOptions) renderAvoidingTakenTables(ctx context.Context, render func() (string, ingest.Sink, error), stderr io.Writer) (string, error) {
	cc, err := pgx.ParseConfig(o.pgURL)
	if err != nil {
		return "", fmt.Errorf("--pg-url: %w", redact.Err(err))
	}
	if err := bridge.ConfigureSession(&cc.Config, "kafka2pg-infer", ingest.Config{}.StatementTimeout()); err != nil {
		return "", fmt.Errorf("--pg-url: %w", err)
	}
	conn, err := pgx.ConnectConfig(ctx, cc)
	if err != nil {
		return "", fmt.Errorf("connect to Postgres (--pg-url): %w", redact.Err(err))
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var taken []string // tables tried that exist with other columns, and why
	for {
		out, sink, err := render()
		if err != nil {
			return "", err
		}
		name := sink.Table.QualifiedName()
		have, err := readCatalogColumns(ctx, conn, name)
		if err != nil {
			return "", err
		}
		if len(have) == 0 || fitTable(sink, have, "").fits() {
			if len(have) > 0 {
				o.tableNote = fmt.Sprintf("# Table %s exists in the database and takes these rows as it is.\n", name)
			}
			if len(taken) > 0 {
				fmt.Fprintf(stderr, "kafka2pg infer: %s; this config writes %s instead\n", strings.Join(taken, "; "), name)
			}
			return out, nil
		}
		why := fitTable(sink, have, typedName(sink.Table.Name))
		reason := strings.Join(why.problems, "; ")
		if reason == "" {
			reason = "it lacks or narrows columns the sink writes: " + strings.Join(append(why.missing, why.narrow...), ", ")
		}
		taken = append(taken, fmt.Sprintf("table %s exists with other columns (%s)", name, reason))
		if o.tableGiven || len(taken) > 1 {
			base := o.table // <table>_typed, taken too
			if o.tableGiven {
				base = typedName(o.table)
			}
			return "", fmt.Errorf("%s: choose a table that does not exist yet with --pg-table (e.g. --pg-table %s)", strings.Join(taken, "; "), freeName(ctx, conn, sink.Table.Schema, base))
		}
		what := "other columns"
		if rawShaped(have) {
			what = "the zero-config table's columns"
		}
		o.tableNote = fmt.Sprintf("# Table %s exists with %s, which this sink cannot write:\n# this config writes %s instead.\n",
			name, what, pgx.Identifier{sink.Table.Schema, typedName(o.table)}.Sanitize())
		o.table = typedName(o.table)
		if !o.groupGiven {
			o.group = "kafka2pg-" + o.table
		}
	}
}

// freeName is base, or base_2, base_3... the first that no table in
// schemaName has.
func freeName(ctx context.Context, conn *pgx.Conn, schemaName, base string) string {
	name := base
	for i := 2; i < 100; i++ {
		var exists bool
		err := conn.QueryRow(ctx, "SELECT to_regclass($1) IS NOT NULL", pgx.Identifier{schemaName, name}.Sanitize()).Scan(&exists)
		if err != nil || !exists {
			return name
		}
		name = fmt.Sprintf("%s_%d", base, i)
	}
	return name
}

// rawShaped says the columns are those of a zero-config table.
func rawShaped(have []catalogColumn) bool {
	names := make([]string, len(have))
	for i, c := range have {
		names[i] = c.Name
	}
	for _, c := range decode.RawTable("", "", decode.ValueJSON).Columns {
		if !slices.Contains(names, c.Name) {
			return false
		}
	}
	return true
}
