package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestPeersSmokeFlink runs kafka2pg and Flink's exactly-once JDBC sink
// (parallelism 2) on a few records, append and upsert with updates, then a
// short latency run of each, against a real broker and the test Postgres
// (with max_prepared_transactions > 0, as scripts/pg-up.sh sets it); run
// fails when a table does not hold what the records make. The Maven build
// of the job (about 45 s, once; the jar is kept in .tmp/flink) and Flink's
// start-up make it slower than the Debezium smoke, so it runs only with
// KAFKA2PG_TEST_FLINK=1 (make bench-peers-flink-smoke).
func TestPeersSmokeFlink(t *testing.T) {
	if os.Getenv("KAFKA2PG_TEST_FLINK") != "1" {
		t.Skip("set KAFKA2PG_TEST_FLINK=1 to run the Flink XA bench-peers smoke (make bench-peers-flink-smoke): it builds a Flink job with Maven")
	}
	brokers, pgURL, bin := smokeEnv(t, "the Flink bench-peers smoke")
	for _, tool := range []string{"java", "mvn"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("no %s on PATH: the Flink bench-peers smoke builds and runs a Flink job (KAFKA2PG_TEST_FLINK is set, but Java 17 and Maven are needed too)", tool)
		}
	}
	repo, err := findRepo()
	if err != nil {
		t.Fatal(err)
	}
	started := time.Now()
	dir := t.TempDir()
	o := options{pgURL: pgURL, brokers: brokers, repo: repo, bin: bin, runTimeout: 3 * time.Minute, offsetFlush: time.Minute,
		out: filepath.Join(dir, "peers.md"), chart: filepath.Join(dir, "peers.svg"), logf: t.Logf, command: "TestPeersSmokeFlink",
		noDebezium: true, records: 2000, reps: 1, scenarios: "append-batch,upsert-updates", instance: "peers-smoke-flink",
		flinkParallelism: []int{2}, flinkCheckpoint: time.Second, latencyRate: 500, latencyWindow: 3 * time.Second}
	rep := smokeRun(t, o, 8*time.Minute)
	if len(rep.results) != 4 {
		t.Fatalf("%d runs, want 4 (two scenarios on two systems)", len(rep.results))
	}
	for _, r := range rep.results {
		if !r.correct() || r.Wall <= 0 || r.PeakRSS <= 0 {
			t.Errorf("%s %s: %d rows (want %d), wall %s, peak RSS %d", r.System, r.Scenario, r.Rows, r.WantRows, r.Wall, r.PeakRSS)
		}
	}
	if len(rep.latency) != 2 {
		t.Fatalf("%d latency runs, want 2", len(rep.latency))
	}
	for _, l := range rep.latency {
		if l.Records == 0 || l.P50 <= 0 || l.P99 < l.P50 {
			t.Errorf("%s latency: %d records, p50 %s, p99 %s", l.System, l.Records, l.P50, l.P99)
		}
	}
	md, err := os.ReadFile(o.out)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"## kafka2pg against Flink's exactly-once JDBC sink (XA)", "| append, batch.size 10000, reWriteBatchedInserts | Flink XA p2 |",
		"| Flink XA p2 | 500 |", rep.facts.flink} {
		if !strings.Contains(string(md), want) {
			t.Errorf("the report lacks %q:\n%s", want, md)
		}
	}
	t.Logf("smoke done in %s", time.Since(started).Round(time.Second))
}
