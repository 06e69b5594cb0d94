package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/kafka2pg/kafka2pg/tools/internal/figures"
)

// series are one system's results in one scenario.
func (rep *report) series(scenarioKey, system string) []result {
	var out []result
	for _, r := range rep.results {
		if r.Scenario == scenarioKey && r.System == system {
			out = append(out, r)
		}
	}
	return out
}

var systems = []string{"kafka2pg", "Debezium JDBC sink"}

// summaryRow is one scenario's medians for two systems.
type summaryRow struct {
	sc                 scenario
	rate, cpu, pg, rss [2]figures.Spread
	runs               int
	// notRun is, per system, why it refused the scenario (every run).
	notRun [2]string
}

func (rep *report) summary() []summaryRow {
	rows := rep.summaryOf(systems)
	return slices.DeleteFunc(rows, func(r summaryRow) bool { return r.sc.data.txEvents > 0 }) // txMarkdown's
}

// summaryOf is summary for the two systems of pair.
func (rep *report) summaryOf(pair []string) []summaryRow {
	var rows []summaryRow
	for _, sc := range rep.order {
		row := summaryRow{sc: sc}
		for i, sys := range pair[:2] {
			rs := rep.series(sc.key, sys)
			row.runs = max(row.runs, len(rs))
			row.rate[i] = figures.SpreadOver(rs, result.rate)
			row.cpu[i] = figures.SpreadOver(rs, func(r result) float64 { return r.perMillion(r.CPU) })
			row.pg[i] = figures.SpreadOver(rs, func(r result) float64 { return r.perMillion(r.PGCPU) })
			row.rss[i] = figures.SpreadOver(rs, func(r result) float64 { return float64(r.PeakRSS) / (1 << 20) })
			if len(rs) > 0 && rs[0].NotRun != "" {
				row.notRun[i] = rs[0].NotRun
			}
		}
		if row.runs > 0 {
			rows = append(rows, row)
		}
	}
	return rows
}

func (row summaryRow) ratio() float64 { return row.rate[0].Med / row.rate[1].Med }

// ran tells whether both systems ran the scenario.
func (row summaryRow) ran() bool { return row.notRun == [2]string{} }

// cells are the figures of system i in the summary: rows/s, CPU and
// Postgres CPU per 1M rows, peak RSS; "not run" when it refused.
func (row summaryRow) cells(i int) (rate, cpu, pg, rss string) {
	if row.notRun[i] != "" {
		return "not run: " + row.notRun[i], "–", "–", "–"
	}
	if row.rate[i].N == 0 {
		return "not run", "–", "–", "–"
	}
	return row.rate[i].Format(0), figures.Num(row.cpu[i].Med, 1), figures.Num(row.pg[i].Med, 1), figures.Num(row.rss[i].Med, 0)
}

// writeResults writes the Markdown report and the chart.
func writeResults(o options, rep *report) error {
	for _, p := range []string{o.out, o.chart} {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
	}
	if err := os.WriteFile(o.out, []byte(markdown(o, rep)), 0o644); err != nil {
		return err
	}
	if len(rep.summary()) == 0 {
		return nil // only changes-tx ran: the chart compares systems, and has no bar
	}
	svg, err := chartSVG(rep)
	if err != nil {
		return fmt.Errorf("draw %s: %w", o.chart, err)
	}
	return os.WriteFile(o.chart, []byte(svg), 0o644)
}

func markdown(o options, rep *report) string {
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	f := rep.facts
	title := "the Debezium JDBC sink"
	if len(rep.flinkLabels()) > 0 {
		title += " and Flink's exactly-once JDBC sink"
	}
	w("# kafka2pg against %s\n\n", title)
	w("Written by `make bench-peers` (tools/benchpeers) on %s, in %s. **One run on a shared 2-core machine**: other work ran beside it (load average %s before, %s after), which slows both systems, and the JDBC sink's long runs more surely than kafka2pg's short ones; compare runs made at a similar load.\n\n",
		f.started.UTC().Format("2006-01-02 15:04 UTC"), f.finished.Sub(f.started).Round(time.Second), f.loadBefore, f.loadAfter)
	w("![rows/s per scenario](%s)\n\n", filepath.Base(o.chart))
	w("Both systems read the same %s Kafka Connect JSON records (schema + payload, 12 fields, %.0f bytes each with the key) from the same topic of %d partitions on one broker, and write them to the same table definition in one Postgres, one system at a time. Medians of %d interleaved repetitions, the range in brackets.\n\n",
		figures.Num(float64(o.records), 0), f.recordBytes, partitions, rep.reps)
	w("| scenario | kafka2pg rows/s | Debezium JDBC sink rows/s | ratio | CPU s per 1M rows (kafka2pg vs JDBC sink) | Postgres CPU s per 1M rows | peak RSS |\n")
	w("|---|---|---|---|---|---|---|\n")
	for _, row := range rep.summary() {
		r0, c0, p0, m0 := row.cells(0)
		r1, c1, p1, m1 := row.cells(1)
		ratio := "–"
		if row.ran() {
			ratio = figures.Num(row.ratio(), 1) + "x"
		}
		w("| %s | %s | %s | %s | %s vs %s | %s vs %s | %s vs %s MiB |\n", row.sc.title, r0, r1, ratio, c0, c1, p0, p1, m0, m1)
	}
	if len(rep.probes) == 2 {
		k, d := rep.probes[0], rep.probes[1]
		w("| two kill -9 mid-stream, append: duplicates (lost) | %s (%s) | %s (%s) | | | | |\n",
			figures.Num(float64(k.Duplicates), 0), figures.Num(float64(k.Lost), 0), figures.Num(float64(d.Duplicates), 0), figures.Num(float64(d.Lost), 0))
	}
	w("\n")
	for _, sc := range rep.order {
		if sc.changes && sc.data.txEvents == 0 {
			c, u, d := rep.changes.changeCounts()
			w("The change-event scenario reads %s Debezium change events instead (%s creates, %s updates, %s deletes, each delete followed by its tombstone; %s bytes each with the key): envelopes of the Postgres connector with the JsonConverter's schemas, keyed by the primary key id, the 12 fields in before and after; see tools/benchpeers/changes.go. Each system applies them in its native mode and creates its table from the events' schemas; its rows/s counts events.\n\n",
				figures.Num(float64(rep.changes.n), 0), figures.Num(float64(c), 0), figures.Num(float64(u), 0), figures.Num(float64(d), 0), figures.Num(rep.changes.meanRecordBytes(), 0))
		}
	}
	w("- **rows/s**: the steady rate, the records written after the first batch over the time from the first row in the table to the last (kafka2pg's last row: the commit that made its offsets reach the end). The start-up and the first batch (the JDBC sink's first batch runs on a cold JIT) are left out; the table of every run below gives the time to the first row and the rate from the start.\n")
	w("- **CPU**: user + system time of the system's processes (kafka2pg's process; the Connect worker's JVM, all threads) from its start (the process; the connector's creation on a worker started for the run) to its last row, per 1,000,000 rows. **Postgres CPU**: the whole server's processes over the same time; only one system runs at a time, so it is that system's load (its backends, the WAL writer, the checkpointer, autovacuum, and the harness's progress queries).\n")
	w("- **peak RSS**: VmHWM of kafka2pg's process, or of the worker's JVM (heap -Xms256m -Xmx2g, as Kafka's connect-distributed.sh).\n")
	w("- **Checked**: after every run, SQL compares the table with what the records make: the row count and the sum of `seq`, and for the upsert and change-event scenarios every key's row against the fold of the records (the last state of each key, none after a delete). A run that does not match fails the bench.\n\n")

	if len(rep.probes) > 0 {
		w("## The kill -9 probe\n\n")
		w("Each system in append mode on the %s records (the JDBC sink with its defaults, offsets committed every %s; Kafka Connect's default is 60 s), killed with SIGKILL when a third and when two thirds of the records were in the table, and started again each time (kafka2pg: the same command; the JDBC sink: the worker, which resumes its connector from the offsets it committed). Once every record was in, SQL counted `count(*) - count(DISTINCT seq)`. Both used a consumer session timeout of %s so that a killed member's partitions move sooner; it changes how long the probe takes, not what it counts.\n\n",
			figures.Num(float64(o.records), 0), secs(o.offsetFlush), secs(probeSessionTimeout))
		w("| system | rows in the table at the kills | rows at the end | duplicates | lost | wall |\n|---|---|---|---|---|---|\n")
		for _, r := range rep.probes {
			w("| %s | %s | %s | %s | %s | %.0f s |\n", r.System, r.killsText(), figures.Num(float64(r.Rows), 0),
				figures.Num(float64(r.Duplicates), 0), figures.Num(float64(r.Lost), 0), r.Wall.Seconds())
		}
		w("\n")
	}

	b.WriteString(txMarkdown(rep))
	b.WriteString(flinkMarkdown(o, rep))
	b.WriteString(failoverMarkdown(o, rep))
	w("## Every run\n\n")
	w("| rep | scenario | system | rows/s | start to first row | records in then | first to last row | rows/s from the start | CPU s | Postgres CPU s | peak RSS MiB | rows |\n|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range rep.results {
		if r.NotRun != "" {
			w("| %d | %s | %s | not run: %s | | | | | | | | |\n", r.Rep, r.Scenario, r.System, r.NotRun)
			continue
		}
		w("| %d | %s | %s | %s | %.1f s | %s | %.1f s | %s | %.1f | %.1f | %.0f | %s |\n", r.Rep, r.Scenario, r.System, figures.Num(r.rate(), 0),
			r.FirstRow.Seconds(), figures.Num(float64(r.AtFirst), 0), r.Active.Seconds(), figures.Num(r.wallRate(), 0), r.CPU, r.PGCPU, float64(r.PeakRSS)/(1<<20), figures.Num(float64(r.Rows), 0))
	}
	w("\n")

	w("## What ran\n\n")
	w("- Command: `%s` (from `make bench-peers`; `make bench-peers RECORDS=1000000` for a million records, about 30 minutes on an idle machine).\n", f.command)
	w("- Machine: %d CPUs (%s), %s, %s; %s.\n", f.nproc, f.cpuModel, f.memory, f.kernel, f.goVersion)
	w("- kafka2pg %s (checkout %s), its defaults (`--batch-max-rows 10000`, two table writers), a typed sink of `payload.*`:\n\n", f.kafka2pg, f.commit)
	w("```yaml\n%s```\n\n", kafka2pgConfig("TOPIC", "peers_kafka2pg", false))
	w("  and `mode: upsert`, `key: [id]` for the upsert scenarios; for the change events:\n\n")
	w("```yaml\n%s```\n\n", kafka2pgChangeConfig("TOPIC", "peers_kafka2pg"))
	w("- Kafka: %s. Kafka Connect %s (distributed mode, one worker, scripts/connect-up.sh; JsonConverter with schemas for values), %s. Debezium JDBC sink %s. Jars from Maven Central (connect/pom.xml).\n", f.kafka, f.connect, f.java, f.debezium)
	w("- PostgreSQL %s (%s)", f.pgVersion, f.pgSettings)
	if f.pgCPUNote != "" {
		w("; its CPU was not measured: %s", f.pgCPUNote)
	}
	w(". The table of every run is created by the harness (the columns of the 12 fields; `PRIMARY KEY (id)` for upsert; in the change-event scenario each system creates its own) followed by CHECKPOINT.\n")
	w("- The JDBC sink's configuration beyond the connection, `collection.name.format` (the table), `key.converter` StringConverter and `topics`, per scenario:\n\n")
	for _, sc := range rep.order {
		if sc.data.txEvents > 0 {
			continue // the JDBC sink does not run it
		}
		extra := map[string]string{}
		for k, v := range sc.debezium {
			extra[k] = v
		}
		if sc.jdbcParams != "" {
			extra["connection.url"] = "jdbc:postgresql://HOST:PORT/DB?" + sc.jdbcParams
		}
		js, _ := json.Marshal(extra)
		if len(extra) == 0 {
			js = []byte("(none: Debezium's defaults, insert.mode insert, batch.size 500, tasks.max 1)")
		}
		w("  - %s: `%s`\n", sc.title, js)
	}
	w("\n  batch.size alone would not batch more than 500: Connect hands a put() at most max.poll.records records (500), and the sink flushes at the end of each put(), so the batch scenarios raise `consumer.override.max.poll.records` with it.\n")
	return b.String()
}

// killsText lists the rows in the table at each kill of a probe.
func (r result) killsText() string {
	kills := make([]string, len(r.Kills))
	for i, k := range r.Kills {
		kills[i] = figures.Num(float64(k), 0)
	}
	return strings.Join(kills, ", ")
}

func secs(d time.Duration) string { return figures.Num(d.Seconds(), 0) + " s" }
