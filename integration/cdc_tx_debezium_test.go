package integration_test

import (
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafka2pg/kafka2pg/internal/cdctest"
	"github.com/kafka2pg/kafka2pg/internal/pgtest"
)

// TestDebeziumBankTransactionsStayWhole is the bank test on make
// test-cdc's stack: a source database moves money between accounts of
// tables a and b and logs each transfer in transfers, one source
// transaction each (a fifth of them touching 3 to 6 accounts); Debezium's
// PostgreSQL connector captures it with provide.transaction.metadata into
// topics of 3 partitions and a transaction topic of one; kafka2pg
// replicates it with a transactions: true sink, killed with SIGKILL 5
// times, then as 2 instances at once. A checker polls the replica in
// REPEATABLE READ snapshots all along: the total of balances must be the
// source's and the transfers without a gap in every one; the replica
// ends equal to the source.
func TestDebeziumBankTransactionsStayWhole(t *testing.T) {
	if os.Getenv(cdcEnv) != "1" {
		t.Skipf("set %s=1, with %s, %s and %s (make test-cdc starts them all)", cdcEnv, brokersEnv, connectURLEnv, sourcePGURLEnv)
	}
	const (
		accounts  = 40
		transfers = 1500
		kills     = 5
	)
	ctx := t.Context()
	name := fmt.Sprintf("bank%08x", rand.Uint32())
	replica := "replica_" + name

	// The source: the accounts, and the topics, the transaction topic of
	// one partition, made before the connector would make them.
	src := newCDCSourceDB(t, name)
	mustExec(t, src, fmt.Sprintf(`CREATE TABLE a (id integer PRIMARY KEY, balance bigint NOT NULL);
		CREATE TABLE b (id integer PRIMARY KEY, balance bigint NOT NULL);
		CREATE TABLE transfers (id integer PRIMARY KEY, amount bigint NOT NULL);
		INSERT INTO a SELECT g, %[2]d FROM generate_series(1, %[1]d) g;
		INSERT INTO b SELECT g, %[2]d FROM generate_series(1, %[1]d) g;`, accounts, cdctest.BankStart))
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(os.Getenv(brokersEnv), ",")...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	if _, err := adm.CreateTopics(ctx, 3, -1, nil, name+".public.a", name+".public.b", name+".public.transfers"); err != nil {
		t.Fatal(err)
	}
	if _, err := adm.CreateTopic(ctx, 1, -1, nil, name+".transaction"); err != nil {
		t.Fatal(err)
	}

	targetURL := pgtest.URL(t)
	target, err := pgx.Connect(ctx, targetURL)
	if err != nil {
		t.Fatal(err)
	}
	defer target.Close(ctx)
	mustExec(t, target, "CREATE SCHEMA "+pgx.Identifier{replica}.Sanitize())
	pcfg, err := pgxpool.ParseConfig(targetURL)
	if err != nil {
		t.Fatal(err)
	}
	pcfg.ConnConfig.RuntimeParams["search_path"] = replica
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	checker := &cdctest.Checker{Pool: pool, Accounts: accounts, Total: 2 * accounts * cdctest.BankStart}
	stopChecker := checker.Start(t, 50*time.Millisecond)

	config := fmt.Sprintf(`kafka-brokers: [%s]
kafka-group: %s
pg-url: ${K2P_IT_PG_URL}
metrics-addr: ""
sinks:
  - topic_regex: '%s\.public\.(?P<table>a|b|transfers)'
    format: debezium
    schema: %s
    table: '${table}'
    transactions: true
`, os.Getenv(brokersEnv), name, name, replica)
	env, args := cdcRunArgs(t, config, targetURL)
	b := startBridgeEnv(t, "bank-0", env, args...)
	createConnector(t, name, map[string]string{"provide.transaction.metadata": "true"})
	// The connector's initial snapshot reads the accounts as events
	// without a transaction block, which apply as they come, each
	// partition on its own: a transfer committed before the snapshot's
	// point would be read by it, and could show half applied. The
	// transfers start once the snapshot's accounts are in, so that every
	// transfer is streamed, inside its source transaction.
	pollUntil(t, 2*time.Minute, "the snapshot's accounts in the replica", func() (bool, string) {
		requireRunning(t, b)
		var n int64
		if err := pool.QueryRow(ctx, "SELECT (SELECT count(*) FROM a) + (SELECT count(*) FROM b)").Scan(&n); err != nil {
			return false, err.Error()
		}
		return n == 2*accounts, fmt.Sprintf("%d of %d accounts", n, 2*accounts)
	})

	workloadDone := make(chan error, 1)
	go func() {
		rng := rand.New(rand.NewPCG(rand.Uint64(), 37))
		for i := 1; i <= transfers; i++ {
			k := 2
			if rng.IntN(5) == 0 {
				k = 3 + rng.IntN(4)
			}
			err := pgx.BeginFunc(ctx, src, func(tx pgx.Tx) error {
				seen := map[string]bool{}
				var moved int64
				for j := 0; j < k; j++ {
					table, id := "a", 1+rng.IntN(accounts)
					for {
						table, id = []string{"a", "b"}[rng.IntN(2)], 1+rng.IntN(accounts)
						if !seen[fmt.Sprint(table, id)] {
							break
						}
					}
					seen[fmt.Sprint(table, id)] = true
					delta := int64(rng.IntN(100) + 1)
					if j == k-1 {
						delta = -moved
					}
					moved += delta
					if _, err := tx.Exec(ctx, "UPDATE "+table+" SET balance = balance + $1 WHERE id = $2", delta, id); err != nil {
						return err
					}
				}
				_, err := tx.Exec(ctx, "INSERT INTO transfers VALUES ($1, $2)", i, moved)
				return err
			})
			if err != nil {
				workloadDone <- err
				return
			}
			time.Sleep(time.Duration(5+rng.IntN(20)) * time.Millisecond)
		}
		workloadDone <- nil
	}()
	for i := range kills {
		time.Sleep(randomDuration(time.Second, 4*time.Second))
		if !b.kill(t) {
			t.Fatalf("kafka2pg was not running when its kill %d was due: %s\n%s", i+1, b.status(), tail(b.logPath, 20))
		}
		b = startBridgeEnv(t, fmt.Sprintf("bank-%d", i+1), env, args...)
	}
	b2 := startBridgeEnv(t, "bank-second", env, args...)
	if err := <-workloadDone; err != nil {
		t.Fatalf("workload: %v", err)
	}
	var total int64
	pollUntil(t, 3*time.Minute, "the replica to equal the source", func() (bool, string) {
		requireRunning(t, b, b2)
		var diff, n int64
		if err := pool.QueryRow(ctx, "SELECT count(*) FROM transfers").Scan(&n); err != nil {
			return false, err.Error()
		}
		if n < transfers {
			return false, fmt.Sprintf("%d of %d transfers replicated", n, transfers)
		}
		for _, table := range []string{"a", "b"} {
			rows, err := src.Query(ctx, "SELECT id, balance FROM "+table)
			if err != nil {
				return false, err.Error()
			}
			ids, balances, err := collectPairs(rows)
			if err != nil {
				return false, err.Error()
			}
			var d int64
			if err := pool.QueryRow(ctx, `SELECT count(*) FROM unnest($1::int4[], $2::int8[]) s(id, balance)
				LEFT JOIN `+table+` r USING (id) WHERE r.balance IS DISTINCT FROM s.balance`, ids, balances).Scan(&d); err != nil {
				return false, err.Error()
			}
			diff += d
		}
		total = n
		return diff == 0, fmt.Sprintf("%d accounts differ", diff)
	})
	stopChecker()
	checker.Verdict(t)
	n, _ := checker.Counts()
	t.Logf("%d source transactions through Debezium, %d kill -9, then 2 instances: whole in all %d snapshots, equal to the source", total, kills, n)
}

// collectPairs reads (id, balance) rows.
func collectPairs(rows pgx.Rows) ([]int32, []int64, error) {
	var ids []int32
	var balances []int64
	for rows.Next() {
		var id int32
		var bal int64
		if err := rows.Scan(&id, &bal); err != nil {
			rows.Close()
			return nil, nil, err
		}
		ids, balances = append(ids, id), append(balances, bal)
	}
	return ids, balances, rows.Err()
}
