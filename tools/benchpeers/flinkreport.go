package main

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/kafka2pg/kafka2pg/tools/internal/figures"
)

// flinkLabels are the labels of the Flink systems that ran, in the order
// of their first run.
func (rep *report) flinkLabels() []string {
	var out []string
	for _, r := range rep.results {
		if strings.HasPrefix(r.System, "Flink XA") && !slices.Contains(out, r.System) {
			out = append(out, r.System)
		}
	}
	return out
}

// flinkMarkdown is the report's section on Flink's exactly-once JDBC sink:
// kafka2pg against each parallelism, the latency of every system, and the
// kill -9 probe restarted both ways. Empty when Flink did not run.
func flinkMarkdown(o options, rep *report) string {
	labels := rep.flinkLabels()
	if len(labels) == 0 && len(rep.flinkProbes) == 0 {
		return ""
	}
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	w("## kafka2pg against Flink's exactly-once JDBC sink (XA)\n\n")
	w("Flink's JDBC sink in exactly-once mode (`JdbcSink.builder()...buildExactlyOnce`: XA two-phase commit bound to Flink's checkpoints) in a local MiniCluster, one JVM per run (%s; tools/benchpeers/flink, built by Maven from Maven Central). It reads the same topics as kafka2pg with a group of its own (KafkaSource, read_committed), parses the same 12 payload fields with Jackson and writes them to the same table definition: batches of 5,000, checkpoints every %s (its rows become visible at checkpoints), `withMaxRetries(0)` (the XA writer refuses retries), one XA transaction per connection (Postgres' rule). Append is a plain `INSERT` with `reWriteBatchedInserts=true`; upsert is `INSERT ... ON CONFLICT (id) DO UPDATE` one statement per record (a multi-row statement fails when a batch holds a key twice). Flink has one append configuration, so it runs the batched append scenario only, and it has no applier of Debezium change events.\n\n",
		rep.facts.flink, secs(o.flinkCheckpoint))
	w("| scenario | system | kafka2pg rows/s | Flink rows/s | ratio | CPU s per 1M rows (kafka2pg vs Flink) | Postgres CPU s per 1M rows | peak RSS |\n|---|---|---|---|---|---|---|---|\n")
	for _, label := range labels {
		for _, row := range rep.summaryOf([]string{"kafka2pg", label}) {
			if len(rep.series(row.sc.key, label)) == 0 {
				continue // Flink does not run it
			}
			r0, c0, p0, m0 := row.cells(0)
			r1, c1, p1, m1 := row.cells(1)
			ratio := "–" // n/a when a run wrote all in its first batch
			if r := row.ratio(); !math.IsNaN(r) {
				ratio = figures.Num(r, 1) + "x"
			}
			w("| %s | %s | %s | %s | %s | %s vs %s | %s vs %s | %s vs %s MiB |\n", row.sc.title, label, r0, r1, ratio, c0, c1, p0, p1, m0, m1)
		}
	}
	w("\nRows/s, CPU and peak RSS as in the table above; Flink's CPU and peak RSS are its JVM's (the MiniCluster: job manager, task manager, source, sink; heap -Xms256m -Xmx2g as the Connect worker's). Its first rows wait for the JVM, the job's start and the first checkpoint (the every-run table has the time to the first row).\n\n")
	if len(rep.latency) > 0 {
		w("### Record-to-visible latency\n\n")
		w("Each system on a topic of its own, empty at its start, fed by a producer at a steady rate: half the slowest of these systems' median append rates above (-latency-rate, when given, overrides it), so every one keeps up. The Debezium JDBC sink is not measured here. The clock starts when Kafka acknowledges a record and stops at the first poll of the table (every %s) that shows it; both systems commit a partition's records in order, so a partition's highest `seq` in the table makes every record before it visible. Measured over %s after the first row and a warm-up as long.\n\n",
			latencyPoll, o.latencyWindow)
		w("| system | records/s | records measured | p50 | p99 | rows become visible at |\n|---|---|---|---|---|---|\n")
		for _, l := range rep.latency {
			w("| %s | %s | %s | %s | %s | %s |\n", l.System, figures.Num(l.Rate, 0), figures.Num(float64(l.Records), 0), ms(l.P50), ms(l.P99), l.Visibility)
		}
		w("\n")
	}
	if len(rep.flinkProbes) > 0 {
		w("### The kill -9 probe, Flink restarted two ways\n\n")
		w("As kafka2pg's probe above: append, the %s records, SIGKILL to the JVM when a third and when two thirds of them are in the table, started again each time; Flink promises exactly-once only when the job resumes from its retained checkpoint (externalized checkpoints, retained on cancellation, passed back as `execution.state-recovery.path`), and flink-connector-jdbc 4.0.0's XA writer commits a checkpoint's transaction at its barrier, before the checkpoint completes, so a kill between the two duplicates that checkpoint's records even then. Restarted plainly, it starts from the group's offsets that Flink committed to Kafka at its last completed checkpoint (earliest when none). A run that stops short counts as done once the table has not changed for %s; the missing records are lost. Prepared transactions left in Postgres (`pg_prepared_xacts`) hold their locks until someone commits or rolls them back.\n\n",
			figures.Num(float64(o.records), 0), secs(lossSettle))
		w("| system | rows in the table at the kills | rows at the end | duplicates | lost | prepared transactions left | wall |\n|---|---|---|---|---|---|---|\n")
		for _, r := range rep.flinkProbes {
			w("| %s | %s | %s | %s | %s | %s | %.0f s |\n", r.System, r.killsText(), figures.Num(float64(r.Rows), 0),
				figures.Num(float64(r.Duplicates), 0), figures.Num(float64(r.Lost), 0), figures.Num(float64(r.Prepared), 0), r.Wall.Seconds())
		}
		for _, r := range rep.flinkProbes {
			if r.DuplicateRanges != "" {
				w("- %s, the duplicates by partition (`seq` from-to, how many, most copies of one): %s.\n", r.System, r.DuplicateRanges)
			}
		}
		w("\n")
	}
	return b.String()
}

func ms(d time.Duration) string { return figures.Num(float64(d)/float64(time.Millisecond), 0) + " ms" }
