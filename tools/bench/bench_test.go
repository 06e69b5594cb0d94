package main

import (
	"cmp"
	"context"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// TestMain lets the test binary serve kfake when the bench re-runs it as
// its Kafka (see startKfake).
func TestMain(m *testing.M) {
	if serveKfakeIfAsked() {
		return
	}
	os.Exit(m.Run())
}

// positive reports whether v is a finite number above 0.
func positive(v float64) bool { return v > 0 && !math.IsInf(v, 0) }

// TestBenchSmoke runs the whole bench at tiny sizes: 2 repetitions of 20,000
// records of both shapes, the minimal pipe among the contenders, 2 s of
// latency, a backlog of 40,000. Every run commits at a
// positive rate and leaves exactly its records in the table, every ratio is
// finite and positive, every target is judged, and the report has every
// section.
func TestBenchSmoke(t *testing.T) {
	if os.Getenv("KAFKA2PG_BENCH_SMOKE") != "1" {
		t.Skip("set KAFKA2PG_BENCH_SMOKE=1 to run the bench smoke test (needs bin/kafka2pg and a Postgres URL in KAFKA2PG_TEST_PG_URL or KAFKA2PG_PG_URL); make test does")
	}
	pgURL := cmp.Or(os.Getenv("KAFKA2PG_TEST_PG_URL"), os.Getenv("KAFKA2PG_PG_URL"))
	if pgURL == "" {
		t.Fatal("KAFKA2PG_BENCH_SMOKE=1 needs KAFKA2PG_TEST_PG_URL or KAFKA2PG_PG_URL")
	}
	bin := cmp.Or(os.Getenv("KAFKA2PG_BIN"), filepath.Join("..", "..", "bin", "kafka2pg"))
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()
	const records, reps, backlog = 20_000, 2, 40_000
	o := options{records: records, reps: reps, latencyFor: 2 * time.Second, backlog: backlog, pgURL: pgURL, bin: bin,
		out: filepath.Join(dir, "results.md"), chart: filepath.Join(dir, "results.svg"),
		brokers: os.Getenv("KAFKA2PG_TEST_BROKERS"), timeout: 2 * time.Minute, logf: t.Logf}
	if err := o.validate(); err != nil {
		t.Fatalf("options: %v", err)
	}
	rep, err := run(ctx, o)
	if err != nil {
		t.Fatalf("bench run: %v", err)
	}
	for _, r := range rep.all() {
		if !positive(r.rowsPerSec()) {
			t.Errorf("%s: %v rows/s, want > 0", r.title(), r.rowsPerSec())
		}
		if w := r.wrong(); w != "" {
			t.Error(w)
		}
		// kfake's CPU is measured for what fetches from it, never for the
		// ceilings and the upsert limit, nor with a real broker.
		readsKafka := !slices.Contains([]string{"ceiling1", "ceiling2", "upsertLimit1", "upsertLimit2"}, r.Kind)
		if measured := !math.IsNaN(r.BrokerCPU); measured != (o.brokers == "" && readsKafka) || r.BrokerCPU < 0 {
			t.Errorf("%s: kfake CPU %v s", r.title(), r.BrokerCPU)
		}
	}
	for _, table := range tables {
		for _, kind := range kindsOf(table) {
			s := rep.series(kind, table)
			if len(s.runs) != reps {
				t.Errorf("%s on %s: %d runs, want %d", kind, table, len(s.runs), reps)
				continue
			}
			if r := s.ratio(); !positive(r.Lo) || !positive(r.Hi) || r.N != reps {
				t.Errorf("%s × ceiling: %+v, want %d finite positive ratios", s.runs[0].title(), r, reps)
			}
		}
		if s := rep.series("bridge", table); s.runs[0].Records != records {
			t.Errorf("%s ran on %d records, want %d", s.runs[0].title(), s.runs[0].Records, records)
		}
		for _, other := range kindsOf(table)[3:] {
			if r := rep.pairedRatio(rep.series("bridge", table), rep.series(other, table)); !positive(r.Lo) || r.N != reps {
				t.Errorf("kafka2pg ÷ %s on %s: %+v, want %d finite positive ratios", other, table, r, reps)
			}
		}
	}
	// The minimal pipes' MB/s count the bytes of their block's shape.
	for _, table := range []string{rawTable, smallTable} {
		for _, r := range append(rep.series("pipe", table).runs, rep.series("pipeRows", table).runs...) {
			if r.RecordBytes != rep.series("bridge", table).runs[0].RecordBytes {
				t.Errorf("%s: %v bytes per record, kafka2pg's run %v", r.title(), r.RecordBytes, rep.series("bridge", table).runs[0].RecordBytes)
			}
		}
	}
	if small, def := rep.series("bridge", smallTable), rep.series("bridge", rawTable); len(small.runs) > 0 && len(def.runs) > 0 &&
		!(small.runs[0].RecordBytes < 80 && def.runs[0].RecordBytes > 200) {
		t.Errorf("bytes per record: small %v, default %v; want under 80 and over 200", small.runs[0].RecordBytes, def.runs[0].RecordBytes)
	}
	// Each repetition runs both upsert streams: the limit on 1 and 2
	// connections, then kafka2pg, which leaves one row per id (the
	// updates stream has a tenth as many ids as records).
	if len(rep.upserts) != 2*reps {
		t.Errorf("%d upsert blocks, want %d", len(rep.upserts), 2*reps)
	}
	for _, bl := range rep.upserts {
		if len(bl.limit) != 2 || bl.bridge.Kind != "bridge" || bl.bridge.Records != records {
			t.Errorf("upsert block %d (%s): %d limit runs, kafka2pg run %+v", bl.rep, bl.keys, len(bl.limit), bl.bridge)
		}
		want := int64(records)
		if bl.keys == keysUpdates {
			want = records / 10
		}
		for _, r := range bl.results() {
			if r.TableRows != want {
				t.Errorf("%s: %d rows in the table, want %d", r.title(), r.TableRows, want)
			}
		}
	}
	for _, m := range keyModes {
		for _, kind := range []string{"bridge", "limit"} {
			s := rep.upsertSeries(m, kind)
			if r := s.over(s.appends); !positive(r.Lo) || r.N != reps {
				t.Errorf("upsert %s %s ÷ append: %+v, want %d finite positive ratios", m, kind, r, reps)
			}
		}
	}
	targets := rep.targets()
	if len(targets) != 16 {
		t.Errorf("%d targets, want 16", len(targets))
	}
	for _, tg := range targets {
		if !strings.HasPrefix(tg.verdict, "PASS") && !strings.HasPrefix(tg.verdict, "MISS") {
			t.Errorf("target %q: verdict %q, want PASS or MISS", tg.goal, tg.verdict)
		}
	}

	if len(rep.latency) != reps {
		t.Fatalf("%d latency windows in the report, want one per repetition (%d)", len(rep.latency), reps)
	}
	for i, l := range rep.latency {
		if l.Rep != i+1 {
			t.Errorf("latency window %d: repetition %d, want %d", i, l.Rep, i+1)
		}
		if l.Records == 0 || l.TableRows != int64(l.Records) {
			t.Errorf("latency %d: %d records produced, %d matched to a commit; want equal and > 0", l.Rep, l.Records, l.TableRows)
		}
		if !positive(l.P50) || !(l.P50 <= l.P99 && l.P99 <= l.Max) || !(l.P99Lower <= l.P99) || math.IsInf(l.Max, 0) {
			t.Errorf("latency %d: p50 %v, p99 %v (lower %v), max %v: want 0 < p50 <= p99 <= max and lower <= p99", l.Rep, l.P50, l.P99, l.P99Lower, l.Max)
		}
		// Each window is paced at half the zero-config rate of its own
		// repetition.
		want, _ := rep.latencyRate(l.Rep, 0)
		if l.TargetRate != want {
			t.Errorf("latency %d: asked %.0f records/s, want half its repetition's zero-config rate, %.0f", l.Rep, l.TargetRate, want)
		}
		if got := l.rowsPerSec() / l.TargetRate; got < 0.9 || got > 1.1 {
			t.Errorf("latency %d: produced at %.0f records/s, asked %.0f", l.Rep, l.rowsPerSec(), l.TargetRate)
		}
		if !(l.ResolutionMax > 0 && l.ResolutionMax < 1) {
			t.Errorf("latency %d: commit windows up to %v s, want below 1 s", l.Rep, l.ResolutionMax)
		}
		if l.MaxWALSize == "" || l.Checkpoints < 0 || l.CheckpointSync < 0 {
			t.Errorf("latency %d: %d checkpoints, sync %v, max_wal_size %q: want counts read from Postgres", l.Rep, l.Checkpoints, l.CheckpointSync, l.MaxWALSize)
		}
	}
	if b := rep.backlog; b == nil || b.Records != backlog || b.PeakRSS <= 0 {
		t.Errorf("backlog: %+v, want %d records and a peak RSS", b, backlog)
	}

	md, err := os.ReadFile(o.out)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range append(sections, "Postgres checkpoints started (max_wal_size)", "kafka2pg ÷ baseline a (zero-config)", "kafka2pg ÷ baseline b (typed)",
		"kafka2pg upsert ÷ kafka2pg append, typed (10% new keys, 90% updates)", "**kafka2pg upsert (all keys new)**",
		"baseline a: INSERT per record (zero-config)", "baseline b: multi-row INSERT (typed)",
		"kafka2pg ÷ minimal pipe (zero-config, small records)", "kafka2pg ÷ minimal pipe into the bridge's table (zero-config)", "kafka2pg ÷ ceiling on 2 conns (zero-config)",
		"minimal pipe: franz-go + COPY of the values (zero-config)", "minimal pipe into the bridge's table (zero-config, small records)", "**kafka2pg (zero-config, small records)**") {
		if !strings.Contains(string(md), want) {
			t.Errorf("results.md lacks %q", want)
		}
	}
	if !regexp.MustCompile(`settings as found: checkpoint_timeout \S+, fsync \S+, max_wal_size \S+, shared_buffers`).Match(md) {
		t.Errorf("results.md does not give the Postgres settings:\n%.2000s", md)
	}
	if strings.Contains(string(md), "not run") {
		t.Errorf("results.md says a scenario did not run:\n%s", md)
	}
	svg, err := os.ReadFile(o.chart)
	if err != nil {
		t.Fatal(err)
	}
	bars := 0
	for _, table := range tables {
		bars += len(kindsOf(table))
	}
	if s := string(svg); !strings.HasPrefix(s, "<svg") || !strings.HasSuffix(s, "</svg>\n") || strings.Count(s, "<rect") < 1+bars {
		t.Errorf("results.svg is not a chart of %d bars:\n%s", bars, s)
	}
}

// kindsOf lists the scenarios a full run measures on table: the ceilings
// and kafka2pg first, then what kafka2pg is paired with.
func kindsOf(table string) []string {
	switch table {
	case typedTable:
		return []string{"ceiling1", "ceiling2", "bridge", "baselineB", "baselineA"}
	case smallTable:
		return []string{"ceiling1", "ceiling2", "bridge", "pipe", "pipeRows"}
	}
	return []string{"ceiling1", "ceiling2", "bridge", "pipe", "pipeRows", "baselineB", "baselineA"}
}

func TestQuantileIsNearestRank(t *testing.T) {
	vs := []float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	for _, c := range []struct {
		q, want float64
	}{{0.5, 5}, {0.9, 9}, {0.99, 10}, {1, 10}, {0, 1}} {
		if got := quantile(vs, c.q); got != c.want {
			t.Errorf("quantile(1..10, %v) = %v, want %v", c.q, got, c.want)
		}
	}
	if got := quantile(nil, 0.5); !math.IsNaN(got) {
		t.Errorf("quantile of nothing = %v, want NaN", got)
	}
}

// TestCheckpointStatsCountACheckpoint: once checkpoint returns,
// readCheckpointStats shows one more checkpoint, even on a loaded machine
// (the checkpointer reports its statistics after it wakes the backend that
// asked; CI once read the count in between).
func TestCheckpointStatsCountACheckpoint(t *testing.T) {
	pgURL := cmp.Or(os.Getenv("KAFKA2PG_TEST_PG_URL"), os.Getenv("KAFKA2PG_PG_URL"))
	if pgURL == "" {
		t.Skip("set KAFKA2PG_TEST_PG_URL (or KAFKA2PG_PG_URL) to a Postgres where CHECKPOINT may run; make test does")
	}
	conn, err := pgx.Connect(t.Context(), pgURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.WithoutCancel(t.Context()))
	st, err := readCheckpointStats(t.Context(), conn)
	if err != nil {
		t.Fatal(err)
	}
	n, sync := st.count, st.sync
	if err := checkpoint(t.Context(), conn); err != nil {
		t.Fatal(err)
	}
	st2, err := readCheckpointStats(t.Context(), conn)
	if err != nil {
		t.Fatal(err)
	}
	n2, sync2 := st2.count, st2.sync
	if n2 < n+1 || sync2 < sync {
		t.Errorf("checkpoints %d -> %d, sync time %v -> %v across a CHECKPOINT", n, n2, sync, sync2)
	}
}
