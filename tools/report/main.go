// Command report renders the pages made of what the fault-matrix and scale
// tests measured (package internal/testreport of the product module: one
// JSON line per fault case or measurement):
//
//	cd tools && go run ./report faults -in .tmp/faults/results.jsonl -out ../docs/RELIABILITY.md \
//	    -setup "Apache Kafka 4.1.1" -setup "PostgreSQL 17"
//	cd tools && go run ./report scale -in .tmp/scale/results.jsonl -out ../docs/SCALING.md \
//	    -throughput-svg ../docs/img/scaling-throughput.svg -lag-svg ../docs/img/scaling-lag.svg
//
// -keep PAGE (faults) keeps PAGE's rows for the cases the results lack: a
// run of a few cases updates their rows and keeps the others as last
// measured.
//
// make faults and make scale run it. The figures are the tests' (SQL
// against the records they produced, or the bridge's own /metrics); the
// pages only print and chart them, mark a fault case FAIL when its counts
// do not add up even if the case said PASS, and say so when a section has
// no measurement.
//
// Exit status: 0 when the page was written; 1 when a fault case failed
// (the page is written all the same) or the page could not be written; 2 on
// bad arguments or an unreadable results file. A scale chart without data
// is left out of the page, with a message.
package main

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/kafka2pg/kafka2pg/internal/testreport"
)

func main() {
	if len(os.Args) < 2 || (os.Args[1] != "faults" && os.Args[1] != "scale") {
		fmt.Fprintln(os.Stderr, "usage: report faults|scale -in RESULTS.jsonl -out PAGE.md [-setup LINE]... (report faults -h, report scale -h)")
		os.Exit(2)
	}
	page := os.Args[1]
	fs := flag.NewFlagSet("report "+page, flag.ExitOnError)
	in := fs.String("in", "", "JSON-lines results file (required)")
	defaultOut := map[string]string{"faults": "../docs/RELIABILITY.md", "scale": "../docs/SCALING.md"}[page]
	out := fs.String("out", defaultOut, "Markdown page to write")
	command := fs.String("command", "make "+page, "how the run was started, for the header")
	var setup listFlag
	fs.Var(&setup, "setup", "a line describing the setup (repeatable)")
	var keep *string
	if page == "faults" {
		keep = fs.String("keep", "", "a page of an earlier run whose rows are kept for the cases the results do not have (a run of some cases only)")
	}
	var tputSVG, lagSVG *string
	if page == "scale" {
		tputSVG = fs.String("throughput-svg", "../docs/img/scaling-throughput.svg", "throughput chart to write; empty: none")
		lagSVG = fs.String("lag-svg", "../docs/img/scaling-lag.svg", "lag chart to write; empty: none")
	}
	_ = fs.Parse(os.Args[2:])
	r := run{name: "report " + page, out: *out}
	if *in == "" {
		r.exit(2, fmt.Errorf("-in is required: the results file the %s tests wrote", map[string]string{"faults": "fault", "scale": "scale"}[page]))
	}
	meta := pageMeta{Command: *command, Setup: setup}
	if page == "faults" {
		results := readResults[testreport.FaultResult](r, *in, "fault", nil)
		if *keep != "" {
			f, err := os.Open(*keep)
			if err != nil {
				r.exit(2, err)
			}
			kept, err := keptResults(f)
			f.Close()
			if err != nil {
				r.exit(2, fmt.Errorf("-keep %s: %w", *keep, err))
			}
			results = append(kept, results...) // a case of the run replaces its kept row
		}
		var buf bytes.Buffer
		renderErr := renderFaults(&buf, results, meta)
		if buf.Len() > 0 {
			r.write(*out, buf.Bytes(), 2)
			fmt.Printf("%s: wrote %s (%d results)\n", r.name, *out, len(results))
		}
		if renderErr != nil {
			r.exit(1, renderErr)
		}
		return
	}
	entries := readResults(r, *in, "scale", checkScale)
	notes := append([]string{fmt.Sprintf("measured by %s, %s", *command, time.Now().UTC().Format("2006-01-02 15:04 MST"))}, setup...)
	if rel, ok := r.chart(*tputSVG, func(b *bytes.Buffer) error { return writeThroughputSVG(b, entries, notes) }); ok {
		meta.ThroughputChart = rel
	}
	if rel, ok := r.chart(*lagSVG, func(b *bytes.Buffer) error { return writeLagSVG(b, entries, notes) }); ok {
		meta.LagChart = rel
	}
	var buf bytes.Buffer
	if err := renderScale(&buf, entries, meta); err != nil {
		r.exit(1, err)
	}
	r.write(*out, buf.Bytes(), 1)
	fmt.Printf("%s: wrote %s (%d measurements)\n", r.name, *out, len(entries))
}

// run is one invocation: its name for messages and the page it writes.
type run struct {
	name string
	out  string
}

func (r run) exit(code int, err error) {
	fmt.Fprintf(os.Stderr, "%s: %v\n", r.name, err)
	os.Exit(code)
}

// write writes data to path, creating its directory; it exits with code
// when it cannot.
func (r run) write(path string, data []byte, code int) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		r.exit(code, err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		r.exit(code, err)
	}
}

// chart draws a chart into path and returns its path relative to the page;
// false when path is empty or there is nothing to draw (with a message).
func (r run) chart(path string, draw func(*bytes.Buffer) error) (string, bool) {
	if path == "" {
		return "", false
	}
	var buf bytes.Buffer
	if err := draw(&buf); err != nil {
		fmt.Fprintf(os.Stderr, "%s: %s left out: %v\n", r.name, path, err)
		return "", false
	}
	r.write(path, buf.Bytes(), 1)
	rel, err := filepath.Rel(filepath.Dir(r.out), path)
	if err != nil {
		rel = path
	}
	return filepath.ToSlash(rel), true
}

// readResults reads the JSON-lines file at path (see decodeLines); it exits
// with status 2 when it cannot.
func readResults[T any](r run, path, what string, check func(T) error) []T {
	f, err := os.Open(path)
	if err != nil {
		r.exit(2, err)
	}
	defer f.Close()
	results, err := decodeLines(f, what, check)
	if err != nil {
		r.exit(2, err)
	}
	return results
}

// decodeLines parses a JSON-lines file of results. Blank lines are
// skipped; a line that does not parse, or that check refuses, is an error
// naming its number.
func decodeLines[T any](r io.Reader, what string, check func(T) error) ([]T, error) {
	var out []T
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 16*1024*1024)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		var v T
		err := json.Unmarshal([]byte(line), &v)
		if err == nil && check != nil {
			err = check(v)
		}
		if err != nil {
			return nil, fmt.Errorf("read %s results: line %d: %w", what, n, err)
		}
		out = append(out, v)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read %s results: %w", what, err)
	}
	return out, nil
}

// checkScale says whether an entry's payload is the one its kind names.
func checkScale(e testreport.ScaleEntry) error {
	var ok bool
	switch e.Kind {
	case testreport.KindThroughput:
		ok = e.Throughput != nil
	case testreport.KindRebalance:
		ok = e.Rebalance != nil
	case testreport.KindRecovery:
		ok = e.Recovery != nil
	case testreport.KindPartitions:
		ok = e.Partitions != nil
	case testreport.KindPartman:
		ok = true
	default:
		return fmt.Errorf("unknown kind %q", e.Kind)
	}
	if !ok {
		return fmt.Errorf("kind %q without its %s object", e.Kind, e.Kind)
	}
	return nil
}

type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, "; ") }
func (l *listFlag) Set(s string) error { *l = append(*l, s); return nil }

// pageMeta describes the run for a page's header.
type pageMeta struct {
	Command string   // how the run was started, e.g. "make faults"
	Setup   []string // one line each: Kafka, Postgres, Go, machine, wall time
	// ThroughputChart and LagChart are the scale page's charts, relative
	// to the page ("img/scaling-throughput.svg"); empty leaves them out.
	ThroughputChart, LagChart string
}

// writeHeader writes a page's title, the do-not-edit note naming the make
// target and the generator, the command, and the setup lines: no date, as
// the page says what was measured, not when.
func writeHeader(b *strings.Builder, title, target, generator, from string, meta pageMeta) {
	fmt.Fprintf(b, "# %s\n\n", title)
	fmt.Fprintf(b, "<!-- Generated by `%s` (%s) from the run's %s; do not edit by hand. -->\n\n", target, generator, from)
	fmt.Fprintf(b, "Generated by `%s`.\n", cmp.Or(meta.Command, target))
	if len(meta.Setup) > 0 {
		b.WriteString("\n")
		for _, s := range meta.Setup {
			fmt.Fprintf(b, "- %s\n", s)
		}
	}
}

// cell makes s safe inside a Markdown table cell.
func cell(s string) string {
	s = strings.ReplaceAll(s, "|", `\|`)
	return strings.ReplaceAll(s, "\n", " ")
}
