package ingest

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/jackc/pgx/v5"

	"github.com/kafka2pg/kafka2pg/pgcopy"
	"github.com/kafka2pg/kafka2pg/schema"
	"github.com/kafka2pg/kafka2pg/stream"
)

// Routing by content: a sink with a Router sends each record to the table
// the Router names for it (a template of the record's value or headers).
// The sink's Table is the model of those tables: their columns, key and
// options; its name only stands for them in dead letters, logs and
// metrics. The set of a Router's tables grows as records name new ones:
// each is prepared (created, evolved) the first time a batch routes a
// record to it, before the batch's transaction, under the DDL lock that
// EnsureTables takes, so partitions (and instances) that meet a new table
// at once create it once. A batch that spans several tables is written in
// its one fenced transaction, so exactly once holds across them.
//
// A routed append batch is written as the isolating path writes
// (copyIsolating): its rows are mapped before the transaction, and a row
// Postgres refuses is found under savepoints in the same transaction. A
// routed upsert batch applies each table's records as one change set
// (upsertRoutedFast), as an unrouted batch is applied; when Postgres
// refuses a row it is applied again one record at a time under
// savepoints (upsertRouted).

// Router names the table of each record of a routed sink. A record it
// cannot name a table for (a missing field, a value that makes no valid
// name) is an error wrapping decode.ErrBadRecord, of kind KindRoute, which
// becomes a bad record; any other error aborts the batch. It must be
// comparable (a pointer): the writer counts the tables of each Router
// (Config.MaxTablesPerSink). Safe for concurrent use.
type Router interface {
	Route(r *stream.Record) (Route, error)
}

// Route is the table a Router names for a record.
type Route struct {
	Schema, Table string
}

// The bad-record kinds of routing.
const (
	// KindRoute: the record names no valid table (its Router says why).
	KindRoute = "route"
	// KindRouteLimit: the record names a table beyond the sink's
	// Config.MaxTablesPerSink.
	KindRouteLimit = "route_limit"
)

// routeSet is the tables a Router has routed records to since the writer
// started, whether they existed or were created: what
// Config.MaxTablesPerSink caps.
type routeSet struct {
	sink   string                  // the routed sink's table, its template
	tables map[string]*routedTable // by qualified name
	warned bool                    // the cap's WARN was logged
}

// routedTable is one table of a routed sink; mu is held while it is
// prepared, so that the partitions meeting it at once prepare it once.
type routedTable struct {
	mu    sync.Mutex
	ready bool
	sink  Sink // the routed sink's Sink with this table's name, no Router
}

// routeGroup is the records of a batch that go to one table, in offset
// order.
type routeGroup struct {
	sink    Sink
	records []stream.Record
}

// routeBatch sorts b's records into the tables their sink's Router names,
// in order of first appearance, preparing the tables it meets for the
// first time; the records it cannot route, or that are over the size
// limit, are bad records.
func (w *Writer) routeBatch(ctx context.Context, b *stream.Batch, sink Sink) ([]*routeGroup, []badRecord, error) {
	var (
		groups []*routeGroup
		byName = map[string]*routeGroup{}
		bad    []badRecord
	)
	for i := range b.Records {
		r := &b.Records[i]
		if x := tooLarge(r, w.cfg.MaxRecordBytes); x != nil {
			bad = append(bad, *x)
			continue
		}
		rt, err := sink.Router.Route(r)
		if err != nil {
			x, err := classify(r, err)
			if err != nil {
				return nil, nil, err
			}
			bad = append(bad, *x)
			continue
		}
		name := schema.Table{Schema: rt.Schema, Name: rt.Table}.QualifiedName()
		g := byName[name]
		if g == nil {
			t := w.admitRoute(sink, rt, name)
			if t == nil {
				bad = append(bad, badRecord{rec: r, kind: KindRouteLimit, table: name,
					err: fmt.Errorf("the record routes to %s, and the sink %s has reached its %d tables: raise the limit (max tables per sink), or route to fewer tables", name, sink.Table.QualifiedName(), w.cfg.MaxTablesPerSink)})
				continue
			}
			if err := w.prepareRouted(ctx, b.Topic, t); err != nil {
				var missing *MissingTableError
				if !errors.As(err, &missing) {
					return nil, nil, err
				}
				// Creating tables is off (or the sink's create is
				// false): a record may name any table, and one that is
				// missing is the record's problem, not the partition's.
				w.forgetRoute(sink, name)
				bad = append(bad, badRecord{rec: r, kind: KindRoute, table: name,
					err: fmt.Errorf("the record routes to %s, which does not exist, and creating tables is off: create it, or turn creating tables on", name)})
				continue
			}
			g = &routeGroup{sink: t.sink}
			byName[name] = g
			groups = append(groups, g)
		}
		g.records = append(g.records, *r)
	}
	return groups, bad, nil
}

// admitRoute is the routed table name of sink, counted in its Router's
// set; nil when the set is full (Config.MaxTablesPerSink), which the log
// hears of once.
func (w *Writer) admitRoute(sink Sink, rt Route, name string) *routedTable {
	w.mu.Lock()
	defer w.mu.Unlock()
	set := w.routeSetOf(sink)
	if t, ok := set.tables[name]; ok {
		return t
	}
	if max := w.cfg.MaxTablesPerSink; max > 0 && len(set.tables) >= max {
		if !set.warned {
			set.warned = true
			w.log.Warn("a routed sink reached its table limit: records routed to further tables become dead letters of kind "+KindRouteLimit,
				"table", sink.Table.QualifiedName(), "max_tables", max, "refused_table", name)
		}
		return nil
	}
	s := sink
	s.Router = nil
	s.Table.Schema, s.Table.Name = rt.Schema, rt.Table
	t := &routedTable{sink: s}
	set.tables[name] = t
	return t
}

// routeSetOf is the set of sink's Router, made empty the first time.
// w.mu is held, or w is not shared yet.
func (w *Writer) routeSetOf(sink Sink) *routeSet {
	set := w.routed[sink.Router]
	if set == nil {
		set = &routeSet{sink: sink.Table.QualifiedName(), tables: map[string]*routedTable{}}
		w.routed[sink.Router] = set
	}
	return set
}

// forgetRoute takes name out of sink's set: no record went to it.
func (w *Writer) forgetRoute(sink Sink, name string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.routeSetOf(sink).tables, name)
}

// prepareRouted prepares t's table once: created when missing and
// creating is on, evolved with the sink's evolve, checked (ensureTable).
// A failure leaves it to the next batch that routes there.
func (w *Writer) prepareRouted(ctx context.Context, topic string, t *routedTable) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.ready {
		return nil
	}
	w.mu.Lock()
	create := w.create
	w.mu.Unlock()
	if _, err := w.ensureTable(ctx, topic, t.sink, create); err != nil {
		return err
	}
	t.ready = true
	w.log.Info("routed table ready", "topic", topic, "table", t.sink.Table.QualifiedName())
	return nil
}

// replayRouted is the sink of the table rec routes to now, for the replay
// of its letter filed for table: false when the letter is of another
// sink, when rec still names no table, or names one past the cap.
func (w *Writer) replayRouted(ctx context.Context, sink Sink, rec *stream.Record, table string) (Sink, bool, error) {
	rt, err := sink.Router.Route(rec)
	if err != nil {
		return Sink{}, false, nil
	}
	name := schema.Table{Schema: rt.Schema, Name: rt.Table}.QualifiedName()
	if table != name && table != sink.Table.QualifiedName() {
		return Sink{}, false, nil
	}
	t := w.admitRoute(sink, rt, name)
	if t == nil {
		return Sink{}, false, nil
	}
	if err := w.prepareRouted(ctx, rec.Topic, t); err != nil {
		return Sink{}, false, err
	}
	return t.sink, true, nil
}

// RoutedTables is how many tables each routed sink has routed records to
// since the writer started (what Config.MaxTablesPerSink caps), by the
// sink's table as its template names it ("public"."events_${value.type}").
func (w *Writer) RoutedTables() map[string]int {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make(map[string]int, len(w.routed))
	for _, set := range w.routed {
		out[set.sink] += len(set.tables)
	}
	return out
}

// writeRouted writes b, whose sink has a Router, into the tables its
// records route to, in one transaction.
func (w *Writer) writeRouted(ctx context.Context, b *stream.Batch, sink Sink) (outcome, error) {
	groups, bad, err := w.routeBatch(ctx, b, sink)
	if err != nil {
		return outcome{}, named(b, err)
	}
	var res outcome
	if sink.Upsert != nil {
		if res, err = w.upsertRoutedFast(ctx, b, sink, groups, bad); err == nil && res.redo != 0 {
			res, err = w.upsertRouted(ctx, b, sink, groups, bad)
		}
	} else {
		res, err = w.appendRouted(ctx, b, sink, groups, bad)
	}
	return res, named(b, err)
}

// routedRows is the mapped rows of one routed table.
type routedRows struct {
	table schema.Table
	rows  []mappedRow
}

// appendRouted copies each table's rows (copyIsolating) in one
// transaction; with OnError "stop", a bad record commits only the rows
// before it.
func (w *Writer) appendRouted(ctx context.Context, b *stream.Batch, sink Sink, groups []*routeGroup, bad []badRecord) (outcome, error) {
	tables := make([]routedRows, 0, len(groups))
	for _, g := range groups {
		rows, refused, err := materialize(g.records, g.sink.Mapper, w.cfg.MaxRecordBytes)
		if err != nil {
			return outcome{}, err
		}
		bad = append(bad, inTable(refused, g.sink.Table)...)
		tables = append(tables, routedRows{table: g.sink.Table, rows: rows})
	}
	spec := txSpec{batches: []*stream.Batch{b}, sink: sink, isolating: true, notifies: true}
	return w.inBatchTx(ctx, spec, func(ctx context.Context, tx *batchTx) (outcome, error) {
		stop := w.cfg.OnError == OnErrorStop
		if stop {
			if _, err := tx.Exec(ctx, "SAVEPOINT kafka2pg_batch"); err != nil {
				return outcome{}, fmt.Errorf("savepoint: %w", err)
			}
		}
		res := outcome{bad: slices.Clone(bad)}
		written := make([]int, len(tables))
		for i, t := range tables {
			refused, n, err := copyIsolating(ctx, tx, t.table, t.rows)
			if err != nil {
				return outcome{}, fmt.Errorf("copy into %s: %w", t.table.QualifiedName(), err)
			}
			res.bad = append(res.bad, inTable(refused, t.table)...)
			res.rows += n
			written[i] = n
		}
		slices.SortFunc(res.bad, func(x, y badRecord) int { return cmp.Compare(x.rec.Offset, y.rec.Offset) })
		if !stop || len(res.bad) == 0 {
			return res, w.routedNotify(ctx, tx, b, tables, written)
		}
		first := res.bad[0]
		if _, err := tx.Exec(ctx, "ROLLBACK TO SAVEPOINT kafka2pg_batch"); err != nil {
			return outcome{}, fmt.Errorf("rollback to savepoint: %w", err)
		}
		rows := 0
		for i, t := range tables {
			written[i] = 0
			var prefix [][]any
			for _, r := range t.rows {
				if r.rec.Offset < first.rec.Offset {
					prefix = append(prefix, r.values)
				}
			}
			if len(prefix) == 0 {
				continue
			}
			if _, err := pgcopy.CopyFrom(ctx, tx, t.table.Ident(), t.table.ColumnNames(), pgx.CopyFromRows(prefix)); err != nil {
				return outcome{}, fmt.Errorf("copy into %s: %w", t.table.QualifiedName(), err)
			}
			rows += len(prefix)
			written[i] = len(prefix)
		}
		if err := w.routedNotify(ctx, tx, b, tables, written); err != nil {
			return outcome{}, err
		}
		return w.stopAt(ctx, tx, b, rows, first)
	})
}

// upsertRoutedFast applies each table's records as one change set, as
// an unrouted upsert sink's batch is (upsertFast), all in one
// transaction. It asks for the isolating upsertRouted (outcome.redo) when
// Postgres refuses a row, and with OnError "stop" when a record is bad.
func (w *Writer) upsertRoutedFast(ctx context.Context, b *stream.Batch, sink Sink, groups []*routeGroup, bad []badRecord) (outcome, error) {
	if len(bad) > 0 && w.cfg.OnError == OnErrorStop {
		return outcome{redo: attemptIsolated}, nil
	}
	// isolating: the COPYs and statements of many tables have no one
	// step's measure, so the transaction has its ceiling only.
	spec := txSpec{batches: []*stream.Batch{b}, sink: sink, isolating: true, notifies: true}
	return w.inBatchTx(ctx, spec, func(ctx context.Context, tx *batchTx) (outcome, error) {
		res := outcome{bad: slices.Clone(bad)}
		tables := make([]routedRows, len(groups))
		written := make([]int, len(groups))
		for i, g := range groups {
			t := g.sink.Table
			tables[i].table = t
			oids, err := describeTable(ctx, tx, t)
			if err != nil {
				return outcome{}, err
			}
			r, err := w.upsertSet(ctx, &batchTx{Tx: tx.Tx, oids: oids, state: tx.state}, g.records, g.sink)
			if err != nil || r.redo != 0 {
				return outcome{redo: attemptIsolated}, err
			}
			res.bad = append(res.bad, inTable(r.bad, t)...)
			res.rows += r.rows
			res.stale += r.stale
			written[i] = r.rows
		}
		slices.SortFunc(res.bad, func(x, y badRecord) int { return cmp.Compare(x.rec.Offset, y.rec.Offset) })
		return res, w.routedNotify(ctx, tx, b, tables, written)
	})
}

// upsertRouted applies the records' operations in offset order, each
// into its table by the statements of the isolating upsert path, in one
// transaction (applyEach).
func (w *Writer) upsertRouted(ctx context.Context, b *stream.Batch, sink Sink, groups []*routeGroup, bad []badRecord) (outcome, error) {
	var items []oneOp
	stale := 0
	for _, g := range groups {
		ops, refused, err := w.upsertOps(g.records, g.sink)
		if err != nil {
			return outcome{}, err
		}
		bad = append(bad, inTable(refused, g.sink.Table)...)
		for _, op := range upsertOneByOne(g.sink, ops, &stale, nil) {
			op.table = g.sink.Table.QualifiedName()
			items = append(items, op)
		}
	}
	slices.SortStableFunc(items, func(x, y oneOp) int { return cmp.Compare(x.rec.Offset, y.rec.Offset) })
	spec := txSpec{batches: []*stream.Batch{b}, sink: sink, isolating: true, notifies: true}
	return w.inBatchTx(ctx, spec, func(ctx context.Context, tx *batchTx) (outcome, error) {
		stale = 0
		res, err := w.applyEach(ctx, tx, b, items, bad, "upsert into the tables routed from "+sink.Table.QualifiedName())
		res.stale = stale
		if err != nil || !w.cfg.Notify {
			return res, err
		}
		// What applyEach applied: every operation but those refused, and
		// none from a stop on.
		refused := map[*stream.Record]bool{}
		for _, x := range res.bad {
			refused[x.rec] = true
		}
		tables := make([]routedRows, len(groups))
		written := make([]int, len(groups))
		index := map[string]int{}
		for i, g := range groups {
			tables[i].table = g.sink.Table
			index[g.sink.Table.QualifiedName()] = i
		}
		for _, op := range items {
			if !refused[op.rec] && (res.stop == nil || op.rec.Offset < res.stop.Offset) {
				written[index[op.table]]++
			}
		}
		return res, w.routedNotify(ctx, tx, b, tables, written)
	})
}

// routedNotify runs, with Config.Notify, the NOTIFY of each table of a
// routed batch that it wrote rows into (written, by tables' index), on
// the table's own channel.
func (w *Writer) routedNotify(ctx context.Context, tx *batchTx, b *stream.Batch, tables []routedRows, written []int) error {
	if !w.cfg.Notify {
		return nil
	}
	tx.at(StepNotify)
	for i, t := range tables {
		if err := w.notify(ctx, tx, b, Sink{Table: t.table}, written[i]); err != nil {
			return err
		}
	}
	return nil
}

// inTable is bad with each record's dead letter naming table t.
func inTable(bad []badRecord, t schema.Table) []badRecord {
	for i := range bad {
		bad[i].table = t.QualifiedName()
	}
	return bad
}
