package main

import (
	"cmp"
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestMain lets the test binary serve kfake when the bench re-runs it as
// its Kafka (see startKfake).
func TestMain(m *testing.M) {
	if serveKfakeIfAsked() {
		return
	}
	os.Exit(m.Run())
}

// TestBenchSmoke runs the whole bench on 20,000 records: every scenario
// commits at a positive rate and leaves exactly the records in its table.
func TestBenchSmoke(t *testing.T) {
	if os.Getenv("KAFKA2PG_BENCH_SMOKE") != "1" {
		t.Skip("set KAFKA2PG_BENCH_SMOKE=1 to run the bench smoke test (needs bin/kafka2pg and a Postgres URL in KAFKA2PG_TEST_PG_URL or KAFKA2PG_PG_URL)")
	}
	pgURL := cmp.Or(os.Getenv("KAFKA2PG_TEST_PG_URL"), os.Getenv("KAFKA2PG_PG_URL"))
	if pgURL == "" {
		t.Fatal("KAFKA2PG_BENCH_SMOKE=1 needs KAFKA2PG_TEST_PG_URL or KAFKA2PG_PG_URL")
	}
	bin := cmp.Or(os.Getenv("KAFKA2PG_BIN"), filepath.Join("..", "bin", "kafka2pg"))
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	const records = 20_000
	o := options{records: records, pgURL: pgURL, bin: bin, out: filepath.Join(dir, "results.md"), chart: filepath.Join(dir, "results.svg"),
		brokers: os.Getenv("KAFKA2PG_TEST_BROKERS"), timeout: 2 * time.Minute, logf: t.Logf}
	rep, err := run(ctx, o)
	if err != nil {
		t.Fatalf("bench run: %v", err)
	}
	kinds := map[string]bool{}
	for _, bl := range rep.blocks {
		for _, r := range append(append([]result(nil), bl.ceiling...), bl.contender) {
			kinds[r.Kind] = true
			if !(r.rowsPerSec() > 0) {
				t.Errorf("%s: %v rows/s, want > 0", r.title(), r.rowsPerSec())
			}
			if r.TableRows != int64(r.Records) {
				t.Errorf("%s: the table held %d rows, want %d", r.title(), r.TableRows, r.Records)
			}
		}
		if bl.contender.Kind == "bridge" && bl.contender.Records != records {
			t.Errorf("%s ran on %d records, want %d", bl.contender.title(), bl.contender.Records, records)
		}
	}
	for _, k := range []string{"ceiling1", "ceiling2", "bridge", "baselineA", "baselineB"} {
		if !kinds[k] {
			t.Errorf("no %s scenario in the report", k)
		}
	}
	for _, f := range []string{o.out, o.chart} {
		if st, err := os.Stat(f); err != nil || st.Size() == 0 {
			t.Errorf("%s was not written (%v)", f, err)
		}
	}
}
