// Command benchpeers measures kafka2pg against the Debezium JDBC sink on
// Kafka Connect, on one broker and one Postgres, with the same records
// (make bench-peers):
//
//	cd tools && go run ./benchpeers -pg-url "$PG" -out ../bench/peers.md -chart ../bench/peers.svg
//
// The records are Kafka Connect JSON envelopes (JsonConverter with
// schemas: a "schema" of 12 fields and their "payload", about 960 bytes
// with the key) in topics of 8 partitions, produced once per run and read
// by every contender with a consumer group of its own. Each repetition runs
// every scenario on both systems, back to back, in alternating order:
// append with the JDBC sink's defaults; append with batch.size 10000 (and
// max.poll.records 10000, without which a put() never holds more than 500
// records) and reWriteBatchedInserts=true; upsert by the primary key id
// with all keys new; upsert with 10% new keys and 90% updates. kafka2pg
// runs with its defaults and a typed sink of payload.* (append or upsert
// by id), the JDBC sink on a Kafka Connect worker of scripts/connect-up.sh
// started for each run. Both write to the same table definition, created by
// the harness. The changes scenario reads Debezium change events instead
// (changes.go; half as many events as -records: 10% creates, 90% updates,
// 1% deletes with their tombstones), applied by each system in its native
// mode, which creates the table from the events' schemas: kafka2pg's
// format debezium sink, the JDBC sink with primary.key.mode record_key,
// delete.enabled and schema.evolution basic. A build of kafka2pg that
// refuses format debezium sinks is reported "not run". The changes-tx
// scenario (changestx.go) groups those events into source transactions,
// with Debezium's transaction metadata, and runs kafka2pg alone on them,
// change by change and with transactions: true. Every upsert table
// is checked against the fold of its records (foldMismatches). Then the kill -9 probe: each system in append mode, killed
// with SIGKILL when a third and when two thirds of the records are in,
// started again each time, and the duplicates counted with SQL once every
// record is in.
//
// Last, the lossy failover (failover.go): each system writes through a
// TCP forwarder to a primary of the harness's own that streams to an
// asynchronous standby; the primary dies holding commits the standby never
// received, the standby is promoted, the forwarder moves to it, and SQL
// counts the records lost for good and the duplicates. kafka2pg must lose
// and duplicate nothing in any variant (-failover), or the run fails.
//
// Rows/s is the records over the time from the first row to the last in
// the table (kafka2pg's last: its durable offsets); CPU is the system's
// processes' user+system time from its start to its last row, Postgres'
// the whole server's over the same time (only one system runs at a time);
// peak RSS is VmHWM. -smoke checks on a few records that both systems run.
//
// Exit status: 0 when the results were written, 1 when a run failed or a
// table did not hold what the records make, 2 on bad flags.
package main

import (
	"cmp"
	"context"
	"crypto/rand"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/kafka2pg/kafka2pg/tools/internal/procfs"
)

// options are the command's flags.
type options struct {
	records     int
	reps        int
	scenarios   string // comma-separated keys; empty: all
	probe       bool
	pgURL       string
	brokers     string
	repo        string
	bin         string
	out         string
	chart       string
	runTimeout  time.Duration
	offsetFlush time.Duration
	// freshWorker gives each Debezium run a worker of its own (the
	// default); -smoke keeps one.
	freshWorker bool
	instance    string
	// noDebezium leaves the Debezium JDBC sink out (-debezium=false:
	// kafka2pg and Flink only).
	noDebezium bool
	// flinkParallelism lists the parallelisms Flink's XA sink runs with;
	// empty: Flink does not run.
	flinkParallelism []int
	// flinkCheckpoint is the job's checkpoint interval: when its rows
	// become visible.
	flinkCheckpoint time.Duration
	// latencyRate is the producer's rate of the latency runs; 0: half
	// the slowest system's median append rate; negative: no latency runs.
	latencyRate float64
	// latencyWindow is how long the latency runs measure, after a warm-up
	// as long.
	latencyWindow time.Duration
	// failover lists the lossy-failover variants kafka2pg runs,
	// failoverPeers those the other systems run (failover.go); empty:
	// none.
	failover, failoverPeers []failoverVariant
	// failoverRate is the producer's rate in the failover runs.
	failoverRate float64
	logf         func(format string, args ...any)
	command      string
}

// defaultRecords keeps the default run at about 10 minutes on an idle
// 2-core machine: the JDBC sink takes most of it (10-15k rows/s, and a
// worker started for each of its runs).
const defaultRecords = 150_000

func main() {
	var o options
	smoke := false
	flag.IntVar(&o.records, "records", defaultRecords, "records per topic (every scenario reads one of two topics of this many); 1000000 takes about 30 minutes on an idle machine")
	flag.IntVar(&o.reps, "reps", 3, "repetitions of every scenario on both systems, interleaved")
	flag.StringVar(&o.scenarios, "scenarios", "", "scenarios to run, comma-separated (default all: "+strings.Join(scenarioKeys(), ",")+")")
	flag.BoolVar(&o.probe, "probe", true, "run the kill -9 duplicate probe")
	flag.StringVar(&o.pgURL, "pg-url", cmp.Or(os.Getenv("KAFKA2PG_PG_URL"), os.Getenv("DATABASE_URL")), "PostgreSQL URL of the target database (env KAFKA2PG_PG_URL or DATABASE_URL; make bench-peers passes scripts/pg-url.sh)")
	flag.StringVar(&o.brokers, "brokers", os.Getenv("KAFKA2PG_TEST_BROKERS"), "Kafka bootstrap list (env KAFKA2PG_TEST_BROKERS; empty: the cluster of scripts/kafka-up.sh, started when not running)")
	flag.StringVar(&o.repo, "repo", "", "the kafka2pg checkout (default: found from the working directory)")
	flag.StringVar(&o.bin, "bin", "", "the kafka2pg binary (default REPO/bin/kafka2pg: make build)")
	flag.StringVar(&o.out, "out", "", "Markdown results to write (default REPO/bench/peers.md)")
	flag.StringVar(&o.chart, "chart", "", "SVG chart to write (default REPO/bench/peers.svg)")
	flag.DurationVar(&o.runTimeout, "run-timeout", 15*time.Minute, "longest one run may take")
	flag.DurationVar(&o.offsetFlush, "offset-flush", time.Minute, "the Connect worker's offset.flush.interval.ms (Kafka's default 60s): how often the JDBC sink's offsets are committed")
	debezium := flag.Bool("debezium", true, "run the Debezium JDBC sink on Kafka Connect")
	flinkPar := flag.String("flink-parallelism", "2,4", "parallelisms of Flink's exactly-once JDBC sink (XA), comma-separated; empty: Flink does not run")
	flag.DurationVar(&o.flinkCheckpoint, "flink-checkpoint", time.Second, "Flink's checkpoint interval (its rows become visible at checkpoints)")
	flag.Float64Var(&o.latencyRate, "latency-rate", 0, "records/s of the latency runs (every system on an empty topic fed at this rate); 0: half the slowest system's median append rate; -1: no latency runs")
	flag.DurationVar(&o.latencyWindow, "latency-window", 20*time.Second, "how long each latency run measures, after a warm-up as long")
	failover := flag.String("failover", "flowing,killed,idle", "lossy-failover variants kafka2pg runs (Postgres servers of the harness's own: a primary, an asynchronous standby promoted after the primary dies holding commits it never sent): flowing, killed, idle; empty: none")
	failoverPeers := flag.String("failover-peers", "flowing", "lossy-failover variants the Debezium JDBC sink and Flink run; empty: none")
	flag.Float64Var(&o.failoverRate, "failover-rate", 1000, "records/s the producer writes in the failover runs")
	flag.BoolVar(&smoke, "smoke", false, "check that both systems run: 2,000 records, 1 repetition, two scenarios, no probe, one worker; writes the results to -out only when given")
	flag.Parse()
	o.freshWorker, o.instance, o.noDebezium = true, "peers", !*debezium
	var err error
	if o.flinkParallelism, err = parseParallelism(*flinkPar); err != nil {
		fmt.Fprintf(os.Stderr, "benchpeers: %v\n", err)
		os.Exit(2)
	}
	if o.failover, err = parseVariants("failover", *failover); err == nil {
		o.failoverPeers, err = parseVariants("failover-peers", *failoverPeers)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "benchpeers: %v\n", err)
		os.Exit(2)
	}
	if smoke {
		o.smoke()
	}
	if err := o.resolve(); err != nil {
		fmt.Fprintf(os.Stderr, "benchpeers: %v\n", err)
		os.Exit(2)
	}
	o.logf = func(format string, args ...any) { fmt.Printf(format+"\n", args...) }
	o.command = commandLine(os.Args[1:])
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if _, err := run(ctx, o); err != nil {
		fmt.Fprintf(os.Stderr, "benchpeers: %v\n", err)
		os.Exit(1)
	}
}

// smoke narrows o to the smoke run.
func (o *options) smoke() {
	o.records, o.reps, o.probe, o.freshWorker = 2000, 1, false, false
	o.failover, o.failoverPeers = nil, nil // TestPeersSmokeFailover runs kafka2pg's
	o.scenarios = "append-defaults,upsert-updates,changes," + changesTxKey
	o.instance = "peers-smoke"
	if o.out == "" {
		o.out, o.chart = "-", "-"
	}
}

func scenarioKeys() []string {
	var keys []string
	for _, s := range scenarios(dataset{}, dataset{}, dataset{}) {
		keys = append(keys, s.key)
	}
	return keys
}

// resolve checks the flags and fills the defaults that depend on the
// checkout.
func (o *options) resolve() error {
	switch {
	case o.pgURL == "":
		return fmt.Errorf("-pg-url is empty: pass it or set KAFKA2PG_PG_URL")
	case o.records < partitions*10:
		return fmt.Errorf("-records is %d: it must be at least %d", o.records, partitions*10)
	case o.reps < 0:
		return fmt.Errorf("-reps is %d: it must be 0 (the probe only) or more", o.reps)
	case o.offsetFlush < time.Millisecond:
		return fmt.Errorf("-offset-flush is %s: it must be at least 1ms", o.offsetFlush)
	case (len(o.failover) > 0 || len(o.failoverPeers) > 0) && !(o.failoverRate >= 10):
		return fmt.Errorf("-failover-rate is %v: it must be at least 10 records/s", o.failoverRate)
	case len(o.flinkParallelism) > 0 && o.flinkCheckpoint < 10*time.Millisecond:
		return fmt.Errorf("-flink-checkpoint is %s: it must be at least 10ms (Flink's minimum)", o.flinkCheckpoint)
	}
	for _, k := range o.scenarioList() {
		if !slices.Contains(scenarioKeys(), k) {
			return fmt.Errorf("-scenarios has %q: it takes %s", k, strings.Join(scenarioKeys(), ", "))
		}
	}
	if o.repo == "" {
		repo, err := findRepo()
		if err != nil {
			return err
		}
		o.repo = repo
	}
	abs := func(p *string, def string) error {
		v, err := filepath.Abs(cmp.Or(*p, filepath.Join(o.repo, def)))
		*p = v
		return err
	}
	if o.out == "-" {
		o.out, o.chart = "", ""
		return abs(&o.bin, "bin/kafka2pg")
	}
	for _, p := range []struct {
		v   *string
		def string
	}{{&o.bin, "bin/kafka2pg"}, {&o.out, "bench/peers.md"}, {&o.chart, "bench/peers.svg"}} {
		if err := abs(p.v, p.def); err != nil {
			return err
		}
	}
	return nil
}

func (o options) scenarioList() []string {
	if o.scenarios == "" {
		return scenarioKeys()
	}
	return strings.Split(o.scenarios, ",")
}

// findRepo finds the checkout: the working directory or a parent that has
// scripts/connect-up.sh.
func findRepo() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "scripts", "connect-up.sh")); err == nil {
			return d, nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("no scripts/connect-up.sh in %s or a parent: pass -repo", dir)
		}
	}
}

// report is what a run measured, and where.
type report struct {
	results []result // in the order they ran
	probes  []result
	latency []latencyResult
	// flinkProbes: Flink's kill -9 probe, restarted from its checkpoint
	// and plainly.
	flinkProbes []result
	// failovers: the lossy-failover runs; failoverNote why none ran.
	failovers    []failoverResult
	failoverNote string
	facts        facts
	reps         int
	order        []scenario
	changes      dataset // of the changes scenario
}

// run measures every repetition, then the probe, and writes the results.
func run(ctx context.Context, o options) (*report, error) {
	if _, err := os.Stat(o.bin); err != nil {
		return nil, fmt.Errorf("the kafka2pg binary: %w (run make build)", err)
	}
	o.command = strings.ReplaceAll(o.command, o.repo+"/", "")
	f := machineFacts(o)
	if o.brokers == "" {
		o.logf("no -brokers: starting (or finding) the cluster of scripts/kafka-up.sh")
		out, err := exec.CommandContext(ctx, filepath.Join(o.repo, "scripts", "kafka-up.sh")).Output()
		if err != nil {
			return nil, fmt.Errorf("scripts/kafka-up.sh: %w", err)
		}
		o.brokers = strings.TrimSpace(string(out))
	}
	f.kafka = kafkaVersion(o.repo, o.brokers)
	conn, err := pgx.Connect(ctx, o.pgURL)
	if err != nil {
		return nil, fmt.Errorf("connect to Postgres: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	d := &db{conn: conn, url: o.pgURL}
	if err := conn.QueryRow(ctx, "SELECT split_part(current_setting('server_version'), ' ', 1)").Scan(&f.pgVersion); err != nil {
		return nil, fmt.Errorf("SHOW server_version: %w", err)
	}
	if err := conn.QueryRow(ctx, `SELECT string_agg(name || ' ' || current_setting(name), ', ' ORDER BY name) FROM pg_settings
		WHERE name IN ('fsync', 'max_prepared_transactions', 'max_wal_size', 'shared_buffers', 'synchronous_commit')`).Scan(&f.pgSettings); err != nil {
		return nil, fmt.Errorf("read the Postgres settings: %w", err)
	}
	pg := procfs.FindPostgres(ctx, conn)
	if pg.Why != "" {
		o.logf("note: Postgres CPU is not measured: %s", pg.Why)
		f.pgCPUNote = pg.Why
	}
	tmp, err := os.MkdirTemp("", "kafka2pg-peers-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	k, err := newKafka(strings.Split(o.brokers, ","))
	if err != nil {
		return nil, err
	}
	defer k.Close()

	runID := strings.ToLower(time.Now().UTC().Format("150405") + rand.Text()[:4])
	newKeys := dataset{name: "new", n: o.records}
	updates := dataset{name: "updates", n: o.records, updates: true}
	changes := newChanges(o.records / 2)
	f.recordBytes = newKeys.meanRecordBytes()
	var chosen []scenario
	for _, sc := range scenarios(newKeys, updates, changes) {
		if slices.Contains(o.scenarioList(), sc.key) {
			chosen = append(chosen, sc)
		}
	}
	h := &harness{db: d, pg: pg, timeout: o.runTimeout, logf: o.logf, topics: map[string]string{}, runID: runID}
	need := map[string]dataset{}
	for _, sc := range chosen {
		need[sc.data.name] = sc.data
	}
	if o.probe {
		need[newKeys.name] = newKeys
	}
	for _, ds := range []dataset{newKeys, updates, changes, changes.withTransactions()} {
		if _, ok := need[ds.name]; !ok {
			continue
		}
		topic := "peers_" + ds.name + "_" + runID
		started := time.Now()
		if err := k.fill(ctx, topic, ds); err != nil {
			return nil, err
		}
		if err := k.fillTransactions(ctx, topic, ds); err != nil {
			return nil, err
		}
		o.logf("produced %d records (%.0f bytes each with the key) to %s in %.1fs", ds.records(), ds.meanRecordBytes(), topic, time.Since(started).Seconds())
		h.topics[ds.name] = topic
	}
	defer func() {
		cctx := context.WithoutCancel(ctx)
		if err := k.drop(cctx, withTxTopics(h.topics)...); err != nil {
			o.logf("note: %v", err)
		}
		if err := d.forgetGroups(cctx, "peers-kafka2pg-"); err != nil {
			o.logf("note: %v", err)
		}
	}()

	f.java = javaVersion()
	k2p := &kafka2pgSystem{bin: o.bin, brokers: o.brokers, pgURL: o.pgURL, tmp: tmp, db: d}
	peers := []system{k2p}
	var dbz *debeziumSystem
	if !o.noDebezium {
		w := &worker{repo: o.repo, instance: o.instance, brokers: o.brokers, flushMS: int(o.offsetFlush.Milliseconds()),
			client: &http.Client{Timeout: 30 * time.Second}, logf: o.logf}
		// A worker of an earlier, interrupted run would resume its
		// connectors: start from a new one.
		if err := w.down(ctx); err != nil {
			return nil, err
		}
		o.logf("starting a Kafka Connect worker (scripts/connect-up.sh, CONNECT_INSTANCE=%s)", o.instance)
		if err := w.up(ctx); err != nil {
			return nil, err
		}
		defer func() {
			if err := w.down(context.WithoutCancel(ctx)); err != nil {
				o.logf("note: %v", err)
			}
		}()
		if f.connect, f.debezium, err = w.versions(ctx); err != nil {
			return nil, err
		}
		dbz = &debeziumSystem{w: w, pgURL: o.pgURL, db: d}
		peers = append(peers, dbz)
	}
	flinks, err := newFlinkSystems(ctx, o, d, tmp, &f)
	if err != nil {
		return nil, err
	}
	for _, fs := range flinks {
		peers = append(peers, fs)
	}
	if dbz != nil && o.freshWorker {
		started := false // the worker just started serves the first run
		h.fresh = func(ctx context.Context) error {
			if !started {
				started = true
				return nil
			}
			return dbz.freshWorker(ctx)
		}
	}
	o.logf("Postgres %s; %s; Kafka Connect %s, Debezium JDBC sink %s; %s; %d records a topic, %d repetition(s) of %d scenario(s)%s",
		f.pgVersion, f.kafka, cmp.Or(f.connect, "not run"), cmp.Or(f.debezium, "not run"), cmp.Or(f.flink, "Flink not run"),
		o.records, o.reps, len(chosen), map[bool]string{true: ", then the kill -9 probe"}[o.probe])

	rep := &report{facts: f, reps: o.reps, order: chosen, changes: changes}
	for i := range o.reps {
		o.logf("== repetition %d of %d", i+1, o.reps)
		for j, sc := range chosen {
			var systems []system
			for _, sys := range append(slices.Clip(peers), txPeers(k2p, chosen)...) {
				if runs(sys, sc) {
					systems = append(systems, sys)
				}
			}
			// Each system goes first in turn.
			k := (i + j) % len(systems)
			systems = append(systems[k:], systems[:k]...)
			for _, sys := range systems {
				r, err := h.measure(ctx, sys, sc, i+1)
				if err != nil {
					return rep, err
				}
				rep.results = append(rep.results, r)
			}
		}
	}
	if err := latencies(ctx, o, h, k, peers, rep); err != nil {
		return rep, err
	}
	if o.probe {
		o.logf("== the kill -9 probe (append, %d records, two kills each)", newKeys.n)
		probe := scenario{key: "kill-probe", title: "kill -9 probe, append, Debezium defaults", data: newKeys}
		for _, sys := range peers {
			if _, ok := sys.(*flinkSystem); ok {
				continue
			}
			r, err := h.probe(ctx, sys, probe)
			if err != nil {
				return rep, err
			}
			rep.probes = append(rep.probes, r)
		}
		// Flink's exactly-once holds only when it resumes from its
		// retained checkpoint: the probe restarts it both ways.
		if len(flinks) > 0 {
			for _, restore := range []bool{true, false} {
				fs := *flinks[0]
				fs.restore = restore
				r, err := h.probe(ctx, &fs, probe)
				if err != nil {
					return rep, err
				}
				r.System += ", " + fs.restartLabel()
				rep.flinkProbes = append(rep.flinkProbes, r)
			}
		}
	}
	if err := failovers(ctx, o, h, k, peers, rep); err != nil {
		return rep, err
	}
	rep.facts.loadAfter = procfs.LoadAverage()
	rep.facts.finished = time.Now()
	for _, r := range rep.probes {
		if r.System == k2p.label() && (r.Duplicates != 0 || r.Lost != 0) {
			return rep, fmt.Errorf("kafka2pg wrote %d duplicates and lost %d records under kill -9", r.Duplicates, r.Lost)
		}
	}
	switch {
	case o.out != "" && failoverOnly(rep):
		if err := writeFailoverOnly(o, rep); err != nil {
			return rep, err
		}
		o.logf("wrote %s", o.out)
	case o.out != "":
		if err := writeResults(o, rep); err != nil {
			return rep, err
		}
		o.logf("wrote %s and %s", o.out, o.chart)
	}
	return rep, failoverVerdict(rep)
}

// commandLine is the command as the report shows it, without the Postgres
// URL (it may hold a password).
func commandLine(args []string) string {
	out := []string{"benchpeers"}
	for i := 0; i < len(args); i++ {
		a := args[i]
		name, _, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if name == "pg-url" {
			out = append(out, "-pg-url \"$KAFKA2PG_PG_URL\"")
			if !hasValue {
				i++
			}
			continue
		}
		out = append(out, a)
	}
	return strings.Join(out, " ")
}
