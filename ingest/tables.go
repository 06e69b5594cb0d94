package ingest

import (
	"context"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/kafka2pg/kafka2pg/schema"
)

// ddlLockKey serializes DDL of concurrent bridges: CREATE TABLE IF NOT EXISTS
// alone can still fail with a unique violation in pg_type when two sessions
// race.
const ddlLockKey = "kafka2pg.ddl"

// EnsureTables creates the sinks' tables when create is true and they are
// missing, then checks that every table has the columns the mapping writes.
// A mismatch is an error naming the table, the column and the fix, returned
// before anything is written.
func (w *Writer) EnsureTables(ctx context.Context, create bool) error {
	w.mu.Lock()
	w.create = create
	w.mu.Unlock()
	seen := map[string]bool{}
	for topic, sink := range w.routes.Load().fixed {
		if seen[sink.Table.QualifiedName()] {
			continue
		}
		seen[sink.Table.QualifiedName()] = true
		if _, err := w.ensureTable(ctx, topic, sink, create); err != nil {
			return err
		}
	}
	return nil
}

// ensureTable prepares one sink's table: plans it (PlanTable) under the DDL
// lock, runs the plan, then checks the table as it is now. It returns how
// many statements of the plan it ran.
func (w *Writer) ensureTable(ctx context.Context, topic string, sink Sink, create bool) (ran int, err error) {
	t := sink.Table
	if sink.Boundaries != nil {
		return 0, nil // kafka2pg's own table, made by the migrations
	}
	if sink.Changes != nil && sink.Changes.KeyColumns() == nil {
		// The columns and the key come with the first event: the table is
		// prepared then (writeChanging).
		return 0, nil
	}
	if sink.Router != nil {
		// Each routed table is prepared on its first record (route.go).
		return 0, nil
	}
	if create && !sink.NoCreate || sink.Evolve || t.Partition != nil {
		err := pgx.BeginFunc(ctx, w.pool, func(tx pgx.Tx) error {
			ran = 0
			if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock(hashtext($1))", ddlLockKey); err != nil {
				return err
			}
			p, err := PlanTable(ctx, tx, topic, sink, create)
			if err != nil {
				return err
			}
			if sink.Evolve && p.EvolveErr != nil {
				return p.EvolveErr
			}
			for _, stmt := range p.Statements() {
				if schema.IsPartitionSQL(stmt) {
					made, err := w.createPartition(ctx, tx, stmt)
					if err != nil {
						return err
					}
					if made {
						ran++
					}
					continue
				}
				if len(p.Create) == 0 {
					w.log.Info("evolving table", "table", t.QualifiedName(), "statement", stmt)
				}
				if _, err := tx.Exec(ctx, stmt); err != nil {
					return fmt.Errorf("%s: %w", stmt, err)
				}
				ran++
			}
			return nil
		})
		if err != nil {
			return 0, fmt.Errorf("prepare table %s for topic %q: %w", t.QualifiedName(), topic, err)
		}
	}
	p, err := PlanTable(ctx, w.pool, topic, sink, false)
	if err != nil {
		return ran, fmt.Errorf("check table %s: %w", t.QualifiedName(), err)
	}
	if err := p.Err(); err != nil {
		return ran, err
	}
	for _, c := range sink.Children {
		if c.Table.Name == "" {
			continue // not bound yet (Child.Bind)
		}
		n, err := w.ensureTable(ctx, topic, Sink{Table: c.Table, NoCreate: sink.NoCreate, Evolve: sink.Evolve}, create)
		ran += n
		if err != nil {
			return ran, err
		}
	}
	return ran, nil
}

// TableMapper is a RowMapper whose table follows a schema that changes while
// it runs (a schema registry's subject gains versions). Table returns the
// table its rows fill now; a change only appends columns or widens their
// types, never removes or reorders them. Row returns an error wrapping
// decode.ErrTableChanged when a record needs a change; Table already
// describes the changed table then. Safe for concurrent use.
type TableMapper interface {
	RowMapper
	Table() schema.Table
}

// retyped reports whether a column of both tables has another type in b.
func retyped(a, b schema.Table) bool {
	for _, x := range a.Columns {
		for _, y := range b.Columns {
			if x.Name == y.Name && x.Type != y.Type {
				return true
			}
		}
	}
	return false
}

// sameColumns reports whether a and b have the same columns and types.
func sameColumns(a, b schema.Table) bool {
	return slices.Equal(a.Columns, b.Columns)
}

// columnsChecker is a ChangeDecoder that tells whether its table has
// columns without building the table (cdc.Decoder.HasColumns): the
// Applier asks after each event it decodes, a change batch once.
type columnsChecker interface {
	HasColumns(cols []schema.Column) bool
}

// hasColumns reports whether d's table has t's columns (sameColumns).
func hasColumns(d ChangeDecoder, t schema.Table) bool {
	if c, ok := d.(columnsChecker); ok {
		return c.HasColumns(t.Columns)
	}
	return sameColumns(d.Table(), t)
}

// changeTable evolves a sink's table to t, the table its mapper needs now,
// and makes the changed sink the topic's sink. Partitions of one topic meet
// the same change (a change decoder learns its table from each partition's
// first event at every start): once another partition made it, the topic's
// sink is taken as it is. The INFO says a change only when DDL ran.
func (w *Writer) changeTable(ctx context.Context, topic string, sink Sink, t schema.Table) (Sink, error) {
	next := sink
	next.Table, next.Evolve = t, true
	var err error
	if next.Children, err = bindChildren(sink.Children, t); err != nil {
		return Sink{}, fmt.Errorf("children of table %s: %w", t.QualifiedName(), err)
	}
	w.mu.Lock()
	if cur, ok := w.changed[topic]; ok && sameColumns(cur.Table, t) && slices.Equal(cur.Table.PrimaryKey, t.PrimaryKey) {
		w.mu.Unlock()
		return cur, nil
	}
	create := w.create
	w.mu.Unlock()
	ran, err := w.ensureTable(ctx, topic, next, create)
	if err != nil {
		return Sink{}, err
	}
	if ran > 0 {
		w.log.Info("table changed with the topic's schema", "topic", topic, "table", t.QualifiedName(), "columns", len(t.Columns), "statements", ran)
	} else {
		w.log.Debug("table checked against the topic's schema: no change", "topic", topic, "table", t.QualifiedName(), "columns", len(t.Columns))
	}
	if retyped(sink.Table, t) {
		// pgx caches, per connection, the column types a COPY encodes
		// with; after ALTER COLUMN TYPE (ours or another instance's) a
		// cached int4 would refuse a bigint forever. New connections
		// describe the table afresh; those in use close when released.
		w.pool.Reset()
	}
	w.mu.Lock()
	if w.servesLocked(topic, sink) {
		// A sink that SetSinks replaced meanwhile keeps its change to
		// this batch: the next one takes the new sink.
		w.changed[topic] = next
	}
	w.mu.Unlock()
	return next, nil
}

// sinkFor returns the sink of a topic: configured, or resolved once through
// Config.Resolve (a topic matched by a regex), whose table is then prepared
// like EnsureTables prepares the configured ones.
func (w *Writer) sinkFor(ctx context.Context, topic string) (Sink, error) {
	w.mu.Lock()
	s, ok := w.changed[topic]
	w.mu.Unlock()
	if ok {
		return s, nil
	}
	rt := w.routes.Load()
	if s, ok := rt.fixed[topic]; ok {
		return s, nil
	}
	w.mu.Lock()
	s, ok = w.resolved[topic]
	create := w.create
	w.mu.Unlock()
	if ok {
		return s, nil
	}
	if rt.resolve == nil {
		return Sink{}, fmt.Errorf("no table is configured for topic %q", topic)
	}
	s, ok, err := rt.resolve(ctx, topic)
	if err != nil {
		return Sink{}, fmt.Errorf("sink for topic %q: %w", topic, err)
	}
	if !ok {
		return Sink{}, fmt.Errorf("no table is configured for topic %q", topic)
	}
	if err := validateSink(topic, s); err != nil {
		return Sink{}, err
	}
	if _, err := w.ensureTable(ctx, topic, s, create); err != nil {
		return Sink{}, err
	}
	w.log.Info("new topic matched; table ready", "topic", topic, "table", s.Table.QualifiedName())
	w.mu.Lock()
	if w.routes.Load() == rt {
		w.resolved[topic] = s // else SetSinks replaced the patterns meanwhile
	}
	w.mu.Unlock()
	return s, nil
}

// TableName names the table a topic's records go to, or "" when the topic
// has no sink yet.
func (w *Writer) TableName(topic string) string {
	if s, ok := w.routes.Load().fixed[topic]; ok {
		return s.Table.QualifiedName()
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if s, ok := w.resolved[topic]; ok {
		return s.Table.QualifiedName()
	}
	return ""
}

// MissingTableError is EnsureTables' error, without create, for a sink's
// table that does not exist.
type MissingTableError struct {
	Table string // as a query names it, quoted where it must be
	Topic string
}

func (e *MissingTableError) Error() string {
	return fmt.Sprintf("table %s for topic %q does not exist: create it, or let EnsureTables create it", e.Table, e.Topic)
}
