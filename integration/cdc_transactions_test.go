package integration_test

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafka2pg/kafka2pg/internal/cdctest"
)

// TestCDCTransactionsStayWholeUnderKill9AndARebalance replicates a
// bank as Debezium captures it with transaction metadata, simulated
// (cdctest.Bank's change events and END records on kfake:
// transfers between accounts of two tables and a log table, topics of 3
// partitions and a transaction topic of one) with `kafka2pg run` and a
// transactions: true sink, killed with SIGKILL 5 times while the capture
// arrives, then with 2 instances at once (a rebalance). A checker polls
// the replica in REPEATABLE READ snapshots all along: none may show part
// of a source transaction, and the replica ends equal to the source.
func TestCDCTransactionsStayWholeUnderKill9AndARebalance(t *testing.T) {
	parallel(t)
	const kills = 5
	s := newScenario(t, 3)
	// The capture's prefix is this run's own: the sink's topic_regex must
	// not match the topics of another run on the same broker (one stopped
	// before its cleanup leaves them), whose transfers would land in the
	// same tables.
	prefix := fmt.Sprintf("txit%08x", rand.Uint32())
	topics := map[string]string{}
	for _, table := range cdctest.BankTables {
		topics[table] = s.kafka.CreateTopic(t, prefix+".public."+table, 3)
	}
	txTopic := s.kafka.CreateTopic(t, prefix+".transaction", 1)
	rng := rand.New(rand.NewPCG(rand.Uint64(), 37))
	bank := cdctest.NewBankOn(topics, txTopic, 40, 3)
	bank.TransfersOf(rng, 600)
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(s.kafka.Brokers(), ",")...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	// The producer sends the capture in 360 steps, 20ms apart, a 360th of
	// every partition's log at a time: the partitions cut its transactions
	// at different places, as a connector's topics do. It sends them in
	// kills+1 phases, each let go as a bridge starts, so that every bridge
	// has records arriving while it writes and applies, and the kills land
	// among them however slow a start is.
	const steps = 360
	phase := make(chan struct{}, kills+1)
	produced := make(chan error, 1)
	go func() {
		sent := map[cdctest.TopicPart]int{}
		for i := 1; i <= steps; i++ {
			if (i-1)%(steps/(kills+1)) == 0 {
				select {
				case <-phase:
				case <-t.Context().Done():
					produced <- t.Context().Err()
					return
				}
			}
			var rs []*kgo.Record
			for tp, recs := range bank.Log {
				end := len(recs) * i / steps
				for _, r := range recs[sent[tp]:end] {
					rs = append(rs, &kgo.Record{Topic: tp.Topic, Partition: tp.Part, Key: r.Key, Value: r.Value})
				}
				sent[tp] = end
			}
			if err := cl.ProduceSync(t.Context(), rs...).FirstErr(); err != nil {
				produced <- err
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
		produced <- nil
	}()

	path := filepath.Join(t.TempDir(), "kafka2pg.yaml")
	config := fmt.Sprintf(`sinks:
  - topic_regex: '%s\.public\.(?P<table>[a-z]+)-[0-9a-f]{8}'
    format: debezium
    table: '${table}'
    transactions: true
    transaction_topic: %s
`, prefix, txTopic)
	if err := os.WriteFile(path, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	flags := append([]string{"--batch-max-rows", "200", "--batch-max-wait", "50ms", "--kafka-metadata-max-age", "1s"}, fastGroupFlags...)
	checker := &cdctest.Checker{Pool: s.db, Accounts: bank.Accounts, Total: bank.Total()}
	stopChecker := checker.Start(t, 50*time.Millisecond)
	durable := func() int64 {
		var n int64
		if err := s.db.QueryRow(t.Context(), "SELECT coalesce(sum(next_offset), 0) FROM kafka2pg.offsets WHERE consumer_group = $1", s.group).Scan(&n); err != nil {
			return -1 // not migrated yet
		}
		return n
	}
	applied := func() int64 {
		var n int64
		if err := s.db.QueryRow(t.Context(), cdctest.AppliedEnds, s.group).Scan(&n); err != nil {
			return -1
		}
		return n
	}

	for i := range kills {
		before := durable()
		b := startBridge(t, fmt.Sprintf("tx-kill-%d", i), s.configArgs(path, flags...)...)
		phase <- struct{}{}
		pollUntil(t, 90*time.Second, "bridge "+b.name+" to commit a batch", func() (bool, string) {
			requireRunning(t, b)
			now := durable()
			return now > before, fmt.Sprintf("sum of next_offset %d, %d when it started", now, before)
		})
		time.Sleep(randomDuration(50*time.Millisecond, 900*time.Millisecond)) // the chaos schedule
		requireRunning(t, b)
		if !b.kill(t) {
			t.Fatalf("bridge %s ended on its own before it could be killed (%s)", b.name, b.status())
		}
		t.Logf("killed %s: %d source transactions applied, sum of next_offset %d", b.name, applied(), durable())
	}
	// Two instances at once: they share the partitions, and one applies.
	b1 := startBridge(t, "tx-final-1", s.configArgs(path, flags...)...)
	b2 := startBridge(t, "tx-final-2", s.configArgs(path, flags...)...)
	phase <- struct{}{}
	if err := <-produced; err != nil {
		t.Fatalf("produce: %v", err)
	}
	pollUntil(t, 3*time.Minute, "every source transaction applied", func() (bool, string) {
		requireRunning(t, b1, b2)
		n := applied()
		return n == int64(bank.Transfers), fmt.Sprintf("%d of %d applied", n, bank.Transfers)
	})
	stopChecker()
	for _, b := range []*bridge{b1, b2} {
		b.signal(t, syscall.SIGTERM)
		if !b.wait(60 * time.Second) {
			t.Errorf("bridge %s did not stop within 60s of SIGTERM", b.name)
		}
	}
	checker.Verdict(t)
	bank.EqualsSource(t, s.db)
	n, _ := checker.Counts()
	t.Logf("%d source transactions over %d kill -9 and a run of 2 instances: whole in all %d snapshots, equal to the source", bank.Transfers, kills, n)
}
