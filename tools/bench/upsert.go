package main

import (
	"cmp"
	"context"
	"fmt"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/kafka2pg/kafka2pg/pgcopy"
	"github.com/kafka2pg/kafka2pg/schema"
	"github.com/kafka2pg/kafka2pg/stream"
	"github.com/kafka2pg/kafka2pg/tools/internal/figures"
)

// The upsert scenarios, run in each repetition right after the typed
// table's block: kafka2pg in upsert mode by id into upsertTable (the typed
// table's columns, primary key id), on two streams, each against kafka2pg's
// own append rate on the typed table in the same repetition and against
// the Postgres-side limit of the statement an upsert comes down to.

// keyMode is how an upsert stream's records choose their id.
type keyMode string

const (
	// keysNew: record i has id i: the typed table's own records, so the
	// append run of the repetition wrote the same rows.
	keysNew keyMode = "new"
	// keysUpdates: record 10k brings id k, the other 9 records of 10
	// update an id an earlier record brought, chosen by a hash of the
	// record's index among all the ids so far (as make bench-peers), so
	// the updates spread over the whole table.
	keysUpdates keyMode = "updates"
)

var keyModes = []keyMode{keysNew, keysUpdates}

func (m keyMode) id(i int) int64 {
	if m == keysNew {
		return int64(i)
	}
	if i%10 == 0 {
		return int64(i / 10)
	}
	h := uint64(i) * 0x9E3779B97F4A7C15
	return int64((h >> 17) % uint64(i/10+1))
}

func (m keyMode) label() string {
	if m == keysNew {
		return "all keys new"
	}
	return "10% new keys, 90% updates"
}

// record is record i of the stream: every record of an id in partition id
// mod 8, as a producer keyed by id places them, keyed by its user (as the
// typed table's records are) and with id as its JSON id.
func (m keyMode) record(i int) (partition int32, key, value []byte) {
	id := m.id(i)
	return int32(id % partitions), recordKey(i), keyedValue(id, i)
}

// upsertState sums up an upsert table: the rows, the sum of their
// kafka_offset, the sum of id XOR kafka_offset, and the rows whose
// kafka_partition is not id mod 8. A table whose every row holds the last
// record of its id (by offset) sums up as finalState says.
type upsertState struct {
	rows, offsets, mix, misplaced int64
}

// finalState is the upsert table once records 0..n-1 of m are applied in
// offset order.
func finalState(m keyMode, n int) upsertState {
	next := make([]int64, partitions)
	last := make(map[int64]int64) // id → offset of its last record
	for i := range n {
		id := m.id(i)
		last[id] = next[id%partitions]
		next[id%partitions]++
	}
	var s upsertState
	for id, off := range last {
		s.rows++
		s.offsets += off
		s.mix += id ^ off
	}
	return s
}

func (e *env) upsertState(ctx context.Context) (upsertState, error) {
	var s upsertState
	err := e.conn.QueryRow(ctx, `SELECT count(*), coalesce(sum(kafka_offset), 0)::bigint, coalesce(sum(id # kafka_offset), 0)::bigint,
		count(*) FILTER (WHERE kafka_partition <> id % 8) FROM `+pgx.Identifier{"public", upsertTable}.Sanitize()).Scan(&s.rows, &s.offsets, &s.mix, &s.misplaced)
	if err != nil {
		return s, fmt.Errorf("read the upsert table: %w", err)
	}
	return s, nil
}

// checkUpsert sets r's table rows, and its mismatch when the table does not
// hold the last record of every id.
func (e *env) checkUpsert(ctx context.Context, r *result, m keyMode) error {
	got, err := e.upsertState(ctx)
	if err != nil {
		return err
	}
	want := finalState(m, r.Records)
	r.TableRows, r.WantRows = got.rows, want.rows
	if got != want {
		r.Mismatch = fmt.Sprintf("the table sums up as %+v, want %+v (rows, sum of offsets, sum of id XOR offset, rows in another partition)", got, want)
	}
	return nil
}

// upsertBlock is one stream's upsert scenarios in one repetition.
type upsertBlock struct {
	rep    int
	keys   keyMode
	limit  []result // 1 and 2 connections
	bridge result
}

// bestLimit is the better of the limit's runs.
func (b upsertBlock) bestLimit() result {
	best := b.limit[0]
	for _, c := range b.limit[1:] {
		if c.rowsPerSec() > best.rowsPerSec() {
			best = c
		}
	}
	return best
}

func (b upsertBlock) results() []result { return append(slices.Clone(b.limit), b.bridge) }

// runUpserts measures the limit, then kafka2pg, on a topic of n records of
// m filled before each.
func runUpserts(ctx context.Context, e *env, rep int, m keyMode, topic string, n int) (upsertBlock, error) {
	bl := upsertBlock{rep: rep, keys: m}
	var err error
	if bl.limit, err = runUpsertLimit(ctx, e, m, topic, n); err != nil {
		return bl, err
	}
	if err := e.kafka.fillWith(ctx, topic, n, m.record); err != nil {
		return bl, err
	}
	if bl.bridge, err = runBridge(ctx, e, upsertTable, topic, n, m); err != nil {
		return bl, err
	}
	if err := e.kafka.drop(ctx, topic); err != nil {
		e.logf("note: %v", err)
	}
	return bl, nil
}

// upsertBatch is the rows of one batch of one partition, as the limit
// applies them.
type upsertBatch struct {
	partition int32
	rows      [][]any // one per id, the id's last record in the batch, by id
}

// buildUpsertBatches builds the rows of records 0..n-1 of m: per partition,
// in offset order, cut in batches of batchRows records, each reduced to
// the last record of every id and sorted by id, the batches ordered
// round-robin over the partitions.
func buildUpsertBatches(m keyMode, topic string, n int) (schema.Table, []upsertBatch, error) {
	t, mapper, err := tableFor(upsertTable)
	if err != nil {
		return t, nil, err
	}
	type keyed struct {
		id  int64
		row []any
	}
	perPartition := make([][]keyed, partitions)
	ts := time.Now()
	for i := range n {
		p, key, value := m.record(i)
		r := &stream.Record{Topic: topic, Partition: p, Offset: int64(len(perPartition[p])), Timestamp: ts,
			TimestampType: stream.TimestampCreateTime, Key: key, Value: value}
		row, err := mapper.Row(r, nil)
		if err != nil {
			return t, nil, fmt.Errorf("build row %d: %w", i, err)
		}
		perPartition[p] = append(perPartition[p], keyed{m.id(i), row})
	}
	var out []upsertBatch
	for start := 0; ; start += batchRows {
		added := false
		for p, recs := range perPartition {
			if start >= len(recs) {
				continue
			}
			last := make(map[int64][]any)
			for _, k := range recs[start:min(start+batchRows, len(recs))] {
				last[k.id] = k.row
			}
			ids := make([]int64, 0, len(last))
			for id := range last {
				ids = append(ids, id)
			}
			slices.Sort(ids)
			b := upsertBatch{partition: int32(p), rows: make([][]any, len(ids))}
			for j, id := range ids {
				b.rows[j] = last[id]
			}
			out = append(out, b)
			added = true
		}
		if !added {
			return t, out, nil
		}
	}
}

// upsertLimitSQL is the limit's statement: the rows of a staging table into
// t, each updating the row of its id when there is one.
func upsertLimitSQL(t schema.Table, stage string) string {
	cols := t.ColumnNames()
	var set []string
	for _, c := range cols {
		if c != "id" {
			q := pgx.Identifier{c}.Sanitize()
			set = append(set, q+" = EXCLUDED."+q)
		}
	}
	list := columnList(cols)
	return fmt.Sprintf("INSERT INTO %s (%s) SELECT %s FROM %s ON CONFLICT (id) DO UPDATE SET %s",
		t.QualifiedName(), list, list, pgx.Identifier{stage}.Sanitize(), strings.Join(set, ", "))
}

func columnList(cols []string) string {
	q := make([]string, len(cols))
	for i, c := range cols {
		q[i] = pgx.Identifier{c}.Sanitize()
	}
	return strings.Join(q, ", ")
}

// runUpsertLimit measures the Postgres side of an upsert alone: the rows of
// buildUpsertBatches, pre-loaded before the clock starts into a temporary
// table per batch (pgcopy.CopyFrom), then, timed, one INSERT ... SELECT ...
// ON CONFLICT (id) DO UPDATE per batch, each in a transaction of its own,
// on one connection and on two (each taking every other partition).
func runUpsertLimit(ctx context.Context, e *env, m keyMode, topic string, n int) ([]result, error) {
	t, batches, err := buildUpsertBatches(m, topic, n)
	if err != nil {
		return nil, err
	}
	defer func() {
		batches = nil
		runtime.GC()
		debug.FreeOSMemory()
	}()
	var out []result
	for _, conns := range []int{1, 2} {
		if err := e.resetTable(ctx, t, true); err != nil {
			return nil, err
		}
		r, err := upsertLimitOn(ctx, e, t, batches, conns)
		if err != nil {
			return nil, err
		}
		r.Records, r.ActiveRows, r.Keys = n, n, m
		if err := e.checkUpsert(ctx, &r, m); err != nil {
			return nil, err
		}
		e.logf("%-36s %s", r.title(), r.summary())
		out = append(out, r)
	}
	return out, e.dropTable(ctx, t)
}

// upsertLimitOn loads and applies batches on conns connections.
func upsertLimitOn(ctx context.Context, e *env, t schema.Table, batches []upsertBatch, conns int) (result, error) {
	cs, err := connectN(ctx, e, conns)
	if err != nil {
		return result{}, err
	}
	defer closeAll(ctx, cs)
	stmts := make([][]string, conns)
	cols := t.ColumnNames()
	for j, b := range batches {
		c := cs[int(b.partition)%conns]
		stage := fmt.Sprintf("bench_stage_%d", j)
		if _, err := c.Exec(ctx, fmt.Sprintf("CREATE TEMP TABLE %s AS SELECT %s FROM %s WITH NO DATA",
			pgx.Identifier{stage}.Sanitize(), columnList(cols), t.QualifiedName())); err != nil {
			return result{}, fmt.Errorf("create the staging table: %w", err)
		}
		err := pgx.BeginFunc(ctx, c, func(tx pgx.Tx) error {
			_, err := pgcopy.CopyFrom(ctx, tx, pgx.Identifier{stage}, cols, pgx.CopyFromRows(b.rows))
			return err
		})
		if err != nil {
			return result{}, fmt.Errorf("fill the staging table: %w", err)
		}
		stmts[int(b.partition)%conns] = append(stmts[int(b.partition)%conns], upsertLimitSQL(t, stage))
	}
	if err := checkpoint(ctx, e.conn); err != nil {
		return result{}, err
	}
	r, err := timed(ctx, e, cs, func(ctx context.Context, i int, c *pgx.Conn) error {
		for _, sql := range stmts[i] {
			err := pgx.BeginFunc(ctx, c, func(tx pgx.Tx) error {
				_, err := tx.Exec(ctx, sql)
				return err
			})
			if err != nil {
				return fmt.Errorf("upsert into %s: %w", t.QualifiedName(), err)
			}
		}
		return nil
	})
	r.Kind, r.Table = fmt.Sprintf("upsertLimit%d", conns), upsertTable
	return r, err
}

// upsertAppend is the typed table's kafka2pg run of repetition rep: what
// the upsert runs of the repetition are measured against.
func (rep *report) upsertAppend(r int) (result, bool) {
	for _, bl := range rep.blocks {
		if bl.rep != r || bl.table != typedTable {
			continue
		}
		for _, c := range bl.contenders {
			if c.Kind == "bridge" {
				return c, true
			}
		}
	}
	return result{}, false
}

// upsertSeries is the upsert runs of m over the repetitions: kind "bridge"
// or "limit" (the better of 1 and 2 connections), paired per repetition
// with kafka2pg's append run and with the limit.
type upsertSeries struct {
	runs, appends, limits []result
}

func (rep *report) upsertSeries(m keyMode, kind string) upsertSeries {
	var s upsertSeries
	for _, bl := range rep.upserts {
		if bl.keys != m {
			continue
		}
		app, ok := rep.upsertAppend(bl.rep)
		if !ok {
			continue
		}
		r := bl.bridge
		if kind == "limit" {
			r = bl.bestLimit()
		}
		s.runs, s.appends, s.limits = append(s.runs, r), append(s.appends, app), append(s.limits, bl.bestLimit())
	}
	return s
}

func (s upsertSeries) each(f func(r result) float64) figures.Spread {
	return figures.SpreadOver(s.runs, f)
}

// over is the per-repetition ratio of the runs' rows/s to those of refs.
func (s upsertSeries) over(refs []result) figures.Spread {
	vs := make([]float64, len(s.runs))
	for i, r := range s.runs {
		vs[i] = r.rowsPerSec() / refs[i].rowsPerSec()
	}
	return figures.SpreadOf(vs)
}

// upsertGoals are the targets of kafka2pg's upsert rate over its own append
// rate on the same rows.
var upsertGoals = map[keyMode]float64{keysNew: 0.6, keysUpdates: 0.4}

// upsertTitle names an upsert run.
func upsertTitle(r result) string {
	what := map[string]string{"bridge": "kafka2pg upsert", "upsertLimit1": "limit: INSERT ... ON CONFLICT from staging, 1 conn",
		"upsertLimit2": "limit: INSERT ... ON CONFLICT from staging, 2 conns"}[r.Kind]
	return fmt.Sprintf("%s (%s)", cmp.Or(what, r.Kind), r.Keys.label())
}

// upsertMarkdown writes the upsert section of results.md.
func upsertMarkdown(w func(format string, args ...any), rep *report) {
	if len(rep.upserts) == 0 {
		w("Not run (-upsert=false).\n\n")
		return
	}
	w("kafka2pg in upsert mode by id, against its own append rate on the typed table (the same repetition, the same " +
		"columns without the primary key) and against the limit: Postgres applying the same rows, pre-loaded into staging " +
		"tables, with INSERT ... ON CONFLICT (see *How it was measured*). Median (min–max) over the repetitions; the " +
		"ratios are paired within each repetition. rows/s and CPU count records, as kafka2pg's do: a record of the " +
		"updates stream whose id a later record of the same batch updates costs Postgres nothing, so the limit of that " +
		"stream is far above the other's.\n\n")
	w("| scenario | runs | rows/s | × kafka2pg append | × limit | CPU s / M rows: process | CPU s / M rows: Postgres | CPU s / M rows: kfake | peak RSS | rows in table |\n")
	w("|---|---|---|---|---|---|---|---|---|---|\n")
	row := func(title string, s upsertSeries) {
		w("| %s | %d | %s | %s | %s | %s | %s | %s | %s | %s |\n", title, len(s.runs), s.each(result.rowsPerSec).Format(0),
			s.over(s.appends).Format(2), s.over(s.limits).Format(2),
			figures.Num(s.each(func(r result) float64 { return r.perMillion(r.ClientCPU) }).Med, 2),
			figures.Num(s.each(func(r result) float64 { return r.perMillion(r.PGCPU) }).Med, 2),
			figures.Num(s.each(func(r result) float64 { return r.perMillion(r.BrokerCPU) }).Med, 2),
			mib(slices.MaxFunc(s.runs, func(a, b result) int { return cmp.Compare(a.PeakRSS, b.PeakRSS) }).PeakRSS),
			figures.Num(float64(s.runs[0].TableRows), 0))
	}
	if s := rep.upsertSeries(keysNew, "bridge"); len(s.runs) > 0 {
		app := upsertSeries{runs: s.appends, appends: s.appends, limits: s.limits}
		row("kafka2pg append (typed), the reference", app)
	}
	for _, m := range keyModes {
		if s := rep.upsertSeries(m, "limit"); len(s.runs) > 0 {
			row(fmt.Sprintf("limit: INSERT ... ON CONFLICT from staging, better of 1 and 2 conns (%s)", m.label()), s)
			row(fmt.Sprintf("**kafka2pg upsert (%s)**", m.label()), rep.upsertSeries(m, "bridge"))
		}
	}
	w("\nEvery upsert run, in the order they ran:\n\n")
	w("| rep | run | rows/s | × kafka2pg append | × limit | CPU s / M rows: process | CPU s / M rows: Postgres | CPU s / M rows: kfake | rows in table | wall | other processes, cores |\n")
	w("|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, bl := range rep.upserts {
		app, _ := rep.upsertAppend(bl.rep)
		for _, r := range bl.results() {
			w("| %d | %s | %s | %s | %s | %s | %s | %s | %s | %.1f s | %s |\n", bl.rep, r.title(), figures.Num(r.rowsPerSec(), 0),
				figures.Num(r.rowsPerSec()/app.rowsPerSec(), 2), figures.Num(r.rowsPerSec()/bl.bestLimit().rowsPerSec(), 2),
				figures.Num(r.perMillion(r.ClientCPU), 2), figures.Num(r.perMillion(r.PGCPU), 2), figures.Num(r.perMillion(r.BrokerCPU), 2),
				figures.Num(float64(r.TableRows), 0), r.Wall.Seconds(), figures.Num(r.OthersCores, 2))
		}
	}
	w("\n")
}
