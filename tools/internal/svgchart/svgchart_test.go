package svgchart

import (
	"bytes"
	"encoding/xml"
	"errors"
	"io"
	"math"
	"slices"
	"strings"
	"testing"
)

func TestRateIsTheIncreaseOverTheTrailingWindow(t *testing.T) {
	counter := []Point{{0, 0}, {0.25, 100}, {0.5, 300}, {0.75, 300}, {1.0, 400}, {1.25, 1400}, {1.5, 0}, {3.5, 50}}
	got := Rate(counter, 1)
	want := []Point{
		{0, 0},
		{0.25, 400},  // 100 in 0.25s
		{0.5, 600},   // 300 in 0.5s
		{0.75, 400},  // 300 in 0.75s
		{1.0, 400},   // 400 in 1s
		{1.25, 1300}, // 1300 since t=0.25
		{1.5, 0},     // a reset reads as 0
		{3.5, 25},    // the previous sample is 2s old: 50 in 2s
	}
	if len(got) != len(want) {
		t.Fatalf("Rate returned %d points, want %d: %v", len(got), len(want), got)
	}
	for i := range want {
		if got[i].T != want[i].T || math.Abs(got[i].V-want[i].V) > 1e-9 {
			t.Errorf("Rate point %d = %v, want %v (all: %v)", i, got[i], want[i], got)
		}
	}
}

func TestNiceTicksCoverTheRangeWithRoundSteps(t *testing.T) {
	tests := []struct {
		hi   float64
		want []float64
	}{
		{0, []float64{0, 1}},
		{math.NaN(), []float64{0, 1}},
		{1, []float64{0, 0.2, 0.4, 0.6000000000000001, 0.8, 1}},
		{37, []float64{0, 10, 20, 30, 40}},
		{48_500, []float64{0, 10_000, 20_000, 30_000, 40_000, 50_000}},
		{100_000, []float64{0, 20_000, 40_000, 60_000, 80_000, 100_000}},
	}
	for _, tt := range tests {
		if got := NiceTicks(tt.hi); !slices.Equal(got, tt.want) {
			t.Errorf("NiceTicks(%v) = %v, want %v", tt.hi, got, tt.want)
		}
	}
}

func TestFormatValueIsShort(t *testing.T) {
	for v, want := range map[float64]string{0: "0", 2.5: "2.5", 40: "40", 15_000: "15k", 1_250_000: "1.3M", 0.6000000000000001: "0.6"} {
		if got := formatValue(v); got != want {
			t.Errorf("formatValue(%v) = %q, want %q", v, got, want)
		}
	}
}

func TestWriteSVGIsWellFormedWithTitleNotesAxesAndLines(t *testing.T) {
	c := Chart{
		Title:  `kafka2pg <rows> & "lag"`,
		Notes:  []string{"commit abc1234", "2026-01-02"},
		XLabel: "seconds since the bridge started",
		Panels: []Panel{
			{Title: "rows/s", YLabel: "rows/s", Color: "#1f77b4", Points: []Point{{0, 0}, {1, 5000}, {2, 20000}}},
			// A gap (no lag reported yet) splits the line in two.
			{Title: "lag", YLabel: "records", Color: "#d62728", Points: []Point{{0, math.NaN()}, {1, 900}, {2, math.NaN()}, {3, 0}, {4, 10}}},
		},
		Markers: []Marker{{T: 1.5, Label: "burst"}},
	}
	var buf bytes.Buffer
	if err := c.WriteSVG(&buf); err != nil {
		t.Fatal(err)
	}
	svg := buf.String()
	texts, polylines := parseSVG(t, svg)
	for _, want := range []string{`kafka2pg <rows> & "lag"`, "commit abc1234", "2026-01-02", "seconds since the bridge started",
		"rows/s", "records", "burst", "20k", "0", "4"} {
		if !slices.Contains(texts, want) {
			t.Errorf("no text %q in the SVG; texts: %q", want, texts)
		}
	}
	if polylines != 3 {
		t.Errorf("%d polylines, want 3 (one for rows/s, two for lag around the gap)\n%s", polylines, svg)
	}
}

func TestWriteSVGRefusesAChartWithNothingToDraw(t *testing.T) {
	for _, c := range []Chart{{}, {Panels: []Panel{{Points: []Point{{0, 1}}}}}} {
		if err := c.WriteSVG(io.Discard); err == nil {
			t.Errorf("WriteSVG(%+v) = nil, want an error", c)
		}
	}
}

// parseSVG decodes the whole document as XML, failing the test on a syntax
// error, and returns its text nodes and the number of polylines.
func parseSVG(t *testing.T, svg string) (texts []string, polylines int) {
	t.Helper()
	d := xml.NewDecoder(strings.NewReader(svg))
	var inText bool
	for {
		tok, err := d.Token()
		if errors.Is(err, io.EOF) {
			return texts, polylines
		}
		if err != nil {
			t.Fatalf("the SVG is not well-formed XML: %v\n%s", err, svg)
		}
		switch tok := tok.(type) {
		case xml.StartElement:
			inText = tok.Name.Local == "text"
			if tok.Name.Local == "polyline" {
				polylines++
			}
		case xml.CharData:
			if inText {
				texts = append(texts, string(tok))
			}
		case xml.EndElement:
			inText = false
		}
	}
}
