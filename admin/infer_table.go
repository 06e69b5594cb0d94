package admin

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/kafka2pg/kafka2pg/decode"
	"github.com/kafka2pg/kafka2pg/ingest"
	"github.com/kafka2pg/kafka2pg/schema"
)

// avoidTakenTables guesses the sink (guess builds it for r.Table) so that
// its table is one run can write: missing, or existing with columns that
// take the sink's rows. A table that exists with others (the zero-config
// table of the topic, whose kafka_topic is NOT NULL) makes it pick
// <table>_typed; with r.FixedTable, or when <table>_typed is taken too, it
// fails with a *TablesTakenError naming a free name.
func avoidTakenTables(ctx context.Context, pool *pgxpool.Pool, r *InferRequest, guess func() (Inferred, ingest.Sink, error)) (Inferred, error) {
	var avoided []Avoided
	for {
		res, sink, err := guess()
		if err != nil {
			return Inferred{}, err
		}
		fit, err := ReadFit(ctx, pool, sink, "")
		if err != nil {
			return Inferred{}, err
		}
		if !fit.Exists() || fit.Fits() {
			res.Exists, res.Avoided = fit.Exists(), avoided
			return res, nil
		}
		why := Fit(sink, fit.Columns, TypedName(sink.Table.Name))
		reason := strings.Join(why.Problems, "; ")
		if reason == "" {
			reason = "it lacks or narrows columns the sink writes: " + strings.Join(append(why.Missing, why.Narrow...), ", ")
		}
		avoided = append(avoided, Avoided{Table: sink.Table.QualifiedName(), Reason: reason, ZeroConfig: rawShaped(fit.Columns)})
		if r.FixedTable || len(avoided) > 1 {
			base := r.Table // <table>_typed, taken too
			if r.FixedTable {
				base = TypedName(r.Table)
			}
			return Inferred{}, &TablesTakenError{Avoided: avoided, Free: freeName(ctx, pool, sink.Table.Schema, base)}
		}
		r.Table = TypedName(r.Table)
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
