// Command faultreport renders docs/RELIABILITY.md from the JSON-lines
// results that the fault-matrix cases append (see package faultreport):
//
//	go run ./internal/faultreport/cmd -in .tmp/faults/results.jsonl -out docs/RELIABILITY.md \
//	    -setup "Apache Kafka 4.1.1" -setup "PostgreSQL 17"
//
// It writes the page even when a case failed, then exits 1; it exits 2 on
// bad flags or an unreadable results file.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/kafka2pg/kafka2pg/internal/faultreport"
)

type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, "; ") }
func (l *listFlag) Set(s string) error { *l = append(*l, s); return nil }

func main() {
	in := flag.String("in", "", "JSON-lines results file (required)")
	out := flag.String("out", "docs/RELIABILITY.md", "Markdown page to write")
	command := flag.String("command", "make faults", "how the run was started, for the header")
	var setup listFlag
	flag.Var(&setup, "setup", "a line describing the setup (repeatable)")
	flag.Parse()
	if *in == "" {
		fmt.Fprintln(os.Stderr, "faultreport: -in is required: the results file the fault cases wrote")
		os.Exit(2)
	}
	f, err := os.Open(*in)
	if err != nil {
		fmt.Fprintf(os.Stderr, "faultreport: %v\n", err)
		os.Exit(2)
	}
	results, err := faultreport.Read(f)
	f.Close()
	if err != nil {
		fmt.Fprintf(os.Stderr, "faultreport: %v\n", err)
		os.Exit(2)
	}
	var page bytes.Buffer
	renderErr := faultreport.Render(&page, results, faultreport.Meta{
		Generated: time.Now(), Command: *command, Setup: setup,
	})
	if page.Len() > 0 {
		if err := os.MkdirAll(filepath.Dir(*out), 0o755); err != nil {
			fmt.Fprintf(os.Stderr, "faultreport: %v\n", err)
			os.Exit(2)
		}
		if err := os.WriteFile(*out, page.Bytes(), 0o644); err != nil {
			fmt.Fprintf(os.Stderr, "faultreport: %v\n", err)
			os.Exit(2)
		}
		fmt.Printf("faultreport: wrote %s (%d results)\n", *out, len(results))
	}
	if renderErr != nil {
		fmt.Fprintf(os.Stderr, "faultreport: %v\n", renderErr)
		os.Exit(1)
	}
}
