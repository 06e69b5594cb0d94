package bridge_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafka2pg/kafka2pg/bridge"
	"github.com/kafka2pg/kafka2pg/cdc"
	"github.com/kafka2pg/kafka2pg/ingest"
	"github.com/kafka2pg/kafka2pg/internal/cdctest"
	"github.com/kafka2pg/kafka2pg/internal/kafkatest"
	"github.com/kafka2pg/kafka2pg/internal/pgtest"
	"github.com/kafka2pg/kafka2pg/reader"
	"github.com/kafka2pg/kafka2pg/sinks"
)

// bankSinks are the sinks of one bridge replicating bank with
// transactions: decoders of its own, as a process of its own has.
func bankSinks(t *testing.T, bank *cdctest.Bank) sinks.Set {
	t.Helper()
	set := sinks.Set{Fixed: map[string]ingest.Sink{
		bank.TxTopic: ingest.BoundariesSink(ingest.Boundaries{Source: bank.TxTopic, Parse: cdc.ParseBoundary}),
	}, Appliers: []ingest.ApplierConfig{{Source: bank.TxTopic}}}
	for table, topic := range bank.Topics {
		d, err := cdc.NewDecoder(cdc.Config{Schema: "public", Table: table})
		if err != nil {
			t.Fatal(err)
		}
		set.Fixed[topic] = ingest.Sink{Table: d.Table(), Changes: d, Evolve: true,
			Transactions: &ingest.Transactions{Source: bank.TxTopic}}
	}
	return set
}

// Two bridges of one group replicate a bank captured with transaction
// metadata, on topics of 3 partitions: the second joins while the first
// runs (a rebalance), then the first stops (another, and the applier
// moves to the second). A reader polling the replica never sees part of
// a source transaction, and the replica ends equal to the source.
func TestTransactionsTwoBridgesWithARebalanceApplyWholeSourceTransactions(t *testing.T) {
	t.Parallel()
	k := kafkatest.New(t)
	topics := map[string]string{}
	var all []string
	for _, table := range cdctest.BankTables {
		topics[table] = k.CreateTopic(t, "bank.public."+table, 3)
		all = append(all, topics[table])
	}
	txTopic := k.CreateTopic(t, "bank.transaction", 1)
	all = append(all, txTopic)
	rng := rand.New(rand.NewPCG(7, 37))
	bank := cdctest.NewBankOn(topics, txTopic, 30, 3)
	// Three waves of 200 source transactions each: where each partition's
	// log ends after each.
	var ends []map[cdctest.TopicPart]int
	for range 3 {
		bank.TransfersOf(rng, 200)
		end := map[cdctest.TopicPart]int{}
		for tp, recs := range bank.Log {
			end[tp] = len(recs)
		}
		ends = append(ends, end)
	}

	url := pgtest.URL(t)
	pool, err := pgxpool.New(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	checker := &cdctest.Checker{Pool: pool, Accounts: bank.Accounts, Total: bank.Total()}
	stopChecker := checker.Start(t, 25*time.Millisecond)

	// The capture reaches Kafka in three waves, each partition's records
	// in order, each wave ending with a transaction's END.
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(k.Brokers(), ",")...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	sent := map[cdctest.TopicPart]int{}
	wave := func(i int) {
		t.Helper()
		var rs []*kgo.Record
		for tp, recs := range bank.Log {
			end := ends[i][tp]
			for _, r := range recs[sent[tp]:end] {
				rs = append(rs, &kgo.Record{Topic: tp.Topic, Partition: tp.Part, Key: r.Key, Value: r.Value})
			}
			sent[tp] = end
		}
		if err := cl.ProduceSync(t.Context(), rs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	start := func() (*bridge.Bridge, <-chan error) {
		cfg := bridge.Config{
			Kafka: reader.Config{Brokers: strings.Split(k.Brokers(), ","), Group: "g-" + txTopic, Topics: all,
				HeartbeatInterval: 500 * time.Millisecond, FetchMaxWait: 100 * time.Millisecond},
			Sinks:       bankSinks(t, bank),
			PostgresURL: url,
		}
		b, err := bridge.New(cfg, nil, prometheus.NewRegistry())
		if err != nil {
			t.Fatal(err)
		}
		return b, run(t.Context(), b)
	}
	applied := func() int64 {
		var n int64
		if err := pool.QueryRow(t.Context(), cdctest.AppliedEnds, "g-"+txTopic).Scan(&n); err != nil {
			return -1 // the schema is not migrated yet
		}
		return n
	}
	waitApplied := func(n int) {
		t.Helper()
		kafkatest.Poll(t, 2*time.Minute, fmt.Sprintf("%d source transactions applied", n), func() (bool, string) {
			got := applied()
			return got == int64(n), fmt.Sprintf("%d applied", got)
		})
	}

	b1, done1 := start()
	wave(0)
	waitApplied(200)
	b2, done2 := start()
	wave(1)
	waitApplied(400)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if err := b1.Shutdown(ctx); err != nil {
		t.Fatalf("shut the first bridge down: %v", err)
	}
	if err := wait(t, done1, 30*time.Second); err != nil {
		t.Fatalf("the first bridge's Run: %v", err)
	}
	wave(2)
	waitApplied(bank.Transfers)
	if err := b2.Shutdown(ctx); err != nil {
		t.Fatalf("shut the second bridge down: %v", err)
	}
	if err := wait(t, done2, 30*time.Second); err != nil {
		t.Fatalf("the second bridge's Run: %v", err)
	}
	stopChecker()
	checker.Verdict(t)
	bank.EqualsSource(t, pool)
}
