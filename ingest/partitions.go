package ingest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/kafka2pg/kafka2pg/schema"
	"github.com/kafka2pg/kafka2pg/stream"
)

// Partitioned target tables. A table may be partitioned already (by
// pg_partman, by hand): its rows go where Postgres routes them, and an
// upsert key must hold its partition key, since a unique index of a
// partitioned table must. A sink whose Table has a Partition has its
// table created partitioned by range of a time column, keeps the current
// partition and Premake after it ready at every start, and creates the
// partition of a row that falls outside them when the row comes: the
// batch that meets it rolls back, the partition is created in a
// transaction of its own under the DDL lock, and the batch is written
// again. A partition that overlaps one made by someone else, or whose
// range a DEFAULT partition already holds rows of, is left to them.

// partitionKeySQL reads whether a table is partitioned and its partition
// key: its columns ("" for an expression), and pg_get_partkeydef's
// text, as in RANGE (created_at). Its one parameter is the table's
// QualifiedName.
const partitionKeySQL = `SELECT c.relkind = 'p', COALESCE(pg_get_partkeydef(c.oid), ''),
       ARRAY(SELECT COALESCE(a.attname::text, '') FROM unnest(pt.partattrs) k
             LEFT JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum = k)
FROM pg_class c LEFT JOIN pg_partitioned_table pt ON pt.partrelid = c.oid
WHERE c.oid = to_regclass($1)`

// readPartitionKey fills c's Partitioned, PartitionKey and PartitionKeyDef.
func readPartitionKey(ctx context.Context, q Querier, name string, c *Catalog) error {
	err := q.QueryRow(ctx, partitionKeySQL, name).Scan(&c.Partitioned, &c.PartitionKeyDef, &c.PartitionKey)
	if err != nil {
		return fmt.Errorf("read the partition key of %s: %w", name, err)
	}
	return nil
}

// lacksPartitionKey are the columns of the partition key that key does
// not hold; an expression in the key counts as one it cannot hold.
func (c Catalog) lacksPartitionKey(key []string) []string {
	if !c.Partitioned {
		return nil
	}
	var lack []string
	for _, col := range c.PartitionKey {
		switch {
		case col == "":
			lack = append(lack, "the expression of "+c.PartitionKeyDef)
		case !slices.Contains(key, col):
			lack = append(lack, col)
		}
	}
	return lack
}

// PartitionKeyError is a table's refusal of an upsert key (or a change
// sink's primary key) that lacks columns of the table's partition key:
// Postgres allows a unique index on a partitioned table only when it holds
// every partition key column, and INSERT ... ON CONFLICT needs one on
// exactly the key.
type PartitionKeyError struct {
	Table        string   // quoted, qualified
	Topic        string   // the topic whose sink it is
	Key          []string // the sink's key
	PartitionKey string   // pg_get_partkeydef: RANGE (created_at)
	Lacks        []string // the partition key columns Key lacks
}

func (e *PartitionKeyError) Error() string {
	return fmt.Sprintf("table %s for topic %q is partitioned by %s, and the upsert key (%s) lacks %s: a unique index of a partitioned table must hold the partition key; add %s to the sink's key",
		e.Table, e.Topic, e.PartitionKey, strings.Join(e.Key, ", "), strings.Join(e.Lacks, ", "), strings.Join(e.Lacks, ", "))
}

// PartitionErr is what a sink with a Partition refuses in its existing
// table: one that is not partitioned, or partitioned by another key; and,
// for every table, a key that lacks the partition key (PartitionKeyError).
func (p TablePlan) PartitionErr() error {
	t := p.Sink.Table
	if want := t.Partition; want != nil && p.Catalog.Exists() {
		switch {
		case !p.Catalog.Partitioned:
			return fmt.Errorf("table %s for topic %q exists and is not partitioned, and the sink sets partition_by %s: kafka2pg partitions only a table it creates; drop partition_by, or move the rows into a table created PARTITION BY RANGE (%s)",
				t.QualifiedName(), p.Topic, want.Column, schema.QuoteIdent(want.Column))
		case !p.Catalog.rangeOf(want.Column):
			return fmt.Errorf("table %s for topic %q is partitioned by %s, and the sink sets partition_by %s (RANGE): drop partition_by to write into the table as it is partitioned, or set its column to the table's",
				t.QualifiedName(), p.Topic, p.Catalog.PartitionKeyDef, want.Column)
		}
	}
	for _, key := range p.Keys() {
		if lack := p.Catalog.lacksPartitionKey(key); len(lack) > 0 {
			return &PartitionKeyError{Table: t.QualifiedName(), Topic: p.Topic, Key: key, PartitionKey: p.Catalog.PartitionKeyDef, Lacks: lack}
		}
	}
	return nil
}

// rangeOf says the table is partitioned by range of column alone.
func (c Catalog) rangeOf(column string) bool {
	return c.Partitioned && slices.Equal(c.PartitionKey, []string{column}) && strings.HasPrefix(c.PartitionKeyDef, "RANGE ")
}

// planPartitions plans the partitions the sink's table keeps ready at
// now (schema.PlanPartitions) that are missing: all of them for a table
// created now, those that do not exist in one partitioned by range of the
// sink's column. A partition that exists costs no DDL, so a role without
// CREATE on the schema starts once they all do.
func (p *TablePlan) planPartitions(ctx context.Context, q Querier, now time.Time) error {
	t := p.Sink.Table
	switch {
	case t.Partition == nil:
		return nil
	case len(p.Create) > 0:
		p.Partitions = schema.PlanPartitions(t, now)
		return nil
	case !p.Catalog.rangeOf(t.Partition.Column):
		return nil
	}
	var names []string
	starts := t.Partition.Ahead(now)
	for _, start := range starts {
		names = append(names, t.PartitionQualifiedName(start))
	}
	missing, err := missingPartitions(ctx, q, names)
	if err != nil {
		return fmt.Errorf("look up the partitions of %s: %w", t.QualifiedName(), err)
	}
	for i, start := range starts {
		if slices.Contains(missing, names[i]) {
			p.Partitions = append(p.Partitions, t.PartitionSQL(start))
		}
	}
	return nil
}

// missingPartitions are those of names (quoted, qualified) that do not
// exist.
func missingPartitions(ctx context.Context, q Querier, names []string) ([]string, error) {
	rows, err := q.Query(ctx, "SELECT n FROM unnest($1::text[]) n WHERE to_regclass(n) IS NULL", names)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

// partitionTaken says err is Postgres refusing a partition because its
// range is someone else's: it overlaps another partition (42P17), or a
// DEFAULT partition holds rows in it (23514, the default partition's
// updated constraint).
func partitionTaken(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && (pgErr.Code == "42P17" || pgErr.Code == "23514")
}

// createPartition runs stmt, one of schema.PlanPartitions', in tx under
// a savepoint: a range that is someone else's (partitionTaken) is left
// to them, and reported false.
func (w *Writer) createPartition(ctx context.Context, tx pgx.Tx, stmt string) (bool, error) {
	sp, err := tx.Begin(ctx)
	if err != nil {
		return false, err
	}
	if _, err := sp.Exec(ctx, stmt); err != nil {
		if rbErr := sp.Rollback(ctx); rbErr != nil {
			return false, rbErr
		}
		if partitionTaken(err) {
			w.log.Info("partition left to the table's own", "statement", stmt, "reason", err.Error())
			return false, nil
		}
		return false, fmt.Errorf("%s: %w", stmt, err)
	}
	return true, sp.Commit(ctx)
}

// addPartitions makes ready the partitions of sink's table that rows of
// b fall into and that are missing, and returns how many were missing:
// those it created and those another writer created meanwhile. Write
// calls it when Postgres refused rows of b: a row outside every partition
// is refused (23514, no partition of relation found for row), and the
// batch is written again once its partition exists. It looks the
// partitions up first, and takes the DDL lock, in a transaction of its
// own, only when one is missing. A record the mapping refuses is skipped
// here: its own attempt makes it a bad record.
func (w *Writer) addPartitions(ctx context.Context, b *stream.Batch, sink Sink) (int, error) {
	t := sink.Table
	col := slices.Index(t.ColumnNames(), t.Partition.Column)
	if col < 0 || sink.Mapper == nil {
		return 0, nil
	}
	var (
		starts []time.Time
		names  []string
		row    []any
		err    error
	)
	for i := range b.Records {
		r := &b.Records[i]
		if r.Unreadable != nil {
			continue
		}
		if row, err = sink.Mapper.Row(r, row); err != nil || col >= len(row) {
			continue
		}
		at, ok := row[col].(time.Time)
		if !ok {
			continue // null or infinity: no partition takes it
		}
		start := t.Partition.Start(at)
		if name := t.PartitionQualifiedName(start); !slices.Contains(names, name) {
			starts, names = append(starts, start), append(names, name)
		}
	}
	if len(names) == 0 {
		return 0, nil
	}
	missing, err := missingPartitions(ctx, w.pool, names)
	if err != nil || len(missing) == 0 {
		return 0, err
	}
	ready, created := 0, 0
	err = pgx.BeginFunc(ctx, w.pool, func(tx pgx.Tx) error {
		ready, created = 0, 0
		if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock(hashtext($1))", ddlLockKey); err != nil {
			return err
		}
		for i, name := range names {
			if !slices.Contains(missing, name) {
				continue
			}
			var exists bool
			if err := tx.QueryRow(ctx, "SELECT to_regclass($1) IS NOT NULL", name).Scan(&exists); err != nil {
				return fmt.Errorf("look up partition %s: %w", name, err)
			}
			made := false
			if !exists {
				if made, err = w.createPartition(ctx, tx, t.PartitionSQL(starts[i])); err != nil {
					return err
				}
			}
			if exists || made {
				ready++
			}
			if made {
				created++
			}
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("create partitions of %s: %w", t.QualifiedName(), err)
	}
	if created > 0 {
		w.log.Info("partitions created for rows outside the table's partitions", "table", t.QualifiedName(), "partitions", created, "topic", b.Topic, "partition", b.Partition)
	}
	return ready, nil
}
