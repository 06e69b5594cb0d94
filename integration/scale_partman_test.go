package integration_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafka2pg/kafka2pg/internal/testreport"
)

// TestPgPartmanManagedParent writes through kafka2pg into a parent table
// whose daily partitions pg_partman created (partman.create_parent), and
// checks that every record landed once, each in the child of its day, none
// in the default partition. Skipped, with the package to install, when the
// server lacks the pg_partman extension (.ci/run installs it).
func TestPgPartmanManagedParent(t *testing.T) {
	parallel(t)
	s := newScenario(t, 3)
	var version string
	err := s.db.QueryRow(t.Context(), `SELECT default_version FROM pg_available_extensions WHERE name = 'pg_partman'`).Scan(&version)
	if err != nil {
		t.Skipf("the pg_partman extension is not installed on this PostgreSQL (apt-get install postgresql-<version>-partman; .ci/run does): %v", err)
	}
	// pg_partman 4 calls native partitioning "native"; 5 calls it "range".
	kind := "native"
	if !strings.HasPrefix(version, "4.") {
		kind = "range"
	}
	today := time.Now().UTC().Truncate(24 * time.Hour)
	ddl := []string{
		`CREATE SCHEMA partman`,
		`CREATE EXTENSION pg_partman SCHEMA partman`,
		fmt.Sprintf(`CREATE TABLE %s (
    id bigint NOT NULL,
    created_at timestamptz NOT NULL,
    amount numeric(12,2),
    kafka_partition integer NOT NULL,
    kafka_offset bigint NOT NULL
) PARTITION BY RANGE (created_at)`, tableName(s.table)),
		fmt.Sprintf(`SELECT partman.create_parent(p_parent_table => 'public.%s', p_control => 'created_at',
    p_type => '%s', p_interval => '1 day', p_premake => 4, p_start_partition => '%s')`,
			s.table, kind, today.AddDate(0, 0, -3).Format(time.RFC3339)),
	}
	for _, q := range ddl {
		if _, err := s.db.Exec(t.Context(), q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	config := writeSinksConfig(t, fmt.Sprintf(`  - topic: %s
    table: %s
    create: false
    columns:
      - {name: id, path: id, type: bigint, not_null: true}
      - {name: created_at, path: created_at, type: timestamptz, not_null: true}
      - {name: amount, path: amount, type: "numeric(12,2)"}
    metadata: {partition: kafka_partition, offset: kafka_offset}
`, s.topic, s.table))
	// Records from three days ago to three days ahead, every hour: all in
	// children pg_partman made (start three days back, four premade).
	var rs []*kgo.Record
	for h := range 6 * 24 {
		at := today.AddDate(0, 0, -3).Add(time.Duration(h)*time.Hour + 17*time.Minute)
		rs = append(rs, &kgo.Record{Topic: s.topic, Key: fmt.Appendf(nil, "k%d", h),
			Value: fmt.Appendf(nil, `{"id":%d,"created_at":"%s","amount":%d.25}`, h, at.Format(time.RFC3339), h)})
	}
	s.kafka.Produce(t, rs...)
	ends := s.kafka.EndOffsets(t, s.topic)
	s.requireAllPartitionsHaveData(t, ends)
	b := startBridge(t, "partman", s.configArgs(config, "--until-caught-up", "--batch-max-rows", "50")...)
	b.requireExitZero(t, 2*time.Minute)

	q := fmt.Sprintf(`SELECT count(*), count(DISTINCT (kafka_partition, kafka_offset)), count(DISTINCT tableoid),
       count(*) FILTER (WHERE tableoid::regclass::text LIKE '%%default'),
       (SELECT count(*) FROM (SELECT tableoid FROM %[1]s GROUP BY tableoid
                              HAVING count(DISTINCT date_trunc('day', created_at)) > 1) x)
FROM %[1]s`, tableName(s.table))
	var rows, distinct, children, inDefault, mixed int64
	if err := s.db.QueryRow(t.Context(), q).Scan(&rows, &distinct, &children, &inDefault, &mixed); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	t.Logf("pg_partman %s: %d rows, %d distinct positions, in %d children, %d in the default partition, %d children holding more than one day",
		version, rows, distinct, children, inDefault, mixed)
	if rows != int64(len(rs)) || distinct != int64(len(rs)) {
		t.Errorf("%s\n  = %d rows, %d distinct positions; want %d, %d", q, rows, distinct, len(rs), len(rs))
	}
	if children < 6 || inDefault != 0 || mixed != 0 {
		t.Errorf("%s\n  = %d children used, %d rows in the default partition, %d children with several days; want >= 6, 0, 0",
			q, children, inDefault, mixed)
	}
	assertDurableOffsets(t, s.db, s.group, s.topic, ends)
	// Maintenance keeps premaking partitions with the bridge's rows in place.
	if _, err := s.db.Exec(t.Context(), `SELECT partman.run_maintenance()`); err != nil {
		t.Errorf("SELECT partman.run_maintenance(): %v", err)
	}
	reportScale(t, testreport.ScaleEntry{Kind: testreport.KindPartman, Broker: brokerName(s.kafka),
		Note: fmt.Sprintf("pg_partman %s made daily partitions of the parent (`create_parent(..., p_interval => '1 day', p_premake => 4)`); kafka2pg wrote %d records spread over six days into it with one binary COPY per batch: %d rows, each once, in %d children, each row in the child of its day, none in the default partition; `run_maintenance()` ran afterwards.",
			version, len(rs), rows, children)})
}
