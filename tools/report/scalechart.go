package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"

	"github.com/kafka2pg/kafka2pg/internal/testreport"
	"github.com/kafka2pg/kafka2pg/tools/internal/svgchart"
)

// barColors are the variants' colors, in column order.
var barColors = []string{"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd"}

// writeThroughputSVG draws the throughput matrix as grouped bars: one
// group per cell (1, 2, 3 instances; 8, 64, 512 partitions), one bar per
// variant, rows/s on a shared y axis from zero. Written by hand, like
// package svgchart: no plotting dependency.
func writeThroughputSVG(w io.Writer, entries []testreport.ScaleEntry, notes []string) error {
	ts := throughputs(entries)
	if len(ts) == 0 {
		return errors.New("throughput chart: no throughput results")
	}
	names, _ := variants(ts)
	type group struct {
		label string
		rates []float64 // by variant; NaN when missing
	}
	var groups []group
	for _, axis := range []string{"instances", "partitions"} {
		var keys []int
		for _, e := range ts {
			if t := e.Throughput; t.Axis == axis {
				k := map[bool]int{true: t.Instances, false: t.Partitions}[axis == "instances"]
				if !slices.Contains(keys, k) {
					keys = append(keys, k)
				}
			}
		}
		slices.Sort(keys)
		for _, k := range keys {
			g := group{label: fmt.Sprintf("%d instance(s)", k)}
			if axis == "partitions" {
				g.label = fmt.Sprintf("%d partitions", k)
			}
			for _, n := range names {
				v := math.NaN()
				for _, e := range ts {
					t := e.Throughput
					if t.Axis == axis && t.Variant == n && ((axis == "instances" && t.Instances == k) || (axis == "partitions" && t.Partitions == k)) {
						v = t.RowsPerSec
					}
				}
				g.rates = append(g.rates, v)
			}
			groups = append(groups, g)
		}
	}
	top := 0.0
	for _, g := range groups {
		for _, v := range g.rates {
			if !math.IsNaN(v) {
				top = max(top, v)
			}
		}
	}
	ticks := svgchart.NiceTicks(top)
	top = ticks[len(ticks)-1]
	const (
		width, left, right = 960, 78, 20
		plotH              = 300
	)
	head := 34 + 18*len(notes) + 10
	legendY := head + plotH + 60
	height := legendY + 24*len(names) + 10
	plotW := float64(width - left - right)
	y := func(v float64) float64 { return float64(head) + plotH - v/top*plotH }
	bw := bufio.NewWriter(w)
	p := func(format string, args ...any) { fmt.Fprintf(bw, format, args...) }
	p(`<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="DejaVu Sans, Verdana, Helvetica, Arial, sans-serif">`+"\n", width, height, width, height)
	p(`<rect width="100%%" height="100%%" fill="#ffffff"/>` + "\n")
	p(`<text x="%d" y="24" font-size="18" font-weight="bold" fill="#222">kafka2pg rows/s: instances (64 partitions) and partitions (1 instance)</text>`+"\n", left)
	for i, n := range notes {
		p(`<text x="%d" y="%d" font-size="12" fill="#555">%s</text>`+"\n", left, 34+18*i+12, esc(n))
	}
	for _, v := range ticks {
		p(`<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#e4e4e4"/>`+"\n", left, y(v), width-right, y(v))
		p(`<text x="%d" y="%.1f" font-size="11" fill="#444" text-anchor="end">%s</text>`+"\n", left-6, y(v)+4, esc(short(v)))
	}
	p(`<text transform="translate(18 %.1f) rotate(-90)" font-size="12" fill="#444" text-anchor="middle">rows/s</text>`+"\n", float64(head)+plotH/2)
	slot := plotW / float64(len(groups))
	barW := slot * 0.8 / float64(len(names))
	for gi, g := range groups {
		x0 := float64(left) + slot*float64(gi) + slot*0.1
		for vi, v := range g.rates {
			if math.IsNaN(v) {
				continue
			}
			x := x0 + barW*float64(vi)
			p(`<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"/>`+"\n", x, y(v), barW-2, float64(head)+plotH-y(v), barColors[vi%len(barColors)])
			p(`<text x="%.1f" y="%.1f" font-size="10" fill="#222" text-anchor="middle">%s</text>`+"\n", x+barW/2-1, y(v)-4, esc(short(v)))
		}
		p(`<text x="%.1f" y="%d" font-size="12" fill="#444" text-anchor="middle">%s</text>`+"\n", x0+slot*0.4, head+plotH+18, esc(g.label))
	}
	p(`<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#222"/>`+"\n", left, head+plotH, width-right, head+plotH)
	p(`<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#222"/>`+"\n", left, head, left, head+plotH)
	for i, n := range names {
		p(`<rect x="%d" y="%d" width="14" height="14" fill="%s"/>`+"\n", left, legendY+24*i, barColors[i%len(barColors)])
		p(`<text x="%d" y="%d" font-size="12" fill="#222">%s</text>`+"\n", left+20, legendY+24*i+12, esc(n))
	}
	p("</svg>\n")
	return bw.Flush()
}

// writeLagSVG draws the max and mean lag over time of the largest
// many-partitions run, with package svgchart.
func writeLagSVG(w io.Writer, entries []testreport.ScaleEntry, notes []string) error {
	var best *testreport.ScaleEntry
	for i, e := range entries {
		if e.Kind == testreport.KindPartitions && e.Partitions != nil &&
			(best == nil || e.Partitions.Topics*e.Partitions.PartitionsPerTopic >= best.Partitions.Topics*best.Partitions.PartitionsPerTopic) {
			best = &entries[i]
		}
	}
	if best == nil || len(best.Partitions.LagT) == 0 {
		return errors.New("lag chart: no lag samples")
	}
	p := best.Partitions
	var maxPts, meanPts []svgchart.Point
	for i, t := range p.LagT {
		maxPts = append(maxPts, svgchart.Point{T: t, V: p.LagMax[i]})
		meanPts = append(meanPts, svgchart.Point{T: t, V: p.LagMean[i]})
	}
	c := svgchart.Chart{
		Title:  fmt.Sprintf("Lag per partition while one process drains %d partitions (%s)", p.Topics*p.PartitionsPerTopic, best.Broker),
		Notes:  notes,
		XLabel: "seconds since the process started",
		Panels: []svgchart.Panel{
			{Title: "max lag over the partitions (end offset − next_offset in kafka2pg.offsets)", YLabel: "records", Color: "#d62728", Points: maxPts},
			{Title: "mean lag over the partitions", YLabel: "records", Color: "#1f77b4", Points: meanPts},
		},
	}
	return c.WriteSVG(w)
}

// short prints 150000 as "150k".
func short(v float64) string {
	switch {
	case v >= 1e6:
		return fmt.Sprintf("%.1fM", v/1e6)
	case v >= 1e3:
		return fmt.Sprintf("%.0fk", v/1e3)
	}
	return fmt.Sprintf("%.0f", v)
}

// esc escapes text for SVG.
func esc(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;").Replace(s)
}
