package main

import (
	"context"
	"encoding/xml"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestPeersSmoke runs the harness's smoke mode (-smoke): both systems on a
// few records, append, upsert with updates and the Debezium change events,
// and kafka2pg on the change events in source transactions with and
// without transactions: true (changes-tx), against a real broker, a
// Kafka Connect worker of scripts/connect-up.sh and the test Postgres; it
// checks that every run wrote what the records make (run fails otherwise)
// and that the report and the chart are written.
func TestPeersSmoke(t *testing.T) {
	brokers, pgURL, bin := smokeEnv(t, "the bench-peers smoke")
	repo, err := findRepo()
	if err != nil {
		t.Fatal(err)
	}
	for _, tool := range []string{"java", "mvn", "curl"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("no %s on PATH: the bench-peers smoke runs Kafka Connect from Maven jars (KAFKA2PG_TEST_BROKERS is set, but Java 17, Maven and curl are needed too)", tool)
		}
	}
	started := time.Now()
	fetch := exec.Command(filepath.Join(repo, "scripts", "connect-up.sh"), "--fetch")
	if out, err := fetch.CombinedOutput(); err != nil {
		t.Skipf("Maven could not fetch the Kafka Connect and Debezium jars (scripts/connect-up.sh --fetch: %v); the bench-peers smoke needs Maven Central:\n%s", err, tail(string(out), 2000))
	}
	t.Logf("jars ready in %s (the first fetch from Maven Central takes about 40 s)", time.Since(started).Round(time.Second))

	dir := t.TempDir()
	o := options{pgURL: pgURL, brokers: brokers, repo: repo, bin: bin, runTimeout: 3 * time.Minute, offsetFlush: time.Minute,
		out: filepath.Join(dir, "peers.md"), chart: filepath.Join(dir, "peers.svg"), logf: t.Logf, command: "TestPeersSmoke"}
	o.smoke()
	rep := smokeRun(t, o, 5*time.Minute)
	if len(rep.results) != 8 {
		t.Fatalf("%d runs, want 8 (three scenarios on two systems, and changes-tx on kafka2pg both ways)", len(rep.results))
	}
	for _, r := range rep.results {
		if r.NotRun != "" {
			// Only kafka2pg's refusal of format debezium sinks (a build
			// whose writer does not apply change events) gets here.
			t.Logf("%s %s: not run: %s", r.System, r.Scenario, r.NotRun)
			continue
		}
		want := o.records
		if r.Scenario == "changes" || r.Scenario == changesTxKey {
			want = o.records / 2
		}
		if !r.correct() || r.Records != want || r.Wall <= 0 || r.PeakRSS <= 0 {
			t.Errorf("%s %s: %d records, %d rows (want %d), wall %s, peak RSS %d", r.System, r.Scenario, r.Records, r.Rows, r.WantRows, r.Wall, r.PeakRSS)
		}
	}
	md, err := os.ReadFile(o.out)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(rep.facts.debezium, ".Final") {
		t.Errorf("the worker reported the JDBC sink's version as %q", rep.facts.debezium)
	}
	for _, want := range []string{"| append, Debezium defaults |", "| upsert (PK id), 10% new keys, 90% updates, batch 10000 |",
		"| Debezium change events: 10% creates, 90% updates, 1% deletes, batch 10000 |", "Debezium JDBC sink " + rep.facts.debezium,
		"## Transaction-consistent apply (`transactions: true`)", "| events/s (first row to last) |"} {
		if !strings.Contains(string(md), want) {
			t.Errorf("the report lacks %q:\n%s", want, md)
		}
	}
	svg, err := os.Open(o.chart)
	if err != nil {
		t.Fatal(err)
	}
	defer svg.Close()
	for dec := xml.NewDecoder(svg); ; {
		if _, err := dec.Token(); err != nil {
			if !errors.Is(err, io.EOF) {
				t.Fatalf("the chart is not well-formed XML: %v", err)
			}
			break
		}
	}
	t.Logf("smoke done in %s", time.Since(started).Round(time.Second))
}

// smokeEnv is the broker, the Postgres and the binary a smoke test runs
// against; it skips t, naming the variable, when one is not set.
func smokeEnv(t *testing.T, what string) (brokers, pgURL, bin string) {
	t.Helper()
	for _, v := range []struct{ name, how string }{
		{"KAFKA2PG_TEST_BROKERS", "to a real Kafka broker (make kafka-up)"},
		{"KAFKA2PG_TEST_PG_URL", "(scripts/pg-url.sh KAFKA2PG_TEST_PG_URL)"},
		{"KAFKA2PG_BIN", "to the built binary (make build)"},
	} {
		if os.Getenv(v.name) == "" {
			t.Skipf("set %s %s to run %s", v.name, v.how, what)
		}
	}
	return os.Getenv("KAFKA2PG_TEST_BROKERS"), os.Getenv("KAFKA2PG_TEST_PG_URL"), os.Getenv("KAFKA2PG_BIN")
}

// smokeRun resolves o and runs the harness, for at most timeout; a failed
// run fails t.
func smokeRun(t *testing.T, o options, timeout time.Duration) *report {
	t.Helper()
	if err := o.resolve(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	rep, err := run(ctx, o)
	if err != nil {
		t.Fatalf("the smoke run failed: %v", err)
	}
	return rep
}
