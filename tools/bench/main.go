// Command bench measures kafka2pg against the Postgres ingest ceiling and
// against two baselines in the style of the incumbents, in one run against
// one Postgres, and writes the figures side by side (make bench):
//
//	cd tools && go run ./bench -pg-url "$PG" -reps 3 -backlog 5000000
//
// which writes ../bench/results.md and ../bench/results.svg, where the
// README links them.
//
// A run is -reps repetitions, and each repetition measures, for the typed
// table, the zero-config table and the zero-config table of small records
// (-shapes), back to back: the ceiling (binary COPY of the rows the bridge
// writes, pre-built in memory, 10,000-row transactions, on one and on two
// connections), then the contenders, each on a topic of 8 partitions
// filled just before it: the bridge (bin/kafka2pg as a subprocess), on the
// zero-config tables the minimal pipes on the bridge's topic after it
// (pipe.go: franz-go and COPY, nothing else), and on the default records
// two franz-go + pgx loops that commit offsets to Kafka after the write:
// (b) one multi-row INSERT per poll, (a) one INSERT per record. Every
// contender's ratio to the ceiling is paired with the ceiling of its own
// repetition; the report gives the median and the range over the
// repetitions.
//
// After the typed table's block come the upsert scenarios (upsert.go):
// kafka2pg in upsert mode by id on two streams (every key new; 90% updates
// of earlier keys), each after the limit of the Postgres side (the same
// rows, pre-loaded into staging tables, applied by INSERT ... ON
// CONFLICT), and judged against kafka2pg's append run on the typed table
// of the same repetition.
//
// Each repetition ends with a latency window of the bridge alone (a
// producer paced at half the repetition's zero-config rate, the bridge with
// its default flush settings, the exact time from each record's timestamp
// to the commit of its row); the target is judged on the median p99 of the
// windows, as the others are on medians. After the repetitions, with
// -backlog N, comes the peak RSS of the bridge draining a pre-filled
// backlog of N records.
//
// Kafka is kfake in a child process (so its CPU is nobody's), or
// KAFKA2PG_TEST_BROKERS when set.
//
// Exit status: 0 when the results were written, 1 when a run failed or a
// table did not hold exactly the records, 2 on bad flags.
package main

import (
	"cmp"
	"context"
	"crypto/rand"
	"flag"
	"fmt"
	"math"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/kafka2pg/kafka2pg/tools/internal/figures"
	"github.com/kafka2pg/kafka2pg/tools/internal/procfs"
)

// options are the command's flags.
type options struct {
	records int
	reps    int
	// latencyFor is how long the latency scenario produces; 0 skips it.
	latencyFor time.Duration
	// latencyRate fixes the latency scenario's rate (records/s) for A/B
	// runs; 0 means half the zero-config median, as the target says.
	latencyRate float64
	// backlog is the record count of the backlog scenario; 0 skips it.
	backlog int

	// tables ("typed", "zero-config", comma-separated; empty: both) and
	// skipBaselines narrow a run to what an A/B comparison of the bridge
	// needs. The zero value measures everything.
	tables        string
	skipBaselines bool
	// skipUpsert leaves out the upsert scenarios after each typed block.
	skipUpsert bool
	// shapes are the record shapes ("default", "small", comma-separated;
	// empty: both): default runs the tables of -tables, small the
	// zero-config table of small records (smallTable).
	shapes string

	// profileDir, when set, runs the bridge with --pprof and writes a CPU
	// profile of profileFor from its first fetch, per bridge run, there
	// (a diagnosis: the bridge then idles until the profile ends).
	profileDir string
	profileFor time.Duration

	pgURL    string
	bin      string
	out      string
	chart    string
	brokers  string // KAFKA2PG_TEST_BROKERS; empty means kfake
	timeout  time.Duration
	logf     func(format string, args ...any)
	baseADiv int // baseline (a) runs on records/baseADiv records, at most baseAMax
	baseBDiv int // baseline (b) runs on records/baseBDiv records
}

const baseAMax = 100_000

func main() {
	if serveKfakeIfAsked() {
		return
	}
	var o options
	quick := false
	flag.IntVar(&o.records, "records", 1_000_000, "records per kafka2pg scenario and per ceiling (baseline b: a quarter; baseline a: a tenth, at most 100,000)")
	flag.IntVar(&o.reps, "reps", 3, "repetitions of every ceiling and contender, interleaved")
	flag.DurationVar(&o.latencyFor, "latency", 20*time.Second, "how long the latency scenario produces at half the measured rate (0 skips it)")
	flag.IntVar(&o.backlog, "backlog", 0, "records of the backlog (peak RSS) scenario; 0 skips it (make bench runs 5,000,000)")
	flag.StringVar(&o.pgURL, "pg-url", cmp.Or(os.Getenv("KAFKA2PG_PG_URL"), os.Getenv("DATABASE_URL")), "PostgreSQL URL (env KAFKA2PG_PG_URL or DATABASE_URL; make bench passes scripts/pg-url.sh)")
	flag.StringVar(&o.bin, "bin", "../bin/kafka2pg", "the kafka2pg binary (make build; the default is relative to tools/)")
	flag.StringVar(&o.out, "out", "../bench/results.md", "Markdown results to write")
	flag.StringVar(&o.chart, "chart", "../bench/results.svg", "SVG chart to write")
	flag.Float64Var(&o.latencyRate, "latency-rate", 0, "records/s of the latency scenario; 0: half the zero-config rate measured (the target's rate); fix it to compare two binaries")
	flag.StringVar(&o.tables, "tables", "typed,zero-config", "the tables of the default records to measure, comma-separated (one of them for A/B runs of the bridge alone)")
	flag.StringVar(&o.shapes, "shapes", "small,default", "the record shapes, comma-separated: default (~250-byte records, the tables of -tables), small (~65-byte records, the zero-config table)")
	baselines := flag.Bool("baselines", true, "measure baselines (a) and (b); false for A/B runs of the bridge alone")
	upsert := flag.Bool("upsert", true, "measure the upsert scenarios after the typed table's (new keys, 90% updates: kafka2pg and the INSERT ... ON CONFLICT limit)")
	flag.StringVar(&o.profileDir, "bridge-profile", "", "a directory: run the bridge with --pprof and write a CPU profile of each of its throughput runs there, from its first fetch for -bridge-profile-for (a diagnosis, not a measurement)")
	flag.DurationVar(&o.profileFor, "bridge-profile-for", 3*time.Second, "how long each -bridge-profile profile lasts")
	flag.BoolVar(&quick, "quick", false, "a smoke run: 100,000 records, 1 repetition, 5 s of latency, no backlog")
	flag.DurationVar(&o.timeout, "timeout", 10*time.Minute, "longest one contender may take")
	flag.Parse()
	o.skipBaselines, o.skipUpsert = !*baselines, !*upsert
	if quick {
		o.records, o.reps, o.latencyFor, o.backlog = 100_000, 1, 5*time.Second, 0
	}
	if err := o.validate(); err != nil {
		fmt.Fprintf(os.Stderr, "bench: %v\n", err)
		os.Exit(2)
	}
	o.brokers = os.Getenv("KAFKA2PG_TEST_BROKERS")
	o.logf = func(format string, args ...any) { fmt.Printf(format+"\n", args...) }
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if _, err := run(ctx, o); err != nil {
		fmt.Fprintf(os.Stderr, "bench: %v\n", err)
		os.Exit(1)
	}
}

func (o options) validate() error {
	switch {
	case o.pgURL == "":
		return fmt.Errorf("-pg-url is empty: pass it or set KAFKA2PG_PG_URL")
	case o.records < partitions:
		return fmt.Errorf("-records is %d: it must be at least %d (one per partition)", o.records, partitions)
	case o.reps < 1:
		return fmt.Errorf("-reps is %d: it must be at least 1", o.reps)
	case o.backlog != 0 && o.backlog < partitions:
		return fmt.Errorf("-backlog is %d: it must be 0 (skip) or at least %d", o.backlog, partitions)
	case o.latencyFor < 0:
		return fmt.Errorf("-latency is %s: it must be 0 (skip) or positive", o.latencyFor)
	}
	for _, t := range o.tableList() {
		if t != "typed" && t != "zero-config" {
			return fmt.Errorf("-tables has %q: it takes typed, zero-config or both, comma-separated", t)
		}
	}
	for _, s := range o.shapeList() {
		if s != "default" && s != "small" {
			return fmt.Errorf("-shapes has %q: it takes default, small or both, comma-separated", s)
		}
	}
	if !o.skipUpsert && !o.runs(typedTable) {
		return fmt.Errorf("-upsert needs the typed table's append rate: add typed to -tables, or pass -upsert=false")
	}
	if o.latencyRate < 0 {
		return fmt.Errorf("-latency-rate is %v: it must be 0 (half the measured rate) or positive", o.latencyRate)
	}
	if o.latencyFor > 0 && o.latencyRate == 0 && !o.runs(rawTable) {
		return fmt.Errorf("-latency needs the zero-config table's rate: add zero-config to -tables, pass -latency-rate, or pass -latency 0")
	}
	return nil
}

// tableList is -tables as a list; empty means both tables.
func (o options) tableList() []string {
	return strings.Split(cmp.Or(o.tables, "typed,zero-config"), ",")
}

// shapeList is -shapes as a list; empty means both shapes.
func (o options) shapeList() []string {
	return strings.Split(cmp.Or(o.shapes, "small,default"), ",")
}

// runs says whether the run measures table (typedTable, rawTable,
// smallTable).
func (o options) runs(table string) bool {
	if table == smallTable {
		return slices.Contains(o.shapeList(), "small")
	}
	return slices.Contains(o.shapeList(), "default") && slices.Contains(o.tableList(), tableLabel(table))
}

// report is what one run measured.
type report struct {
	blocks []block // in the order they ran
	// upserts are the upsert scenarios, each repetition's right after its
	// typed block (upsert.go).
	upserts []upsertBlock
	// latency holds one window per repetition, each run right after the
	// repetition's blocks (latencyRate).
	latency     []latencyResult
	backlog     *result
	facts       facts
	reps        int
	recordBytes float64
	smallBytes  float64
}

// block is the ceiling of one table in one repetition and the contenders
// measured right after it.
type block struct {
	rep        int // from 1
	table      string
	ceiling    []result // 1 and 2 connections
	contenders []result // kafka2pg, the minimal pipes (zero-config tables), baseline b, baseline a
}

// best is the block's ceiling: the better of one and two connections.
func (b block) best() result {
	best := b.ceiling[0]
	for _, c := range b.ceiling[1:] {
		if c.rowsPerSec() > best.rowsPerSec() {
			best = c
		}
	}
	return best
}

func (b block) results() []result {
	return append(append([]result(nil), b.ceiling...), b.contenders...)
}

// latencyRate is the producer's rate for the latency window of repetition
// rep: fixed (-latency-rate), or half the rate of that repetition's
// zero-config kafka2pg run, so that each window is paired with the
// maximum measured just before it, as the ratios pair each run with its
// own ceiling.
func (rep *report) latencyRate(r int, fixed float64) (float64, string) {
	if fixed > 0 {
		return fixed, "-latency-rate"
	}
	for _, bl := range rep.blocks {
		if bl.rep != r || bl.table != rawTable {
			continue
		}
		for _, c := range bl.contenders {
			if c.Kind == "bridge" {
				return c.rowsPerSec() / 2, "half this repetition's zero-config rate"
			}
		}
	}
	return math.NaN(), "no zero-config run"
}

// run measures every repetition, each followed by its latency window, then
// the backlog scenario, and writes the results.
func run(ctx context.Context, o options) (*report, error) {
	bin, err := filepath.Abs(o.bin)
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(bin); err != nil {
		return nil, fmt.Errorf("the bridge binary: %w (run make build)", err)
	}
	o.baseADiv, o.baseBDiv = cmp.Or(o.baseADiv, 10), cmp.Or(o.baseBDiv, 4)
	f := machineFacts(ctx, o)
	e, err := newEnv(ctx, o, bin)
	if err != nil {
		return nil, err
	}
	defer e.Close(ctx)
	f.pgVersion, f.pgSettings, f.kafka, f.pgCPUNote, f.realKafka = e.pgVersion, e.pgSettings, e.kafkaName, e.pg.Why, o.brokers != ""
	rep := &report{recordBytes: e.recordBytes, smallBytes: e.smallBytes, reps: o.reps}
	nA := min(max(o.records/o.baseADiv, partitions), baseAMax)
	nB := max(o.records/o.baseBDiv, partitions)

	// Topic names are unique per run: a real broker is shared.
	runID := time.Now().UTC().Format("150405") + "_" + rand.Text()[:6]
	seq := 0
	topicFor := func(what string) string {
		seq++
		return strings.ToLower(fmt.Sprintf("bench_%s_%d_%s", what, seq, runID))
	}
	// contend fills topic with n records of table's shape and runs the
	// contenders of runs on it, one after the other.
	contend := func(table, topic string, n int, runs ...func(topic string) (result, error)) ([]result, error) {
		if err := e.kafka.fill(ctx, topic, n, valueOf(table)); err != nil {
			return nil, err
		}
		var out []result
		for _, runOne := range runs {
			r, err := runOne(topic)
			if err != nil {
				return nil, err
			}
			out = append(out, r)
		}
		if err := e.kafka.drop(ctx, topic); err != nil {
			o.logf("note: %v", err)
		}
		return out, nil
	}
	for i := range o.reps {
		for _, table := range tables {
			if !o.runs(table) {
				continue
			}
			o.logf("== repetition %d of %d, %s table", i+1, o.reps, tableLabel(table))
			bl := block{rep: i + 1, table: table}
			// The ceiling writes the rows of the bridge's topic, name
			// included; the baselines have topics of the same length.
			bridgeTopic := topicFor(table)
			if bl.ceiling, err = runCeilings(ctx, e, table, bridgeTopic, o.records); err != nil {
				return nil, err
			}
			// The minimal pipes read the bridge's topic after the bridge,
			// on the zero-config tables, whose rows are the values too.
			type step = func(topic string) (result, error)
			bridge := []step{func(topic string) (result, error) { return runBridge(ctx, e, table, topic, o.records, "") }}
			if table != typedTable {
				bridge = append(bridge,
					func(topic string) (result, error) { return runPipe(ctx, e, table, topic, o.records, false) },
					func(topic string) (result, error) { return runPipe(ctx, e, table, topic, o.records, true) })
			}
			steps := []struct {
				topic string
				n     int
				runs  []step
			}{
				{bridgeTopic, o.records, bridge},
				{topicFor(table), nB, []step{func(topic string) (result, error) { return runBaseline(ctx, e, table, topic, nB, false) }}},
				{topicFor(table), nA, []step{func(topic string) (result, error) { return runBaseline(ctx, e, table, topic, nA, true) }}},
			}
			// The baselines answer the incumbents on the default records;
			// the small records are the bridge's own target.
			if o.skipBaselines || table == smallTable {
				steps = steps[:1]
			}
			for _, s := range steps {
				rs, err := contend(table, s.topic, s.n, s.runs...)
				if err != nil {
					return nil, err
				}
				bl.contenders = append(bl.contenders, rs...)
			}
			rep.blocks = append(rep.blocks, bl)
			if table != typedTable || o.skipUpsert {
				continue
			}
			for _, m := range keyModes {
				o.logf("== repetition %d of %d, upsert, %s", i+1, o.reps, m.label())
				ub, err := runUpserts(ctx, e, i+1, m, topicFor("upsert_"+string(m)), o.records)
				if err != nil {
					return nil, err
				}
				rep.upserts = append(rep.upserts, ub)
			}
		}
		if o.latencyFor > 0 {
			rate, why := rep.latencyRate(i+1, o.latencyRate)
			o.logf("== latency, repetition %d of %d: producing at %s records/s (%s) for %s", i+1, o.reps, figures.Num(rate, 0), why, o.latencyFor)
			lr, err := runLatency(ctx, e, rawTable, topicFor("latency"), rate, o.latencyFor)
			if err != nil {
				return nil, err
			}
			lr.Rep, lr.FixedRate = i+1, o.latencyRate > 0
			rep.latency = append(rep.latency, lr)
		}
	}
	if o.backlog > 0 {
		o.logf("== backlog: draining %s records (zero-config)", figures.Num(float64(o.backlog), 0))
		rs, err := contend(rawTable, topicFor("backlog"), o.backlog, func(topic string) (result, error) {
			return runBridge(ctx, e, rawTable, topic, o.backlog, "")
		})
		if err != nil {
			return nil, err
		}
		r := rs[0]
		r.Kind = "backlog"
		rep.backlog = &r
	}
	f.loadAfter = procfs.LoadAverage()
	f.finished = time.Now()
	rep.facts = f
	var bad []string
	for _, r := range rep.all() {
		if w := r.wrong(); w != "" {
			bad = append(bad, w)
		}
	}
	if err := writeResults(o, rep); err != nil {
		return rep, err
	}
	if len(bad) > 0 {
		return rep, fmt.Errorf("wrong tables: %s", strings.Join(bad, "; "))
	}
	return rep, nil
}
