// Command bench measures kafka2pg against the Postgres ingest ceiling and
// against two baselines in the style of the incumbents, in one run against
// one Postgres, and writes the figures side by side (make bench):
//
//	go run ./bench -pg-url "$PG" -out bench/results.md -chart bench/results.svg
//
// Each block measures, back to back, the ceiling (binary COPY of the rows
// the bridge writes, pre-built in memory, 10,000-row transactions, on one
// and on two connections) and then one contender on a topic of 8 partitions
// filled just before it: the bridge (bin/kafka2pg as a subprocess) on the
// zero-config table and on a ten-column typed table, and two franz-go + pgx
// loops that commit offsets to Kafka after the write: (a) one INSERT per
// record, (b) one multi-row INSERT per poll. Kafka is kfake in a child
// process (so its CPU is nobody's), or KAFKA2PG_TEST_BROKERS when set.
//
// Exit status: 0 when the results were written, 1 when a run failed or a
// table did not hold exactly the records, 2 on bad flags.
package main

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// options are the command's flags.
type options struct {
	records  int
	pgURL    string
	bin      string
	out      string
	chart    string
	quick    bool
	brokers  string // KAFKA2PG_TEST_BROKERS; empty means kfake
	timeout  time.Duration
	logf     func(format string, args ...any)
	baseADiv int // baseline (a) runs on records/baseADiv records, at most baseAMax
}

const baseAMax = 100_000

func main() {
	if serveKfakeIfAsked() {
		return
	}
	var o options
	flag.IntVar(&o.records, "records", 1_000_000, "records per scenario (baseline a: a tenth, at most 100,000)")
	flag.StringVar(&o.pgURL, "pg-url", cmp.Or(os.Getenv("KAFKA2PG_PG_URL"), os.Getenv("DATABASE_URL")), "PostgreSQL URL (env KAFKA2PG_PG_URL or DATABASE_URL; make bench passes scripts/pg-url.sh)")
	flag.StringVar(&o.bin, "bin", "bin/kafka2pg", "the kafka2pg binary (make build)")
	flag.StringVar(&o.out, "out", "bench/results.md", "Markdown results to write")
	flag.StringVar(&o.chart, "chart", "bench/results.svg", "SVG chart to write")
	flag.BoolVar(&o.quick, "quick", false, "a smoke run: 100,000 records")
	flag.DurationVar(&o.timeout, "timeout", 10*time.Minute, "longest one contender may take")
	flag.Parse()
	if o.quick {
		o.records = 100_000
	}
	if o.pgURL == "" || o.records < partitions {
		fmt.Fprintln(os.Stderr, "bench: need -pg-url (or KAFKA2PG_PG_URL) and -records of at least 8")
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

// report is what one run measured.
type report struct {
	blocks      []block
	facts       facts
	recordBytes float64
}

// block is one contender with the ceiling measured just before it.
type block struct {
	ceiling   []result // 1 and 2 connections
	contender result
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

// run measures every block and writes the results.
func run(ctx context.Context, o options) (*report, error) {
	bin, err := filepath.Abs(o.bin)
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(bin); err != nil {
		return nil, fmt.Errorf("the bridge binary: %w (run make build)", err)
	}
	if o.baseADiv == 0 {
		o.baseADiv = 10
	}
	f := machineFacts(ctx, o)
	e, err := newEnv(ctx, o, bin)
	if err != nil {
		return nil, err
	}
	defer e.Close(ctx)
	f.pgVersion, f.kafka, f.pgCPUNote = e.pgVersion, e.kafkaName, e.pg.why
	rep0 := &report{recordBytes: e.recordBytes}
	nA := min(max(o.records/o.baseADiv, partitions), baseAMax)

	runID := time.Now().UTC().Format("150405")
	type plan struct {
		table string
		n     int
		run   func(topic string) (result, error)
	}
	plans := []plan{
		{typedTable, o.records, func(topic string) (result, error) { return runBridge(ctx, e, typedTable, topic, o.records) }},
		{rawTable, o.records, func(topic string) (result, error) { return runBridge(ctx, e, rawTable, topic, o.records) }},
		{typedTable, o.records, func(topic string) (result, error) { return runBaseline(ctx, e, topic, o.records, false) }},
		{typedTable, nA, func(topic string) (result, error) { return runBaseline(ctx, e, topic, nA, true) }},
	}
	rep := rep0
	for i, p := range plans {
		ceil, err := runCeilings(ctx, e, p.table, o.records)
		if err != nil {
			return nil, err
		}
		topic := fmt.Sprintf("bench_%s_%d_%s", p.table, i, runID)
		if err := e.kafka.fill(ctx, topic, p.n); err != nil {
			return nil, err
		}
		r, err := p.run(topic)
		if err != nil {
			return nil, err
		}
		if err := e.kafka.drop(ctx, topic); err != nil {
			o.logf("note: %v", err)
		}
		rep.blocks = append(rep.blocks, block{ceiling: ceil, contender: r})
	}
	f.loadAfter = loadAverage()
	f.finished = time.Now()
	rep.facts = f
	var bad []string
	for _, b := range rep.blocks {
		for _, r := range append(append([]result(nil), b.ceiling...), b.contender) {
			if r.TableRows != int64(r.Records) {
				bad = append(bad, fmt.Sprintf("%s: the table held %d rows, not %d", r.title(), r.TableRows, r.Records))
			}
		}
	}
	if err := writeResults(o, rep); err != nil {
		return rep, err
	}
	if len(bad) > 0 {
		return rep, fmt.Errorf("wrong row counts: %s", strings.Join(bad, "; "))
	}
	return rep, nil
}
