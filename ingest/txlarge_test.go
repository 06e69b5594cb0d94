package ingest_test

import (
	"context"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/kafka2pg/kafka2pg/ingest"
	"github.com/kafka2pg/kafka2pg/internal/cdctest"
	"github.com/kafka2pg/kafka2pg/internal/pgtest"
	"github.com/kafka2pg/kafka2pg/stream"
)

// largeTxHeapLimit bounds the heap while one large transaction applies:
// the Applier holds one FETCH of it, whatever its size.
const largeTxHeapLimit = 96 << 20

// Not parallel: it measures the process's heap, which parallel tests
// would share. Go runs it before the parallel tests of the package.
func TestTransactionsLargeTransactionAppliesWholeWithBoundedHeap(t *testing.T) {
	_, pool := pgtest.MigratedPool(t)
	// KAFKA2PG_TEST_TX_EVENTS: make test-cdc-tx-large sets 200,000.
	n := envCount(t, "KAFKA2PG_TEST_TX_EVENTS", 20000, 2)
	per := n / 2 // one create in a and one in b per account id
	txid := "9000:1"
	m := newMember(t, pool, newBankSource(1).AllParts())
	// The transaction's events are made and written a batch at a time, so
	// that the test holds no more of it than the Applier may.
	record := func(table string, id, i int) stream.Record {
		key, value := cdctest.BankEvent(table, id, 1, "c", txid, int64(i), int64(id), int64(100+i))
		return stream.Record{Key: key, Value: value}
	}
	var staged int64
	for ti, table := range []string{"a", "b"} {
		for p := range int32(bankParts) {
			tp := topicPart{Topic: bankTopic(table), Part: p}
			var recs []stream.Record
			flush := func() {
				if len(recs) == 0 {
					return
				}
				first := max(m.prev[tp], 0)
				for i := range recs {
					recs[i].Topic, recs[i].Partition, recs[i].Offset = tp.Topic, p, first+int64(i)
					staged += int64(len(recs[i].Key) + len(recs[i].Value))
				}
				b := &stream.Batch{Topic: tp.Topic, Partition: p, Epoch: m.pos[tp].Epoch, PrevOffset: m.prev[tp],
					FirstOffset: first, NextOffset: first + int64(len(recs)), LeaderEpoch: -1, LogEndOffset: -1, Records: recs}
				if err := m.w.Write(t.Context(), b); err != nil {
					t.Fatal(err)
				}
				m.prev[tp] = b.NextOffset
				recs = recs[:0]
			}
			for id := 1; id <= per; id++ {
				if int32(id%bankParts) != p {
					continue
				}
				recs = append(recs, record(table, id, 2*(id-1)+ti+1))
				if len(recs) == 5000 {
					flush()
				}
			}
			flush()
		}
	}
	src := &cdctest.Bank{TxTopic: bankTxTopic, Log: map[topicPart][]stream.Record{}}
	src.Boundary(txid, map[string]int64{"a": int64(per), "b": int64(per)})
	if _, err := m.feed(t.Context(), src, rand.New(rand.NewPCG(6, 37)), 1); err != nil {
		t.Fatal(err)
	}
	if got := queryInt(t, pool, "SELECT count(*) FROM kafka2pg.cdc_staged"); got != int64(2*per) {
		t.Fatalf("%d events staged, want %d", got, 2*per)
	}

	// A reader sees none of the transaction or all of it.
	var snapshots, partial atomic.Int64
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	wg.Go(func() {
		for ctx.Err() == nil {
			var rows int64
			err := pgx.BeginTxFunc(ctx, pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
				return tx.QueryRow(ctx, "SELECT (SELECT count(*) FROM a) + (SELECT count(*) FROM b)").Scan(&rows)
			})
			if err == nil {
				snapshots.Add(1)
				if rows != 0 && rows != int64(2*per) {
					partial.Add(1)
				}
			}
			select {
			case <-ctx.Done():
			case <-time.After(20 * time.Millisecond):
			}
		}
	})
	var peak atomic.Uint64
	wg.Go(func() {
		var ms runtime.MemStats
		for ctx.Err() == nil {
			runtime.ReadMemStats(&ms)
			if ms.HeapInuse > peak.Load() {
				peak.Store(ms.HeapInuse)
			}
			select {
			case <-ctx.Done():
			case <-time.After(5 * time.Millisecond):
			}
		}
	})
	runtime.GC()
	a := claimedApplier(t, m.w, ingest.ApplierConfig{})
	start := time.Now()
	applied, err := a.ApplyReady(t.Context())
	took := time.Since(start)
	cancel()
	wg.Wait()
	if err != nil || applied != 1 {
		t.Fatalf("applied %d (%v), want the one transaction", applied, err)
	}
	t.Logf("one source transaction of %d events (%d MiB staged) applied in %s (%.0f events/s); peak heap in use %d MiB; %d of %d snapshots partial",
		2*per, staged>>20, took.Round(time.Millisecond), float64(2*per)/took.Seconds(), peak.Load()>>20, partial.Load(), snapshots.Load())
	if got := queryInt(t, pool, "SELECT (SELECT count(*) FROM a) + (SELECT count(*) FROM b)"); got != int64(2*per) {
		t.Fatalf("the replica has %d rows, want %d", got, 2*per)
	}
	if partial.Load() > 0 {
		t.Fatalf("%d of %d snapshots saw part of the transaction", partial.Load(), snapshots.Load())
	}
	if peak.Load() > largeTxHeapLimit {
		t.Fatalf("the heap reached %d MiB while the transaction applied, over %d MiB", peak.Load()>>20, largeTxHeapLimit>>20)
	}
}
