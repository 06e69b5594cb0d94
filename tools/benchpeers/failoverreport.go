package main

import (
	"cmp"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/kafka2pg/kafka2pg/tools/internal/figures"
)

// failoverMarkdown is the report's lossy-failover section; "" when no
// failover ran.
func failoverMarkdown(o options, rep *report) string {
	if len(rep.failovers) == 0 && rep.failoverNote == "" {
		return ""
	}
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	w("## Lossy failover\n\n")
	if rep.failoverNote != "" {
		w("Not run: %s.\n\n", rep.failoverNote)
		return b.String()
	}
	w("Each sink writes, in append mode, records produced at %s records/s to a topic of its own, through a TCP forwarder, to a Postgres primary of the harness's own that streams to an asynchronous standby (pg_basebackup -R, no replication slot). ", figures.Num(o.failoverRate, 0))
	w("The standby's walreceiver is stopped (SIGSTOP) until the primary holds commits of the sink that it can never send (the walsender's sent_lsn stood still for 1 s with WAL waiting, and the sink committed rows after that; the harness writes WAL of its own, logical messages, until sent_lsn stands still, since the loopback connection's buffers hold tens of MB), then until the sink's consumer group has committed Kafka offsets past what the standby can hold, for at most the sink's offset commit interval and 15 s. The Debezium JDBC sink commits its offsets every offset.flush.interval.ms (%s here), so its standby is frozen %s before the commit that follows one it was seen to make: the standby then lags by seconds at the kill, as an asynchronous standby does, and the sink's offsets are past the commits it lacks. ", secs(o.offsetFlush), secs(failoverLead))
	w("The primary is then killed with -9, the walreceiver continued, the standby promoted once it replayed all it received, and the forwarder moved to it, cutting every connection, as a virtual IP or a DNS name moves: no sink is reconfigured. ")
	w("Each sink goes on by itself; the harness only restarts what an operator would (a FAILED Connect task, through the REST API; an exited Flink job, from its latest retained checkpoint). ")
	w("Records keep flowing %s after the sink's first write on the new primary; then SQL on the new primary counts the records produced that have no row (**lost for good**, once the table stood still for %s) and the rows beyond one per record (**duplicates**).\n\n", secs(failoverTail), secs(lossSettle))
	w("Variants, as kafka2pg's fault cases 23a-c: **records flowing** through the failover; **sink killed** with -9 with the primary and started again after the promote; **partitions idle**: the producer stops once the primary holds commits it never sent, the primary dies once the sink wrote every record, and records resume %s after the promote, so nothing fails a write at the failover.\n\n", secs(failoverIdle))
	if len(rep.failovers) > 0 {
		w("The servers: PostgreSQL %s from the installed binaries, initdb'd by the harness for each run (fsync off, wal_level replica, trust authentication).\n\n", rep.failovers[0].Server)
	}
	w("| sink | variant | records | commits lost by the failover | Kafka offsets past them at the kill | rows lost for good | duplicates | how it recovered | promote to first write |\n|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range rep.failovers {
		if r.NotRun != "" {
			w("| %s | %s | not run: %s | | | | | | |\n", r.System, r.Variant.title(), r.NotRun)
			continue
		}
		lost := fmt.Sprintf("%s rows (%s on the old primary, %s on the new; standby frozen %s s)", figures.Num(float64(r.OldRows-r.NewRows), 0),
			figures.Num(float64(r.OldRows), 0), figures.Num(float64(r.NewRows), 0), figures.Num(r.Frozen.Seconds(), 1))
		covered := "no"
		if r.KafkaCovered {
			covered = "yes"
		}
		recovery, first := r.Recovery, figures.Num(r.Recover.Seconds(), 1)+" s"
		if r.Failed != "" {
			recovery = "**failed**: " + firstLine(r.Failed)
			if r.Recover == 0 {
				first = "never"
			}
		}
		mark := func(n int64) string {
			s := figures.Num(float64(n), 0)
			if n != 0 && r.System == "kafka2pg" {
				s = "**" + s + " WRONG**"
			}
			return s
		}
		w("| %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", r.System, r.Variant.title(), figures.Num(float64(r.Records), 0), lost, covered,
			mark(r.Lost), mark(r.Duplicates), strings.ReplaceAll(recovery, "|", "\\|"), first)
	}
	w("\n")
	for _, r := range rep.failovers {
		if r.KafkaNote != "" {
			w("- %s, %s: %s.\n", r.System, r.Variant.title(), r.KafkaNote)
		}
	}
	w("\n")
	return b.String()
}

// failoverOnly tells whether the run measured nothing but failovers
// (-reps 0 -probe=false -latency-rate -1): its report is then the
// failover section alone, with the run's facts.
func failoverOnly(rep *report) bool {
	return len(rep.results) == 0 && len(rep.probes) == 0 && len(rep.flinkProbes) == 0 && len(rep.latency) == 0 && len(rep.failovers) > 0
}

// writeFailoverOnly writes the report of a failover-only run.
func writeFailoverOnly(o options, rep *report) error {
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	f := rep.facts
	w("# kafka2pg and its peers through a lossy Postgres failover\n\n")
	w("Written by `make bench-peers`'s harness (tools/benchpeers, the failover only) on %s, in %s, on a shared 2-core machine (load average %s before, %s after).\n\n",
		f.started.UTC().Format("2006-01-02 15:04 UTC"), f.finished.Sub(f.started).Round(time.Second), f.loadBefore, f.loadAfter)
	b.WriteString(failoverMarkdown(o, rep))
	w("## What ran\n\n")
	w("- Command: `%s`.\n", f.command)
	w("- Machine: %d CPUs (%s), %s, %s; %s.\n", f.nproc, f.cpuModel, f.memory, f.kernel, f.goVersion)
	w("- kafka2pg %s (checkout %s), its defaults, the typed append sink of bench/peers.md.\n", f.kafka2pg, f.commit)
	w("- Kafka: %s. Kafka Connect %s, Debezium JDBC sink %s (insert.mode insert, its defaults), %s.\n", f.kafka, cmp.Or(f.connect, "not run"), cmp.Or(f.debezium, "not run"), cmp.Or(f.java, "no Java"))
	if f.flink != "" {
		w("- %s; Flink's XA sink at parallelism %s, a checkpoint every %s, started again from its latest retained checkpoint when killed.\n", f.flink, joinInts(o.flinkParallelism), o.flinkCheckpoint)
	}
	if err := os.MkdirAll(filepath.Dir(o.out), 0o755); err != nil {
		return err
	}
	return os.WriteFile(o.out, []byte(b.String()), 0o644)
}

func joinInts(ns []int) string {
	s := make([]string, len(ns))
	for i, n := range ns {
		s[i] = fmt.Sprint(n)
	}
	return strings.Join(s, ",")
}
