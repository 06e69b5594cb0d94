package main

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/kafka2pg/kafka2pg/internal/testreport"
	"github.com/kafka2pg/kafka2pg/tools/internal/figures"
)

// renderScale writes docs/SCALING.md: the measured tables, in a fixed
// order, then the prose on scaling Postgres. When a kind was measured
// twice (a test re-run into the same file), the last entry of each key
// wins. It returns an error when entries is empty, after writing nothing.
func renderScale(w io.Writer, entries []testreport.ScaleEntry, meta pageMeta) error {
	if len(entries) == 0 {
		return errors.New("render scale report: no results")
	}
	var b strings.Builder
	writeHeader(&b, "Scaling kafka2pg", "make scale", "tools/report", "measurements", meta)
	b.WriteString(`
Every figure below was measured in this run by a test in
integration/scale*_test.go, against the real kafka2pg binary, a real
PostgreSQL and the Kafka named in each table, and every run it comes from
ended with the exactly-once check (each produced record in its table once,
no gap, no duplicate). Scale-out is Kafka's consumer group: run more
instances with the same ` + "`--kafka-group`" + `; the fenced offsets in Postgres
keep it exactly-once across rebalances.
`)
	renderThroughput(&b, entries, meta)
	renderRebalance(&b, entries)
	renderRecovery(&b, entries)
	renderPartitions(&b, entries, meta)
	renderPostgres(&b, entries)
	if _, err := io.WriteString(w, b.String()); err != nil {
		return fmt.Errorf("render scale report: %w", err)
	}
	return nil
}

// latest keeps the last entry of each key, in first-seen order.
func latest[T any](entries []testreport.ScaleEntry, kind string, get func(testreport.ScaleEntry) *T, key func(testreport.ScaleEntry) string) []testreport.ScaleEntry {
	idx := map[string]int{}
	var out []testreport.ScaleEntry
	for _, e := range entries {
		if e.Kind != kind || get(e) == nil {
			continue
		}
		k := key(e)
		if i, ok := idx[k]; ok {
			out[i] = e
			continue
		}
		idx[k] = len(out)
		out = append(out, e)
	}
	return out
}

func throughputs(entries []testreport.ScaleEntry) []testreport.ScaleEntry {
	return latest(entries, testreport.KindThroughput, func(e testreport.ScaleEntry) *testreport.Throughput { return e.Throughput },
		func(e testreport.ScaleEntry) string {
			t := e.Throughput
			return fmt.Sprintf("%s/%s/%d/%d", t.Variant, t.Axis, t.Instances, t.Partitions)
		})
}

// variants returns the columns in first-seen order, with their flags.
func variants(ts []testreport.ScaleEntry) (names []string, flags map[string][]string) {
	flags = map[string][]string{}
	for _, e := range ts {
		if _, ok := flags[e.Throughput.Variant]; !ok {
			names = append(names, e.Throughput.Variant)
			flags[e.Throughput.Variant] = e.Throughput.Flags
		}
	}
	return names, flags
}

// failed marks a row whose test failed.
func failed(e testreport.ScaleEntry) string {
	if e.Failed {
		return " **(its test FAILED)**"
	}
	return ""
}

func renderThroughput(b *strings.Builder, entries []testreport.ScaleEntry, meta pageMeta) {
	b.WriteString("\n## Throughput against instances and partitions\n\n")
	ts := throughputs(entries)
	if len(ts) == 0 {
		b.WriteString("Not measured in this run (TestScaleThroughputMatrix, `KAFKA2PG_SCALE=1`).\n")
		return
	}
	names, flags := variants(ts)
	fmt.Fprintf(b, "A backlog of %s records (about 215 bytes each, the zero-config table) drained by kafka2pg processes of one group, each cell with a fresh group and table, on %s. Rows/s is measured between 20%% and 80%% of the backlog durable in `kafka2pg.offsets`, so start-up, the first rebalances and the tail are left out. Each column is the same cells with other bridge flags:\n\n",
		figures.Num(float64(ts[0].Throughput.Records), 0), ts[0].Broker)
	for _, n := range names {
		f := strings.Join(flags[n], " ")
		if f == "" {
			f = "the defaults"
		} else {
			f = "`" + f + "`"
		}
		fmt.Fprintf(b, "- **%s**: %s\n", n, f)
	}
	b.WriteString("\n**All processes run on this one machine.** On a 2-core box more instances share the same two CPUs (with Postgres and Kafka), so the instances table measures what coordination costs, not scale-out capacity: with a CPU per instance and a database that keeps up, each instance adds its own throughput. Compare the columns within a row; the rows ran back to back in the same run.\n\n")
	for _, axis := range []string{"instances", "partitions"} {
		label := map[string]string{"instances": "instances (64 partitions)", "partitions": "partitions (1 instance)"}[axis]
		fmt.Fprintf(b, "| %s |", label)
		for _, n := range names {
			fmt.Fprintf(b, " %s, rows/s |", n)
		}
		b.WriteString("\n|---:|")
		for range names {
			b.WriteString("---:|")
		}
		b.WriteString("\n")
		var keys []int
		for _, e := range ts {
			t := e.Throughput
			if t.Axis != axis {
				continue
			}
			k := t.Instances
			if axis == "partitions" {
				k = t.Partitions
			}
			if !slices.Contains(keys, k) {
				keys = append(keys, k)
			}
		}
		slices.Sort(keys)
		for _, k := range keys {
			fmt.Fprintf(b, "| %d |", k)
			for _, n := range names {
				cell := "–"
				for _, e := range ts {
					t := e.Throughput
					if t.Axis == axis && t.Variant == n && ((axis == "instances" && t.Instances == k) || (axis == "partitions" && t.Partitions == k)) {
						cell = figures.Num(float64(int64(t.RowsPerSec+0.5)), 0) + failed(e)
					}
				}
				fmt.Fprintf(b, " %s |", cell)
			}
			b.WriteString("\n")
		}
		b.WriteString("\n")
	}
	if meta.ThroughputChart != "" {
		fmt.Fprintf(b, "![rows/s against instances and partitions, one bar per column](%s)\n", meta.ThroughputChart)
	}
}

func renderRebalance(b *strings.Builder, entries []testreport.ScaleEntry) {
	b.WriteString("\n## Write gaps while instances come and go\n\n")
	rs := latest(entries, testreport.KindRebalance, func(e testreport.ScaleEntry) *testreport.Rebalance { return e.Rebalance },
		func(e testreport.ScaleEntry) string { return fmt.Sprint(e.Rebalance.Round) })
	if len(rs) == 0 {
		b.WriteString("Not measured in this run (TestScaleRebalanceWriteGaps).\n")
		return
	}
	r0 := rs[0].Rebalance
	fmt.Fprintf(b, `Three instances of one group (cooperative-sticky, every one with a
`+"`--kafka-instance-id`"+`) over %d partitions, on %s, with a producer writing to
every partition throughout; then one membership change after another. The
target table has an extra column `+"`written_at timestamptz DEFAULT now()`"+` that
COPY leaves out, so each row carries the start of its transaction; a
partition's *gap* is the longest time between two of its consecutive
transactions around the change. A partition *moved* when its owner changed
(its fence epoch in `+"`kafka2pg.offsets`"+` was bumped by a claim). In the quiet
window before the first change the longest gap of any partition was %s.
%s

| # | change | instances after | moved | moved: gap max | moved: gap p50 | writing again after | stayed: gap max | stayed: gap p50 |
|---:|---|---:|---:|---:|---:|---:|---:|---:|
`, r0.Partitions, rs[0].Broker, seconds(r0.SteadyMax), rs[0].Note)
	for _, e := range rs {
		r := e.Rebalance
		rec := "–"
		if r.RecoverySec >= 0 {
			rec = seconds(r.RecoverySec)
		}
		fmt.Fprintf(b, "| %d | %s%s | %d | %d | %s | %s | %s | %d: %s | %s |\n", r.Round, cell(r.Event), failed(e), r.Instances, r.Moved,
			seconds(r.MovedMax), seconds(r.MovedP50), rec, r.Partitions-r.Moved, seconds(r.StayedMax), seconds(r.StayedP50))
	}
	b.WriteString(`
Partitions that stayed kept writing through every rebalance: their longest
gap is the same as in the quiet window (the test fails if it exceeds half
the session timeout). A killed instance's partitions wait for the session
timeout, then for a claim; a partition handed to a new instance pauses
only for the hand-over; a restart with the same ` + "`--kafka-instance-id`" + `
gets its own partitions back without a rebalance, so only they pause, for
the restart.
`)
}

func renderRecovery(b *strings.Builder, entries []testreport.ScaleEntry) {
	b.WriteString("\n## Recovering from the loss of an instance\n\n")
	rs := latest(entries, testreport.KindRecovery, func(e testreport.ScaleEntry) *testreport.Recovery { return e.Recovery },
		func(e testreport.ScaleEntry) string { return e.Recovery.Setting })
	if len(rs) == 0 {
		b.WriteString("Not measured in this run (TestScaleRecoveryAfterInstanceLoss, `KAFKA2PG_SCALE=1`).\n")
		return
	}
	fmt.Fprintf(b, "Two instances over %d partitions under load on %s; one is killed with SIGKILL (no goodbye to the group). Time from the kill until every partition it owned committed a transaction again, elsewhere or in its restarted process:\n\n",
		rs[0].Recovery.Partitions, rs[0].Broker)
	b.WriteString("| setting | its partitions | kill -9 → all writing again |\n|---|---:|---:|\n")
	for _, e := range rs {
		r := e.Recovery
		fmt.Fprintf(b, "| %s (`%s`)%s | %d | %s |\n", cell(r.Setting), strings.Join(r.Flags, " "), failed(e), r.Moved, seconds(r.Seconds))
	}
	b.WriteString(`
Without a restart the group learns of the loss only when the session
timeout expires: recovery is the session timeout plus a rebalance and a
claim, whatever the membership. Lower ` + "`--kafka-session-timeout`" + ` (the broker's
` + "`group.min.session.timeout.ms`" + ` bounds it) for faster failover, at the price of
rebalances on long GC pauses or network blips. With static membership a
restarted process (same ` + "`--kafka-instance-id`" + `) takes its partitions back at
once, without a rebalance, however long the session timeout: set a long
one and restarts (deploys, pod moves) cost no rebalance at all.
`)
}

func renderPartitions(b *strings.Builder, entries []testreport.ScaleEntry, meta pageMeta) {
	b.WriteString("\n## One process, many partitions: memory and fairness\n\n")
	ps := latest(entries, testreport.KindPartitions, func(e testreport.ScaleEntry) *testreport.Partitions { return e.Partitions },
		func(e testreport.ScaleEntry) string {
			return fmt.Sprint(e.Partitions.Topics * e.Partitions.PartitionsPerTopic)
		})
	if len(ps) == 0 {
		b.WriteString("Not measured in this run (TestScaleManyPartitionsBoundedMemoryFairProgress).\n")
		return
	}
	b.WriteString(`One kafka2pg process drains a backlog spread evenly over many topics and
partitions, with one ` + "`topic_regex`" + ` sink whose ` + "`table: s_${topic}`" + ` template gives
every topic its own table. The peak RSS is what the process reports itself
(` + "`kafka2pg_process_peak_resident_memory_bytes`" + `, VmHWM, scraped at the end).
Lag is each partition's end offset minus its ` + "`next_offset`" + `, sampled from
` + "`kafka2pg.offsets`" + `; *max/mean* is the largest lag over the mean lag, over
the samples taken while the mean lag was above a tenth of its start.

| partitions | topics = tables | records | broker | rows/s | peak RSS | limit | --max-buffered-bytes | max/mean lag p50 | max/mean lag max | last first write | longest stall |
|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|
`)
	for _, e := range ps {
		p := e.Partitions
		fmt.Fprintf(b, "| %d%s | %d | %s | %s | %s | **%d MB** | %d MB | %d MiB | %.2f | %.2f | %s | %s |\n",
			p.Topics*p.PartitionsPerTopic, failed(e), p.Tables, figures.Num(float64(p.Records), 0), e.Broker, figures.Num(float64(int64(p.RowsPerSec+0.5)), 0),
			p.PeakRSSBytes>>20, p.RSSLimitBytes>>20, p.MaxBufferedBytes>>20, p.MaxOverMeanP50, p.MaxOverMeanMax,
			seconds(p.FirstWriteMax), seconds(p.StallMax))
		if p.PeakRSSBytes > p.RSSLimitBytes {
			fmt.Fprintf(b, "\n**Over the limit:** %d MB at the peak with %d partitions, above the %d MB the test asserts; the run's test failed.\n\n",
				p.PeakRSSBytes>>20, p.Topics*p.PartitionsPerTopic, p.RSSLimitBytes>>20)
		}
	}
	b.WriteString(`
*Last first write*: from the first row anywhere to the moment the last
partition wrote its first row; *longest stall*: the longest time a partition
with lag went without a write. The test asserts both at most half the drain
plus 2 s: a partition that waited for the others to finish would exceed it.

What makes the drain fair: every fetch lists every partition, least recently
served first (fetch sessions are off, so the order is the bridge's), and a
partition's share of a fetch is ` + "`--kafka-fetch-max-bytes`" + ` over the partitions
owned, never under twice the largest record batch seen: every turn brings
every partition a little. The backlog is produced in 16 KiB batches (the Java
producer's default ` + "`batch.size`" + `); a broker never splits a batch, so a
partition whose whole backlog is one batch can only be fetched whole. The
price, measured with this test: 100-115k rows/s against 131-157k
with ` + "`--kafka-fetch-max-partition-bytes 1MiB`" + `, which drains the same backlog
in waves (the last partitions' first writes 6.6-7.9 s into 6.4-7.9 s drains).
`)
	if meta.LagChart != "" {
		fmt.Fprintf(b, "\n![max and mean lag per partition over the largest run](%s)\n", meta.LagChart)
	}
}

func renderPostgres(b *strings.Builder, entries []testreport.ScaleEntry) {
	b.WriteString(`
## Scaling Postgres itself

kafka2pg writes with binary ` + "`COPY`" + ` and one small fenced ` + "`UPDATE`" + ` per partition
per transaction, so anything that accepts ` + "`COPY`" + ` into a table works as a
target; the target's own scaling is Postgres's.

**Declarative partitioning.** Create the parent ` + "`PARTITION BY RANGE`" + ` (or
` + "`LIST`" + `, ` + "`HASH`" + `) with its partitions, and point a sink at the parent with
` + "`create: false`" + `; Postgres routes every row of the COPY to its partition.
` + "`TestCopyIntoADeclarativelyPartitionedTable`" + ` in
[integration/typed_more_test.go](../integration/typed_more_test.go) writes
3,006 records into a monthly range-partitioned table with a default
partition and checks that each row landed in the partition its timestamp
belongs to, the range edges included.

**Partitions kafka2pg makes.** A typed sink with ` + "`partition_by`" + ` has its
table created ` + "`PARTITION BY RANGE`" + ` of a time column, its partitions made
ahead at every start and for rows outside them as they come
([MAPPING.md](MAPPING.md#partitioned-tables)). With pg_partman, leave
` + "`partition_by`" + ` out: pg_partman keeps its parent's partitions.

**pg_partman** keeps such a parent supplied with partitions ahead of time
(` + "`partman.create_parent`" + `, then ` + "`partman.run_maintenance()`" + ` from cron or its
background worker) and drops or detaches old ones by retention: kafka2pg
needs nothing more than the parent's name. Debian packages it as
` + "`postgresql-<version>-partman`" + ` (.ci/run installs it).
`)
	pm := latest(entries, testreport.KindPartman, func(e testreport.ScaleEntry) *struct{} { return &struct{}{} }, func(testreport.ScaleEntry) string { return "" })
	if len(pm) > 0 {
		fmt.Fprintf(b, "`TestPgPartmanManagedParent` ([integration/scale_partman_test.go](../integration/scale_partman_test.go)), in this run: %s\n", pm[0].Note)
	} else {
		b.WriteString("`TestPgPartmanManagedParent` ([integration/scale_partman_test.go](../integration/scale_partman_test.go)) proves it where the extension is installed; it did not report in this run.\n")
	}
	b.WriteString(`
**Citus** (on paper; not tested here): a distributed table
(` + "`create_distributed_table('orders', 'kafka_partition')`" + `, or a customer id) accepts
` + "`COPY`" + ` through the coordinator, which routes the rows to the worker shards,
and ` + "`kafka2pg.offsets`" + ` stays a local table on the coordinator. The offset
advance and the rows then commit in one distributed transaction (Citus
uses two-phase commit across the nodes it touched), so the exactly-once
argument holds as long as that transaction is atomic. Keep ` + "`kafka2pg.offsets`" + `
local (not distributed) and use ` + "`--pg-max-conns`" + ` to bound what the bridge
asks of the coordinator.

## Settings that matter at scale

| flag | what it does at scale |
|---|---|
| ` + "`--kafka-instance-id`" + ` | static membership: a restart keeps its partitions without a rebalance (the pod or host name) |
| ` + "`--kafka-session-timeout`" + ` | how long a dead instance's partitions wait before they move |
| ` + "`--kafka-group-protocol consumer`" + ` | KIP-848: the broker assigns, incremental by design (Kafka 4.0+) |
| ` + "`--max-buffered-bytes`" + ` | memory of the records buffered across all partitions (key, value and 190 bytes a record) before fetching stops |
| ` + "`--pg-max-conns`" + ` | Postgres connections per process, shared by all partitions |
| ` + "`--table-writers`" + ` | transactions per table at once; batches that find them busy share one (one COPY, one fenced advance per partition) |
| ` + "`--kafka-metadata-max-age`" + ` | how soon new topics (regex sinks) and partitions are noticed |
`)
}

// seconds formats seconds briefly: "0.09 s", "6.0 s".
func seconds(s float64) string {
	if s < 1 {
		return fmt.Sprintf("%.2f s", s)
	}
	return fmt.Sprintf("%.1f s", s)
}
