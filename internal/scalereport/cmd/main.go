// Command scalereport renders docs/SCALING.md and its charts from the
// JSON-lines measurements that the scale tests append (see package
// scalereport):
//
//	go run ./internal/scalereport/cmd -in .tmp/scale/results.jsonl -out docs/SCALING.md \
//	    -throughput-svg docs/img/scaling-throughput.svg -lag-svg docs/img/scaling-lag.svg \
//	    -setup "Apache Kafka 4.1.1" -setup "PostgreSQL 15"
//
// Exit status: 0 when the page was written, 1 when it could not be, 2 on
// bad flags or an unreadable results file. A chart without data is left
// out of the page, with a message.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/kafka2pg/kafka2pg/internal/scalereport"
)

type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, "; ") }
func (l *listFlag) Set(s string) error { *l = append(*l, s); return nil }

func main() {
	in := flag.String("in", "", "JSON-lines results file (required)")
	out := flag.String("out", "docs/SCALING.md", "Markdown page to write")
	tputSVG := flag.String("throughput-svg", "docs/img/scaling-throughput.svg", "throughput chart to write; empty: none")
	lagSVG := flag.String("lag-svg", "docs/img/scaling-lag.svg", "lag chart to write; empty: none")
	command := flag.String("command", "make scale", "how the run was started, for the header")
	var setup listFlag
	flag.Var(&setup, "setup", "a line describing the setup (repeatable)")
	flag.Parse()
	if *in == "" {
		fmt.Fprintln(os.Stderr, "scalereport: -in is required: the results file the scale tests wrote")
		os.Exit(2)
	}
	f, err := os.Open(*in)
	if err != nil {
		fmt.Fprintf(os.Stderr, "scalereport: %v\n", err)
		os.Exit(2)
	}
	entries, err := scalereport.Read(f)
	f.Close()
	if err != nil {
		fmt.Fprintf(os.Stderr, "scalereport: %v\n", err)
		os.Exit(2)
	}
	meta := scalereport.Meta{Generated: time.Now(), Command: *command, Setup: setup}
	notes := []string{fmt.Sprintf("measured by %s, %s", *command, time.Now().UTC().Format("2006-01-02 15:04 MST"))}
	notes = append(notes, setup...)
	write := func(path string, draw func(*bytes.Buffer) error) (string, bool) {
		if path == "" {
			return "", false
		}
		var buf bytes.Buffer
		if err := draw(&buf); err != nil {
			fmt.Fprintf(os.Stderr, "scalereport: %s left out: %v\n", path, err)
			return "", false
		}
		if err := writeFile(path, buf.Bytes()); err != nil {
			fmt.Fprintf(os.Stderr, "scalereport: %v\n", err)
			os.Exit(1)
		}
		rel, err := filepath.Rel(filepath.Dir(*out), path)
		if err != nil {
			rel = path
		}
		return filepath.ToSlash(rel), true
	}
	if rel, ok := write(*tputSVG, func(b *bytes.Buffer) error { return scalereport.WriteThroughputSVG(b, entries, notes) }); ok {
		meta.ThroughputChart = rel
	}
	if rel, ok := write(*lagSVG, func(b *bytes.Buffer) error { return scalereport.WriteLagSVG(b, entries, notes) }); ok {
		meta.LagChart = rel
	}
	var page bytes.Buffer
	if err := scalereport.Render(&page, entries, meta); err != nil {
		fmt.Fprintf(os.Stderr, "scalereport: %v\n", err)
		os.Exit(1)
	}
	if err := writeFile(*out, page.Bytes()); err != nil {
		fmt.Fprintf(os.Stderr, "scalereport: %v\n", err)
		os.Exit(1)
	}
	fmt.Printf("scalereport: wrote %s (%d measurements)\n", *out, len(entries))
}

func writeFile(path string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o644)
}
