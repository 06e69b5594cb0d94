package integration_test

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestRewindUnderARunningBridgeKeepsEveryRecordOnce moves every partition
// of two topics back to a middle offset with offsets reset --yes while a
// bridge runs and a producer feeds one of them: the zero-config table and
// a typed table with partition and offset columns. The reset deletes, in
// its transaction, the rows the records read again write; afterwards each
// (partition, offset) is there exactly once, no gap. A typed append table
// without those columns and without a unique key is refused without
// --allow-duplicates. It measures how long the bridge takes to re-claim.
func TestRewindUnderARunningBridgeKeepsEveryRecordOnce(t *testing.T) {
	s := newScenario(t, 3)
	const n, rewindTo = 3000, 500
	typedTopic := s.kafka.CreateTopic(t, "kafka2pg-it-typed", 3)
	bareTopic := s.kafka.CreateTopic(t, "kafka2pg-it-bare", 3)
	typedTable, bareTable := s.table+"_typed", s.table+"_bare"
	s.produce(t, n)
	for _, topic := range []string{typedTopic, bareTopic} {
		produceIDs(t, s, topic, n)
	}
	config := writeConfig(t, fmt.Sprintf(`kafka-brokers: [%s]
kafka-group: %s
metrics-addr: ""
sinks:
  - topic: %s
    table: %s
  - topic: %s
    table: %s
    columns:
      - {name: id, path: id, type: bigint, not_null: true}
    metadata: {topic: kafka_topic, partition: kafka_partition, offset: kafka_offset}
  - topic: %s
    table: %s
    columns:
      - {name: id, path: id, type: bigint, not_null: true}
`, s.kafka.Brokers(), s.group, s.topic, s.table, typedTopic, typedTable, bareTopic, bareTable))
	// The group flags left at their defaults: the re-claim times below are
	// those of a bridge run as documented.
	b := startBridge(t, "running", "run", "--config", config, "--pg-url", s.pgURL, "--kafka-fetch-max-wait", "250ms")
	topics := []string{s.topic, typedTopic, bareTopic}
	caughtUp := func(what string) {
		t.Helper()
		pollUntil(t, 2*time.Minute, what, func() (bool, string) {
			requireRunning(t, b)
			var behind []string
			for _, topic := range topics {
				ends := s.kafka.EndOffsets(t, topic)
				got, err := queryDurableOffsets(t, s.db, s.group, topic)
				if err != nil {
					return false, err.Error()
				}
				if !maps.Equal(got, ends) {
					behind = append(behind, fmt.Sprintf("%s %s of %s", topic, formatOffsets(got), formatOffsets(ends)))
				}
			}
			return len(behind) == 0, strings.Join(behind, "; ")
		})
	}
	caughtUp("the bridge to catch up")
	reset := func(extra ...string) (int, string) {
		t.Helper()
		return cli(t, append([]string{"offsets", "reset", "--config", config, "--pg-url", s.pgURL, "--to", fmt.Sprint(rewindTo)}, extra...)...)
	}

	// The table that cannot tell which record wrote a row is refused.
	code, out := reset("--topic", bareTopic)
	t.Logf("reset of the bare typed table (dry run): exit %d\n%s", code, out)
	if code != 1 || !strings.Contains(out, "REFUSED") || !strings.Contains(out, "metadata: {partition: kafka_partition, offset: kafka_offset}") {
		t.Errorf("reset of %s: exit %d, want 1, REFUSED and how to add the columns", bareTable, code)
	}
	bareBefore := s.kafka.EndOffsets(t, bareTopic)
	if code, out := reset("--topic", bareTopic, "--yes"); code != 1 || !maps.Equal(mustDurable(t, s, bareTopic), bareBefore) {
		t.Errorf("reset --yes of %s: exit %d, offsets %s; want 1 and nothing moved\n%s", bareTable, code, formatOffsets(mustDurable(t, s, bareTopic)), out)
	}
	if code, out := reset("--topic", bareTopic, "--allow-duplicates"); code != 0 || !strings.Contains(out, "none (--allow-duplicates)") {
		t.Errorf("reset of %s --allow-duplicates (dry run): exit %d, want 0\n%s", bareTable, code, out)
	}

	// Under load: a producer feeds the zero-config topic while the two
	// topics move back. The dry run exits 0 and says what it would delete.
	prod := s.startProducer(t, 50, 20*time.Millisecond, 2000)
	code, out = reset("--topic", s.topic, "--topic", typedTopic)
	t.Logf("reset (dry run):\n%s", out)
	if code != 0 || !strings.Contains(out, "ROWS TO DELETE") || !strings.Contains(out, "run again with --yes") {
		t.Errorf("reset dry run: exit %d, want 0 with the rows to delete", code)
	}
	epochs := func() map[string]int64 {
		t.Helper()
		rows, err := s.db.Query(t.Context(), `SELECT topic || '/' || partition, epoch FROM kafka2pg.offsets WHERE consumer_group = $1 AND topic = ANY($2)`,
			s.group, []string{s.topic, typedTopic})
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		out := map[string]int64{}
		for rows.Next() {
			var k string
			var e int64
			if err := rows.Scan(&k, &e); err != nil {
				t.Fatal(err)
			}
			out[k] = e
		}
		return out
	}
	before := epochs()
	code, out = reset("--topic", s.topic, "--topic", typedTopic, "--yes")
	resetAt := time.Now()
	t.Logf("reset --yes:\n%s", out)
	if code != 0 || !strings.Contains(out, "6 partition(s) moved") || !strings.Contains(out, "row(s) and 0 dead letter(s)") {
		t.Fatalf("reset --yes: exit %d, want 0 and 6 partitions moved with their rows deleted", code)
	}
	// The reset bumped each epoch once; the bridge's claim bumps it again.
	reclaimed := map[string]time.Duration{}
	pollUntil(t, time.Minute, "the bridge to re-claim every partition moved", func() (bool, string) {
		requireRunning(t, b)
		now := epochs()
		for k, e := range now {
			if _, ok := reclaimed[k]; !ok && e >= before[k]+2 {
				reclaimed[k] = time.Since(resetAt)
			}
		}
		return len(reclaimed) == len(before), fmt.Sprintf("re-claimed %v of %d", reclaimed, len(before))
	})
	// A fenced partition waits three heartbeats (3 s each by default)
	// before it claims again; an idle one first learns of the fence
	// within --fence-check-interval (5 s).
	const reclaimBound = 5*time.Second + 3*3*time.Second + 5*time.Second
	for _, k := range slices.Sorted(maps.Keys(reclaimed)) {
		t.Logf("re-claimed %s %v after the reset returned", k, reclaimed[k].Round(time.Millisecond))
		if reclaimed[k] > reclaimBound {
			t.Errorf("%s was re-claimed %v after the reset, over %v", k, reclaimed[k].Round(time.Millisecond), reclaimBound)
		}
	}
	prod.stopAndCheck(t)
	caughtUp("the bridge to catch up again")
	b.signal(t, syscall.SIGTERM)
	b.requireExitZero(t, time.Minute)

	zeroEnds := s.kafka.EndOffsets(t, s.topic)
	assertExactlyOnce(t, s.db, s.table, s.topic, zeroEnds)
	assertMatchesLedger(t, s.db, s.table, s.topic, s.ledger, zeroEnds)
	assertExactlyOnce(t, s.db, typedTable, typedTopic, s.kafka.EndOffsets(t, typedTopic))
	var letters int64
	if err := s.db.QueryRow(t.Context(), `SELECT count(*) FROM kafka2pg.dead_letters`).Scan(&letters); err != nil || letters != 0 {
		t.Errorf("%d dead letters (%v), want none: a record read again conflicted with a row the reset left", letters, err)
	}
}

// mustDurable is queryDurableOffsets that fails the test on error.
func mustDurable(t testing.TB, s *scenario, topic string) map[int32]int64 {
	t.Helper()
	got, err := queryDurableOffsets(t, s.db, s.group, topic)
	if err != nil {
		t.Fatal(err)
	}
	return got
}
