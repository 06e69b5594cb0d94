package cdctest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/kafka2pg/kafka2pg/stream"
)

// Bank simulates Debezium's capture of a bank with transaction metadata,
// for the tests of transaction-consistent apply: tables a and b of
// accounts (id, balance) and transfers (id, amount), each a topic of
// Parts partitions (by id), and a transaction topic of one partition.
// Each source transaction moves money between 2 to 6 accounts of both
// tables and logs itself in transfers, so that a reader of the replica
// sees a constant total of balances, and transfers 1..n without a gap, in
// every snapshot, exactly when transactions apply whole and in order.
type Bank struct {
	// Topics names each table's topic (a, b, transfers); TxTopic the
	// transaction topic.
	Topics  map[string]string
	TxTopic string
	// Accounts is the number of accounts of each of a and b; Parts the
	// partitions of each table's topic.
	Accounts, Parts int
	// Log holds the records of every partition, in offset order.
	Log map[TopicPart][]stream.Record
	// Balances are the source's balances after the last transaction, by
	// table (a, b), at index id-1; Transfers counts the transactions.
	Balances  map[string][]int64
	Transfers int
	lsn       int64
	others    int // the transactions of Tx
}

// TopicPart is a topic's partition.
type TopicPart struct {
	Topic string
	Part  int32
}

// BankTables are the tables of a Bank.
var BankTables = []string{"a", "b", "transfers"}

// BankStart is every account's balance in the snapshot.
const BankStart = 1000

// NewBank starts a bank whose topics are named prefix.public.<table> and
// prefix.transaction, with its snapshot: a read event (without a
// transaction block) of every account.
func NewBank(prefix string, accounts, parts int) *Bank {
	topics := map[string]string{}
	for _, t := range BankTables {
		topics[t] = prefix + ".public." + t
	}
	return NewBankOn(topics, prefix+".transaction", accounts, parts)
}

// NewBankOn is NewBank on the topics named by topics (by table) and
// txTopic.
func NewBankOn(topics map[string]string, txTopic string, accounts, parts int) *Bank {
	s := &Bank{Topics: topics, TxTopic: txTopic, Accounts: accounts, Parts: parts,
		Log: map[TopicPart][]stream.Record{}, Balances: map[string][]int64{}}
	for _, t := range []string{"a", "b"} {
		s.Balances[t] = make([]int64, accounts)
		for id := 1; id <= accounts; id++ {
			s.Balances[t][id-1] = BankStart
			s.event(t, id, BankStart, "r", "", 0, 0)
		}
	}
	return s
}

// Total is the sum of all balances, which every transfer keeps.
func (s *Bank) Total() int64 { return int64(2 * s.Accounts * BankStart) }

// Parts lists every partition of the capture, the transaction topic's
// first.
func (s *Bank) AllParts() []TopicPart {
	out := []TopicPart{{s.TxTopic, 0}}
	for _, table := range BankTables {
		for p := range int32(s.Parts) {
			out = append(out, TopicPart{s.Topics[table], p})
		}
	}
	return out
}

func (s *Bank) add(tp TopicPart, key, value []byte) {
	s.Log[tp] = append(s.Log[tp], stream.Record{Topic: tp.Topic, Partition: tp.Part, Offset: int64(len(s.Log[tp])), Key: key, Value: value})
}

// BankValueSchema is the Connect schema of the envelope of table's
// events; BankKeySchema its key's.
func BankValueSchema(table string) string {
	second := "balance"
	if table == "transfers" {
		second = "amount"
	}
	row := fmt.Sprintf(`{"type":"struct","fields":[{"type":"int32","optional":false,"field":"id"},{"type":"int64","optional":false,"field":"%s"}],"optional":true,"name":"bank.public.%s.Value","field":"%%s"}`, second, table)
	return `{"type":"struct","fields":[` + fmt.Sprintf(row, "before") + `,` + fmt.Sprintf(row, "after") +
		`,{"type":"string","optional":false,"field":"op"},{"type":"int64","optional":true,"field":"ts_ms"}],"optional":false,"name":"bank.public.` + table + `.Envelope"}`
}

func BankKeySchema(table string) string {
	return fmt.Sprintf(`{"type":"struct","fields":[{"type":"int32","optional":false,"field":"id"}],"optional":false,"name":"bank.public.%s.Key"}`, table)
}

// BankEvent is the key and value of a change event of table's row id
// whose second column is second; txid "" leaves out the transaction
// block (a snapshot read).
func BankEvent(table string, id int, second int64, op, txid string, total, collOrder, lsn int64) (key, value []byte) {
	field := "balance"
	if table == "transfers" {
		field = "amount"
	}
	tx := "null"
	if txid != "" {
		tx = fmt.Sprintf(`{"id":%q,"total_order":%d,"data_collection_order":%d}`, txid, total, collOrder)
	}
	value = fmt.Appendf(nil, `{"schema":%s,"payload":{"before":null,"after":{"id":%d,%q:%d},"source":{"connector":"postgresql","name":"bank","db":"src","schema":"public","table":%q,"lsn":%d},"op":%q,"ts_ms":1,"transaction":%s}}`,
		BankValueSchema(table), id, field, second, table, lsn, op, tx)
	key = fmt.Appendf(nil, `{"schema":%s,"payload":{"id":%d}}`, BankKeySchema(table), id)
	return key, value
}

// event appends a change event; xid "" leaves out the transaction
// block. As Debezium's Postgres connector does, the transaction's id in
// the event is the txId and the event's own LSN.
func (s *Bank) event(table string, id int, second int64, op, xid string, total, collOrder int64) {
	s.lsn += 8
	txid := ""
	if xid != "" {
		txid = fmt.Sprintf("%s:%d", xid, s.lsn)
	}
	key, value := BankEvent(table, id, second, op, txid, total, collOrder, s.lsn)
	s.add(TopicPart{s.Topics[table], int32(id % s.Parts)}, key, value)
}

// Boundary appends a BEGIN (counts nil) or an END record of txid, with
// its event counts by table, to the transaction topic.
func (s *Bank) Boundary(txid string, counts map[string]int64) {
	s.add(TopicPart{s.TxTopic, 0}, nil, BoundaryValue(txid, counts))
}

// BoundaryValue is the value of a BEGIN (counts nil) or an END record of
// txid on the transaction topic, the END's with its schema.
func BoundaryValue(txid string, counts map[string]int64) []byte {
	if counts == nil {
		return fmt.Appendf(nil, `{"status":"BEGIN","id":%q,"event_count":null,"data_collections":null,"ts_ms":1}`, txid)
	}
	var n int64
	colls := ""
	for _, t := range BankTables {
		if counts[t] == 0 {
			continue
		}
		n += counts[t]
		if colls != "" {
			colls += ","
		}
		colls += fmt.Sprintf(`{"data_collection":"public.%s","event_count":%d}`, t, counts[t])
	}
	return fmt.Appendf(nil, `{"schema":{"type":"struct","name":"io.debezium.connector.common.TransactionMetadataValue"},"payload":{"status":"END","id":%q,"event_count":%d,"data_collections":[%s],"ts_ms":1}}`, txid, n, colls)
}

// Transfer is one source transaction: it moves money between k distinct
// accounts of tables a and b and logs a transfer. It returns its txId,
// the id kafka2pg keys it by.
func (s *Bank) Transfer(rng *rand.Rand, k int) string {
	s.Transfers++
	// The BEGIN's and END's id has the LSN of the commit, the events'
	// their own (see event).
	xid := fmt.Sprint(500 + s.Transfers)
	s.Boundary(fmt.Sprintf("%s:%d", xid, s.lsn), nil)
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
			a = acct{[]string{"a", "b"}[rng.IntN(2)], 1 + rng.IntN(s.Accounts)}
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
		s.Balances[a.table][a.id-1] += delta
		total++
		counts[a.table]++
		s.event(a.table, a.id, s.Balances[a.table][a.id-1], "u", xid, total, counts[a.table])
	}
	total++
	counts["transfers"]++
	s.event("transfers", s.Transfers, moved, "c", xid, total, counts["transfers"])
	s.lsn += 8
	s.Boundary(fmt.Sprintf("%s:%d", xid, s.lsn), counts)
	return xid
}

// BankChange is one change of a source transaction of Bank.Tx: row ID
// of Table gets Second (its balance, or its amount) by Op ("c", "u" or
// "d").
type BankChange struct {
	Table  string
	ID     int
	Second int64
	Op     string
}

// Tx appends one source transaction of changes, in that order, with its
// BEGIN and END, and returns its txId. It leaves Balances and Transfers
// as they are: a test of its own tables' rows, not of the Checker's
// invariant.
func (s *Bank) Tx(changes ...BankChange) string {
	s.others++
	xid := fmt.Sprint(1_000_000 + s.others)
	s.Boundary(fmt.Sprintf("%s:%d", xid, s.lsn), nil)
	counts := map[string]int64{}
	for i, c := range changes {
		counts[c.Table]++
		s.event(c.Table, c.ID, c.Second, c.Op, xid, int64(i+1), counts[c.Table])
	}
	s.lsn += 8
	s.Boundary(fmt.Sprintf("%s:%d", xid, s.lsn), counts)
	return xid
}

// TransfersOf appends n source transactions, a fifth of them touching 3
// to 6 accounts, the others 2.
func (s *Bank) TransfersOf(rng *rand.Rand, n int) {
	for range n {
		k := 2
		if rng.IntN(5) == 0 {
			k = 3 + rng.IntN(4)
		}
		s.Transfer(rng, k)
	}
}

// Checker polls a replica of a Bank (tables a, b and transfers in the
// connection's search_path) in REPEATABLE READ snapshots and counts
// those that show part of a source transaction (a total of balances other
// than the source's) or transactions out of order (transfers with a gap).
// Snapshots before every account is there are not counted.
type Checker struct {
	Pool      *pgxpool.Pool
	Accounts  int
	Total     int64
	snapshots atomic.Int64
	bad       atomic.Int64
	mu        sync.Mutex
	first     string // the first violation
}

// Start runs the checker every interval until the test ends; the
// returned stop ends it first.
func (c *Checker) Start(t testing.TB, every time.Duration) (stop func()) {
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			c.Check(ctx)
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	})
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); wg.Wait() }) }
	t.Cleanup(stop)
	return stop
}

// Check takes one snapshot.
func (c *Checker) Check(ctx context.Context) {
	var rows, transfers, maxID, sum int64
	err := pgx.BeginTxFunc(ctx, c.Pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		return tx.QueryRow(ctx, `SELECT (SELECT count(*) FROM a) + (SELECT count(*) FROM b),
       (SELECT coalesce(sum(balance), 0) FROM a) + (SELECT coalesce(sum(balance), 0) FROM b),
       (SELECT count(*) FROM transfers), (SELECT coalesce(max(id), 0) FROM transfers)`).Scan(&rows, &sum, &transfers, &maxID)
	})
	if err != nil || rows < int64(2*c.Accounts) {
		return // not there yet (the tables, the snapshot), or the test ends
	}
	c.snapshots.Add(1)
	if sum != c.Total || transfers != maxID {
		if c.bad.Add(1) == 1 {
			c.mu.Lock()
			c.first = fmt.Sprintf("total of balances %d (want %d), %d transfers of ids up to %d", sum, c.Total, transfers, maxID)
			c.mu.Unlock()
		}
	}
}

// Counts returns the snapshots taken and how many of them were bad.
func (c *Checker) Counts() (snapshots, bad int64) { return c.snapshots.Load(), c.bad.Load() }

// Verdict fails t unless the checker saw snapshots, none of them bad.
func (c *Checker) Verdict(t testing.TB) {
	t.Helper()
	n, bad := c.Counts()
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

// EqualsSource fails t unless the replica (tables a, b and transfers)
// holds the source's rows and nothing is left staged.
func (s *Bank) EqualsSource(t testing.TB, pool *pgxpool.Pool) {
	t.Helper()
	ctx := t.Context()
	for _, table := range []string{"a", "b"} {
		var bad, n int64
		q := fmt.Sprintf(`SELECT count(*) FILTER (WHERE r.balance IS DISTINCT FROM s.balance), count(r.id)
FROM unnest($1::int8[]) WITH ORDINALITY AS s(balance, id) LEFT JOIN %s r ON r.id = s.id`, pgx.Identifier{table}.Sanitize())
		if err := pool.QueryRow(ctx, q, s.Balances[table]).Scan(&bad, &n); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		if bad != 0 || n != int64(s.Accounts) {
			t.Fatalf("table %s: %d of %d accounts differ from the source's (%d present)", table, bad, s.Accounts, n)
		}
	}
	var transfers, staged int64
	if err := pool.QueryRow(ctx, "SELECT (SELECT count(*) FROM transfers), (SELECT count(*) FROM kafka2pg.cdc_staged)").Scan(&transfers, &staged); err != nil {
		t.Fatal(err)
	}
	if transfers != int64(s.Transfers) || staged != 0 {
		t.Fatalf("transfers has %d rows (want %d), %d events still staged (want 0)", transfers, s.Transfers, staged)
	}
}

// AppliedEnds counts the source transactions applied of consumer group
// $1: the ENDs before their Applier's position (cdc_appliers).
const AppliedEnds = `SELECT count(*) FROM kafka2pg.cdc_tx_ends e
JOIN kafka2pg.cdc_appliers a ON a.consumer_group = e.consumer_group AND a.source = e.source
WHERE e.consumer_group = $1 AND e.tx_offset < a.applied_tx_offset`
