package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/kafka2pg/kafka2pg/admin"
	"github.com/kafka2pg/kafka2pg/bridge"
	"github.com/kafka2pg/kafka2pg/decode"
	"github.com/kafka2pg/kafka2pg/ingest"
	"github.com/kafka2pg/kafka2pg/internal/redact"
	"github.com/kafka2pg/kafka2pg/schema"
)

// renderAvoidingTakenTables renders infer's config (render builds it for
// o.table) so that its table is one run can write: missing, or existing
// with columns that take the sink's rows. A table that exists with others
// (the zero-config table of the topic, whose kafka_topic is NOT NULL)
// makes infer pick <table>_typed, and a new default group with it (the
// offsets of the table's own group would skip what it already read); with
// --pg-table given, or when <table>_typed is taken too, it fails naming a name
// to choose. What it found goes into the header (o.tableNote) and stderr.
func (o *inferOptions) renderAvoidingTakenTables(ctx context.Context, render func() (string, ingest.Sink, error), stderr io.Writer) (string, error) {
	pool, err := bridge.OpenPool(ctx, o.pgURL, "kafka2pg-infer")
	if err != nil {
		return "", fmt.Errorf("--pg-url: %w", redact.Err(err))
	}
	defer pool.Close()
	if err := pool.Ping(ctx); err != nil {
		return "", fmt.Errorf("connect to Postgres (--pg-url): %w", redact.Err(err))
	}
	var taken []string // tables tried that exist with other columns, and why
	for {
		out, sink, err := render()
		if err != nil {
			return "", err
		}
		name := sink.Table.QualifiedName()
		fit, err := admin.ReadFit(ctx, pool, sink, "")
		if err != nil {
			return "", err
		}
		if !fit.Exists() || fit.Fits() {
			if fit.Exists() {
				o.tableNote = fmt.Sprintf("# Table %s exists in the database and takes these rows as it is.\n", name)
			}
			if len(taken) > 0 {
				fmt.Fprintf(stderr, "kafka2pg infer: %s; this config writes %s instead\n", strings.Join(taken, "; "), name)
			}
			return out, nil
		}
		why := admin.Fit(sink, fit.Columns, admin.TypedName(sink.Table.Name))
		reason := strings.Join(why.Problems, "; ")
		if reason == "" {
			reason = "it lacks or narrows columns the sink writes: " + strings.Join(append(why.Missing, why.Narrow...), ", ")
		}
		taken = append(taken, fmt.Sprintf("table %s exists with other columns (%s)", name, reason))
		if o.tableGiven || len(taken) > 1 {
			base := o.table // <table>_typed, taken too
			if o.tableGiven {
				base = admin.TypedName(o.table)
			}
			return "", fmt.Errorf("%s: choose a table that does not exist yet with --pg-table (e.g. --pg-table %s)", strings.Join(taken, "; "), freeName(ctx, pool, sink.Table.Schema, base))
		}
		what := "other columns"
		if rawShaped(fit.Columns) {
			what = "the zero-config table's columns"
		}
		o.tableNote = fmt.Sprintf("# Table %s exists with %s, which this sink cannot write:\n# this config writes %s instead.\n",
			name, what, schema.QuoteIdent(sink.Table.Schema, admin.TypedName(o.table)))
		o.table = admin.TypedName(o.table)
		if !o.groupGiven {
			o.group = "kafka2pg-" + o.table
		}
	}
}

// freeName is base, or base_2, base_3... the first that no table in
// schemaName has.
func freeName(ctx context.Context, q ingest.Querier, schemaName, base string) string {
	name := base
	for i := 2; i < 100; i++ {
		var exists bool
		err := q.QueryRow(ctx, "SELECT to_regclass($1) IS NOT NULL", schema.QuoteIdent(schemaName, name)).Scan(&exists)
		if err != nil || !exists {
			return name
		}
		name = fmt.Sprintf("%s_%d", base, i)
	}
	return name
}

// rawShaped says the columns are those of a zero-config table.
func rawShaped(have []schema.ExistingColumn) bool {
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
