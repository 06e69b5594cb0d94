package ingest_test

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/kafka2pg/kafka2pg/ingest"
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
		_, pool := pgtest.MigratedPool(t)
		rng := rand.New(rand.NewPCG(8, 37))
		src := newBankSource(1000)
		src.TransfersOf(rng, n)
		events := 0
		for tp, recs := range src.Log {
			if tp.Topic != bankTxTopic {
				events += len(recs)
			}
		}
		sinks, parts := bankSinks(t), src.AllParts()
		if !transactions {
			sinks, parts = changeByChange(t), parts[1:] // all but the transaction topic
		}
		m := memberOf(t, readyWriter(t, pool, ingest.Config{Group: "g", Sinks: sinks}), parts)
		var c cost
		wal := currentWAL(t, pool)
		start := time.Now()
		for more := true; more; {
			var err error
			if more, err = m.feed(t.Context(), src, rng, 500); err != nil {
				t.Fatal(err)
			}
		}
		if transactions {
			c.staged = queryInt(t, pool, "SELECT pg_total_relation_size('kafka2pg.cdc_staged') + pg_total_relation_size('kafka2pg.cdc_tx_ends')")
			a := claimedApplier(t, m.w, ingest.ApplierConfig{})
			applyStart := time.Now()
			if got, err := a.ApplyReady(t.Context()); err != nil || got != n {
				t.Fatalf("applied %d (%v), want %d", got, err, n)
			}
			c.apply = time.Since(applyStart)
		}
		c.took = time.Since(start)
		c.wal = walSince(t, pool, wal)
		src.EqualsSource(t, pool)
		return c, events
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
// transactions, in batches of up to 500 records a partition, and applies
// them: one op is the whole, on a fresh database (not timed). It reports
// the allocations per change event, the figure the collector's work
// follows, besides the time.
func BenchmarkTransactions(b *testing.B) {
	const transfers = 1000
	events := 0
	for b.Loop() {
		b.StopTimer()
		_, pool := pgtest.MigratedPool(b)
		rng := rand.New(rand.NewPCG(8, 37))
		src := newBankSource(1000)
		src.TransfersOf(rng, transfers)
		events = 0
		for tp, recs := range src.Log {
			if tp.Topic != bankTxTopic {
				events += len(recs)
			}
		}
		m := memberOf(b, readyWriter(b, pool, ingest.Config{Group: "g", Sinks: bankSinks(b)}), src.AllParts())
		a := claimedApplier(b, m.w, ingest.ApplierConfig{})
		b.StartTimer()
		for more := true; more; {
			var err error
			if more, err = m.feed(b.Context(), src, rng, 500); err != nil {
				b.Fatal(err)
			}
		}
		if got, err := a.ApplyReady(b.Context()); err != nil || got != transfers {
			b.Fatalf("applied %d (%v), want %d", got, err, transfers)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N*events), "µs/event")
}
