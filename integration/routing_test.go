package integration_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestRoutingByContentUnderAKillLoopKeepsExactlyOnce routes 3 topics into
// 20 tables by a field of the value (table: r_${value.kind}) while the
// bridge is SIGKILLed again and again mid-stream, with small batches so
// that a kill often lands inside a transaction that spans several tables.
// A last run catches up; then every record is in exactly one row of the
// table its kind names, by SQL over the union of the 20 tables.
func TestRoutingByContentUnderAKillLoopKeepsExactlyOnce(t *testing.T) {
	parallel(t)
	const (
		topics     = 3
		partitions = 2
		tables     = 20
		kills      = 3
		limit      = 6000
	)
	s, names, args := routingScenario(t, "route", topics, partitions, "table: r_${value.kind}\n")

	// Record n of the producer goes to topic n%3 with kind n%20: each
	// topic fills every table.
	next := 0
	prod := startProducing(t, 30, 100*time.Millisecond, limit, func(ctx context.Context, n int) error {
		rs := make([]*kgo.Record, n)
		for i := range rs {
			rs[i] = &kgo.Record{Topic: names[next%topics], Key: fmt.Appendf(nil, "k%d", next),
				Value: fmt.Appendf(nil, `{"kind":"k%02d","n":%d}`, next%tables, next)}
			next++
		}
		return s.kafka.TryProduce(ctx, rs...)
	})
	killLoop(t, s, "route", args, kills, prod)
	produced := prod.stopAndCheck(t)
	final := startBridge(t, "route-final", append(args, "--until-caught-up")...)
	final.requireExitZero(t, 2*time.Minute)

	var union []string
	for k := range tables {
		name := fmt.Sprintf("r_k%02d", k)
		union = append(union, fmt.Sprintf("SELECT '%s' AS tbl, kafka_topic, kafka_partition, kafka_offset, value FROM %s",
			name, tableName(name)))
	}
	check := `WITH routed AS (` + strings.Join(union, "\nUNION ALL ") + `)
SELECT kafka_topic, kafka_partition, count(*), count(DISTINCT kafka_offset), min(kafka_offset), max(kafka_offset),
       count(*) FILTER (WHERE tbl <> 'r_' || (value->>'kind'))
FROM routed GROUP BY kafka_topic, kafka_partition ORDER BY 1, 2`
	type stats struct{ count, distinct, min, max, misrouted int64 }
	got := map[string]stats{}
	rows, err := s.db.Query(t.Context(), check)
	if err != nil {
		t.Fatalf("exactly-once check: %s: %v", check, err)
	}
	for rows.Next() {
		var topic string
		var p int32
		var st stats
		if err := rows.Scan(&topic, &p, &st.count, &st.distinct, &st.min, &st.max, &st.misrouted); err != nil {
			t.Fatalf("exactly-once check: %v", err)
		}
		got[fmt.Sprintf("%s/%d", topic, p)] = st
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("exactly-once check: %s: %v", check, err)
	}
	var total int64
	for _, topic := range names {
		for p, end := range s.kafka.EndOffsets(t, topic) {
			total += end
			want := stats{end, end, 0, end - 1, 0}
			if st := got[fmt.Sprintf("%s/%d", topic, p)]; st != want {
				t.Errorf("exactly-once check of %s/%d (end offset %d): count %d, distinct %d, min %d, max %d, misrouted %d; want %d, %d, 0, %d, 0\n  query: %s",
					topic, p, end, st.count, st.distinct, st.min, st.max, st.misrouted, end, end, end-1, check)
			}
		}
	}
	if total != produced {
		t.Errorf("the topics' end offsets sum to %d, and %d records were produced", total, produced)
	}
	var letters int64
	if err := s.db.QueryRow(t.Context(), `SELECT count(*) FROM kafka2pg.dead_letters WHERE consumer_group = $1`, s.group).Scan(&letters); err != nil || letters != 0 {
		t.Errorf("dead letters: %d (%v), want 0", letters, err)
	}
	t.Logf("%d kills; %d records of %d topics in %d tables, each exactly once", kills, produced, topics, tables)
}

// routingScenario is a scenario (its Kafka, database and group; its own
// topic stays empty) with topics topics of partitions partitions named
// <name>-<table suffix>-<i>, and the arguments of a bridge whose one sink
// reads them all with small batches, its YAML after topic_regex given by
// sink (indented by four spaces).
func routingScenario(t *testing.T, name string, topics int, partitions int32, sink string) (*scenario, []string, []string) {
	t.Helper()
	s := newScenario(t, 1)
	prefix := name + "-" + s.table[3:]
	var names []string
	for i := range topics {
		names = append(names, s.kafka.CreateTopic(t, fmt.Sprintf("%s-%d", prefix, i), partitions))
	}
	config := fmt.Sprintf(`kafka-brokers: [%s]
kafka-group: %s
pg-url: %s
metrics-addr: ""
batch-max-rows: 40
batch-max-wait: 50ms
sinks:
  - topic_regex: '%s-.*'
    %s`, s.kafka.Brokers(), s.group, s.pgURL, prefix, sink)
	path := filepath.Join(t.TempDir(), "kafka2pg.yaml")
	if err := os.WriteFile(path, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	return s, names, append([]string{"run", "--config", path}, fastGroupFlags...)
}

// killLoop starts the bridge with args kills times, each time waiting
// until it commits a batch, then SIGKILLs it at a random moment.
func killLoop(t *testing.T, s *scenario, name string, args []string, kills int, prod *producer) {
	t.Helper()
	durable := func() int64 {
		var n int64
		err := s.db.QueryRow(t.Context(), `SELECT coalesce(sum(next_offset), 0) FROM kafka2pg.offsets WHERE consumer_group = $1`, s.group).Scan(&n)
		if err != nil && !notMigratedYet(err) {
			t.Fatalf("read the durable offsets: %v", err)
		}
		return n
	}
	for i := range kills {
		before := durable()
		b := startBridge(t, fmt.Sprintf("%s-%d", name, i), args...)
		pollUntil(t, 45*time.Second, "bridge "+b.name+" to commit a batch", func() (bool, string) {
			requireRunning(t, b)
			now := durable()
			return b.joined() && now > before, fmt.Sprintf("sum of next_offset %d, %d when it started; joined %v", now, before, b.joined())
		})
		time.Sleep(randomDuration(50*time.Millisecond, 500*time.Millisecond)) // the chaos schedule, not a wait for a condition
		requireRunning(t, b)
		if !b.kill(t) {
			t.Fatalf("bridge %s ended on its own (%s) before it could be killed", b.name, b.status())
		}
		t.Logf("killed %s %v after start; sum of next_offset %d -> %d, %d produced", b.name,
			time.Since(b.started).Round(time.Millisecond), before, durable(), prod.count.Load())
	}
}

// TestRoutedUpsertsUnderAKillLoopKeepEachKeysLastRecord routes upserts of
// 200 keys into 20 tables by a field of the value, each key always to the
// same table and partition, while the bridge is SIGKILLed mid-stream with
// small batches that span several tables. A last run catches up; then
// each key has one row, in the table its kind names, holding its last
// record, and every offset is durable.
func TestRoutedUpsertsUnderAKillLoopKeepEachKeysLastRecord(t *testing.T) {
	parallel(t)
	const (
		topics     = 3
		partitions = 2
		tables     = 20
		keys       = 200
		kills      = 3
		limit      = 6000
	)
	s, names, args := routingScenario(t, "upsroute", topics, partitions, `table: u_${value.kind}
    mode: upsert
    key: [id]
    columns:
      - {name: id, type: bigint, from: key, path: id, not_null: true}
      - {name: kind, type: text}
      - {name: n, type: bigint}
`)

	// Record n is of key n%200, whose topic (key%3), partition (by the
	// key) and table (key%20) never change, so its records keep their order.
	next := 0
	prod := startProducing(t, 30, 100*time.Millisecond, limit, func(ctx context.Context, n int) error {
		rs := make([]*kgo.Record, n)
		for i := range rs {
			id := next % keys
			rs[i] = &kgo.Record{Topic: names[id%topics], Key: fmt.Appendf(nil, `{"id":%d}`, id),
				Value: fmt.Appendf(nil, `{"kind":"k%02d","n":%d}`, id%tables, next)}
			next++
		}
		return s.kafka.TryProduce(ctx, rs...)
	})
	killLoop(t, s, "upsroute", args, kills, prod)
	produced := prod.stopAndCheck(t)
	final := startBridge(t, "upsroute-final", append(args, "--until-caught-up")...)
	final.requireExitZero(t, 2*time.Minute)

	var union []string
	for k := range tables {
		name := fmt.Sprintf("u_k%02d", k)
		union = append(union, fmt.Sprintf("SELECT '%s' AS tbl, id, kind, n FROM %s", name, tableName(name)))
	}
	// The last record of key id is the largest n < produced with n%200 = id.
	check := `WITH routed AS (` + strings.Join(union, "\nUNION ALL ") + `),
want AS (SELECT id, max(n) AS n FROM generate_series(0, $1::bigint - 1) AS n, LATERAL (SELECT n % ` + fmt.Sprint(keys) + ` AS id) k GROUP BY id)
SELECT (SELECT count(*) FROM routed), (SELECT count(DISTINCT id) FROM routed),
       (SELECT count(*) FROM routed WHERE tbl <> 'u_' || kind OR kind <> 'k' || lpad((id % ` + fmt.Sprint(tables) + `)::text, 2, '0')),
       (SELECT count(*) FROM want LEFT JOIN routed r USING (id) WHERE r.n IS DISTINCT FROM want.n)`
	var rows, distinct, misrouted, stale int64
	if err := s.db.QueryRow(t.Context(), check, produced).Scan(&rows, &distinct, &misrouted, &stale); err != nil {
		t.Fatalf("check: %s: %v", check, err)
	}
	if want := min(produced, keys); rows != want || distinct != want || misrouted != 0 || stale != 0 {
		t.Errorf("rows %d, distinct keys %d, misrouted %d, keys whose row is not their last record %d; want %d, %d, 0, 0\n  query: %s",
			rows, distinct, misrouted, stale, want, want, check)
	}
	var total, durable int64
	for _, topic := range names {
		for _, end := range s.kafka.EndOffsets(t, topic) {
			total += end
		}
	}
	if err := s.db.QueryRow(t.Context(), `SELECT coalesce(sum(next_offset), 0) FROM kafka2pg.offsets WHERE consumer_group = $1`, s.group).Scan(&durable); err != nil || durable != total {
		t.Errorf("durable offsets sum to %d (%v), the topics' end offsets to %d", durable, err, total)
	}
	if total != produced {
		t.Errorf("the topics' end offsets sum to %d, and %d records were produced", total, produced)
	}
	t.Logf("%d kills; %d upserts of %d keys in %d tables, each key's last record in its table", kills, produced, keys, tables)
}
