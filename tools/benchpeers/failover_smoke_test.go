package main

import (
	"strings"
	"testing"
	"time"

	"github.com/kafka2pg/kafka2pg/internal/pgserver"
)

// TestPeersSmokeFailover runs the lossy-failover scenario of bench-peers
// for kafka2pg, records flowing, against a real broker and Postgres
// servers of the harness's own (pgserver): the promoted standby must lack
// commits the old primary held, and kafka2pg must lose and duplicate
// nothing (run fails otherwise). It runs in make bench-peers-smoke beside
// TestPeersSmoke.
func TestPeersSmokeFailover(t *testing.T) {
	brokers, pgURL, bin := smokeEnv(t, "the bench-peers failover smoke")
	if pgserver.BinDir() == "" {
		t.Skipf("%v: the failover smoke runs a primary and a standby of its own", pgserver.ErrNoServerBinaries)
	}
	repo, err := findRepo()
	if err != nil {
		t.Fatal(err)
	}
	started := time.Now()
	// No report file: its rows/s chart has no runs to draw here.
	o := options{pgURL: pgURL, brokers: brokers, repo: repo, bin: bin, runTimeout: 2 * time.Minute, offsetFlush: time.Minute,
		out: "-", logf: t.Logf, command: "TestPeersSmokeFailover",
		noDebezium: true, records: 100, scenarios: "append-defaults", latencyRate: -1, instance: "peers-smoke-failover",
		failover: []failoverVariant{variantFlowing}, failoverRate: 1000}
	rep := smokeRun(t, o, 3*time.Minute)
	if len(rep.failovers) != 1 {
		t.Fatalf("%d failover runs, want 1", len(rep.failovers))
	}
	r := rep.failovers[0]
	if r.Records == 0 || r.NewRows >= r.OldRows || r.Recover <= 0 || r.Rows != r.Records || r.Lost != 0 || r.Duplicates != 0 {
		t.Errorf("kafka2pg failover: %d records, %d rows on the new primary (%d lost, %d duplicates); %d rows on the old primary, %d on the promoted standby; first write %s after the promote",
			r.Records, r.Rows, r.Lost, r.Duplicates, r.OldRows, r.NewRows, r.Recover)
	}
	md := failoverMarkdown(o, rep)
	if want := "| kafka2pg | records flowing | "; !strings.Contains(md, "## Lossy failover") || !strings.Contains(md, want) {
		t.Errorf("the report lacks the failover section or %q:\n%s", want, md)
	}
	t.Logf("failover smoke done in %s", time.Since(started).Round(time.Second))
}
