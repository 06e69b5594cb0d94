package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/kafka2pg/kafka2pg/tools/internal/procfs"
)

// system is one of the two contenders.
type system interface {
	label() string
	short() string
	// start begins consuming topic into table (created by the harness) for
	// scenario sc; name is unique per run (the group, the connector).
	start(ctx context.Context, sc scenario, topic, table, name string, probe bool) (handle, error)
}

// handle is one run of a system.
type handle interface {
	// done tells whether every record is in the table; an error when the
	// system failed.
	done(ctx context.Context) (bool, error)
	// interval is how long to wait before the next done.
	interval() time.Duration
	// cpu is the CPU seconds the system used since start (every
	// incarnation); peak its peak RSS in bytes.
	cpu() float64
	peak() int64
	kill9(ctx context.Context) error
	restart(ctx context.Context) error
	stop(ctx context.Context) error
	logs() string
}

// scenario is one row of the comparison.
type scenario struct {
	key   string
	title string
	data  dataset
	// upsert: the table's primary key is id; kafka2pg runs mode upsert,
	// the JDBC sink insert.mode=upsert.
	upsert bool
	// debezium is what the JDBC sink's configuration sets beyond the
	// connection, the table and the key converter; jdbcParams go on its
	// JDBC URL.
	debezium   map[string]string
	jdbcParams string
	// changes: the records are Debezium change events (data.changes);
	// each system applies them in its native mode and creates its table
	// from their schemas (kafka2pg format debezium; the JDBC sink
	// primary.key.mode record_key, delete.enabled, schema.evolution basic).
	changes bool
}

// batched is what the batch scenarios set on the JDBC sink. A put() flushes
// its records at its end, and Connect hands it at most max.poll.records
// (500) at a time, so batch.size alone would change nothing.
var batched = map[string]string{"batch.size": "10000", "consumer.override.max.poll.records": "10000"}

func scenarios(newKeys, updates, changes dataset) []scenario {
	// use.reduction.buffer keeps the last record of each key in a batch:
	// without it, reWriteBatchedInserts makes the batch one multi-row
	// INSERT ... ON CONFLICT DO UPDATE, which Postgres refuses as soon as
	// a key is twice in it ("ON CONFLICT DO UPDATE command cannot affect
	// row a second time"), and the task fails. kafka2pg also keeps the
	// last record of each key in a batch.
	upsert := map[string]string{"insert.mode": "upsert", "primary.key.mode": "record_value", "primary.key.fields": "id",
		"use.reduction.buffer": "true"}
	for k, v := range batched {
		upsert[k] = v
	}
	// The JDBC sink's native mode for change events: the key is the
	// record key (JSON with its schema), d events delete, the table is
	// created from the schemas. Batched as the upsert scenarios.
	native := map[string]string{"insert.mode": "upsert", "primary.key.mode": "record_key", "delete.enabled": "true",
		"schema.evolution": "basic", "use.reduction.buffer": "true",
		"key.converter": "org.apache.kafka.connect.json.JsonConverter", "key.converter.schemas.enable": "true"}
	for k, v := range batched {
		native[k] = v
	}
	return []scenario{
		{key: "append-defaults", title: "append, Debezium defaults", data: newKeys},
		{key: "append-batch", title: "append, batch.size 10000, reWriteBatchedInserts", data: newKeys,
			debezium: batched, jdbcParams: "reWriteBatchedInserts=true"},
		{key: "upsert-new", title: "upsert (PK id), all keys new, batch 10000", data: newKeys, upsert: true,
			debezium: upsert, jdbcParams: "reWriteBatchedInserts=true"},
		{key: "upsert-updates", title: "upsert (PK id), 10% new keys, 90% updates, batch 10000", data: updates, upsert: true,
			debezium: upsert, jdbcParams: "reWriteBatchedInserts=true"},
		{key: "changes", title: "Debezium change events: 10% creates, 90% updates, 1% deletes, batch 10000", data: changes, upsert: true,
			changes: true, debezium: native, jdbcParams: "reWriteBatchedInserts=true"},
		{key: changesTxKey, title: "the change events in source transactions, kafka2pg with and without transactions: true",
			data: changes.withTransactions(), upsert: true, changes: true},
	}
}

// result is what one run measured.
type result struct {
	Scenario string
	System   string
	Rep      int
	Records  int
	// FirstRow is the time from the start (the process or the connector)
	// to the first row in the table; Active from the first row to the
	// last; Wall from the start to the last. AtFirst is how many records
	// were in when the first row was seen: the first batch, written
	// before Active starts (with a cold JIT, the JDBC sink's first batch
	// of 10,000 took 15 s here).
	FirstRow, Active, Wall time.Duration
	AtFirst                int64
	CPU, PGCPU             float64 // seconds, start to last row
	PeakRSS                int64
	Rows, SeqSum, Distinct int64
	WantRows, WantSeqSum   int64
	// Mismatches: upsert, the keys whose row differs from the fold of
	// the records (foldMismatches).
	Mismatches int64
	// NotRun is why the system refused the scenario (kafka2pg without a
	// writer for change events); nothing else is set then.
	NotRun string
	// The kill -9 probe: the row count at each kill, and the outcome.
	Kills      []int64
	Duplicates int64
	Lost       int64
	// Prepared is the number of transactions left prepared in Postgres at
	// the probe's end (Flink's XA sink), holding their locks.
	Prepared int64
	// DuplicateRanges says where the duplicates are (duplicateRanges).
	DuplicateRanges string
}

// lossSettle is how long the probe waits on a table that misses records
// and no longer changes before it counts them lost: longer than a
// restarted Connect worker or Flink job takes to write again.
const lossSettle = 60 * time.Second

// rate is the steady rows/s: the records after the first batch over the
// time from the first row to the last;
// NaN when the first batch held them all.
func (r result) rate() float64 {
	if int64(r.Records) <= r.AtFirst {
		return math.NaN()
	}
	return float64(int64(r.Records)-r.AtFirst) / r.Active.Seconds()
}

// wallRate is the records over the time from the start to the last row.
func (r result) wallRate() float64 { return float64(r.Records) / r.Wall.Seconds() }

// perMillion scales CPU seconds to 1,000,000 rows.
func (r result) perMillion(cpu float64) float64 { return cpu / float64(r.Records) * 1e6 }

// correct tells whether the table holds what the records make.
func (r result) correct() bool {
	if len(r.Kills) > 0 {
		return r.Lost == 0
	}
	return r.NotRun != "" || r.Rows == r.WantRows && r.SeqSum == r.WantSeqSum && r.Mismatches == 0
}

// harness is what every run shares.
type harness struct {
	db      *db
	pg      procfs.Postgres
	timeout time.Duration
	logf    func(format string, args ...any)
	// topics holds the topic of each dataset, filled once per harness run
	// and read by every run (each with a group of its own).
	topics map[string]string
	runID  string
	seq    int
	// fresh, when set, gives the Debezium runs a new worker each.
	fresh func(ctx context.Context) error
}

func (h *harness) name(sys system, what string) string {
	h.seq++
	return fmt.Sprintf("peers-%s-%s-%d-%s", sys.short(), what, h.seq, h.runID)
}

// measure runs sys on scenario sc once: until every record is in the
// table, polling the table (or kafka2pg's offsets) for the first and the
// last row.
func (h *harness) measure(ctx context.Context, sys system, sc scenario, rep int) (result, error) {
	table := "peers_" + sys.short()
	if err := h.db.reset(ctx, table, sc.upsert, sc.changes); err != nil {
		return result{}, err
	}
	if _, ok := sys.(*debeziumSystem); ok && h.fresh != nil {
		if err := h.fresh(ctx); err != nil {
			return result{}, err
		}
	}
	want := sc.data.final(sc.upsert)
	r := result{Scenario: sc.key, System: sys.label(), Rep: rep, Records: sc.data.n, WantRows: want.rows, WantSeqSum: want.seqSum}
	pg0, t0 := h.pg.CPU(), time.Now()
	run, err := sys.start(ctx, sc, h.topics[sc.data.name], table, h.name(sys, sc.key), false)
	if err != nil {
		return r, err
	}
	defer func() { _ = run.stop(context.WithoutCancel(ctx)) }()
	deadline := t0.Add(h.timeout)
	var first time.Time
	err = poll(ctx, deadline, func() time.Duration { return 20 * time.Millisecond }, func() (bool, error) {
		if ok, err := h.db.hasRows(ctx, table); err != nil || ok {
			first = time.Now()
			if err == nil {
				r.AtFirst, err = h.db.progress(ctx, table, sc.data)
			}
			return ok, err
		}
		// A system that failed before writing anything fails here.
		_, err := run.done(ctx)
		return false, err
	})
	if err == nil {
		err = poll(ctx, deadline, run.interval, func() (bool, error) { return run.done(ctx) })
	}
	var nr *notRunError
	if errors.As(err, &nr) {
		r.NotRun = nr.why
		h.logf("  %-18s %-16s rep %d: not run: %s", sys.label(), sc.key, rep, nr.why)
		return r, h.db.drop(ctx, table)
	}
	if err != nil {
		return r, h.failed(sys, sc, run, err)
	}
	last := time.Now()
	r.CPU, r.PeakRSS, r.PGCPU = run.cpu(), run.peak(), h.pg.CPU()-pg0
	r.FirstRow, r.Active, r.Wall = first.Sub(t0), last.Sub(first), last.Sub(t0)
	if err := run.stop(ctx); err != nil {
		return r, err
	}
	st, err := h.db.state(ctx, table)
	if err != nil {
		return r, err
	}
	r.Rows, r.SeqSum, r.Distinct = st.rows, st.seqSum, st.distinct
	if sc.upsert {
		if r.Mismatches, err = h.db.foldMismatches(ctx, table, want.fold); err != nil {
			return r, err
		}
	}
	h.logf("  %-18s %-16s rep %d: %8.0f rows/s  first row %5.1fs  CPU %6.1fs  Postgres %6.1fs  peak RSS %5.0f MiB  rows %d%s",
		sys.label(), sc.key, rep, r.rate(), r.FirstRow.Seconds(), r.CPU, r.PGCPU, float64(r.PeakRSS)/(1<<20), r.Rows, wrongNote(r))
	if !r.correct() {
		return r, fmt.Errorf("%s, %s: the table holds %d rows (seq sum %d), not %d (seq sum %d); %d keys differ from the fold of the records",
			sys.label(), sc.title, r.Rows, r.SeqSum, r.WantRows, r.WantSeqSum, r.Mismatches)
	}
	return r, h.db.drop(ctx, table)
}

// notRunError is a system's refusal of a scenario: the report says "not
// run" and why, instead of the run failing.
type notRunError struct{ why string }

func (e *notRunError) Error() string { return "not run: " + e.why }

func wrongNote(r result) string {
	if r.correct() {
		return ""
	}
	return "  WRONG"
}

func (h *harness) failed(sys system, sc scenario, run handle, err error) error {
	if errors.Is(err, errDeadline) {
		err = fmt.Errorf("not done within %s (-run-timeout)", h.timeout)
	}
	return fmt.Errorf("%s, %s: %w\n--- its log (end):\n%s", sys.label(), sc.title, err, tail(run.logs(), 4000))
}

func tail(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}

// probe runs sys in append mode on the records of sc and kills it with
// SIGKILL twice, when a third and when two thirds of the records are in
// the table, starting it again each time; once every record is in, it
// counts the duplicates with SQL.
func (h *harness) probe(ctx context.Context, sys system, sc scenario) (result, error) {
	table := "peers_" + sys.short()
	if err := h.db.reset(ctx, table, false, false); err != nil {
		return result{}, err
	}
	if _, ok := sys.(*debeziumSystem); ok && h.fresh != nil {
		if err := h.fresh(ctx); err != nil {
			return result{}, err
		}
	}
	n := int64(sc.data.n)
	r := result{Scenario: "kill-probe", System: sys.label(), Rep: 1, Records: sc.data.n, WantRows: n, WantSeqSum: n * (n - 1) / 2}
	pg0, t0 := h.pg.CPU(), time.Now()
	run, err := sys.start(ctx, sc, h.topics[sc.data.name], table, h.name(sys, "probe"), true)
	if err != nil {
		return r, err
	}
	defer func() { _ = run.stop(context.WithoutCancel(ctx)) }()
	deadline := t0.Add(h.timeout)
	every := func() time.Duration { return 20 * time.Millisecond }
	var rows int64
	for k := int64(1); k <= 2; k++ {
		// The second kill waits for the restarted system to write
		// something (kafka2pg's first kill may come after two thirds).
		prev := rows
		err := poll(ctx, deadline, every, func() (bool, error) {
			var err error
			if rows, err = h.db.count(ctx, table); err != nil || (rows >= k*n/3 && rows > prev) || rows >= n {
				return true, err
			}
			_, err = run.done(ctx)
			return false, err
		})
		if err != nil {
			return r, h.failed(sys, sc, run, err)
		}
		if err := run.kill9(ctx); err != nil {
			return r, err
		}
		r.Kills = append(r.Kills, rows)
		h.logf("  %-18s kill -9 at %d rows in the table; starting it again", sys.label(), rows)
		if err := run.restart(ctx); err != nil {
			return r, err
		}
	}
	// Done when every record is in (a redelivery comes before the
	// records after it in its partition), then still for 2 s; or, for a
	// system that lost records, when the table has not changed for
	// lossSettle.
	var st tableState
	stableSince := time.Time{}
	err = poll(ctx, deadline, func() time.Duration { return 200 * time.Millisecond }, func() (bool, error) {
		if _, err := run.done(ctx); err != nil {
			return false, err
		}
		prev := st
		var err error
		if st, err = h.db.state(ctx, table); err != nil {
			return false, err
		}
		if st != prev || stableSince.IsZero() {
			stableSince = time.Now()
		}
		if st.distinct < n {
			return st.rows > 0 && time.Since(stableSince) >= lossSettle, nil
		}
		return time.Since(stableSince) >= 2*time.Second, nil
	})
	if err != nil {
		return r, h.failed(sys, sc, run, err)
	}
	r.Wall = time.Since(t0)
	r.CPU, r.PeakRSS, r.PGCPU = run.cpu(), run.peak(), h.pg.CPU()-pg0
	r.Rows, r.Distinct, r.SeqSum = st.rows, st.distinct, st.seqSum
	r.Duplicates, r.Lost = st.rows-st.distinct, n-st.distinct
	if r.Prepared, err = h.db.preparedCount(ctx); err != nil {
		return r, err
	}
	h.logf("  %-18s kill -9 probe: %d rows for %d records: %d duplicates, %d lost, in %.0fs", sys.label(), r.Rows, n, r.Duplicates, r.Lost, r.Wall.Seconds())
	if r.Duplicates > 0 {
		if r.DuplicateRanges, err = h.db.duplicateRanges(ctx, table); err != nil {
			return r, err
		}
		h.logf("  %-18s duplicates by partition: %s", sys.label(), r.DuplicateRanges)
	}
	if err := run.stop(ctx); err != nil {
		return r, err
	}
	return r, h.db.drop(ctx, table)
}
