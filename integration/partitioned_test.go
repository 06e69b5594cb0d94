package integration_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestUpsertIntoATableKafka2pgPartitions runs the binary with a sink whose
// partition_by has kafka2pg create its table partitioned by month: each
// key's last record lands once, in the partition of its month, the three
// made ahead and one that a row fourteen months back needed. check first
// refuses the same sink with a key that lacks the partition column (exit
// 2), as run would.
func TestUpsertIntoATableKafka2pgPartitions(t *testing.T) {
	parallel(t)
	s := newScenario(t, 3)
	sink := fmt.Sprintf(`  - topic: %s
    table: %s
    mode: upsert
    key: [id, created_at]
    partition_by: {column: created_at, interval: month, premake: 2}
    columns:
      - {name: id, path: id, type: bigint, not_null: true}
      - {name: created_at, path: created_at, type: timestamptz, not_null: true}
      - {name: version, path: version, type: integer}
`, s.topic, s.table)
	config := writeSinksConfig(t, sink)
	keyless := filepath.Join(t.TempDir(), "keyless.yaml")
	if err := os.WriteFile(keyless, []byte("sinks:\n"+strings.Replace(sink, "key: [id, created_at]", "key: [id]", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out := cli(t, "check", "--config", keyless, "--kafka-brokers", s.kafka.Brokers(), "--kafka-group", s.group, "--pg-url", s.pgURL)
	if want := "key [id] lacks created_at, the partition_by column"; code != 2 || !strings.Contains(out, want) {
		t.Errorf("check of a key without the partition column exited %d, want 2 with %q; output:\n%s", code, want, out)
	}

	const keys, versions = 60, 3
	start := time.Now().UTC()
	start = time.Date(start.Year(), start.Month(), 1, 0, 0, 0, 0, time.UTC)
	var rs []*kgo.Record
	for v := 1; v <= versions; v++ {
		for k := range keys {
			at := start.AddDate(0, []int{0, 1, 2, -14}[k%4], 0).Add(time.Duration(k) * time.Hour)
			rs = append(rs, &kgo.Record{Topic: s.topic, Key: fmt.Appendf(nil, "k%d", k),
				Value: fmt.Appendf(nil, `{"id":%d,"created_at":"%s","version":%d}`, k, at.Format(time.RFC3339), v)})
		}
	}
	s.kafka.Produce(t, rs...)
	ends := s.kafka.EndOffsets(t, s.topic)
	s.requireAllPartitionsHaveData(t, ends)
	b := startBridge(t, "partitioned-upsert", s.configArgs(config, "--until-caught-up", "--batch-max-rows", "40")...)
	b.requireExitZero(t, 2*time.Minute)

	q := fmt.Sprintf(`SELECT count(*), count(DISTINCT id), min(version), count(DISTINCT tableoid),
       count(*) FILTER (WHERE tableoid::regclass::text <> '%[2]s_p' || to_char(created_at AT TIME ZONE 'UTC', 'YYYYMM')),
       (SELECT count(*) FROM kafka2pg.dead_letters WHERE consumer_group = $1)
FROM %[1]s`, tableName(s.table), s.table)
	var rows, ids, minVersion, parts, misplaced, dead int64
	if err := s.db.QueryRow(t.Context(), q, s.group).Scan(&rows, &ids, &minVersion, &parts, &misplaced, &dead); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	t.Logf("%d records of %d keys: %d rows, %d keys, lowest version %d, in %d partitions, %d outside their month's, %d dead letters",
		len(rs), keys, rows, ids, minVersion, parts, misplaced, dead)
	if rows != keys || ids != keys || minVersion != versions || parts != 4 || misplaced != 0 || dead != 0 {
		t.Errorf("%s\n  = %d rows, %d keys, lowest version %d, %d partitions, %d misplaced, %d dead letters; want %d, %d, %d, 4, 0, 0",
			q, rows, ids, minVersion, parts, misplaced, dead, keys, keys, versions)
	}
	assertDurableOffsets(t, s.db, s.group, s.topic, ends)
}

// TestAppendIntoATableKafka2pgPartitionsByDay appends records of ten days,
// eight of them past the partitions made ahead, from three partitions at
// once (batches of several partitions share a transaction): each record
// lands once, in its day's partition.
func TestAppendIntoATableKafka2pgPartitionsByDay(t *testing.T) {
	parallel(t)
	s := newScenario(t, 3)
	config := writeSinksConfig(t, fmt.Sprintf(`  - topic: %s
    table: %s
    partition_by: {column: at, interval: day, premake: 1}
    columns:
      - {name: at, path: at, type: timestamptz, not_null: true}
      - {name: n, path: n, type: integer}
    metadata: {partition: kafka_partition, offset: kafka_offset}
`, s.topic, s.table))
	today := time.Now().UTC().Truncate(24 * time.Hour)
	var rs []*kgo.Record
	for n := range 600 {
		at := today.AddDate(0, 0, n%10).Add(time.Duration(n) * time.Minute % (24 * time.Hour))
		rs = append(rs, &kgo.Record{Topic: s.topic, Key: fmt.Appendf(nil, "k%d", n),
			Value: fmt.Appendf(nil, `{"at":"%s","n":%d}`, at.Format(time.RFC3339), n)})
	}
	s.kafka.Produce(t, rs...)
	ends := s.kafka.EndOffsets(t, s.topic)
	s.requireAllPartitionsHaveData(t, ends)
	b := startBridge(t, "partitioned-append", s.configArgs(config, "--until-caught-up", "--batch-max-rows", "50")...)
	b.requireExitZero(t, 2*time.Minute)

	q := fmt.Sprintf(`SELECT count(*), count(DISTINCT (kafka_partition, kafka_offset)), count(DISTINCT tableoid),
       count(*) FILTER (WHERE tableoid::regclass::text <> '%[2]s_p' || to_char(at AT TIME ZONE 'UTC', 'YYYYMMDD')),
       (SELECT count(*) FROM kafka2pg.dead_letters WHERE consumer_group = $1)
FROM %[1]s`, tableName(s.table), s.table)
	var rows, distinct, parts, misplaced, dead int64
	if err := s.db.QueryRow(t.Context(), q, s.group).Scan(&rows, &distinct, &parts, &misplaced, &dead); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	t.Logf("%d records: %d rows, %d distinct positions, in %d partitions, %d outside their day's, %d dead letters", len(rs), rows, distinct, parts, misplaced, dead)
	if rows != int64(len(rs)) || distinct != rows || parts != 10 || misplaced != 0 || dead != 0 {
		t.Errorf("%s\n  = %d rows, %d distinct positions, %d partitions, %d misplaced, %d dead letters; want %d, %d, 10, 0, 0",
			q, rows, distinct, parts, misplaced, dead, len(rs), len(rs))
	}
	assertDurableOffsets(t, s.db, s.group, s.topic, ends)
}
