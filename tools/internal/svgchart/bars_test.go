package svgchart

import (
	"bytes"
	"encoding/xml"
	"io"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

func TestBarsDrawsEveryBarWithItsWhiskerTextAndTheGroupsReference(t *testing.T) {
	c := Bars{
		Title:      `kafka2pg <bench> & "peers"`,
		Notes:      []string{"2026-01-02, commit abc1234"},
		XLabel:     "rows/s",
		LabelWidth: 290,
		Groups: []BarGroup{
			{Title: "typed table", Ref: 300_000, Bars: []Bar{
				{Label: "ceiling", Color: "#888888", Med: 300_000, Lo: 280_000, Hi: 320_000, Text: "300,000"},
				{Label: "kafka2pg", Color: "#1f77b4", Med: 240_000, Lo: 240_000, Hi: 240_000, Text: "240,000 (× 0.80)"},
			}},
			{Title: "zero-config table", Bars: []Bar{
				{Label: "kafka2pg", Color: "#1f77b4", Med: 150_000, Lo: 140_000, Hi: 160_000, Text: "150,000"},
				{Label: "not run", Color: "#d62728", Med: math.NaN(), Lo: math.NaN(), Hi: math.NaN(), Text: "n/a"},
			}},
		},
		Footer: []string{"two kill -9: 0 duplicates"},
	}
	var buf bytes.Buffer
	if err := c.WriteSVG(&buf); err != nil {
		t.Fatal(err)
	}
	svg := buf.String()
	texts, _ := parseSVG(t, svg)
	for _, want := range []string{`kafka2pg <bench> & "peers"`, "2026-01-02, commit abc1234", "rows/s", "typed table", "zero-config table",
		"ceiling", "240,000 (× 0.80)", "n/a", "two kill -9: 0 duplicates", "300k"} {
		if !slices.Contains(texts, want) {
			t.Errorf("no text %q in the SVG; texts: %q", want, texts)
		}
	}
	widths := attrs(t, svg, "rect", "width")
	if len(widths) != 1+4 { // the background and one per bar
		t.Fatalf("%d rects, want 5:\n%s", len(widths), svg)
	}
	// Lengths are proportional: 300,000 is 2× 150,000; NaN draws nothing.
	if w300, w150 := widths[1], widths[3]; math.Abs(w300-2*w150) > 0.2 || widths[4] != 0 {
		t.Errorf("bar widths %v: want the first twice the third and the last 0", widths[1:])
	}
	// Two whiskers (three lines each), none for the bar without a range;
	// one dashed reference line, for the group that has one.
	if n := strings.Count(svg, `stroke="#000"/>`); n != 2*3 {
		t.Errorf("%d whisker lines, want 6", n)
	}
	if n := strings.Count(svg, "stroke-dasharray"); n != 1 {
		t.Errorf("%d dashed lines, want 1", n)
	}
	if err := (&Bars{Groups: []BarGroup{{Title: "empty"}}}).WriteSVG(io.Discard); err == nil {
		t.Error("a chart without bars: no error")
	}
}

// attrs returns the numeric attribute attr of every element named elem.
func attrs(t *testing.T, svg, elem, attr string) []float64 {
	t.Helper()
	var out []float64
	d := xml.NewDecoder(strings.NewReader(svg))
	for {
		tok, err := d.Token()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		if s, ok := tok.(xml.StartElement); ok && s.Name.Local == elem {
			for _, a := range s.Attr {
				if a.Name.Local == attr && regexp.MustCompile(`^[0-9.]+$`).MatchString(a.Value) {
					v, _ := strconv.ParseFloat(a.Value, 64)
					out = append(out, v)
				} else if a.Name.Local == attr {
					out = append(out, math.NaN()) // "100%"
				}
			}
		}
	}
}
