package main

import (
	"fmt"
	"strings"

	"github.com/kafka2pg/kafka2pg/tools/internal/figures"
	"github.com/kafka2pg/kafka2pg/tools/internal/svgchart"
)

// chartSVG draws rows/s per scenario as horizontal bars, the median over
// the repetitions with a whisker from min to max, grouped by table, with
// the median of each repetition's best ceiling as a dashed line.
func chartSVG(rep *report) (string, error) {
	colors := map[string]string{"ceiling1": "#bbbbbb", "ceiling2": "#888888", "bridge": "#1f77b4", "pipe": "#9467bd", "baselineB": "#d62728", "baselineA": "#ff9896"}
	f := rep.facts
	c := svgchart.Bars{
		Title: "kafka2pg bench: rows/s committed, against the binary COPY ceiling",
		Notes: []string{
			fmt.Sprintf("%s, commit %s, %d CPUs, PostgreSQL %s, %s.", f.started.UTC().Format("2006-01-02"), f.commit, f.nproc, f.pgVersion, shortKafka(f.kafka)),
			fmt.Sprintf("Bars: median of %d repetitions; whiskers: min–max; (× n): median paired ratio to the ceiling; dashed: the median ceiling (better of 1 and 2 conns).", rep.reps),
		},
		XLabel:     "rows/s",
		LabelWidth: 340,
	}
	for _, table := range tables {
		g := svgchart.BarGroup{Title: tableLabel(table) + " table"}
		var bests []float64
		for _, bl := range rep.blocks {
			if bl.table == table {
				bests = append(bests, bl.best().rowsPerSec())
			}
		}
		g.Ref = figures.SpreadOf(bests).Med
		for _, kind := range scenarioKinds {
			s := rep.series(kind, table)
			if len(s.runs) == 0 {
				continue
			}
			rate := s.rate()
			b := svgchart.Bar{Label: chartLabels[kind], Color: colors[kind], Med: rate.Med, Lo: rate.Lo, Hi: rate.Hi, Text: figures.Num(rate.Med, 0)}
			if kind != "ceiling1" && kind != "ceiling2" {
				b.Text += fmt.Sprintf(" (× %s)", figures.Num(s.ratio().Med, 2))
			}
			if kind == "baselineA" || kind == "baselineB" {
				b.Label += fmt.Sprintf(" (%s records)", figures.Num(float64(s.runs[0].Records), 0))
			}
			g.Bars = append(g.Bars, b)
		}
		if len(g.Bars) > 0 {
			c.Groups = append(c.Groups, g)
		}
	}
	if g := upsertBars(rep); len(g.Bars) > 0 {
		c.Groups = append(c.Groups, g)
	}
	var b strings.Builder
	err := c.WriteSVG(&b)
	return b.String(), err
}

// chartLabels name the bars; the group says the table.
var chartLabels = map[string]string{"ceiling1": "ceiling, COPY, 1 conn", "ceiling2": "ceiling, COPY, 2 conns", "bridge": "kafka2pg",
	"pipe": "minimal pipe: franz-go + COPY", "pipeRows": "minimal pipe into the bridge's table",
	"baselineB": "baseline b: multi-row INSERT", "baselineA": "baseline a: INSERT per record"}

func shortKafka(k string) string {
	if strings.HasPrefix(k, "kfake") {
		return "kfake"
	}
	return "real Kafka"
}

// upsertBars is the upsert group: kafka2pg's append run on the typed table,
// then per stream the limit and kafka2pg's upsert, each with its paired
// ratio to the append run; the dashed line is the append run's median.
func upsertBars(rep *report) svgchart.BarGroup {
	g := svgchart.BarGroup{Title: "upsert by id (typed columns, primary key id)"}
	bar := func(label, color string, s upsertSeries) {
		rate := s.each(result.rowsPerSec)
		g.Bars = append(g.Bars, svgchart.Bar{Label: label, Color: color, Med: rate.Med, Lo: rate.Lo, Hi: rate.Hi,
			Text: fmt.Sprintf("%s (× %s of append)", figures.Num(rate.Med, 0), figures.Num(s.over(s.appends).Med, 2))})
	}
	for _, m := range keyModes {
		s := rep.upsertSeries(m, "bridge")
		if len(s.runs) == 0 {
			continue
		}
		if len(g.Bars) == 0 {
			app := upsertSeries{runs: s.appends, appends: s.appends}
			g.Ref = app.each(result.rowsPerSec).Med
			bar("kafka2pg append (typed)", "#1f77b4", app)
		}
		bar("limit: INSERT ... ON CONFLICT, "+m.label(), "#bbbbbb", rep.upsertSeries(m, "limit"))
		bar("kafka2pg upsert, "+m.label(), "#2ca02c", s)
	}
	return g
}
