package main

import (
	"fmt"
	"html"
	"math"
	"strings"
)

// chartSVG draws rows/s per scenario as horizontal bars, kafka2pg above the
// JDBC sink, the median over the repetitions with a whisker from min to
// max, and the probe's duplicates as a line of text under them.
func chartSVG(rep *report) string {
	const (
		width, left, right, top = 960, 160, 40, 84
		barH, gap, groupGap     = 22, 4, 26
	)
	colors := []string{"#1f77b4", "#d62728"}
	rows := rep.summary()
	maxV := 1.0
	for _, row := range rows {
		for i := range systems {
			if !math.IsNaN(row.rate[i].hi) {
				maxV = max(maxV, row.rate[i].hi)
			}
		}
	}
	maxV = niceCeil(maxV)
	plotW := float64(width - left - right - 110)
	x := func(v float64) float64 {
		if math.IsNaN(v) {
			v = 0
		}
		return left + plotW*v/maxV
	}
	height := top + len(rows)*(18+2*(barH+gap)+groupGap) + 60
	if len(rep.probes) > 0 {
		height += 24
	}
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	w(`<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n", width, height, width, height)
	w(`<rect width="100%%" height="100%%" fill="white"/>` + "\n")
	w(`<text x="12" y="24" font-size="16" font-weight="bold">kafka2pg and the Debezium JDBC sink: rows/s into PostgreSQL, same records, broker and database</text>` + "\n")
	f := rep.facts
	w(`<text x="12" y="42" fill="#555">%s, %d CPUs (shared), PostgreSQL %s, Kafka Connect %s, Debezium %s, kafka2pg %s.</text>`+"\n",
		f.started.UTC().Format("2006-01-02"), f.nproc, html.EscapeString(f.pgVersion), html.EscapeString(f.connect), html.EscapeString(f.debezium), html.EscapeString(f.kafka2pg))
	w(`<text x="12" y="58" fill="#555">Bars: median of %d repetitions; whiskers: min–max; (× n): kafka2pg's median over the JDBC sink's.</text>`+"\n", rep.reps)
	for i := 0; i <= 5; i++ {
		gx := x(maxV * float64(i) / 5)
		w(`<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#ddd"/>`+"\n", gx, top-8, gx, height-44)
		w(`<text x="%.1f" y="%d" text-anchor="middle" fill="#555">%s</text>`+"\n", gx, height-28, num(maxV*float64(i)/5, 0))
	}
	w(`<text x="%.1f" y="%d" text-anchor="middle" fill="#555">rows/s</text>`+"\n", left+plotW/2, height-12)
	y := top
	for _, row := range rows {
		w(`<text x="12" y="%d" font-weight="bold">%s</text>`+"\n", y+12, html.EscapeString(row.sc.title))
		y += 18
		for i, sys := range systems {
			s := row.rate[i]
			w(`<text x="%d" y="%d" text-anchor="end">%s</text>`+"\n", left-8, y+barH-7, html.EscapeString(sys))
			w(`<rect x="%d" y="%d" width="%.1f" height="%d" fill="%s"/>`+"\n", left, y, x(s.med)-left, barH, colors[i])
			if s.lo != s.hi {
				cy := y + barH/2
				w(`<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#000"/>`+"\n", x(s.lo), cy, x(s.hi), cy)
				w(`<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#000"/>`+"\n", x(s.lo), cy-5, x(s.lo), cy+5)
				w(`<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#000"/>`+"\n", x(s.hi), cy-5, x(s.hi), cy+5)
			}
			label := num(s.med, 0)
			if i == 0 {
				label += fmt.Sprintf(" (× %s)", num(row.ratio(), 1))
			}
			w(`<text x="%.1f" y="%d">%s</text>`+"\n", max(x(s.med), x(s.hi))+4, y+barH-7, label)
			y += barH + gap
		}
		y += groupGap
	}
	if len(rep.probes) == 2 {
		k, d := rep.probes[0], rep.probes[1]
		w(`<text x="12" y="%d">Two kill -9 mid-stream (append, %s records): kafka2pg wrote <tspan font-weight="bold">%s</tspan> duplicates, the JDBC sink <tspan font-weight="bold">%s</tspan>.</text>`+"\n",
			y+4, num(float64(k.Records), 0), num(float64(k.Duplicates), 0), num(float64(d.Duplicates), 0))
	}
	w("</svg>\n")
	return b.String()
}

// niceCeil rounds v up to 1, 1.5, 2, 2.5, 3, 4, 5, 6 or 8 × a power of ten.
func niceCeil(v float64) float64 {
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 1.5, 2, 2.5, 3, 4, 5, 6, 8, 10} {
		if m*p >= v {
			return m * p
		}
	}
	return 10 * p
}
