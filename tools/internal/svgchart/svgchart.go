// Package svgchart draws the tools' charts as self-contained SVG, written
// by hand (no plotting dependency, no scripts, no external fonts or
// images): time series in stacked panels (the README's chart of a live
// bridge's /metrics, the scale page's lag), with the axis ticks and rates
// they need.
//
// It does no I/O beyond the io.Writer it is given and starts no
// goroutines. It imports only the standard library.
package svgchart

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
)

// Point is one observation: T seconds since the start of the run, value V.
type Point struct{ T, V float64 }

// Panel is one plot with its own y axis, starting at zero; the panels of a
// Chart are stacked and share the x axis.
type Panel struct {
	Title  string // above the plot: what is drawn and from which metric
	YLabel string // unit of the y axis, e.g. "rows/s"
	Color  string // stroke color of the line, e.g. "#1f77b4"
	Points []Point
}

// Marker is a dashed vertical line across every panel, labeled in the first.
type Marker struct {
	T     float64
	Label string
}

// Chart is a whole figure: a title, note lines under it (setup, date,
// commit), then the panels.
type Chart struct {
	Title   string
	Notes   []string
	XLabel  string
	Panels  []Panel
	Markers []Marker
}

// Layout, in SVG user units (pixels at 100%).
const (
	width        = 960
	marginLeft   = 78
	marginRight  = 28
	titleHeight  = 34
	noteHeight   = 18
	panelGap     = 34 // space for a panel's title above its plot
	plotHeight   = 190
	axisHeight   = 46 // x tick labels and the x axis label under a plot
	bottomMargin = 12
)

// WriteSVG renders the chart as a standalone SVG document.
func (c *Chart) WriteSVG(w io.Writer) error {
	if len(c.Panels) == 0 {
		return errors.New("render chart: no panels")
	}
	tMax := 0.0
	for _, p := range c.Panels {
		for _, pt := range p.Points {
			tMax = max(tMax, pt.T)
		}
	}
	if tMax <= 0 {
		return errors.New("render chart: no points after t=0")
	}
	xTicks := NiceTicks(tMax)
	tMax = xTicks[len(xTicks)-1]
	plotWidth := float64(width - marginLeft - marginRight)
	x := func(t float64) float64 { return marginLeft + t/tMax*plotWidth }

	top := titleHeight + noteHeight*len(c.Notes) + 8
	height := top + len(c.Panels)*(panelGap+plotHeight+axisHeight) + bottomMargin

	bw := bufio.NewWriter(w)
	p := func(format string, args ...any) { fmt.Fprintf(bw, format, args...) }
	p(`<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="DejaVu Sans, Verdana, Helvetica, Arial, sans-serif">`+"\n",
		width, height, width, height)
	p(`<rect width="100%%" height="100%%" fill="#ffffff"/>` + "\n")
	p(`<text x="%d" y="24" font-size="18" font-weight="bold" fill="#222">%s</text>`+"\n", marginLeft, esc(c.Title))
	for i, n := range c.Notes {
		p(`<text x="%d" y="%d" font-size="12" fill="#555">%s</text>`+"\n", marginLeft, titleHeight+noteHeight*i+12, esc(n))
	}

	y0 := top
	for i, panel := range c.Panels {
		plotTop := float64(y0 + panelGap)
		plotBottom := plotTop + plotHeight
		vMax := 0.0
		for _, pt := range panel.Points {
			if !math.IsNaN(pt.V) {
				vMax = max(vMax, pt.V)
			}
		}
		yTicks := NiceTicks(vMax)
		vTop := yTicks[len(yTicks)-1]
		y := func(v float64) float64 { return plotBottom - v/vTop*plotHeight }

		p(`<text x="%d" y="%.1f" font-size="14" font-weight="bold" fill="#222">%s</text>`+"\n", marginLeft, plotTop-12, esc(panel.Title))
		// Grid and y ticks.
		for _, v := range yTicks {
			p(`<line x1="%d" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#e4e4e4" stroke-width="1"/>`+"\n", marginLeft, y(v), x(tMax), y(v))
			p(`<text x="%d" y="%.1f" font-size="11" fill="#444" text-anchor="end">%s</text>`+"\n", marginLeft-6, y(v)+4, esc(formatValue(v)))
		}
		for _, t := range xTicks {
			p(`<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#f0f0f0" stroke-width="1"/>`+"\n", x(t), plotTop, x(t), plotBottom)
			p(`<text x="%.1f" y="%.1f" font-size="11" fill="#444" text-anchor="middle">%s</text>`+"\n", x(t), plotBottom+16, esc(formatValue(t)))
		}
		p(`<text x="%.1f" y="%.1f" font-size="12" fill="#444" text-anchor="middle">%s</text>`+"\n", x(tMax/2), plotBottom+36, esc(c.XLabel))
		p(`<text transform="translate(18 %.1f) rotate(-90)" font-size="12" fill="#444" text-anchor="middle">%s</text>`+"\n", plotTop+plotHeight/2, esc(panel.YLabel))
		// Markers.
		for _, m := range c.Markers {
			p(`<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#888" stroke-width="1" stroke-dasharray="4 3"/>`+"\n", x(m.T), plotTop, x(m.T), plotBottom)
			if i == 0 && m.Label != "" {
				p(`<text x="%.1f" y="%.1f" font-size="11" fill="#666">%s</text>`+"\n", x(m.T)+4, plotTop+12, esc(m.Label))
			}
		}
		// The series: one polyline per run of points without a gap (NaN).
		for _, run := range runs(panel.Points) {
			var pts strings.Builder
			for _, pt := range run {
				fmt.Fprintf(&pts, "%.1f,%.1f ", x(pt.T), y(pt.V))
			}
			p(`<polyline fill="none" stroke="%s" stroke-width="2" stroke-linejoin="round" points="%s"/>`+"\n", esc(panel.Color), strings.TrimSpace(pts.String()))
		}
		// Axes last, over the grid.
		p(`<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#222" stroke-width="1"/>`+"\n", marginLeft, plotTop, marginLeft, plotBottom)
		p(`<line x1="%d" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#222" stroke-width="1"/>`+"\n", marginLeft, plotBottom, x(tMax), plotBottom)
		y0 += panelGap + plotHeight + axisHeight
	}
	p("</svg>\n")
	return bw.Flush()
}

// runs splits points at NaN values (no observation), so a gap is drawn as a
// gap rather than a line to zero.
func runs(points []Point) [][]Point {
	var out [][]Point
	var cur []Point
	for _, pt := range points {
		if math.IsNaN(pt.V) {
			if len(cur) > 0 {
				out = append(out, cur)
			}
			cur = nil
			continue
		}
		cur = append(cur, pt)
	}
	if len(cur) > 0 {
		out = append(out, cur)
	}
	return out
}

// NiceTicks returns 0 and the multiples of a 1, 2 or 5 × 10^k step up to the
// first one at or above hi, about five of them. hi <= 0 gives 0 and 1.
func NiceTicks(hi float64) []float64 {
	if !(hi > 0) || math.IsInf(hi, 0) {
		return []float64{0, 1}
	}
	raw := hi / 5
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	step := mag * 10
	for _, m := range []float64{1, 2, 5, 10} {
		if m*mag >= raw {
			step = m * mag
			break
		}
	}
	var ticks []float64
	for i := 0; ; i++ {
		v := float64(i) * step
		ticks = append(ticks, v)
		if v >= hi*(1-1e-9) {
			return ticks
		}
	}
}

// formatValue prints a tick value briefly: 0, 2.5, 40, 15k, 1.2M.
func formatValue(v float64) string {
	trim := func(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }
	switch a := math.Abs(v); {
	case a >= 1e6:
		return trim(math.Round(v/1e5)/10) + "M"
	case a >= 1e3:
		return trim(math.Round(v/1e2)/10) + "k"
	default:
		return trim(math.Round(v*100) / 100)
	}
}

// esc escapes text for an SVG text node or attribute value.
func esc(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch r {
		case '&':
			b.WriteString("&amp;")
		case '<':
			b.WriteString("&lt;")
		case '>':
			b.WriteString("&gt;")
		case '"':
			b.WriteString("&quot;")
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// Rate turns samples of a counter into its per-second rate over the trailing
// window: at each sample, the increase since the oldest sample at most
// window seconds earlier (or since the previous sample, when that one is
// older), divided by the time between them. The first sample's rate is 0. A counter reset (a decrease) reads as 0, not negative.
func Rate(counter []Point, window float64) []Point {
	out := make([]Point, 0, len(counter))
	j := 0
	for i, pt := range counter {
		for j < i-1 && pt.T-counter[j].T > window {
			j++
		}
		if j == i {
			out = append(out, Point{pt.T, 0})
			continue
		}
		dt := pt.T - counter[j].T
		out = append(out, Point{pt.T, max(pt.V-counter[j].V, 0) / dt})
	}
	return out
}
