package ingest_test

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/kafka2pg/kafka2pg/ingest"
	"github.com/kafka2pg/kafka2pg/internal/cdctest"
	"github.com/kafka2pg/kafka2pg/internal/pgtest"
)

// walSince is the WAL Postgres wrote since lsn was current.
func walSince(t *testing.T, pool *pgxpool.Pool, lsn string) int64 {
	return queryInt(t, pool, "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), $1::pg_lsn)::int8", lsn)
}

func currentWAL(t *testing.T, pool *pgxpool.Pool) string {
	var lsn string
	if err := pool.QueryRow(t.Context(), "SELECT pg_current_wal_lsn()::text").Scan(&lsn); err != nil {
		t.Fatal(err)
	}
	return lsn
}

// bankRun is a bank capture of transfers on a fresh database, with a
// member that owns its partitions (with transactions, the transaction
// topic's too) and writes them in batches of up to 500 records.
type bankRun struct {
	pool   *pgxpool.Pool
	src    *cdctest.Bank
	rng    *rand.Rand
	m      *member
	events int // change events, the transaction topic's records aside
}

func newBankRun(tb testing.TB, transfers int, transactions bool) *bankRun {
	tb.Helper()
	r := &bankRun{rng: rand.New(rand.NewPCG(8, 37)), src: newBankSource(1000)}
	_, r.pool = pgtest.MigratedPool(tb)
	r.src.TransfersOf(r.rng, transfers)
	for tp, recs := range r.src.Log {
		if tp.Topic != bankTxTopic {
			r.events += len(recs)
		}
	}
	sinks, parts := bankSinks(tb), r.src.AllParts()
	if !transactions {
		sinks, parts = changeByChange(tb), parts[1:] // all but the transaction topic
	}
	r.m = memberOf(tb, readyWriter(tb, r.pool, ingest.Config{Group: "g", Sinks: sinks}), parts)
	return r
}

// writeAll writes every record of the capture.
func (r *bankRun) writeAll(tb testing.TB) {
	tb.Helper()
	for more := true; more; {
		var err error
		if more, err = r.m.feed(tb.Context(), r.src, r.rng, 500); err != nil {
			tb.Fatal(err)
		}
	}
}

// The same bank capture is replicated change by change and with
// transactions, by one member in batches of up to 500 records; the test
// logs what each costs (time, WAL, the staging's size) and checks both
// replicas. Not parallel: it reads the server's WAL position, which
// parallel tests would move.
func TestTransactionsCostComparedWithChangeByChange(t *testing.T) {
	// KAFKA2PG_TEST_TX_COST_TRANSFERS: make test-cdc-tx-large sets 20,000.
	n := envCount(t, "KAFKA2PG_TEST_TX_COST_TRANSFERS", 300, 1)
	type cost struct {
		took, apply time.Duration
		wal, staged int64
	}
	run := func(transactions bool) (cost, int) {
		r := newBankRun(t, n, transactions)
		var c cost
		wal := currentWAL(t, r.pool)
		start := time.Now()
		r.writeAll(t)
		if transactions {
			c.staged = queryInt(t, r.pool, "SELECT pg_total_relation_size('kafka2pg.cdc_staged') + pg_total_relation_size('kafka2pg.cdc_tx_ends')")
			a := claimedApplier(t, r.m.w, ingest.ApplierConfig{})
			applyStart := time.Now()
			if got, err := a.ApplyReady(t.Context()); err != nil || got != n {
				t.Fatalf("applied %d (%v), want %d", got, err, n)
			}
			c.apply = time.Since(applyStart)
		}
		c.took = time.Since(start)
		c.wal = walSince(t, r.pool, wal)
		r.src.EqualsSource(t, r.pool)
		return c, r.events
	}
	direct, events := run(false)
	tx, _ := run(true)
	rate := func(d time.Duration) float64 { return float64(events) / d.Seconds() }
	t.Logf("%d source transactions, %d change events", n, events)
	t.Logf("change by change: %s, %.0f events/s, WAL %d bytes/event", direct.took.Round(time.Millisecond), rate(direct.took), direct.wal/int64(events))
	t.Logf("transactions:     %s, %.0f events/s (%.2fx), of which staging %s, applying %s; WAL %d bytes/event (%.2fx); staging %d bytes/event at its largest",
		tx.took.Round(time.Millisecond), rate(tx.took), direct.took.Seconds()/tx.took.Seconds(), (tx.took - tx.apply).Round(time.Millisecond), tx.apply.Round(time.Millisecond),
		tx.wal/int64(events), float64(tx.wal)/float64(direct.wal), tx.staged/int64(events))
}

// BenchmarkTransactions stages the bank capture's events of 1,000 source
// transactions and applies them: one op is the whole, on a fresh database
// (not timed). With -benchmem its allocations per op are what the
// collector's work follows; it reports the time per change event too.
func BenchmarkTransactions(b *testing.B) {
	const transfers = 1000
	events := 0
	for b.Loop() {
		b.StopTimer()
		r := newBankRun(b, transfers, true)
		a := claimedApplier(b, r.m.w, ingest.ApplierConfig{})
		events = r.events
		b.StartTimer()
		r.writeAll(b)
		if got, err := a.ApplyReady(b.Context()); err != nil || got != transfers {
			b.Fatalf("applied %d (%v), want %d", got, err, transfers)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N*events), "µs/event")
}
