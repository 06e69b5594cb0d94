package svgchart

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math"
)

// Bars is a chart of horizontal bars in groups on one x axis from zero
// (the benches' rows/s per scenario): each bar a median, with a whisker
// from the lowest to the highest value when they differ, and a text after
// it.
type Bars struct {
	Title  string
	Notes  []string // lines under the title: date, setup, how to read it
	XLabel string   // under the axis, e.g. "rows/s"
	// LabelWidth is the room left of the bars for their labels, in pixels;
	// 0 means 160.
	LabelWidth int
	Groups     []BarGroup
	Footer     []string // lines under the axis
}

// BarGroup is a titled group of bars.
type BarGroup struct {
	Title string
	Bars  []Bar
	// Ref, when above zero, is drawn as a dashed line across the group's
	// bars: what they are measured against (the ceiling).
	Ref float64
}

// Bar is one bar: Med is its length, Lo and Hi its whisker. NaN draws
// nothing.
type Bar struct {
	Label       string
	Color       string // e.g. "#1f77b4"
	Med, Lo, Hi float64
	Text        string // after the bar, e.g. its value and a ratio
}

// Bars' layout, in SVG user units.
const (
	barHeight     = 22
	barGap        = 5
	barGroupTitle = 20
	barGroupGap   = 28
	barTextRoom   = 110 // right of the plot, for the last bar's text
)

// WriteSVG renders the chart as a standalone SVG document.
func (c *Bars) WriteSVG(w io.Writer) error {
	hi, bars := 0.0, 0
	for _, g := range c.Groups {
		for _, b := range g.Bars {
			bars++
			for _, v := range []float64{b.Med, b.Hi, g.Ref} {
				if !math.IsNaN(v) {
					hi = max(hi, v)
				}
			}
		}
	}
	if bars == 0 {
		return errors.New("render bar chart: no bars")
	}
	ticks := NiceTicks(hi)
	top := ticks[len(ticks)-1]
	left := c.LabelWidth
	if left == 0 {
		left = 160
	}
	plotW := float64(width - left - marginRight - barTextRoom)
	x := func(v float64) float64 {
		if math.IsNaN(v) {
			v = 0
		}
		return float64(left) + plotW*v/top
	}
	plotTop := titleHeight + noteHeight*len(c.Notes) + 20
	plotBottom := plotTop
	for _, g := range c.Groups {
		plotBottom += barGroupTitle + len(g.Bars)*(barHeight+barGap) + barGroupGap
	}
	height := plotBottom + axisHeight + noteHeight*len(c.Footer) + bottomMargin

	bw := bufio.NewWriter(w)
	p := func(format string, args ...any) { fmt.Fprintf(bw, format, args...) }
	p(`<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="DejaVu Sans, Verdana, Helvetica, Arial, sans-serif">`+"\n",
		width, height, width, height)
	p(`<rect width="100%%" height="100%%" fill="#ffffff"/>` + "\n")
	p(`<text x="12" y="24" font-size="16" font-weight="bold" fill="#222">%s</text>`+"\n", esc(c.Title))
	for i, n := range c.Notes {
		p(`<text x="12" y="%d" font-size="12" fill="#555">%s</text>`+"\n", titleHeight+noteHeight*i+12, esc(n))
	}
	for _, v := range ticks {
		p(`<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#e4e4e4"/>`+"\n", x(v), plotTop-8, x(v), plotBottom)
		p(`<text x="%.1f" y="%d" font-size="11" fill="#444" text-anchor="middle">%s</text>`+"\n", x(v), plotBottom+16, esc(formatValue(v)))
	}
	p(`<text x="%.1f" y="%d" font-size="12" fill="#444" text-anchor="middle">%s</text>`+"\n", x(top/2), plotBottom+36, esc(c.XLabel))
	y := plotTop
	for _, g := range c.Groups {
		p(`<text x="12" y="%d" font-size="13" font-weight="bold" fill="#222">%s</text>`+"\n", y+12, esc(g.Title))
		y += barGroupTitle
		y0 := y
		for _, b := range g.Bars {
			p(`<text x="%d" y="%d" font-size="12" fill="#222" text-anchor="end">%s</text>`+"\n", left-8, y+barHeight-7, esc(b.Label))
			p(`<rect x="%d" y="%d" width="%.1f" height="%d" fill="%s"/>`+"\n", left, y, x(b.Med)-float64(left), barHeight, esc(b.Color))
			if b.Lo < b.Hi {
				cy := y + barHeight/2
				p(`<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#000"/>`+"\n", x(b.Lo), cy, x(b.Hi), cy)
				p(`<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#000"/>`+"\n", x(b.Lo), cy-5, x(b.Lo), cy+5)
				p(`<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#000"/>`+"\n", x(b.Hi), cy-5, x(b.Hi), cy+5)
			}
			end := x(b.Med)
			if !math.IsNaN(b.Hi) {
				end = max(end, x(b.Hi))
			}
			p(`<text x="%.1f" y="%d" font-size="12" fill="#222">%s</text>`+"\n", end+4, y+barHeight-7, esc(b.Text))
			y += barHeight + barGap
		}
		if g.Ref > 0 {
			p(`<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#000" stroke-dasharray="4 3"/>`+"\n", x(g.Ref), y0-3, x(g.Ref), y-barGap+3)
		}
		y += barGroupGap
	}
	p(`<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#222"/>`+"\n", left, plotTop-8, left, plotBottom)
	p(`<line x1="%d" y1="%d" x2="%.1f" y2="%d" stroke="#222"/>`+"\n", left, plotBottom, x(top), plotBottom)
	for i, f := range c.Footer {
		p(`<text x="12" y="%d" font-size="12" fill="#222">%s</text>`+"\n", plotBottom+axisHeight+noteHeight*i+12, esc(f))
	}
	p("</svg>\n")
	return bw.Flush()
}
