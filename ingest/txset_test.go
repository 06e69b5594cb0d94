package ingest_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/kafka2pg/kafka2pg/cdc"
	"github.com/kafka2pg/kafka2pg/ingest"
	"github.com/kafka2pg/kafka2pg/internal/cdctest"
	"github.com/kafka2pg/kafka2pg/internal/pgtest"
	"github.com/kafka2pg/kafka2pg/stream"
)

// TraceStale makes staleCount an ingest.StaleTracer: it adds up the skips
// of an Applier's apply too.
func (s *staleCount) TraceStale(_ context.Context, _ string, n int) {
	s.mu.Lock()
	s.n += n
	s.mu.Unlock()
}

// custTx is a writer of topic customers with transactions (source
// cust.transaction, whose transaction topic it also owns) and its
// Applier, each topic's partition 0 claimed.
type custTx struct {
	t      *testing.T
	w      *ingest.Writer
	pool   *pgxpool.Pool
	a      *ingest.Applier
	stale  *staleCount
	epochs map[string]int64
	next   map[string]int64
}

const custTxTopic = "cust.transaction"

func newCustTx(t *testing.T, sink ingest.Sink, cfg ingest.ApplierConfig) *custTx {
	t.Helper()
	_, pool := pgtest.MigratedPool(t)
	return newCustTxOn(t, pool, sink, cfg)
}

// newCustTxOn is newCustTx on pool, a migrated database.
func newCustTxOn(t *testing.T, pool *pgxpool.Pool, sink ingest.Sink, cfg ingest.ApplierConfig) *custTx {
	t.Helper()
	sink.Transactions = &ingest.Transactions{Source: custTxTopic}
	c := &custTx{t: t, pool: pool, stale: &staleCount{}, epochs: map[string]int64{}, next: map[string]int64{}}
	c.w = readyWriter(t, pool, ingest.Config{Group: "g", Tracer: c.stale, Sinks: map[string]ingest.Sink{
		"customers": sink,
		custTxTopic: ingest.BoundariesSink(ingest.Boundaries{Source: custTxTopic, Parse: cdc.ParseBoundary}),
	}})
	for _, topic := range []string{"customers", custTxTopic} {
		pos, err := c.w.Claim(t.Context(), topic, []int32{0})
		if err != nil {
			t.Fatal(err)
		}
		c.epochs[topic] = pos[0].Epoch
	}
	cfg.Source = custTxTopic
	a, err := c.w.NewApplier(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Claim(t.Context()); err != nil {
		t.Fatal(err)
	}
	c.a = a
	return c
}

// write writes recs as the next batch of topic's partition 0.
func (c *custTx) write(topic string, recs ...stream.Record) {
	c.t.Helper()
	first := c.next[topic]
	for i := range recs {
		recs[i].Topic, recs[i].Offset = topic, first+int64(i)
	}
	write(c.t, c.w, &stream.Batch{Topic: topic, Epoch: c.epochs[topic], PrevOffset: prevOf(first), FirstOffset: first,
		NextOffset: first + int64(len(recs)), LeaderEpoch: -1, LogEndOffset: -1, Records: recs})
	c.next[topic] = first + int64(len(recs))
}

// apply applies what is ready, and fails unless it is want transactions.
func (c *custTx) apply(want int) {
	c.t.Helper()
	if n, err := c.a.ApplyReady(c.t.Context()); err != nil || n != want {
		c.t.Fatalf("applied %d transactions (%v), want %d", n, err, want)
	}
}

// inTx is the change event e, at t1, with the transaction block of
// source transaction tx, at order n.
func inTx(e srcEv, tx string, n int) stream.Record {
	r := e.record(0, time.Date(2026, 1, 2, 3, 4, 0, 0, time.UTC))
	block := fmt.Appendf(nil, `"transaction":{"id":%q,"total_order":%d,"data_collection_order":%d},"op":`, tx, n, n)
	r.Value = bytes.Replace(r.Value, []byte(`"op":`), block, 1)
	return r
}

// txEnd is the END record of source transaction tx of n events.
func txEnd(tx string, n int) stream.Record {
	return stream.Record{Value: fmt.Appendf(nil, `{"status":"END","id":%q,"event_count":%d,"data_collections":[]}`, tx, n)}
}

// custState is the customers table: id=name:deleted_at (HH24:MI, or
// live):version.
func custState(t *testing.T, pool *pgxpool.Pool) string {
	t.Helper()
	var s string
	q := `SELECT string_agg(id || '=' || coalesce(name, 'NULL') || ':' || coalesce(to_char(deleted_at AT TIME ZONE 'UTC', 'HH24:MI'), 'live') || ':' || src_version, ' ' ORDER BY id) FROM customers`
	if err := pool.QueryRow(t.Context(), q).Scan(&s); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return s
}

// Source transactions applied together keep the sink's guard: an older
// update in a later transaction of the group loses to the newer one, and
// is counted; a delete marks its row with the event's Kafka timestamp and
// its version; an older update of the deleted row, applied later, does
// not bring it back, and is counted.
func TestTransactionsApplyByKeyKeepsTheVersionGuardAndCountsSkips(t *testing.T) {
	t.Parallel()
	c := newCustTx(t, debeziumGuardedSink(t), ingest.ApplierConfig{})
	c.write("customers",
		inTx(srcEv{"c", 1, "a", 100, 110}, "t1", 1), inTx(srcEv{"c", 2, "b", 100, 120}, "t1", 2),
		inTx(srcEv{"u", 1, "b", 200, 210}, "t2", 1), inTx(srcEv{"d", 2, "", 200, 220}, "t2", 2),
		inTx(srcEv{"u", 1, "old", 150, 160}, "t3", 1))
	c.write(custTxTopic, txEnd("t1", 2), txEnd("t2", 2), txEnd("t3", 1))
	c.apply(3)
	want := "1=b:live:" + seqVersion(200, 210) + " 2=b:03:04:" + seqVersion(200, 220)
	if got := custState(t, c.pool); got != want {
		t.Fatalf("%s\nwant %s", got, want)
	}
	wantCounts(t, c.pool, c.stale, 1, 0)

	c.write("customers", inTx(srcEv{"u", 2, "old", 150, 160}, "t4", 1))
	c.write(custTxTopic, txEnd("t4", 1))
	c.apply(1)
	if got := custState(t, c.pool); got != want {
		t.Fatalf("after an older update of the deleted row: %s\nwant %s", got, want)
	}
	wantCounts(t, c.pool, c.stale, 2, 0)
}

// A change Postgres refuses fails the apply, naming the constraint, and
// commits nothing of the group; once the table takes it, the group
// applies.
func TestTransactionsRefusedChangeFailsTheApplyNamingIt(t *testing.T) {
	t.Parallel()
	c := newCustTx(t, debeziumGuardedSink(t), ingest.ApplierConfig{})
	c.write("customers", inTx(srcEv{"c", 1, "a", 100, 110}, "t1", 1))
	c.write(custTxTopic, txEnd("t1", 1))
	c.apply(1)
	refuseNamed(t, c.pool, "customers")
	c.write("customers", inTx(srcEv{"u", 1, "b", 200, 210}, "t2", 1), inTx(srcEv{"c", 2, "refused", 300, 310}, "t3", 1))
	c.write(custTxTopic, txEnd("t2", 1), txEnd("t3", 1))
	n, err := c.a.ApplyReady(t.Context())
	if err == nil || !strings.Contains(err.Error(), "customers_name_check") || n != 0 {
		t.Fatalf("applied %d, error %v; want none applied and the check named", n, err)
	}
	want := "1=a:live:" + seqVersion(100, 110)
	if got := custState(t, c.pool); got != want {
		t.Fatalf("after the refused apply: %s\nwant %s", got, want)
	}
	if _, err := c.pool.Exec(t.Context(), "ALTER TABLE customers DROP CONSTRAINT customers_name_check"); err != nil {
		t.Fatal(err)
	}
	c.apply(2)
	want = "1=b:live:" + seqVersion(200, 210) + " 2=refused:live:" + seqVersion(300, 310)
	if got := custState(t, c.pool); got != want {
		t.Fatalf("%s\nwant %s", got, want)
	}
}

// The ENDs applied are deleted once the applied position is RetainEnds
// past them; those within it still mark a copy of their transaction's
// events (a connector's replay) as applied, so the copy is not staged.
func TestTransactionsAppliedEndsArePrunedBehindRetainEnds(t *testing.T) {
	t.Parallel()
	pool, rng, src := bankTest(t, 5, 20)
	src.TransfersOf(rng, 50)
	m := newMember(t, pool, src.AllParts())
	feedAll(t, rng, src, m)
	const retain = 20
	a := claimedApplier(t, m.w, ingest.ApplierConfig{RetainEnds: retain})
	if n, err := a.ApplyReady(t.Context()); err != nil || n != 50 {
		t.Fatalf("applied %d (%v), want 50", n, err)
	}
	last := int64(len(src.Log[topicPart{Topic: bankTxTopic}]) - 1) // the last END
	if got := queryInt(t, pool, "SELECT count(*) FROM kafka2pg.cdc_tx_ends WHERE tx_offset < $1", last-retain); got != 0 {
		t.Fatalf("%d applied ENDs more than %d offsets behind the last one are kept", got, retain)
	}
	// BEGIN and END alternate: the ENDs within the window are kept.
	if got := queryInt(t, pool, "SELECT count(*) FROM kafka2pg.cdc_tx_ends"); got != retain/2+1 {
		t.Fatalf("%d ENDs kept, want %d", got, retain/2+1)
	}

	// The connector sends the last transfer again: its events are copies.
	again := 0
	for _, tp := range src.AllParts()[1:] {
		recs := src.Log[tp]
		for _, r := range recs {
			if bytes.Contains(r.Value, fmt.Appendf(nil, `"id":"%d:`, 500+src.Transfers)) {
				r.Offset = int64(len(src.Log[tp]))
				src.Log[tp] = append(src.Log[tp], r)
				again++
			}
		}
	}
	if again == 0 {
		t.Fatal("found no event of the last transfer to send again")
	}
	feedAll(t, rng, src, m)
	if got := queryInt(t, pool, "SELECT count(*) FROM kafka2pg.cdc_staged"); got != 0 {
		t.Fatalf("%d of %d copies of an applied transaction's events staged", got, again)
	}
	src.EqualsSource(t, pool)
}

// The look at the next transactions runs while a group applies, so the
// staging can outdate it: a transaction whose last event is staged after
// the look saw it incomplete is applied in the same ApplyReady, after the
// group, not left for the next poll.
func TestTransactionsALookOutdatedWhileAGroupAppliesIsTakenAgain(t *testing.T) {
	t.Parallel()
	c := newCustTx(t, debeziumGuardedSink(t), ingest.ApplierConfig{})
	c.write("customers", inTx(srcEv{"c", 1, "a", 100, 110}, "t1", 1), inTx(srcEv{"c", 2, "b", 100, 120}, "t2", 1))
	c.write(custTxTopic, txEnd("t1", 1), txEnd("t2", 2))
	looks := 0
	ingest.SetAfterLook(c.a, func() {
		looks++
		if looks == 1 {
			// The look after t1 saw t2 with one event of two.
			c.write("customers", inTx(srcEv{"c", 3, "c", 100, 130}, "t2", 2))
		}
	})
	c.apply(2)
	if got, want := custState(t, c.pool), "1=a:live:"+seqVersion(100, 110)+" 2=b:live:"+seqVersion(100, 120)+" 3=c:live:"+seqVersion(100, 130); got != want {
		t.Fatalf("%s\nwant %s", got, want)
	}
	if looks != 2 {
		t.Fatalf("%d looks ahead, want one beside each group", looks)
	}
}

// With one connection in the pool (--pg-max-conns 1), the look at the
// next transactions waits for the connection of the group that applies,
// and the groups still apply one after another: the apply never waits
// for the look while it holds the connection.
func TestTransactionsApplyWithOneConnectionLooksBetweenTheGroups(t *testing.T) {
	t.Parallel()
	pool, _ := ingest.OnePool(t, nil)
	// GroupEvents 1: each transaction is a group, and each apply but the
	// last has a look beside it.
	c := newCustTxOn(t, pool, debeziumGuardedSink(t), ingest.ApplierConfig{GroupEvents: 1})
	c.write("customers", inTx(srcEv{"c", 1, "a", 100, 110}, "t1", 1), inTx(srcEv{"c", 2, "b", 100, 120}, "t2", 1),
		inTx(srcEv{"c", 3, "c", 100, 130}, "t3", 1))
	c.write(custTxTopic, txEnd("t1", 1), txEnd("t2", 1), txEnd("t3", 1))
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if n, err := c.a.ApplyReady(ctx); err != nil || n != 3 {
		t.Fatalf("ApplyReady on one connection = %d, %v; want 3 transactions applied, one group at a time", n, err)
	}
	if got, want := custState(t, pool), "1=a:live:"+seqVersion(100, 110)+" 2=b:live:"+seqVersion(100, 120)+" 3=c:live:"+seqVersion(100, 130); got != want {
		t.Fatalf("%s\nwant %s", got, want)
	}
}

// A copy of an event whose original is still staged (a connector's
// replay before the transaction's END) is left, whether it comes in a
// later batch or in the same one: staging COPYs, and a COPY that meets a
// copy is done again leaving it, in the batch's transaction.
func TestTransactionsCopiesOfStagedEventsAreStagedOnce(t *testing.T) {
	t.Parallel()
	c := newCustTx(t, debeziumGuardedSink(t), ingest.ApplierConfig{})
	e1, e2 := inTx(srcEv{"c", 1, "a", 100, 110}, "t1", 1), inTx(srcEv{"c", 2, "b", 100, 120}, "t1", 2)
	c.write("customers", e1)
	c.write("customers", e1, e2, e2) // a copy of a staged event, and one within the batch
	if got := queryInt(t, c.pool, "SELECT count(*) FROM kafka2pg.cdc_staged WHERE txid = 't1'"); got != 2 {
		t.Fatalf("%d events of t1 staged, want 2", got)
	}
	if got := queryInt(t, c.pool, "SELECT count(*) FROM kafka2pg.offsets WHERE topic = 'customers' AND next_offset = 4"); got != 1 {
		t.Fatal("the batch with the copies did not move the offsets to 4")
	}
	c.write(custTxTopic, txEnd("t1", 2))
	c.apply(1)
	if got, want := custState(t, c.pool), "1=a:live:"+seqVersion(100, 110)+" 2=b:live:"+seqVersion(100, 120); got != want {
		t.Fatalf("%s\nwant %s", got, want)
	}
	if got := queryInt(t, c.pool, "SELECT count(*) FROM kafka2pg.cdc_staged"); got != 0 {
		t.Fatalf("%d events staged after the apply, want 0", got)
	}
}

// A copy of an END (a connector's restart writes the transaction topic's
// record again, at a later offset) leaves the END staged first, whether
// the copy comes in a later batch or in the same one: the ENDs are
// COPYed, and a COPY that meets a copy is done again leaving it.
func TestTransactionsCopiesOfAnEndLeaveTheEndStagedFirst(t *testing.T) {
	t.Parallel()
	c := newCustTx(t, debeziumGuardedSink(t), ingest.ApplierConfig{})
	c.write(custTxTopic, txEnd("t1", 1))                                 // offset 0
	c.write(custTxTopic, txEnd("t1", 1), txEnd("t2", 1), txEnd("t2", 2)) // offsets 1-3
	for _, want := range []struct {
		txid   string
		offset int64
		events int64
	}{{"t1", 0, 1}, {"t2", 2, 1}} {
		if got := queryInt(t, c.pool, "SELECT count(*) FROM kafka2pg.cdc_tx_ends WHERE txid = $1 AND tx_offset = $2 AND event_count = $3",
			want.txid, want.offset, want.events); got != 1 {
			t.Errorf("no END of %s staged at offset %d with %d events", want.txid, want.offset, want.events)
		}
	}
	if got := queryInt(t, c.pool, "SELECT count(*) FROM kafka2pg.cdc_tx_ends"); got != 2 {
		t.Fatalf("%d ENDs staged, want 2", got)
	}
	if got := queryInt(t, c.pool, "SELECT count(*) FROM kafka2pg.offsets WHERE topic = $1 AND next_offset = 4", custTxTopic); got != 1 {
		t.Fatal("the batch with the copies did not move the transaction topic's offset to 4")
	}
	c.write("customers", inTx(srcEv{"c", 1, "a", 100, 110}, "t1", 1), inTx(srcEv{"c", 2, "b", 100, 120}, "t2", 1))
	c.apply(2)
	if got, want := custState(t, c.pool), "1=a:live:"+seqVersion(100, 110)+" 2=b:live:"+seqVersion(100, 120); got != want {
		t.Fatalf("%s\nwant %s", got, want)
	}
}

// The Applier and the staging read kafka2pg.cdc_staged and cdc_tx_ends by
// key whatever their statistics say. Those queues are emptied by every
// apply, and VACUUM truncates an emptied table to no pages: a statement
// planned then, and kept as the session's generic plan, scanned the whole
// staging once per pending END, which cost a bench run 100 s of Postgres
// CPU before its first row. Here the Applier looks for the next
// transaction while nothing is staged yet (the ENDs come first), more
// times than Postgres plans a statement anew, and then applies; the
// tables' scan counters must show no sequential scan but the orphans'
// sweep's, which reads the staging whole by design.
func TestTransactionsApplierReadsTheQueuesByKeyWhateverTheirStatistics(t *testing.T) {
	t.Parallel()
	url, setup := pgtest.MigratedPool(t)
	if _, err := setup.Exec(t.Context(), "VACUUM kafka2pg.cdc_staged, kafka2pg.cdc_tx_ends"); err != nil {
		t.Fatal(err)
	}
	// A session's counts reach the statistics when it ends: the counts
	// are read with every other session of the database ended.
	setup.Close()
	monitor, err := pgxpool.New(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer monitor.Close()
	// What the queues' scans and probes read: the sequential scans of
	// each table, and the entries read of all its indexes. All, not the
	// key's alone: with an empty queue's statistics Postgres once took an
	// index by offset for the staging's probe of an END by its
	// transaction id, and read every END of the source for each batch.
	type reads struct{ seqScans, indexEntries int64 }
	scans := func() map[string]reads {
		for i := 0; queryInt(t, monitor, "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()") > 0; i++ {
			if i == 250 {
				t.Fatal("the database's other sessions did not end within 5 s")
			}
			time.Sleep(20 * time.Millisecond)
		}
		// A new snapshot of the statistics, with what the ended sessions
		// reported.
		if _, err := monitor.Exec(t.Context(), "SELECT pg_stat_clear_snapshot()"); err != nil {
			t.Fatal(err)
		}
		out := map[string]reads{}
		for _, table := range []string{"cdc_staged", "cdc_tx_ends"} {
			out[table] = reads{
				seqScans:     queryInt(t, monitor, "SELECT coalesce((SELECT seq_scan FROM pg_stat_user_tables WHERE schemaname = 'kafka2pg' AND relname = $1), 0)", table),
				indexEntries: queryInt(t, monitor, "SELECT coalesce(sum(idx_tup_read), 0)::int8 FROM pg_stat_user_indexes WHERE schemaname = 'kafka2pg' AND relname = $1", table),
			}
		}
		return out
	}
	before := scans()

	pool, err := pgxpool.New(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	// Applies of 30 transactions, of events staged 10 at a time: a
	// statement that read all the source's ENDs or staged events where it
	// means to probe some would read n entries each time.
	c := newCustTxOn(t, pool, debeziumGuardedSink(t), ingest.ApplierConfig{GroupEvents: 30})
	const n = 300
	var evs, ends []stream.Record
	for i := 1; i <= n; i++ {
		tx := fmt.Sprintf("t%d", i)
		evs = append(evs, inTx(srcEv{"c", i, "a", 100 + i, 110}, tx, 1))
		ends = append(ends, txEnd(tx, 1))
	}
	c.write(custTxTopic, ends...)
	for range 8 {
		c.apply(0)
	}
	for first := 1; first < n; first += 10 {
		c.write("customers", evs[first:min(first+10, n)]...)
	}
	c.apply(0)
	c.write("customers", evs[0])
	c.apply(n)
	if got := queryInt(t, pool, "SELECT count(*) FROM customers"); got != n {
		t.Fatalf("%d customers, want %d", got, n)
	}
	pool.Close()
	after := scans()
	for table, was := range before {
		if got := after[table].seqScans - was.seqScans; got > 1 {
			t.Errorf("%d sequential scans of kafka2pg.%s, want at most the orphans' sweep's", got, table)
		}
		// Each END and each staged event is probed a few times: found by
		// the staging's check, counted, read by the cursor, deleted.
		if got := after[table].indexEntries - was.indexEntries; got > 4*n {
			t.Errorf("%d entries of kafka2pg.%s's indexes read for %d transactions of one event, want at most %d", got, table, n, 4*n)
		}
		t.Logf("kafka2pg.%s: %d sequential scans, %d entries of its indexes read", table, after[table].seqScans-was.seqScans, after[table].indexEntries-was.indexEntries)
	}
}

// The order of the source's transactions is the END records' on a
// transaction topic of one partition: an END of a second partition stops
// the Applier with an error that says so, and nothing is applied.
func TestTransactionsAnEndOnASecondPartitionOfTheTransactionTopicStopsTheApplier(t *testing.T) {
	t.Parallel()
	c := newCustTx(t, debeziumGuardedSink(t), ingest.ApplierConfig{})
	pos, err := c.w.Claim(t.Context(), custTxTopic, []int32{1})
	if err != nil {
		t.Fatal(err)
	}
	c.write("customers", inTx(srcEv{"c", 1, "a", 100, 110}, "t1", 1))
	end := txEnd("t1", 1)
	end.Topic, end.Partition = custTxTopic, 1
	write(t, c.w, &stream.Batch{Topic: custTxTopic, Partition: 1, Epoch: pos[1].Epoch, PrevOffset: prevOf(0), FirstOffset: 0,
		NextOffset: 1, LeaderEpoch: -1, LogEndOffset: -1, Records: []stream.Record{end}})
	n, err := c.a.ApplyReady(t.Context())
	if err == nil || !strings.Contains(err.Error(), "partition 1 of the transaction topic") || n != 0 {
		t.Fatalf("ApplyReady = %d, %v; want 0 and an error naming partition 1 of the transaction topic", n, err)
	}
	if got := queryInt(t, c.pool, "SELECT count(*) FROM customers"); got != 0 {
		t.Fatalf("%d customers applied, want 0", got)
	}
}

// An event staged without the END of its transaction for OrphanAfter
// becomes a dead letter, and leaves the staging; one staged since stays.
func TestTransactionsEventWithoutAnEndBecomesADeadLetterAfterOrphanAfter(t *testing.T) {
	t.Parallel()
	c := newCustTx(t, debeziumGuardedSink(t), ingest.ApplierConfig{OrphanAfter: time.Hour})
	orphan := inTx(srcEv{"c", 1, "a", 100, 110}, "t1", 1)
	c.write("customers", orphan)
	if _, err := c.pool.Exec(t.Context(), "UPDATE kafka2pg.cdc_staged SET staged_at = now() - interval '61 minutes'"); err != nil {
		t.Fatal(err)
	}
	c.write("customers", inTx(srcEv{"c", 2, "b", 100, 120}, "t2", 1))
	c.apply(0)
	if got := queryInt(t, c.pool, "SELECT count(*) FROM kafka2pg.dead_letters WHERE error_kind = $1 AND kafka_offset = 0", ingest.KindTransactionEndMissing); got != 1 {
		t.Fatalf("%d dead letters of the orphan, want 1", got)
	}
	// The staging kept the event's payloads and its schemas apart: the
	// dead letter holds the key and value as they came, byte for byte.
	var key, value []byte
	if err := c.pool.QueryRow(t.Context(), "SELECT key, value FROM kafka2pg.dead_letters WHERE error_kind = $1", ingest.KindTransactionEndMissing).Scan(&key, &value); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(key, orphan.Key) || !bytes.Equal(value, orphan.Value) {
		t.Fatalf("the dead letter holds\n%s\n%s\nwant the event as it came\n%s\n%s", key, value, orphan.Key, orphan.Value)
	}
	if got := queryInt(t, c.pool, "SELECT count(*) FROM kafka2pg.cdc_staged WHERE txid = 't2'"); got != 1 {
		t.Fatalf("%d events of t2 staged, want the one that waits for its END", got)
	}
	c.write(custTxTopic, txEnd("t2", 1))
	c.apply(1)
	if got, want := custState(t, c.pool), "2=b:live:"+seqVersion(100, 120); got != want {
		t.Fatalf("%s\nwant %s", got, want)
	}
}

// Each chunk of an apply transaction applies its own changes only: the
// session's staging table, which empties at COMMIT, holds no chunk's rows
// when the next one is applied (a version guard would count them again
// as skipped, and a key in both would fail the statement).
func TestTransactionsEachChunkAppliesItsOwnChangesOnly(t *testing.T) {
	t.Parallel()
	c := newCustTx(t, debeziumGuardedSink(t), ingest.ApplierConfig{FetchRows: 1})
	c.write("customers",
		inTx(srcEv{"c", 1, "a", 100, 110}, "t1", 1),
		inTx(srcEv{"u", 1, "b", 200, 210}, "t2", 1),
		inTx(srcEv{"c", 2, "c", 300, 310}, "t3", 1))
	c.write(custTxTopic, txEnd("t1", 1), txEnd("t2", 1), txEnd("t3", 1))
	c.apply(3)
	want := "1=b:live:" + seqVersion(200, 210) + " 2=c:live:" + seqVersion(300, 310)
	if got := custState(t, c.pool); got != want {
		t.Fatalf("%s\nwant %s", got, want)
	}
	wantCounts(t, c.pool, c.stale, 0, 0)
}

// Sets apply table by table, so a foreign key between two replicated
// tables can refuse them where the source's order does not: here a
// transfer names (by its amount) an account that the same source
// transaction creates after the transfers table's first event. The
// refused set makes the chunk apply again change by change, in the
// source's order, and the transaction applies whole.
func TestTransactionsApplyInTheSourcesOrderWhenTheSetsBreakAForeignKey(t *testing.T) {
	t.Parallel()
	pool, rng, src := bankTest(t, 1, 3)
	src.Transfer(rng, 2)
	m := newMember(t, pool, src.AllParts())
	a := claimedApplier(t, m.w, ingest.ApplierConfig{})
	feedAll(t, rng, src, m)
	if n, err := a.ApplyReady(t.Context()); err != nil || n != 1 {
		t.Fatalf("applied %d transactions (%v), want the first transfer", n, err)
	}
	if _, err := pool.Exec(t.Context(), `ALTER TABLE transfers ADD FOREIGN KEY (amount) REFERENCES a (id) NOT VALID`); err != nil {
		t.Fatal(err)
	}
	src.Tx(cdctest.BankChange{Table: "transfers", ID: 2, Second: 1, Op: "c"},
		cdctest.BankChange{Table: "a", ID: 4, Second: 0, Op: "c"},
		cdctest.BankChange{Table: "transfers", ID: 3, Second: 4, Op: "c"})
	feedAll(t, rng, src, m)
	if n, err := a.ApplyReady(t.Context()); err != nil || n != 1 {
		t.Fatalf("applied %d transactions (%v), want the one whose transfer names its new account", n, err)
	}
	if got := queryInt(t, pool, `SELECT count(*) FROM transfers t JOIN a ON a.id = t.amount WHERE t.id IN (2, 3)`); got != 2 {
		t.Fatalf("%d transfers 2 and 3 with their accounts, want 2", got)
	}
}

// The staging keeps an event's payloads, and each Connect schema once
// (kafka2pg.cdc_staged_schemas); an event of another shape is staged
// whole. The Applier joins them back: the transactions apply as they
// came.
func TestTransactionsStagingKeepsEachSchemaOnceAndAppliesEventsAsTheyCame(t *testing.T) {
	t.Parallel()
	c := newCustTx(t, debeziumGuardedSink(t), ingest.ApplierConfig{})
	spaced := inTx(srcEv{"c", 3, "c", 100, 130}, "t2", 1)
	spaced.Value = bytes.Replace(spaced.Value, []byte(`{"schema":`), []byte(`{"schema": `), 1)
	evs := []stream.Record{inTx(srcEv{"c", 1, "a", 100, 110}, "t1", 1), inTx(srcEv{"c", 2, "b", 100, 120}, "t1", 2), spaced}
	raw := 0
	for _, r := range evs {
		raw += len(r.Key) + len(r.Value)
	}
	c.write("customers", evs...)
	var split, whole, stored, schemas int
	if err := c.pool.QueryRow(t.Context(), `SELECT count(*) FILTER (WHERE key_schema IS NOT NULL AND value_schema IS NOT NULL),
    count(*) FILTER (WHERE value_schema IS NULL), sum(octet_length(key) + octet_length(value)),
    (SELECT count(*) FROM kafka2pg.cdc_staged_schemas)
FROM kafka2pg.cdc_staged`).Scan(&split, &whole, &stored, &schemas); err != nil {
		t.Fatal(err)
	}
	if split != 2 || whole != 1 || schemas != 2 {
		t.Fatalf("%d events staged without their schemas, %d whole, %d schemas staged; want 2, the spaced one whole, and the key's and value's schema once", split, whole, schemas)
	}
	if stored*2 > raw {
		t.Fatalf("%d bytes staged of %d: want the schemas' bytes left out", stored, raw)
	}
	c.write(custTxTopic, txEnd("t1", 2), txEnd("t2", 1))
	c.apply(2)
	want := "1=a:live:" + seqVersion(100, 110) + " 2=b:live:" + seqVersion(100, 120) + " 3=c:live:" + seqVersion(100, 130)
	if got := custState(t, c.pool); got != want {
		t.Fatalf("%s\nwant %s", got, want)
	}
}

// An Applier whose decoder has not seen a table's new column (another
// member staged the events, and changed the table) meets it while it
// applies a transaction, in a chunk it decodes while an earlier one
// applies: the apply stops, the table is changed, and the transaction
// applies again, whole.
func TestTransactionsAnEventThatChangesItsTableMidApplyAppliesTheTransactionWhole(t *testing.T) {
	t.Parallel()
	c := newCustTx(t, debeziumGuardedSink(t), ingest.ApplierConfig{})
	// The Applier of a second member, whose decoder knows the table as
	// it is now; one event a chunk, so that the new column comes in the
	// third chunk, decoded while the second applies.
	sink2 := debeziumGuardedSink(t)
	sink2.Transactions = &ingest.Transactions{Source: custTxTopic}
	w2 := readyWriter(t, c.pool, ingest.Config{Group: "g", Sinks: map[string]ingest.Sink{
		"customers": sink2,
		custTxTopic: ingest.BoundariesSink(ingest.Boundaries{Source: custTxTopic, Parse: cdc.ParseBoundary}),
	}})
	a2, err := w2.NewApplier(ingest.ApplierConfig{Source: custTxTopic, FetchRows: 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := a2.Claim(t.Context()); err != nil {
		t.Fatal(err)
	}

	// The first member stages the transaction, and adds the column.
	withNote := inTx(srcEv{"c", 3, "c", 100, 130}, "t1", 3)
	withNote.Value = bytes.Replace(withNote.Value, []byte(custValueSchema(custFields)), []byte(custValueSchema(custFieldsV2)), 1)
	withNote.Value = bytes.Replace(withNote.Value, []byte(`"qty":1}`), []byte(`"qty":1,"note":"new"}`), 1)
	c.write("customers", inTx(srcEv{"c", 1, "a", 100, 110}, "t1", 1), inTx(srcEv{"c", 2, "b", 100, 120}, "t1", 2), withNote)
	c.write(custTxTopic, txEnd("t1", 3))
	if n, err := a2.ApplyReady(t.Context()); err != nil || n != 1 {
		t.Fatalf("applied %d transactions (%v), want t1", n, err)
	}
	want := "1=a:live:" + seqVersion(100, 110) + " 2=b:live:" + seqVersion(100, 120) + " 3=c:live:" + seqVersion(100, 130)
	if got := custState(t, c.pool); got != want {
		t.Fatalf("%s\nwant %s", got, want)
	}
	if got := queryInt(t, c.pool, "SELECT count(*) FROM customers WHERE note = 'new' AND id = 3"); got != 1 {
		t.Fatalf("%d rows of id 3 with the new column's value, want 1", got)
	}
	if got := queryInt(t, c.pool, "SELECT count(*) FROM kafka2pg.cdc_staged"); got != 0 {
		t.Fatalf("%d events left staged, want none", got)
	}
}

// A negative FETCH size is refused naming its field: FETCH -n would read
// the cursor backwards.
func TestTransactionsApplierRefusesNegativeSizes(t *testing.T) {
	t.Parallel()
	c := newCustTx(t, debeziumGuardedSink(t), ingest.ApplierConfig{})
	for field, cfg := range map[string]ingest.ApplierConfig{
		"ingest.ApplierConfig.FetchRows":  {Source: custTxTopic, FetchRows: -1},
		"ingest.ApplierConfig.FetchBytes": {Source: custTxTopic, FetchBytes: -1},
		// The window's LIMIT (pending) would refuse it at every look.
		"ingest.ApplierConfig.GroupEvents": {Source: custTxTopic, GroupEvents: -1},
	} {
		_, err := c.w.NewApplier(cfg)
		var fe *stream.FieldError
		if !errors.As(err, &fe) || fe.Field != field || !strings.Contains(err.Error(), "negative") {
			t.Errorf("%+v: %v, want a FieldError on %s saying it is negative", cfg, err, field)
		}
	}
}

// The staging writes each field of an event and of an END as it came:
// the rows of kafka2pg.cdc_staged and cdc_tx_ends, read back.
func TestTransactionsStageEveryFieldOfAnEventAndAnEnd(t *testing.T) {
	t.Parallel()
	c := newCustTx(t, debeziumGuardedSink(t), ingest.ApplierConfig{})
	c.write("customers", inTx(srcEv{"c", 6, "f", 100, 109}, "t8", 1))
	ev := inTx(srcEv{"c", 7, "g", 100, 110}, "t9", 3)
	noStamp := inTx(srcEv{"c", 8, "h", 100, 111}, "t9", 4)
	noStamp.Timestamp = time.Time{}
	for _, r := range []*stream.Record{&ev, &noStamp} { // the source table's name, as Debezium's source block gives it
		r.Value = bytes.Replace(r.Value, []byte(`"connector":"postgresql",`), []byte(`"connector":"postgresql","schema":"public","table":"customers",`), 1)
	}
	c.write("customers", ev, noStamp)
	end := stream.Record{Value: []byte(`{"status":"END","id":"t9","event_count":2,"data_collections":[{"data_collection":"public.customers","event_count":2}]}`)}
	c.write(custTxTopic, txEnd("t7", 0), end)

	type staged struct {
		Txid, Coll, Topic             string
		CollOrder, TotalOrder, Offset int64
		Partition                     int32
		Stamp                         pgtype.Timestamptz
		Key, Value                    bool
		Schemas                       int
	}
	rows, err := c.pool.Query(t.Context(), `SELECT txid, data_collection, topic, collection_order, total_order, kafka_offset, partition,
       kafka_timestamp, key IS NOT NULL, value IS NOT NULL, num_nonnulls(key_schema, value_schema)
FROM kafka2pg.cdc_staged WHERE consumer_group = 'g' AND source = $1 AND txid = 't9' ORDER BY total_order`, custTxTopic)
	if err != nil {
		t.Fatal(err)
	}
	got, err := pgx.CollectRows(rows, pgx.RowToStructByPos[staged])
	if err != nil {
		t.Fatal(err)
	}
	stamp := pgtype.Timestamptz{Time: ev.Timestamp, Valid: true}
	want := []staged{
		{Txid: "t9", Coll: "public.customers", Topic: "customers", CollOrder: 3, TotalOrder: 3, Offset: 1, Stamp: stamp, Key: true, Value: true, Schemas: 2},
		{Txid: "t9", Coll: "public.customers", Topic: "customers", CollOrder: 4, TotalOrder: 4, Offset: 2, Key: true, Value: true, Schemas: 2},
	}
	if len(got) != len(want) {
		t.Fatalf("staged %+v, want %+v", got, want)
	}
	for i := range want {
		if !got[i].Stamp.Time.Equal(want[i].Stamp.Time) || got[i].Stamp.Valid != want[i].Stamp.Valid {
			t.Errorf("event %d staged at %+v, want %+v", i, got[i].Stamp, want[i].Stamp)
		}
		got[i].Stamp = want[i].Stamp
		if got[i] != want[i] {
			t.Errorf("event %d staged as %+v, want %+v", i, got[i], want[i])
		}
	}
	var txPart int32
	var txOffset, count int64
	var colls string
	if err := c.pool.QueryRow(t.Context(), `SELECT tx_partition, tx_offset, event_count, data_collections::text FROM kafka2pg.cdc_tx_ends
WHERE consumer_group = 'g' AND source = $1 AND txid = 't9'`, custTxTopic).Scan(&txPart, &txOffset, &count, &colls); err != nil {
		t.Fatal(err)
	}
	if txPart != 0 || txOffset != 1 || count != 2 || colls != `{"public.customers": 2}` {
		t.Fatalf("END staged at %d@%d with %d events and collections %s, want 0@1, 2 and {\"public.customers\": 2}", txPart, txOffset, count, colls)
	}
	// And what was staged applies: t9, and t7 of no events (t8 waits for
	// its END).
	c.apply(2)
	var rowsNow string
	if err := c.pool.QueryRow(t.Context(), `SELECT string_agg(id || '=' || name || ':' || coalesce(deleted_at::text, 'live'), ' ' ORDER BY id) FROM customers`).Scan(&rowsNow); err != nil {
		t.Fatal(err)
	}
	if rowsNow != "7=g:live 8=h:live" {
		t.Fatalf("customers after the apply: %s, want 7=g:live 8=h:live", rowsNow)
	}
}
