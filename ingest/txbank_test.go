package ingest_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/kafka2pg/kafka2pg/cdc"
	"github.com/kafka2pg/kafka2pg/deadletters"
	"github.com/kafka2pg/kafka2pg/ingest"
	"github.com/kafka2pg/kafka2pg/internal/cdctest"
	"github.com/kafka2pg/kafka2pg/internal/pgtest"
	"github.com/kafka2pg/kafka2pg/stream"
)

// The tests of transaction-consistent apply replicate a simulated
// Debezium capture of a bank (cdctest.Bank, prefix "bank") through
// members that each own some of its partitions, and check the replica
// with a cdctest.Checker.

const (
	bankSourceName = "bank.transaction"
	bankTxTopic    = "bank.transaction"
	bankParts      = 3
)

type topicPart = cdctest.TopicPart

func bankTopic(table string) string { return "bank.public." + table }

func newBankSource(accounts int) *cdctest.Bank { return cdctest.NewBank("bank", accounts, bankParts) }

// bankTest is the start of a test of a bank of accounts: a database,
// a random source seeded with seed, and the capture's snapshot.
func bankTest(t *testing.T, seed uint64, accounts int) (*pgxpool.Pool, *rand.Rand, *cdctest.Bank) {
	t.Helper()
	_, pool := pgtest.MigratedPool(t)
	return pool, rand.New(rand.NewPCG(seed, 37)), newBankSource(accounts)
}

// startChecker runs a checker of src's replica until the test ends;
// stop ends it first.
func startChecker(t *testing.T, pool *pgxpool.Pool, src *cdctest.Bank) (*cdctest.Checker, func()) {
	c := &cdctest.Checker{Pool: pool, Accounts: src.Accounts, Total: src.Total()}
	return c, c.Start(t, 20*time.Millisecond)
}

// bankSinks are the sinks of a member: decoders of its own, as a process
// of its own has.
func bankSinks(t testing.TB) map[string]ingest.Sink {
	t.Helper()
	sinks := map[string]ingest.Sink{bankTxTopic: ingest.BoundariesSink(ingest.Boundaries{Source: bankSourceName, Parse: cdc.ParseBoundary})}
	for _, table := range cdctest.BankTables {
		d, err := cdc.NewDecoder(cdc.Config{Schema: "public", Table: table})
		if err != nil {
			t.Fatal(err)
		}
		sinks[bankTopic(table)] = ingest.Sink{Table: d.Table(), Changes: d, Evolve: true,
			Transactions: &ingest.Transactions{Source: bankSourceName}}
	}
	return sinks
}

// changeByChange are the bank's sinks without transactions, and without
// the transaction topic.
func changeByChange(t testing.TB) map[string]ingest.Sink {
	sinks := bankSinks(t)
	for topic, s := range sinks {
		s.Transactions = nil
		sinks[topic] = s
	}
	delete(sinks, bankTxTopic)
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
	return memberOf(t, readyWriter(t, pool, ingest.Config{Group: "g", Sinks: bankSinks(t)}), own)
}

// memberOf is the member of w that claims own.
func memberOf(t testing.TB, w *ingest.Writer, own []topicPart) *member {
	t.Helper()
	m := &member{w: w, own: own, pos: map[topicPart]stream.Position{}, prev: map[topicPart]int64{}}
	for _, tp := range own {
		pos, err := w.Claim(t.Context(), tp.Topic, []int32{tp.Part})
		if err != nil {
			t.Fatal(err)
		}
		m.pos[tp] = pos[tp.Part]
		m.prev[tp] = pos[tp.Part].NextOffset
	}
	return m
}

// claimedApplier is an Applier of the bank's source on w (cfg's Source
// set), claimed.
func claimedApplier(t testing.TB, w *ingest.Writer, cfg ingest.ApplierConfig) *ingest.Applier {
	t.Helper()
	cfg.Source = bankSourceName
	a, err := w.NewApplier(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Claim(t.Context()); err != nil {
		t.Fatal(err)
	}
	return a
}

// envCount is the number in the environment variable name, else def;
// one under least fails t.
func envCount(t testing.TB, name string, def, least int) int {
	t.Helper()
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < least {
		t.Fatalf("%s=%q: want a number, at least %d", name, s, least)
	}
	return n
}

// feed writes one batch of up to maxBatch records of each owned
// partition, from where the member left it; it reports whether any was
// left to write.
func (m *member) feed(ctx context.Context, src *cdctest.Bank, rng *rand.Rand, maxBatch int) (bool, error) {
	more := false
	for _, tp := range m.own {
		next := max(m.prev[tp], 0)
		recs := src.Log[tp]
		if next >= int64(len(recs)) {
			continue
		}
		end := min(next+1+int64(rng.IntN(maxBatch)), int64(len(recs)))
		b := &stream.Batch{Topic: tp.Topic, Partition: tp.Part, Epoch: m.pos[tp].Epoch, PrevOffset: m.prev[tp],
			FirstOffset: next, NextOffset: end, LeaderEpoch: -1, LogEndOffset: int64(len(recs)), Records: recs[next:end]}
		if err := m.w.Write(ctx, b); err != nil {
			return false, err
		}
		m.prev[tp] = end
		more = more || end < int64(len(recs))
	}
	return more, nil
}

// waitApplied polls until every source transaction is applied.
func waitApplied(t *testing.T, pool *pgxpool.Pool, n int, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		got := queryInt(t, pool, cdctest.AppliedEnds, "g")
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

// feedAll writes the whole capture through the members, a batch of each
// member's partitions in turn, in random sizes.
func feedAll(t *testing.T, rng *rand.Rand, src *cdctest.Bank, members ...*member) {
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
	pool, rng, src := bankTest(t, 1, 20)
	src.TransfersOf(rng, 400)
	// No member owns every partition: the one with the transaction topic
	// lacks a partition of each table.
	var own1, own2 []topicPart
	for i, tp := range src.AllParts() {
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
	waitApplied(t, pool, src.Transfers, time.Minute)
	if err := stopApplier(); err != nil {
		t.Fatal(err)
	}
	stopChecker()
	c.Check(t.Context())
	c.Verdict(t)
	src.EqualsSource(t, pool)
	if st := a.Stats(); st.Applied != int64(src.Transfers) || st.Partial != 0 {
		t.Fatalf("applier stats %+v, want %d applied whole", st, src.Transfers)
	}
}

func TestTransactionsZombieApplierCommitsNothing(t *testing.T) {
	t.Parallel()
	pool, rng, src := bankTest(t, 2, 5)
	src.TransfersOf(rng, 1)
	m := newMember(t, pool, src.AllParts())
	feedAll(t, rng, src, m)
	old := claimedApplier(t, m.w, ingest.ApplierConfig{})
	if n, err := old.ApplyReady(t.Context()); err != nil || n != 1 {
		t.Fatalf("the first applier applied %d transactions (%v), want 1", n, err)
	}
	src.TransfersOf(rng, 2)
	feedAll(t, rng, src, m)
	// A second applier claims the source: the first is a zombie now.
	fresh := claimedApplier(t, m.w, ingest.ApplierConfig{})
	n, err := old.ApplyReady(t.Context())
	if !errors.Is(err, ingest.ErrApplierFenced) || n != 0 {
		t.Fatalf("the zombie applied %d transactions, err %v; want 0 and ErrApplierFenced", n, err)
	}
	if got := queryInt(t, pool, cdctest.AppliedEnds, "g"); got != 1 {
		t.Fatalf("%d transactions applied after the zombie's try, want the 1 before it", got)
	}
	if n, err := fresh.ApplyReady(t.Context()); err != nil || n != src.Transfers-1 {
		t.Fatalf("the new applier applied %d (%v), want %d", n, err, src.Transfers-1)
	}
	src.EqualsSource(t, pool)
}

func TestTransactionsCheckerSeesHalfAppliedTransactionsWithoutThem(t *testing.T) {
	t.Parallel()
	pool, rng, src := bankTest(t, 3, 10)
	src.TransfersOf(rng, 50)
	w := readyWriter(t, pool, ingest.Config{Group: "g", Sinks: changeByChange(t)})
	m := memberOf(t, w, src.AllParts()[1:]) // all but the transaction topic
	// Table a's partitions whole, table b's snapshot only: what a reader
	// sees while b's partitions lag.
	full := src.Log
	src.Log = map[topicPart][]stream.Record{}
	for tp, recs := range full {
		if tp.Topic == bankTopic("b") {
			recs = recs[:len(recs)-len(recs)/2]
		}
		src.Log[tp] = recs
	}
	feedAll(t, rng, src, m)
	c := &cdctest.Checker{Pool: pool, Accounts: src.Accounts, Total: src.Total()}
	c.Check(t.Context())
	if n, bad := c.Counts(); n != 1 || bad != 1 {
		t.Fatalf("the checker saw %d bad of %d snapshots of a replica applied change by change, want 1 of 1", bad, n)
	}
}

func TestTransactionsRestartedMembersAndApplierResumeAndStayWhole(t *testing.T) {
	t.Parallel()
	pool, rng, src := bankTest(t, 4, 20)
	src.TransfersOf(rng, 100)
	src.Transfer(rng, 2*src.Accounts) // a large one, that the kill may cut
	src.TransfersOf(rng, 100)
	c, stopChecker := startChecker(t, pool, src)
	parts := src.AllParts()
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
	waitApplied(t, pool, src.Transfers, time.Minute)
	if err := stopApplier(); err != nil {
		t.Fatal(err)
	}
	stopChecker()
	c.Verdict(t)
	src.EqualsSource(t, pool)
}

func TestTransactionsIncompleteTransactionWaitsThenAppliesWhatArrivedAndDeadLettersTheRest(t *testing.T) {
	t.Parallel()
	pool, rng, src := bankTest(t, 5, 4)
	txid := src.Transfer(rng, 2)
	// The event of transfers never comes (a filtered table): hold back the
	// transfers topic's partition that has it.
	lost := topicPart{Topic: bankTopic("transfers"), Part: int32(1 % bankParts)}
	held := src.Log[lost]
	delete(src.Log, lost)
	m := newMember(t, pool, src.AllParts())
	feedAll(t, rng, src, m)
	a := claimedApplier(t, m.w, ingest.ApplierConfig{OnIncomplete: ingest.IncompleteApply, IncompleteTimeout: time.Hour})
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
	if n := queryInt(t, pool, "SELECT (SELECT sum(balance) FROM a) + (SELECT sum(balance) FROM b)"); n != src.Total() {
		t.Fatalf("total of balances %d, want %d: the transfer's account changes apply together", n, src.Total())
	}
	// The lost event arrives late: a dead letter, not a change.
	src.Log[lost] = held
	m.own = append(m.own, lost)
	feedAll(t, rng, src, m)
	if n := queryInt(t, pool, "SELECT count(*) FROM kafka2pg.dead_letters WHERE error_kind = $1", ingest.KindLateEvent); n != 1 {
		t.Fatalf("%d dead letters of kind %s, want the late event's", n, ingest.KindLateEvent)
	}
	if n := queryInt(t, pool, "SELECT count(*) FROM transfers"); n != 0 {
		t.Fatalf("transfers has %d rows, want none: the late event must not apply", n)
	}
}

func TestTransactionsBadTransactionTopicRecordIsADeadLetterThatReplayRefuses(t *testing.T) {
	t.Parallel()
	pool, rng, src := bankTest(t, 9, 2)
	src.Log[topicPart{Topic: bankTxTopic}] = []stream.Record{{Topic: bankTxTopic, Value: []byte(`{"status":`)}}
	m := newMember(t, pool, []topicPart{{Topic: bankTxTopic}})
	feedAll(t, rng, src, m)
	if n := queryInt(t, pool, "SELECT count(*) FROM kafka2pg.dead_letters WHERE topic = $1", bankTxTopic); n != 1 {
		t.Fatalf("%d dead letters of the transaction topic, want its bad record", n)
	}
	if _, err := m.w.Replay(t.Context(), deadletters.Filter{}, ingest.ReplayOptions{}); !errors.Is(err, ingest.ErrChangeReplay) || !strings.Contains(err.Error(), "rewind") {
		t.Fatalf("Replay = %v, want ErrChangeReplay saying to rewind", err)
	}
}
