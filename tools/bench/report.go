package main

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"os/exec"
	"runtime"
	"strings"
	"time"

	"github.com/kafka2pg/kafka2pg/tools/internal/figures"
	"github.com/kafka2pg/kafka2pg/tools/internal/procfs"
)

// result is one measured scenario.
type result struct {
	Kind      string // ceiling1, ceiling2, bridge, pipe, pipeRows, baselineA, baselineB, latency, backlog
	Table     string // typedTable, rawTable or smallTable (the pipe: its block's)
	Records   int
	TableRows int64         // count(*) of the table afterwards
	Wall      time.Duration // from the start (process, consumer) to the last commit
	// Active is from the first records fetched to the last commit;
	// ActiveRows the rows committed in it (all). rows/s is
	// ActiveRows/Active: without the start-up (group join, migrations).
	// For the ceiling, Active = Wall.
	Active     time.Duration
	ActiveRows int
	ClientCPU  float64 // CPU seconds of the bridge/baseline/COPY process; NaN unknown
	PGCPU      float64 // CPU seconds of the Postgres server processes; NaN unknown
	// BrokerCPU is the CPU seconds of the kfake child while the run
	// fetched from it, on the same cores; NaN with a real broker (not
	// measured) and for the ceiling, which reads no broker.
	BrokerCPU float64
	PeakRSS   int64 // bytes; 0 unknown
	// OthersCores is the CPU other processes used during the run, in cores
	// (the machine's busy time less the bench, kfake, the bridge, Postgres).
	OthersCores float64
	P50, P99    float64 // seconds from record timestamp to commit; NaN for the ceiling
	RecordBytes float64
	// Keys is the stream of an upsert run (upsert.go); empty otherwise.
	Keys keyMode
	// WantRows is the rows the table must hold when not Records (an
	// upsert's: one per id).
	WantRows int64
	// Mismatch says how the table's content is not what the records make
	// (an upsert table that does not hold the last record of every id).
	Mismatch string
}

// wrong says what is wrong with the table r left, or "".
func (r result) wrong() string {
	want := cmp.Or(r.WantRows, int64(r.Records))
	switch {
	case r.TableRows != want:
		return fmt.Sprintf("%s: the table held %d rows, not %d", r.title(), r.TableRows, want)
	case r.Mismatch != "":
		return r.title() + ": " + r.Mismatch
	}
	return ""
}

func (r result) rowsPerSec() float64 {
	if r.Active <= 0 {
		return 0
	}
	return float64(r.ActiveRows) / r.Active.Seconds()
}

func (r result) mbPerSec() float64 { return r.rowsPerSec() * r.RecordBytes / 1e6 }

// perMillion is CPU seconds per million rows.
func (r result) perMillion(cpu float64) float64 { return cpu / float64(r.Records) * 1e6 }

func (r result) title() string {
	if r.Keys != "" {
		return upsertTitle(r)
	}
	t := tableLabel(r.Table)
	switch r.Kind {
	case "ceiling1":
		return "ceiling, COPY, 1 conn (" + t + ")"
	case "ceiling2":
		return "ceiling, COPY, 2 conns (" + t + ")"
	case "bridge":
		return "kafka2pg (" + t + ")"
	case "backlog":
		return "kafka2pg backlog (" + t + ")"
	case "latency":
		return "kafka2pg latency (" + t + ")"
	case "pipe":
		return "minimal pipe: franz-go + COPY of the values (" + t + ")"
	case "pipeRows":
		return "minimal pipe into the bridge's table (" + t + ")"
	case "baselineA":
		return "baseline a: INSERT per record (" + t + ")"
	case "baselineB":
		return "baseline b: multi-row INSERT (" + t + ")"
	}
	return r.Kind
}

func (r result) summary() string {
	return fmt.Sprintf("%s rows/s, %s MB/s, CPU s/M rows: client %s, Postgres %s, kfake %s, peak RSS %s, p50 %s, p99 %s",
		figures.Num(r.rowsPerSec(), 0), figures.Num(r.mbPerSec(), 1), figures.Num(r.perMillion(r.ClientCPU), 2), figures.Num(r.perMillion(r.PGCPU), 2),
		figures.Num(r.perMillion(r.BrokerCPU), 2), mib(r.PeakRSS), secs(r.P50), secs(r.P99))
}

func mib(b int64) string {
	if b <= 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.0f MiB", float64(b)/(1<<20))
}

func secs(s float64) string {
	switch {
	case math.IsNaN(s):
		return "—"
	case s < 1:
		return fmt.Sprintf("%.0f ms", s*1000)
	}
	return fmt.Sprintf("%.2f s", s)
}

// facts describe the machine and the run.
type facts struct {
	started, finished     time.Time
	nproc                 int
	goVersion, commit     string
	pgVersion, kafka      string
	pgSettings            string
	pgCPUNote             string
	loadBefore, loadAfter string
	bin                   string
	realKafka             bool
	records, reps         int
}

func machineFacts(_ context.Context, o options) facts {
	return facts{started: time.Now(), nproc: runtime.NumCPU(), goVersion: runtime.Version(), commit: describeCommit(o.out, o.chart),
		loadBefore: procfs.LoadAverage(), bin: o.bin, records: o.records, reps: o.reps}
}

// describeCommit names the work tree's commit: a short hash, with
// "+ uncommitted changes" when the tree is dirty; "unknown" without git.
// The bench's own outputs do not count: the previous run's results would
// otherwise mark every run after it.
func describeCommit(outputs ...string) string {
	out, err := exec.Command("git", "rev-parse", "--short", "HEAD").Output()
	if err != nil {
		return "unknown"
	}
	commit := strings.TrimSpace(string(out))
	args := []string{"status", "--porcelain", "--untracked-files=no", "--", ":/"}
	for _, o := range outputs {
		args = append(args, ":(exclude)"+o)
	}
	if st, err := exec.Command("git", args...).Output(); err == nil && len(st) > 0 {
		commit += " + uncommitted changes"
	}
	return commit
}
