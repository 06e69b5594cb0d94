package ingest

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/kafka2pg/kafka2pg/schema"
)

// Querier is what reading the catalog needs: a pgx.Tx, a *pgx.Conn or a
// pool.
type Querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Catalog is an existing table as the catalog describes it: what preparing
// a sink's table (EnsureTables) and checking it (package admin) judge.
type Catalog struct {
	// Columns are the table's, in column order; none when the table does
	// not exist.
	Columns []schema.ExistingColumn
	// UniqueKeys are the columns of each unique, non-partial index (the
	// primary key among them), each sorted by name.
	UniqueKeys [][]string
	// Partitioned says the table is a partitioned one (relkind p), whose
	// PartitionKey are the columns of its partition key ("" for an
	// expression), and PartitionKeyDef the key as pg_get_partkeydef
	// writes it: RANGE (created_at).
	Partitioned     bool
	PartitionKey    []string
	PartitionKeyDef string
}

// ReadCatalog reads the columns (schema.ExistingColumnsSQL) and unique
// indexes (schema.UniqueKeysSQL) of the table called name (a QualifiedName).
// A table that does not exist has neither.
func ReadCatalog(ctx context.Context, q Querier, name string) (Catalog, error) {
	var c Catalog
	rows, err := q.Query(ctx, schema.ExistingColumnsSQL, name)
	if err != nil {
		return c, fmt.Errorf("read the columns of %s: %w", name, err)
	}
	c.Columns, err = pgx.CollectRows(rows, pgx.RowToStructByPos[schema.ExistingColumn])
	if err != nil {
		return c, fmt.Errorf("read the columns of %s: %w", name, err)
	}
	if len(c.Columns) == 0 {
		return c, nil
	}
	rows, err = q.Query(ctx, schema.UniqueKeysSQL, name)
	if err != nil {
		return c, fmt.Errorf("read the unique indexes of %s: %w", name, err)
	}
	c.UniqueKeys, err = pgx.CollectRows(rows, pgx.RowTo[[]string])
	if err != nil {
		return c, fmt.Errorf("read the unique indexes of %s: %w", name, err)
	}
	return c, readPartitionKey(ctx, q, name, &c)
}

// Exists says the table exists.
func (c Catalog) Exists() bool { return len(c.Columns) > 0 }

// Column returns the column called name.
func (c Catalog) Column(name string) (schema.ExistingColumn, bool) {
	i := slices.IndexFunc(c.Columns, func(col schema.ExistingColumn) bool { return col.Name == name })
	if name == "" || i < 0 {
		return schema.ExistingColumn{}, false
	}
	return c.Columns[i], true
}

// HasUniqueKey says a unique index is on exactly the columns of key, as
// INSERT ... ON CONFLICT (key) needs.
func (c Catalog) HasUniqueKey(key []string) bool {
	want := slices.Sorted(slices.Values(key))
	return slices.ContainsFunc(c.UniqueKeys, func(k []string) bool { return slices.Equal(k, want) })
}

// TablePlan is what preparing one sink's table takes, read from the catalog
// and changing nothing: EnsureTables applies it, package admin reports it
// (the validate and apply halves of one plan).
type TablePlan struct {
	Topic string
	Sink  Sink
	// Deferred is a change-event sink whose columns and key come with its
	// first event: its table is planned then, and nothing now.
	Deferred bool
	// Catalog is the table as it is.
	Catalog Catalog
	// Create creates the missing table, when creating is on (the create
	// argument, and not Sink.NoCreate). CREATE SCHEMA is left out when the
	// schema exists: even with IF NOT EXISTS it needs CREATE on the
	// database, which a least-privilege role lacks.
	Create []string
	// Evolve is what lets the existing table take the sink's rows
	// (schema.PlanEvolve), planned whether or not Sink.Evolve lets it
	// run; EvolveErr is a difference PlanEvolve refuses.
	Evolve    []string
	EvolveErr error
	// Partitions create the missing partitions a table with
	// Sink.Table.Partition keeps ready (schema.PlanPartitions); one whose
	// range is someone else's is left to them.
	Partitions []string
}

// PlanTable plans the table of topic's sink in q, changing nothing.
func PlanTable(ctx context.Context, q Querier, topic string, sink Sink, create bool) (TablePlan, error) {
	p := TablePlan{Topic: topic, Sink: sink}
	if sink.Changes != nil && sink.Changes.KeyColumns() == nil {
		p.Deferred = true
		return p, nil
	}
	t := sink.Table
	var err error
	if p.Catalog, err = ReadCatalog(ctx, q, t.QualifiedName()); err != nil {
		return p, err
	}
	if p.Catalog.Exists() {
		p.Evolve, p.EvolveErr = schema.PlanEvolve(t, p.Catalog.Columns)
		return p, p.planPartitions(ctx, q, time.Now())
	}
	if !create || sink.NoCreate {
		return p, nil
	}
	p.Create = schema.PlanCreate(t)
	if t.Schema != "" {
		var exists bool
		if err := q.QueryRow(ctx, "SELECT to_regnamespace($1) IS NOT NULL", schema.QuoteIdent(t.Schema)).Scan(&exists); err != nil {
			return p, fmt.Errorf("look up schema %s: %w", schema.QuoteIdent(t.Schema), err)
		}
		if exists {
			p.Create = slices.DeleteFunc(p.Create, func(s string) bool { return strings.HasPrefix(s, "CREATE SCHEMA") })
		}
	}
	return p, p.planPartitions(ctx, q, time.Now())
}

// Statements are what applying the plan runs, in order: Create, or Evolve
// when Sink.Evolve lets it; then Partitions.
func (p TablePlan) Statements() []string {
	if len(p.Create) > 0 {
		return append(slices.Clip(p.Create), p.Partitions...)
	}
	if p.Sink.Evolve && p.EvolveErr == nil {
		return append(slices.Clip(p.Evolve), p.Partitions...)
	}
	return p.Partitions
}

// Missing are the quoted names of the columns the mapping writes and the
// existing table lacks.
func (p TablePlan) Missing() []string {
	var missing []string
	for _, c := range p.Sink.Table.Columns {
		if _, ok := p.Catalog.Column(c.Name); !ok {
			missing = append(missing, fmt.Sprintf("%q", c.Name))
		}
	}
	return missing
}

// Keys are the column lists that need a unique index: the upsert key, and
// the primary key of a change-event sink.
func (p TablePlan) Keys() [][]string {
	var keys [][]string
	if p.Sink.Upsert != nil {
		keys = append(keys, p.Sink.Upsert.Key)
	}
	if p.Sink.Changes != nil && len(p.Sink.Table.PrimaryKey) > 0 {
		keys = append(keys, p.Sink.Table.PrimaryKey)
	}
	return keys
}

// Err is what the writer refuses to start with once the plan is applied:
// a missing table, columns the mapping writes that the table lacks, a key
// without its unique index.
func (p TablePlan) Err() error {
	if p.Deferred {
		return nil
	}
	t := p.Sink.Table
	if !p.Catalog.Exists() {
		return &MissingTableError{Table: t.QualifiedName(), Topic: p.Topic}
	}
	if missing := p.Missing(); len(missing) > 0 {
		return fmt.Errorf("table %s for topic %q lacks column(s) %s that kafka2pg writes: add them, or choose another table with ingest.Sink.Table",
			t.QualifiedName(), p.Topic, strings.Join(missing, ", "))
	}
	if err := p.PartitionErr(); err != nil {
		return err
	}
	for _, key := range p.Keys() {
		if !p.Catalog.HasUniqueKey(key) {
			return fmt.Errorf("table %s for topic %q has no unique index on the upsert key (%s): create one, e.g. CREATE UNIQUE INDEX ON %s (%s)",
				t.QualifiedName(), p.Topic, strings.Join(key, ", "), t.QualifiedName(), schema.QuoteIdentList(key))
		}
	}
	return nil
}
