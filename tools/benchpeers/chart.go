package main

import (
	"fmt"
	"math"
	"strings"

	"github.com/kafka2pg/kafka2pg/tools/internal/figures"
	"github.com/kafka2pg/kafka2pg/tools/internal/svgchart"
)

// chartSVG draws rows/s per scenario as horizontal bars, kafka2pg above the
// JDBC sink, the median over the repetitions with a whisker from min to
// max, and the probe's duplicates as a line of text under them.
func chartSVG(rep *report) (string, error) {
	colors := []string{"#1f77b4", "#d62728"}
	flinkColors := []string{"#2ca02c", "#9467bd", "#8c564b", "#e377c2"}
	f := rep.facts
	c := svgchart.Bars{
		Title: "kafka2pg and its peers: rows/s into PostgreSQL, same records, broker and database",
		Notes: []string{
			fmt.Sprintf("%s, %d CPUs (shared), PostgreSQL %s, Kafka Connect %s, Debezium %s, kafka2pg %s.",
				f.started.UTC().Format("2006-01-02"), f.nproc, f.pgVersion, f.connect, f.debezium, f.kafka2pg),
			fmt.Sprintf("Bars: median of %d repetitions; whiskers: min–max; (× n): kafka2pg's median over the JDBC sink's.", rep.reps),
		},
		XLabel: "rows/s",
	}
	for _, row := range rep.summary() {
		g := svgchart.BarGroup{Title: row.sc.title}
		for i, sys := range systems {
			s := row.rate[i]
			b := svgchart.Bar{Label: sys, Color: colors[i], Med: s.Med, Lo: s.Lo, Hi: s.Hi, Text: figures.Num(s.Med, 0)}
			if row.notRun[i] != "" {
				b.Med, b.Lo, b.Hi, b.Text = math.NaN(), math.NaN(), math.NaN(), "not run"
			} else if i == 0 && row.ran() {
				b.Text += fmt.Sprintf(" (× %s)", figures.Num(row.ratio(), 1))
			}
			g.Bars = append(g.Bars, b)
		}
		// Flink's XA sink, at each parallelism, where it ran.
		for i, label := range rep.flinkLabels() {
			rs := rep.series(row.sc.key, label)
			if len(rs) == 0 {
				continue
			}
			s := figures.SpreadOver(rs, result.rate)
			g.Bars = append(g.Bars, svgchart.Bar{Label: label, Color: flinkColors[i%len(flinkColors)], Med: s.Med, Lo: s.Lo, Hi: s.Hi, Text: figures.Num(s.Med, 0)})
		}
		c.Groups = append(c.Groups, g)
	}
	if len(rep.probes) == 2 {
		k, d := rep.probes[0], rep.probes[1]
		c.Footer = append(c.Footer, fmt.Sprintf("Two kill -9 mid-stream (append, %s records): kafka2pg wrote %s duplicates, the JDBC sink %s.",
			figures.Num(float64(k.Records), 0), figures.Num(float64(k.Duplicates), 0), figures.Num(float64(d.Duplicates), 0)))
	}
	var b strings.Builder
	err := c.WriteSVG(&b)
	return b.String(), err
}
