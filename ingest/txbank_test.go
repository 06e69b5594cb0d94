package ingest_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/kafka2pg/kafka2pg/cdc"
	"github.com/kafka2pg/kafka2pg/ingest"
	"github.com/kafka2pg/kafka2pg/internal/pgtest"
	"github.com/kafka2pg/kafka2pg/stream"
)

// A simulated Debezium capture of a bank, for the tests of
// transaction-consistent apply: tables a and b of accounts (id, balance),
// and transfers (id, amount), each a topic of bankParts partitions (by
// id), and the transaction topic bank.transaction of one partition. Each
// source transaction moves money between 2 to 6 accounts of both tables
// and logs itself in transfers, so that a reader of the replica sees a
// constant total of balances, and transfers 1..n without a gap, in every
// snapshot, exactly when transactions apply whole and in order.

const (
	bankSourceName = "bank"
	bankTxTopic    = "bank.transaction"
	bankParts      = 3
	bankStart      = 1000 // every account's balance in the snapshot
)

var bankTables = []string{"a", "b", "transfers"}

func bankTopic(table string) string { return "bank.public." + table }

func bankKeySchema(table string) string {
	return fmt.Sprintf(`{"type":"struct","fields":[{"type":"int32","optional":false,"field":"id"}],"optional":false,"name":"bank.public.%s.Key"}`, table)
}

func bankValueSchema(table string) string {
	second := "balance"
	if table == "transfers" {
		second = "amount"
	}
	row := fmt.Sprintf(`{"type":"struct","fields":[{"type":"int32","optional":false,"field":"id"},{"type":"int64","optional":false,"field":"%s"}],"optional":true,"name":"bank.public.%s.Value","field":"%%s"}`, second, table)
	return `{"type":"struct","fields":[` + fmt.Sprintf(row, "before") + `,` + fmt.Sprintf(row, "after") +
		`,{"type":"string","optional":false,"field":"op"},{"type":"int64","optional":true,"field":"ts_ms"}],"optional":false,"name":"bank.public.` + table + `.Envelope"}`
}

type topicPart struct {
	topic string
	part  int32
}

// bankSource is the capture: the records of every topic partition, and
// the source's state after the last transaction.
type bankSource struct {
	accounts  int
	log       map[topicPart][]stream.Record
	balances  map[string][]int64 // by table a, b: index id-1
	transfers int                // the source transactions so far
	lsn       int64
}

func newBankSource(accounts int) *bankSource {
	s := &bankSource{accounts: accounts, log: map[topicPart][]stream.Record{}, balances: map[string][]int64{}}
	for _, t := range []string{"a", "b"} {
		s.balances[t] = make([]int64, accounts)
		for id := 1; id <= accounts; id++ {
			s.balances[t][id-1] = bankStart
			s.event(t, id, bankStart, "r", "", 0, 0)
		}
	}
	return s
}

// total is the sum of all balances, which every transfer keeps.
func (s *bankSource) total() int64 { return int64(2 * s.accounts * bankStart) }

func (s *bankSource) add(tp topicPart, key, value []byte) {
	s.log[tp] = append(s.log[tp], stream.Record{Topic: tp.topic, Partition: tp.part, Offset: int64(len(s.log[tp])), Key: key, Value: value})
}

// event appends a change event of table's row id; txid "" leaves out the
// transaction block (a snapshot read).
func (s *bankSource) event(table string, id int, second int64, op, txid string, total, collOrder int64) {
	s.lsn += 8
	field := "balance"
	if table == "transfers" {
		field = "amount"
	}
	tx := "null"
	if txid != "" {
		tx = fmt.Sprintf(`{"id":%q,"total_order":%d,"data_collection_order":%d}`, txid, total, collOrder)
	}
	value := fmt.Appendf(nil, `{"schema":%s,"payload":{"before":null,"after":{"id":%d,%q:%d},"source":{"connector":"postgresql","name":"bank","db":"src","schema":"public","table":%q,"lsn":%d},"op":%q,"ts_ms":1,"transaction":%s}}`,
		bankValueSchema(table), id, field, second, table, s.lsn, op, tx)
	key := fmt.Appendf(nil, `{"schema":%s,"payload":{"id":%d}}`, bankKeySchema(table), id)
	s.add(topicPart{bankTopic(table), int32(id % bankParts)}, key, value)
}

// boundary appends a BEGIN or (with counts) an END record to the
// transaction topic.
func (s *bankSource) boundary(txid string, counts map[string]int64) {
	if counts == nil {
		s.add(topicPart{bankTxTopic, 0}, nil, fmt.Appendf(nil, `{"status":"BEGIN","id":%q,"event_count":null,"data_collections":null,"ts_ms":1}`, txid))
		return
	}
	var n int64
	colls := ""
	for _, t := range bankTables {
		if counts[t] == 0 {
			continue
		}
		n += counts[t]
		if colls != "" {
			colls += ","
		}
		colls += fmt.Sprintf(`{"data_collection":"public.%s","event_count":%d}`, t, counts[t])
	}
	s.add(topicPart{bankTxTopic, 0}, nil, fmt.Appendf(nil, `{"schema":{"type":"struct","name":"io.debezium.connector.common.TransactionMetadataValue"},"payload":{"status":"END","id":%q,"event_count":%d,"data_collections":[%s],"ts_ms":1}}`, txid, n, colls))
}

// transfer is one source transaction: it moves money between k distinct
// accounts of tables a and b and logs a transfer. It returns its id.
func (s *bankSource) transfer(rng *rand.Rand, k int) string {
	s.transfers++
	txid := fmt.Sprintf("%d:%d", 500+s.transfers, s.lsn)
	s.boundary(txid, nil)
	counts := map[string]int64{}
	total := int64(0)
	type acct struct {
		table string
		id    int
	}
	seen := map[acct]bool{}
	var moved int64
	for i := 0; i < k; i++ {
		var a acct
		for {
			a = acct{[]string{"a", "b"}[rng.IntN(2)], 1 + rng.IntN(s.accounts)}
			if !seen[a] {
				break
			}
		}
		seen[a] = true
		delta := int64(rng.IntN(100) + 1)
		if i == k-1 {
			delta = -moved // the last one balances the transfer
		}
		moved += delta
		s.balances[a.table][a.id-1] += delta
		total++
		counts[a.table]++
		s.event(a.table, a.id, s.balances[a.table][a.id-1], "u", txid, total, counts[a.table])
	}
	total++
	counts["transfers"]++
	s.event("transfers", s.transfers, moved, "c", txid, total, counts["transfers"])
	s.boundary(txid, counts)
	return txid
}

// transfers appends n source transactions, a fifth of them touching 3 to
// 6 accounts, the others 2.
func (s *bankSource) transfersOf(rng *rand.Rand, n int) {
	for range n {
		k := 2
		if rng.IntN(5) == 0 {
			k = 3 + rng.IntN(4)
		}
		s.transfer(rng, k)
	}
}

// bankSinks are the sinks of a member: decoders of its own, as a process
// of its own has.
func bankSinks(t testing.TB) map[string]ingest.Sink {
	t.Helper()
	sinks := map[string]ingest.Sink{bankTxTopic: ingest.BoundariesSink(ingest.Boundaries{Source: bankSourceName, Parse: cdc.ParseBoundary})}
	for _, table := range bankTables {
		d, err := cdc.NewDecoder(cdc.Config{Schema: "public", Table: table})
		if err != nil {
			t.Fatal(err)
		}
		sinks[bankTopic(table)] = ingest.Sink{Table: d.Table(), Changes: d, Evolve: true,
			Transactions: &ingest.Transactions{Source: bankSourceName}}
	}
	return sinks
}

// member is one instance of the group: a Writer and the partitions it
// owns, with the position it left in each.
type member struct {
	w    *ingest.Writer
	own  []topicPart
	pos  map[topicPart]stream.Position
	prev map[topicPart]int64
}

func newMember(t testing.TB, pool *pgxpool.Pool, own []topicPart) *member {
	t.Helper()
	w := readyWriter(t, pool, ingest.Config{Group: "g", Sinks: bankSinks(t)})
	m := &member{w: w, own: own, pos: map[topicPart]stream.Position{}, prev: map[topicPart]int64{}}
	for _, tp := range own {
		pos, err := w.Claim(t.Context(), tp.topic, []int32{tp.part})
		if err != nil {
			t.Fatal(err)
		}
		m.pos[tp] = pos[tp.part]
		m.prev[tp] = pos[tp.part].NextOffset
	}
	return m
}

// feed writes one batch of up to maxBatch records of each owned
// partition, from where the member left it; it reports whether any was
// left to write.
func (m *member) feed(ctx context.Context, src *bankSource, rng *rand.Rand, maxBatch int) (bool, error) {
	more := false
	for _, tp := range m.own {
		next := max(m.prev[tp], 0)
		recs := src.log[tp]
		if next >= int64(len(recs)) {
			continue
		}
		end := min(next+1+int64(rng.IntN(maxBatch)), int64(len(recs)))
		b := &stream.Batch{Topic: tp.topic, Partition: tp.part, Epoch: m.pos[tp].Epoch, PrevOffset: m.prev[tp],
			FirstOffset: next, NextOffset: end, LeaderEpoch: -1, LogEndOffset: int64(len(recs)), Records: recs[next:end]}
		if err := m.w.Write(ctx, b); err != nil {
			return false, err
		}
		m.prev[tp] = end
		more = more || end < int64(len(recs))
	}
	return more, nil
}

// allParts lists every partition of the capture.
func allParts() []topicPart {
	out := []topicPart{{bankTxTopic, 0}}
	for _, table := range bankTables {
		for p := range int32(bankParts) {
			out = append(out, topicPart{bankTopic(table), p})
		}
	}
	return out
}

// checker polls the replica in REPEATABLE READ snapshots and counts those
// that show part of a source transaction (a total of balances other than
// the source's) or transactions out of order (transfers with a gap).
type checker struct {
	pool      *pgxpool.Pool
	accounts  int
	total     int64
	snapshots atomic.Int64
	bad       atomic.Int64
	mu        sync.Mutex
	first     string // the first violation
}

func (c *checker) run(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		c.check(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (c *checker) check(ctx context.Context) {
	var rows, transfers, maxID, sum int64
	err := pgx.BeginTxFunc(ctx, c.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		return tx.QueryRow(ctx, `SELECT (SELECT count(*) FROM a) + (SELECT count(*) FROM b),
       (SELECT coalesce(sum(balance), 0) FROM a) + (SELECT coalesce(sum(balance), 0) FROM b),
       (SELECT count(*) FROM transfers), (SELECT coalesce(max(id), 0) FROM transfers)`).Scan(&rows, &sum, &transfers, &maxID)
	})
	if err != nil || rows < int64(2*c.accounts) {
		return // not there yet (the tables, the snapshot), or the test ends
	}
	c.snapshots.Add(1)
	if sum != c.total || transfers != maxID {
		if c.bad.Add(1) == 1 {
			c.mu.Lock()
			c.first = fmt.Sprintf("total of balances %d (want %d), %d transfers of ids up to %d", sum, c.total, transfers, maxID)
			c.mu.Unlock()
		}
	}
}

// verdict fails t unless the checker saw snapshots, none of them bad.
func (c *checker) verdict(t *testing.T) {
	t.Helper()
	n, bad := c.snapshots.Load(), c.bad.Load()
	t.Logf("invariant violated in %d of %d snapshots", bad, n)
	if n == 0 {
		t.Fatal("the checker saw no snapshot of the replica")
	}
	if bad > 0 {
		c.mu.Lock()
		defer c.mu.Unlock()
		t.Fatalf("%d of %d snapshots showed a half-applied or out-of-order source transaction; the first: %s", bad, n, c.first)
	}
}

// equalsSource fails t unless the replica holds the source's rows.
func (s *bankSource) equalsSource(t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	for _, table := range []string{"a", "b"} {
		got := map[int]int64{}
		rows, err := pool.Query(t.Context(), fmt.Sprintf("SELECT id, balance FROM %s", pgx.Identifier{table}.Sanitize()))
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var id int
			var bal int64
			if err := rows.Scan(&id, &bal); err != nil {
				t.Fatal(err)
			}
			got[id] = bal
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		if len(got) != s.accounts {
			t.Fatalf("table %s has %d accounts, want %d", table, len(got), s.accounts)
		}
		for id := 1; id <= s.accounts; id++ {
			if got[id] != s.balances[table][id-1] {
				t.Fatalf("%s account %d: balance %d, want the source's %d", table, id, got[id], s.balances[table][id-1])
			}
		}
	}
	if n := queryInt(t, pool, "SELECT count(*) FROM transfers"); n != int64(s.transfers) {
		t.Fatalf("transfers has %d rows, want %d", n, s.transfers)
	}
	if n := queryInt(t, pool, "SELECT count(*) FROM kafka2pg.cdc_staged"); n != 0 {
		t.Fatalf("%d events are still staged", n)
	}
}

// waitApplied polls until every source transaction is applied.
func waitApplied(t *testing.T, pool *pgxpool.Pool, n int, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		got := queryInt(t, pool, "SELECT count(*) FROM kafka2pg.cdc_tx_ends WHERE applied_at IS NOT NULL")
		if got == int64(n) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d source transactions applied after %s", got, n, within)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// runApplier runs an Applier of w until the returned stop is called,
// which returns Run's error.
func runApplier(t *testing.T, w *ingest.Writer, cfg ingest.ApplierConfig) (*ingest.Applier, func() error) {
	t.Helper()
	cfg.Source = bankSourceName
	a, err := w.NewApplier(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	var once sync.Once
	var runErr error
	stop := func() error {
		once.Do(func() {
			cancel()
			runErr = <-done
		})
		return runErr
	}
	t.Cleanup(func() { stop() })
	return a, stop
}

// startChecker runs a checker until the test ends; stop ends it first.
func startChecker(t *testing.T, pool *pgxpool.Pool, src *bankSource) (*checker, func()) {
	c := &checker{pool: pool, accounts: src.accounts, total: src.total()}
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	wg.Go(func() { c.run(ctx, 20*time.Millisecond) })
	stop := func() { cancel(); wg.Wait() }
	t.Cleanup(stop)
	return c, stop
}

// feedAll writes the whole capture through the members, a batch of each
// member's partitions in turn, in random sizes.
func feedAll(t *testing.T, rng *rand.Rand, src *bankSource, members ...*member) {
	t.Helper()
	for more := true; more; {
		more = false
		for _, m := range members {
			left, err := m.feed(t.Context(), src, rng, 40)
			if err != nil {
				t.Fatal(err)
			}
			more = more || left
		}
	}
}

func TestTransactionsTwoMembersEachOwningSomePartitionsApplyWholeTransactionsInOrder(t *testing.T) {
	t.Parallel()
	_, pool := pgtest.MigratedPool(t)
	rng := rand.New(rand.NewPCG(1, 37))
	src := newBankSource(20)
	src.transfersOf(rng, 400)
	// No member owns every partition: the one with the transaction topic
	// lacks a partition of each table.
	var own1, own2 []topicPart
	for i, tp := range allParts() {
		if i%2 == 0 {
			own1 = append(own1, tp)
		} else {
			own2 = append(own2, tp)
		}
	}
	m1, m2 := newMember(t, pool, own1), newMember(t, pool, own2)
	// The snapshot first: the checker counts once every account is there.
	c, stopChecker := startChecker(t, pool, src)
	a, stopApplier := runApplier(t, m1.w, ingest.ApplierConfig{})
	feedAll(t, rng, src, m1, m2)
	waitApplied(t, pool, src.transfers, time.Minute)
	if err := stopApplier(); err != nil {
		t.Fatal(err)
	}
	stopChecker()
	c.check(t.Context())
	c.verdict(t)
	src.equalsSource(t, pool)
	if st := a.Stats(); st.Applied != int64(src.transfers) || st.Partial != 0 {
		t.Fatalf("applier stats %+v, want %d applied whole", st, src.transfers)
	}
}

func TestTransactionsZombieApplierCommitsNothing(t *testing.T) {
	t.Parallel()
	_, pool := pgtest.MigratedPool(t)
	rng := rand.New(rand.NewPCG(2, 37))
	src := newBankSource(5)
	src.transfersOf(rng, 1)
	m := newMember(t, pool, allParts())
	feedAll(t, rng, src, m)
	old, err := m.w.NewApplier(ingest.ApplierConfig{Source: bankSourceName})
	if err != nil {
		t.Fatal(err)
	}
	if err := old.Claim(t.Context()); err != nil {
		t.Fatal(err)
	}
	if n, err := old.ApplyReady(t.Context()); err != nil || n != 1 {
		t.Fatalf("the first applier applied %d transactions (%v), want 1", n, err)
	}
	src.transfersOf(rng, 2)
	feedAll(t, rng, src, m)
	// A second applier claims the source: the first is a zombie now.
	fresh, err := m.w.NewApplier(ingest.ApplierConfig{Source: bankSourceName})
	if err != nil {
		t.Fatal(err)
	}
	if err := fresh.Claim(t.Context()); err != nil {
		t.Fatal(err)
	}
	n, err := old.ApplyReady(t.Context())
	if !errors.Is(err, ingest.ErrApplierFenced) || n != 0 {
		t.Fatalf("the zombie applied %d transactions, err %v; want 0 and ErrApplierFenced", n, err)
	}
	if got := queryInt(t, pool, "SELECT count(*) FROM kafka2pg.cdc_tx_ends WHERE applied_at IS NOT NULL"); got != 1 {
		t.Fatalf("%d transactions applied after the zombie's try, want the 1 before it", got)
	}
	if n, err := fresh.ApplyReady(t.Context()); err != nil || n != src.transfers-1 {
		t.Fatalf("the new applier applied %d (%v), want %d", n, err, src.transfers-1)
	}
	src.equalsSource(t, pool)
}

func TestTransactionsCheckerSeesHalfAppliedTransactionsWithoutThem(t *testing.T) {
	t.Parallel()
	_, pool := pgtest.MigratedPool(t)
	rng := rand.New(rand.NewPCG(3, 37))
	src := newBankSource(10)
	src.transfersOf(rng, 50)
	sinks := bankSinks(t)
	for topic, s := range sinks {
		s.Transactions = nil
		sinks[topic] = s
	}
	delete(sinks, bankTxTopic)
	w := readyWriter(t, pool, ingest.Config{Group: "g", Sinks: sinks})
	m := &member{w: w, pos: map[topicPart]stream.Position{}, prev: map[topicPart]int64{}}
	// Table a's partitions whole, table b's snapshot only: what a reader
	// sees while b's partitions lag.
	for _, tp := range allParts() {
		if tp.topic == bankTxTopic {
			continue
		}
		pos, err := w.Claim(t.Context(), tp.topic, []int32{tp.part})
		if err != nil {
			t.Fatal(err)
		}
		m.pos[tp], m.prev[tp] = pos[tp.part], pos[tp.part].NextOffset
		m.own = append(m.own, tp)
	}
	full := src.log
	src.log = map[topicPart][]stream.Record{}
	for tp, recs := range full {
		if tp.topic == bankTopic("b") {
			recs = recs[:len(recs)-len(recs)/2]
		}
		src.log[tp] = recs
	}
	feedAll(t, rng, src, m)
	c := &checker{pool: pool, accounts: src.accounts, total: src.total()}
	c.check(t.Context())
	if c.snapshots.Load() != 1 || c.bad.Load() != 1 {
		t.Fatalf("the checker saw %d bad of %d snapshots of a replica applied change by change, want 1 of 1", c.bad.Load(), c.snapshots.Load())
	}
}

func TestTransactionsRestartedMembersAndApplierResumeAndStayWhole(t *testing.T) {
	t.Parallel()
	_, pool := pgtest.MigratedPool(t)
	rng := rand.New(rand.NewPCG(4, 37))
	src := newBankSource(20)
	src.transfersOf(rng, 100)
	src.transfer(rng, 2*src.accounts) // a large one, that the kill may cut
	src.transfersOf(rng, 100)
	c, stopChecker := startChecker(t, pool, src)
	parts := allParts()
	own := func(i int) []topicPart {
		var out []topicPart
		for j, tp := range parts {
			if j%2 == i {
				out = append(out, tp)
			}
		}
		return out
	}
	m1, m2 := newMember(t, pool, own(0)), newMember(t, pool, own(1))
	_, stopApplier := runApplier(t, m1.w, ingest.ApplierConfig{FetchRows: 7})
	for round := 0; round < 5; round++ {
		for range 3 + rng.IntN(5) {
			if _, err := m1.feed(t.Context(), src, rng, 30); err != nil {
				t.Fatal(err)
			}
			if _, err := m2.feed(t.Context(), src, rng, 30); err != nil {
				t.Fatal(err)
			}
		}
		// "kill -9" both members and the applier: their successors claim
		// again and go on from what is durable; the old ones are zombies.
		if err := stopApplier(); err != nil {
			t.Fatal(err)
		}
		old := m1
		m1, m2 = newMember(t, pool, own(0)), newMember(t, pool, own(1))
		if _, err := old.feed(t.Context(), src, rng, 30); !errors.Is(err, stream.ErrFenced) {
			t.Fatalf("a write of the replaced member: %v, want ErrFenced", err)
		}
		_, stopApplier = runApplier(t, m1.w, ingest.ApplierConfig{FetchRows: 7})
	}
	feedAll(t, rng, src, m1, m2)
	waitApplied(t, pool, src.transfers, time.Minute)
	if err := stopApplier(); err != nil {
		t.Fatal(err)
	}
	stopChecker()
	c.verdict(t)
	src.equalsSource(t, pool)
}

func TestTransactionsIncompleteTransactionWaitsThenAppliesWhatArrivedAndDeadLettersTheRest(t *testing.T) {
	t.Parallel()
	_, pool := pgtest.MigratedPool(t)
	rng := rand.New(rand.NewPCG(5, 37))
	src := newBankSource(4)
	txid := src.transfer(rng, 2)
	// The event of transfers never comes (a filtered table): hold back the
	// transfers topic's partition that has it.
	lost := topicPart{bankTopic("transfers"), int32(1 % bankParts)}
	held := src.log[lost]
	delete(src.log, lost)
	m := newMember(t, pool, allParts())
	feedAll(t, rng, src, m)
	a, err := m.w.NewApplier(ingest.ApplierConfig{Source: bankSourceName, OnIncomplete: ingest.IncompleteApply, IncompleteTimeout: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Claim(t.Context()); err != nil {
		t.Fatal(err)
	}
	if n, err := a.ApplyReady(t.Context()); err != nil || n != 0 {
		t.Fatalf("applied %d (%v) of an incomplete transaction, want 0", n, err)
	}
	if got := a.Stats().Incomplete; got.ID != txid || got.Seen != 2 || got.Expected != 3 {
		t.Fatalf("incomplete %+v, want transaction %s with 2 of 3 events", got, txid)
	}
	// Past the timeout, it applies what arrived.
	if _, err := pool.Exec(t.Context(), "UPDATE kafka2pg.cdc_tx_ends SET staged_at = now() - interval '2 hours'"); err != nil {
		t.Fatal(err)
	}
	if n, err := a.ApplyReady(t.Context()); err != nil || n != 1 {
		t.Fatalf("applied %d (%v) after the timeout, want 1", n, err)
	}
	if st := a.Stats(); st.Partial != 1 || st.Incomplete.ID != "" {
		t.Fatalf("stats %+v, want 1 partial and nothing incomplete", st)
	}
	if n := queryInt(t, pool, "SELECT (SELECT sum(balance) FROM a) + (SELECT sum(balance) FROM b)"); n != src.total() {
		t.Fatalf("total of balances %d, want %d: the transfer's account changes apply together", n, src.total())
	}
	// The lost event arrives late: a dead letter, not a change.
	src.log[lost] = held
	m.own = append(m.own, lost)
	feedAll(t, rng, src, m)
	if n := queryInt(t, pool, "SELECT count(*) FROM kafka2pg.dead_letters WHERE error_kind = $1", ingest.KindLateEvent); n != 1 {
		t.Fatalf("%d dead letters of kind %s, want the late event's", n, ingest.KindLateEvent)
	}
	if n := queryInt(t, pool, "SELECT count(*) FROM transfers"); n != 0 {
		t.Fatalf("transfers has %d rows, want none: the late event must not apply", n)
	}
}
