package main

import (
	"fmt"
	"math"

	"github.com/kafka2pg/kafka2pg/tools/internal/figures"
)

// series is one scenario (a kind on a table) over the repetitions, each run
// with the ceiling of its own block.
type series struct {
	kind, table string
	runs        []result
	ceilings    []result // best of the block, per run
}

func (rep *report) series(kind, table string) series {
	s := series{kind: kind, table: table}
	for _, bl := range rep.blocks {
		if bl.table != table {
			continue
		}
		for _, r := range bl.results() {
			if r.Kind == kind {
				s.runs = append(s.runs, r)
				s.ceilings = append(s.ceilings, bl.best())
			}
		}
	}
	return s
}

func (s series) each(f func(r result) float64) figures.Spread { return figures.SpreadOver(s.runs, f) }

func (s series) rate() figures.Spread { return s.each(result.rowsPerSec) }

// ratio is the per-repetition paired ratio to the ceiling of the same block.
func (s series) ratio() figures.Spread {
	vs := make([]float64, len(s.runs))
	for i, r := range s.runs {
		vs[i] = r.rowsPerSec() / s.ceilings[i].rowsPerSec()
	}
	return figures.SpreadOf(vs)
}

// pairedRatio is a's rows/s over b's, per repetition (runs of the same rep
// pair up).
func (rep *report) pairedRatio(a, b series) figures.Spread {
	var vs []float64
	for i := range min(len(a.runs), len(b.runs)) {
		vs = append(vs, a.runs[i].rowsPerSec()/b.runs[i].rowsPerSec())
	}
	return figures.SpreadOf(vs)
}

// target is one goal of the bench and what this run measured against it.
type target struct {
	goal     string
	measured string
	verdict  string // PASS, MISS, or "not run"
}

func verdict(ok bool) string {
	if ok {
		return "PASS"
	}
	return "MISS"
}

// rssTarget is the 256 MB target, read as the stricter of its two
// meanings: 256,000,000 bytes, 244.1 MiB.
const rssTarget = 256_000_000

// latencyTarget is the target p99 record-to-commit latency at half the
// maximum rate.
const latencyTarget = 0.250

// targets judges the run against the targets: on the median over the
// repetitions, the range given.
func (rep *report) targets() []target {
	var out []target
	ratioGoal := func(what string, s figures.Spread, goal float64) {
		t := target{goal: fmt.Sprintf("%s ≥ %s×", what, figures.Num(goal, 2)), measured: s.Format(sharp(s.Med, goal, 2, figures.Num)) + "×", verdict: "not run"}
		if s.N > 0 {
			t.verdict = verdict(s.Med >= goal)
		}
		out = append(out, t)
	}
	ratioGoal("kafka2pg zero-config ÷ ceiling", rep.series("bridge", rawTable).ratio(), 0.85)
	ratioGoal("kafka2pg typed ÷ ceiling", rep.series("bridge", typedTable).ratio(), 0.75)
	for _, table := range []string{rawTable, typedTable} {
		k := rep.series("bridge", table)
		ratioGoal(fmt.Sprintf("kafka2pg ÷ baseline a (%s)", tableLabel(table)), rep.pairedRatio(k, rep.series("baselineA", table)), 10)
		ratioGoal(fmt.Sprintf("kafka2pg ÷ baseline b (%s)", tableLabel(table)), rep.pairedRatio(k, rep.series("baselineB", table)), 1.8)
	}
	for _, table := range []string{rawTable, smallTable} {
		k := rep.series("bridge", table)
		ratioGoal(fmt.Sprintf("kafka2pg ÷ ceiling on 2 conns (%s)", tableLabel(table)), rep.pairedRatio(k, rep.series("ceiling2", table)), 0.9)
		ratioGoal(fmt.Sprintf("kafka2pg ÷ minimal pipe (%s)", tableLabel(table)), rep.pairedRatio(k, rep.series("pipe", table)), 0.95)
		// The same goal against the pipe that writes the bridge's rows
		// into its table: the bridge's own overhead, the table's cost out.
		ratioGoal(fmt.Sprintf("kafka2pg ÷ minimal pipe into the bridge's table (%s)", tableLabel(table)), rep.pairedRatio(k, rep.series("pipeRows", table)), 0.95)
	}
	for _, m := range keyModes {
		s := rep.upsertSeries(m, "bridge")
		ratioGoal(fmt.Sprintf("kafka2pg upsert ÷ kafka2pg append, typed (%s)", m.label()), s.over(s.appends), upsertGoals[m])
	}
	t := target{goal: "peak RSS draining a 5,000,000-record backlog ≤ 256 MB (244.1 MiB)", verdict: "not run",
		measured: "not run (make bench BACKLOG=5000000)"}
	if b := rep.backlog; b != nil {
		peak, goal := float64(b.PeakRSS)/(1<<20), float64(rssTarget)/(1<<20)
		mb := float64(b.PeakRSS) / 1e6
		t.measured = fmt.Sprintf("%s MiB = %s MB (%s records, zero-config)", figures.Num(peak, sharp(peak, goal, 0, figures.Num)),
			figures.Num(mb, sharp(mb, rssTarget/1e6, 0, figures.Num)), figures.Num(float64(b.Records), 0))
		t.verdict = verdict(b.PeakRSS > 0 && b.PeakRSS <= rssTarget)
		if b.Records < 5_000_000 {
			t.verdict += " (smaller backlog)"
		}
	}
	out = append(out, t)
	t = target{goal: "p99 record-to-commit latency at half the maximum rate, default flush settings ≤ 250 ms",
		verdict: "not run", measured: "not run (-latency 0)"}
	if ls := rep.latency; len(ls) > 0 {
		each := func(f func(l latencyResult) float64) figures.Spread { return figures.SpreadOver(ls, f) }
		p99 := each(func(l latencyResult) float64 { return l.P99 })
		ms := func(v float64, digits int) string { return figures.Num(v*1000, digits) + " ms" }
		p99ms := func(v float64) string {
			if v >= 1 {
				return secs(v)
			}
			return ms(v, sharp(p99.Med, latencyTarget, 0, ms))
		}
		t.measured = fmt.Sprintf("%s over %d windows (p50 %s, max %s) at %s records/s", p99.FormatWith(p99ms), len(ls),
			secs(each(func(l latencyResult) float64 { return l.P50 }).Med), secs(each(func(l latencyResult) float64 { return l.Max }).Hi),
			each(func(l latencyResult) float64 { return l.rowsPerSec() }).Format(0))
		t.verdict = verdict(p99.Med <= latencyTarget)
		if ls[0].FixedRate {
			t.verdict = "not judged (-latency-rate fixed the rate)"
		}
	}
	return append(out, t)
}

// sharp is how many digits after the point print (as print(v, digits)
// does) tells v from goal, from digits to digits+6: a median of 0.7496
// against a goal of 0.75 prints as 0.7496, not as 0.75 beside its MISS.
func sharp(v, goal float64, digits int, print func(v float64, digits int) string) int {
	if math.IsNaN(v) || v == goal {
		return digits
	}
	d := digits
	for d < digits+6 && print(v, d) == print(goal, d) {
		d++
	}
	return d
}

func tableLabel(table string) string {
	switch table {
	case rawTable:
		return "zero-config"
	case smallTable:
		return "zero-config, small records"
	}
	return "typed"
}
