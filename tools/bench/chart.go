package main

import (
	"fmt"
	"html"
	"math"
	"strings"
)

// chartSVG draws rows/s per scenario as horizontal bars, the median over
// the repetitions with a whisker from min to max, grouped by table, with
// the median of each repetition's best ceiling as a dashed line.
func chartSVG(rep *report) string {
	const (
		width, left, right, top = 960, 290, 40, 84
		barH, gap, groupGap     = 22, 6, 34
	)
	type bar struct {
		label  string
		s      spread
		color  string
		suffix string
	}
	type group struct {
		title   string
		bars    []bar
		ceiling float64
	}
	colors := map[string]string{"ceiling1": "#bbbbbb", "ceiling2": "#888888", "bridge": "#1f77b4", "baselineB": "#d62728", "baselineA": "#ff9896"}
	var groups []group
	maxV := 1.0
	for _, table := range []string{typedTable, rawTable} {
		g := group{title: tableLabel(table) + " table"}
		var bests []float64
		for _, bl := range rep.blocks {
			if bl.table == table {
				bests = append(bests, bl.best().rowsPerSec())
			}
		}
		g.ceiling = spreadOf(bests).med
		for _, kind := range scenarioKinds {
			s := rep.series(kind, table)
			if len(s.runs) == 0 {
				continue
			}
			br := bar{label: chartLabels[kind], s: s.rate(), color: colors[kind]}
			if kind != "ceiling1" && kind != "ceiling2" {
				br.suffix = fmt.Sprintf(" (× %s)", num(s.ratio().med, 2))
			}
			if kind == "baselineA" || kind == "baselineB" {
				br.label += fmt.Sprintf(" (%s records)", num(float64(s.runs[0].Records), 0))
			}
			maxV = max(maxV, br.s.hi)
			g.bars = append(g.bars, br)
		}
		if len(g.bars) > 0 {
			groups = append(groups, g)
		}
	}
	maxV = niceCeil(maxV)
	plotW := float64(width - left - right - 90)
	x := func(v float64) float64 {
		if math.IsNaN(v) {
			v = 0
		}
		return left + plotW*v/maxV
	}
	height := top + 50
	for _, g := range groups {
		height += 20 + len(g.bars)*(barH+gap) + groupGap
	}
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	w(`<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n", width, height, width, height)
	w(`<rect width="100%%" height="100%%" fill="white"/>` + "\n")
	w(`<text x="%d" y="24" font-size="16" font-weight="bold">kafka2pg bench: rows/s committed, against the binary COPY ceiling</text>`+"\n", 12)
	f := rep.facts
	w(`<text x="12" y="42" fill="#555">%s, commit %s, %d CPUs, PostgreSQL %s, %s.</text>`+"\n",
		f.started.UTC().Format("2006-01-02"), html.EscapeString(f.commit), f.nproc, html.EscapeString(f.pgVersion), html.EscapeString(shortKafka(f.kafka)))
	w(`<text x="12" y="58" fill="#555">Bars: median of %d repetitions; whiskers: min–max; (× n): median paired ratio to the ceiling; dashed: the median ceiling (better of 1 and 2 conns).</text>`+"\n", rep.reps)
	for i := 0; i <= 5; i++ {
		v := maxV * float64(i) / 5
		gx := x(v)
		w(`<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#ddd"/>`+"\n", gx, top-8, gx, height-40)
		w(`<text x="%.1f" y="%d" text-anchor="middle" fill="#555">%s</text>`+"\n", gx, height-24, num(v, 0))
	}
	w(`<text x="%.1f" y="%d" text-anchor="middle" fill="#555">rows/s</text>`+"\n", left+plotW/2, height-8)
	y := top
	for _, g := range groups {
		w(`<text x="12" y="%d" font-weight="bold">%s</text>`+"\n", y+12, html.EscapeString(g.title))
		y += 20
		y0 := y
		for _, br := range g.bars {
			w(`<text x="%d" y="%d" text-anchor="end">%s</text>`+"\n", left-8, y+barH-7, html.EscapeString(br.label))
			w(`<rect x="%d" y="%d" width="%.1f" height="%d" fill="%s"/>`+"\n", left, y, x(br.s.med)-left, barH, br.color)
			if br.s.n > 1 {
				cy := y + barH/2
				w(`<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#000"/>`+"\n", x(br.s.lo), cy, x(br.s.hi), cy)
				w(`<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#000"/>`+"\n", x(br.s.lo), cy-5, x(br.s.lo), cy+5)
				w(`<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#000"/>`+"\n", x(br.s.hi), cy-5, x(br.s.hi), cy+5)
			}
			w(`<text x="%.1f" y="%d">%s%s</text>`+"\n", max(x(br.s.med), x(br.s.hi))+4, y+barH-7, num(br.s.med, 0), br.suffix)
			y += barH + gap
		}
		c := x(g.ceiling)
		w(`<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#000" stroke-dasharray="4 3"/>`+"\n", c, y0-3, c, y-gap+3)
		y += groupGap
	}
	w("</svg>\n")
	return b.String()
}

// chartLabels name the bars; the group says the table.
var chartLabels = map[string]string{"ceiling1": "ceiling, COPY, 1 conn", "ceiling2": "ceiling, COPY, 2 conns", "bridge": "kafka2pg",
	"baselineB": "baseline b: multi-row INSERT", "baselineA": "baseline a: INSERT per record"}

func shortKafka(k string) string {
	if strings.HasPrefix(k, "kfake") {
		return "kfake"
	}
	return "real Kafka"
}

// niceCeil rounds v up to 1, 2 or 5 × a power of ten.
func niceCeil(v float64) float64 {
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 1.5, 2, 2.5, 3, 4, 5, 6, 8, 10} {
		if m*p >= v {
			return m * p
		}
	}
	return 10 * p
}
