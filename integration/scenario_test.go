package integration_test

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/kafka2pg/kafka2pg/internal/kafkatest"
	"github.com/kafka2pg/kafka2pg/internal/pgtest"
)

// Flags that make group membership react in seconds instead of the 45s
// session and 60s rebalance defaults, so survivors take over quickly:
//   - a member that dies while Stable is dropped after the session timeout
//     (6s is kfake's minimum);
//   - a member that dies between JoinGroup and SyncGroup is dropped only after
//     the rebalance timeout, and the whole group waits for it meanwhile (as in
//     Kafka), which the crash loop hits often.
var fastGroupFlags = []string{
	"--kafka-session-timeout", "6s",
	"--kafka-heartbeat-interval", "500ms",
	"--kafka-rebalance-timeout", "10s",
}

// scenario is one test's world: a Kafka cluster with a fresh topic, a fresh
// database, and the group and table names the bridges use.
type scenario struct {
	kafka      *kafkatest.Kafka
	db         *pgxpool.Pool
	pgURL      string
	topic      string
	partitions int32
	group      string
	table      string // in schema public
	ledger     *ledger
}

// newScenario sets up Kafka (a topic with the given partitions), Postgres
// (an empty database) and random group and table names.
func newScenario(t testing.TB, partitions int32) *scenario {
	t.Helper()
	return newScenarioOn(t, partitions, pgtest.URL(t))
}

// newScenarioOn is newScenario on the database of pgURL.
func newScenarioOn(t testing.TB, partitions int32, pgURL string) *scenario {
	t.Helper()
	suffix := fmt.Sprintf("%08x", rand.Uint32())
	s := &scenario{
		pgURL:      pgURL,
		kafka:      kafkatest.New(t),
		partitions: partitions,
		group:      "kafka2pg-it-" + suffix,
		table:      "it_" + suffix,
		ledger:     newLedger(),
	}
	s.topic = s.kafka.CreateTopic(t, "kafka2pg-it", partitions)
	db, err := pgxpool.New(t.Context(), s.pgURL)
	if err != nil {
		t.Fatalf("connect to test database: %v", err)
	}
	t.Cleanup(db.Close)
	s.db = db
	t.Cleanup(func() {
		if t.Failed() {
			s.logOffsetsTable(t)
		}
	})
	t.Logf("topic %s (%d partitions), group %s, table public.%s", s.topic, partitions, s.group, s.table)
	return s
}

// args returns the `kafka2pg run` command line for this scenario, plus extra.
func (s *scenario) args(extra ...string) []string {
	return append([]string{
		"run",
		"--kafka-brokers", s.kafka.Brokers(),
		"--kafka-group", s.group,
		"--topic", s.topic,
		"--pg-url", s.pgURL,
		"--pg-table", s.table,
		"--kafka-fetch-max-wait", "250ms",
		"--metrics-addr=",
		"--log-level", cmp.Or(os.Getenv(logLevelEnv), "info"),
	}, extra...)
}

// logLevelEnv names the environment variable that sets the bridges'
// --log-level (default info); debug helps when diagnosing a failure.
const logLevelEnv = "KAFKA2PG_TEST_LOG_LEVEL"

// start starts a bridge instance for this scenario.
func (s *scenario) start(t testing.TB, name string, extra ...string) *bridge {
	t.Helper()
	return startBridge(t, name, s.args(extra...)...)
}

// runUntilCaughtUp runs `run --until-caught-up` and fails the test unless it
// exits 0 within timeout. It returns how long the run took.
func (s *scenario) runUntilCaughtUp(t testing.TB, name string, timeout time.Duration, extra ...string) time.Duration {
	t.Helper()
	b := s.start(t, name, append([]string{"--until-caught-up"}, extra...)...)
	b.requireExitZero(t, timeout)
	return time.Since(b.started)
}

// runUntilCaughtUpCounting is runUntilCaughtUp for a run that may meet bad
// records: it wants exit status 3 when the run added dead letters of the
// scenario's group, and 0 when it added none.
func (s *scenario) runUntilCaughtUpCounting(t testing.TB, name string, timeout time.Duration, extra ...string) time.Duration {
	t.Helper()
	before := s.deadLetterCount(t)
	b := s.start(t, name, append([]string{"--until-caught-up"}, extra...)...)
	if !b.wait(timeout) {
		b.kill(t)
		t.Fatalf("bridge %s: still running %v after it was asked to finish; killed it", name, timeout)
	}
	added := s.deadLetterCount(t) - before
	want := 0
	if added > 0 {
		want = 3
	}
	b.requireExit(t, want, time.Second) // it has ended: this only reads the status
	t.Logf("bridge %s: %d dead letters added, exit status %d", name, added, want)
	return time.Since(b.started)
}

// deadLetterCount counts kafka2pg.dead_letters of the scenario's group (0
// before the schema exists).
func (s *scenario) deadLetterCount(t testing.TB) int64 {
	t.Helper()
	var n int64
	err := s.db.QueryRow(t.Context(), `SELECT count(*) FROM kafka2pg.dead_letters WHERE consumer_group = $1`, s.group).Scan(&n)
	if err != nil && !notMigratedYet(err) {
		t.Fatalf("count the dead letters: %v", err)
	}
	return n
}

// produce produces n ledgered records synchronously.
func (s *scenario) produce(t testing.TB, n int) {
	t.Helper()
	const chunk = 5000
	for n > 0 {
		k := min(n, chunk)
		rs, ids := s.ledger.newRecords(s.topic, k)
		s.kafka.Produce(t, rs...)
		if err := s.ledger.record(rs, ids); err != nil {
			t.Fatal(err)
		}
		n -= k
	}
}

// requireAllPartitionsHaveData fails the test when a partition received no
// records: the scenario would not test that partition.
func (s *scenario) requireAllPartitionsHaveData(t testing.TB, ends map[int32]int64) {
	t.Helper()
	for p := range s.partitions {
		if ends[p] == 0 {
			t.Fatalf("test setup: partition %d of %s got no records (end offsets %v)", p, s.topic, ends)
		}
	}
}

// verifyFinalState is the end of every scenario, after the bridges are gone:
// the table holds each produced record exactly once, kafka2pg.offsets holds
// the end offsets, and so do the group's Kafka offsets. It returns the end
// offsets.
func (s *scenario) verifyFinalState(t testing.TB) map[int32]int64 {
	t.Helper()
	ends := s.kafka.EndOffsets(t, s.topic)
	s.requireAllPartitionsHaveData(t, ends)
	assertExactlyOnce(t, s.db, s.table, s.topic, ends)
	assertMatchesLedger(t, s.db, s.table, s.topic, s.ledger, ends)
	assertDurableOffsets(t, s.db, s.group, s.topic, ends)
	assertGroupOffsets(t, s.kafka, s.group, s.topic, ends)
	return ends
}

// durableOffsets reads kafka2pg.offsets for the scenario's group and topic:
// next_offset by partition, NULL ones left out. Before the bridge created the
// kafka2pg schema it returns an empty map.
func (s *scenario) durableOffsets(t testing.TB) map[int32]int64 {
	t.Helper()
	got, err := queryDurableOffsets(t, s.db, s.group, s.topic)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// waitProgress waits until every partition's durable next_offset is beyond
// the one in from (absent: beyond 0), failing early if one of the bridges
// that should be doing the work ends. It returns the offsets it saw.
func (s *scenario) waitProgress(t testing.TB, from map[int32]int64, timeout time.Duration, alive ...*bridge) map[int32]int64 {
	t.Helper()
	var got map[int32]int64
	pollUntil(t, timeout, "every partition's next_offset to pass "+formatOffsets(from), func() (bool, string) {
		requireRunning(t, alive...)
		var err error
		got, err = queryDurableOffsets(t, s.db, s.group, s.topic)
		if err != nil {
			return false, err.Error()
		}
		var behind []int32
		for p := range s.partitions {
			if got[p] <= from[p] {
				behind = append(behind, p)
			}
		}
		return len(behind) == 0, fmt.Sprintf("partitions %v not past it yet; next_offset %s", behind, formatOffsets(got))
	})
	return got
}

// logOffsetsTable logs the scenario's rows of kafka2pg.offsets, for
// diagnosing a failure. It runs in cleanup, after t.Context is canceled.
func (s *scenario) logOffsetsTable(t testing.TB) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(t.Context()), 10*time.Second)
	defer cancel()
	const q = `SELECT "partition", next_offset, epoch, leader_epoch, updated_at FROM kafka2pg.offsets
WHERE consumer_group = $1 AND topic = $2 ORDER BY "partition"`
	rows, err := s.db.Query(ctx, q, s.group, s.topic)
	if err != nil {
		t.Logf("kafka2pg.offsets at the end: %s: %v", q, err)
		return
	}
	var lines []string
	for rows.Next() {
		vals, err := rows.Values()
		if err != nil {
			t.Logf("kafka2pg.offsets at the end: %s: %v", q, err)
			return
		}
		lines = append(lines, strings.Trim(fmt.Sprint(vals), "[]"))
	}
	if err := rows.Err(); err != nil {
		t.Logf("kafka2pg.offsets at the end: %s: %v", q, err)
		return
	}
	t.Logf("kafka2pg.offsets at the end (partition, next_offset, epoch, leader_epoch, updated_at):\n  %s", strings.Join(lines, "\n  "))
}

// runFor lets the bridges work under the producer's load for at least d,
// failing early if one of them ends, and then checks that every partition
// advanced past where it was when the window began.
func (s *scenario) runFor(t testing.TB, d time.Duration, alive ...*bridge) map[int32]int64 {
	t.Helper()
	from := s.durableOffsets(t)
	until := time.Now().Add(d)
	for time.Now().Before(until) {
		requireRunning(t, alive...)
		time.Sleep(100 * time.Millisecond)
	}
	return s.waitProgress(t, from, 30*time.Second, alive...)
}

// totalDurable sums next_offset over all partitions of the scenario.
func totalDurable(offsets map[int32]int64) int64 {
	var sum int64
	for _, o := range offsets {
		sum += o
	}
	return sum
}

// queryDurableOffsets reads next_offset by partition from kafka2pg.offsets.
// An absent kafka2pg schema (the bridge has not migrated yet) reads as no
// offsets.
func queryDurableOffsets(t testing.TB, db *pgxpool.Pool, group, topic string) (map[int32]int64, error) {
	const q = `SELECT "partition", next_offset FROM kafka2pg.offsets
WHERE consumer_group = $1 AND topic = $2 AND next_offset IS NOT NULL`
	rows, err := db.Query(t.Context(), q, group, topic)
	if notMigratedYet(err) {
		return map[int32]int64{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("query %q: %w", q, err)
	}
	defer rows.Close()
	got := make(map[int32]int64)
	for rows.Next() {
		var p int32
		var next int64
		if err := rows.Scan(&p, &next); err != nil {
			return nil, fmt.Errorf("scan %q: %w", q, err)
		}
		got[p] = next
	}
	if err := rows.Err(); notMigratedYet(err) {
		return map[int32]int64{}, nil
	} else if err != nil {
		return nil, fmt.Errorf("query %q: %w", q, err)
	}
	return got, nil
}

// notMigratedYet reports whether err says the kafka2pg schema or table does
// not exist (SQLSTATE 3F000 invalid_schema_name, 42P01 undefined_table).
func notMigratedYet(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && (pgErr.Code == "42P01" || pgErr.Code == "3F000")
}

// parallel lets t run beside the package's other parallel tests. A test
// calls it first thing when it owns everything it touches: its database
// (pgtest.URL), its topics and group (random names; on a shared real broker
// too), its child processes and ports, and it asserts no wall-clock or
// memory bound that another test's load could break. Tests that bound how
// soon something happens (readiness, exit after SIGTERM, write gaps), the
// peak RSS of a bridge, or that hold a cluster-wide resource stay serial:
// Go runs the serial tests first, each alone in this package. The full
// fault matrix wants exclusive use of its servers (make faults), so with
// KAFKA2PG_FAULTS=1 every test stays serial.
func parallel(t *testing.T) {
	t.Helper()
	if fullFaults() {
		return
	}
	t.Parallel()
}

// pollUntil polls with a deadline (kafkatest.Poll): it calls check every
// 50ms until done, failing with what and the last status on timeout.
var pollUntil = kafkatest.Poll

// randomDuration returns a uniformly random duration in [lo, hi).
func randomDuration(lo, hi time.Duration) time.Duration {
	return lo + rand.N(hi-lo)
}

// formatOffsets prints a partition → offset map in partition order.
func formatOffsets(m map[int32]int64) string {
	var b strings.Builder
	b.WriteByte('{')
	for i, p := range slices.Sorted(maps.Keys(m)) {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%d:%d", p, m[p])
	}
	b.WriteByte('}')
	return b.String()
}
