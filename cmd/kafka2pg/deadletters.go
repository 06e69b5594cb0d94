package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/spf13/pflag"

	"github.com/kafka2pg/kafka2pg/bridge"
	"github.com/kafka2pg/kafka2pg/deadletters"
	"github.com/kafka2pg/kafka2pg/internal/redact"
)

// deadLettersFlags are the flags of dead-letters list; replay takes run's
// (replay.go).
type deadLettersFlags struct {
	pgURL, pgURLFile string
	group, topic     string
	since            string
	limit            int
	asJSON           bool
}

func defineDeadLettersFlags(fs *pflag.FlagSet, f *deadLettersFlags) {
	definePGURLFlags(fs, &f.pgURL, &f.pgURLFile)
	fs.StringVar(&f.group, "kafka-group", "", "only dead letters of this consumer group")
	fs.StringVar(&f.topic, "topic", "", "only dead letters of this topic")
	fs.StringVar(&f.since, "since", "", "only those since this RFC 3339 time, or this long ago (1h)")
	fs.IntVar(&f.limit, "limit", 50, "at most this many, newest first")
	fs.BoolVar(&f.asJSON, "json", false, "print JSON lines instead of a table")
}

func deadLettersCommand(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && (args[0] == "-h" || args[0] == "--help" || args[0] == "help") {
		fmt.Fprint(stdout, deadLettersUsage)
		return exitOK
	}
	if len(args) == 0 || (args[0] != "list" && args[0] != "replay") {
		fmt.Fprint(stderr, deadLettersUsage)
		return exitUsage
	}
	if args[0] == "replay" {
		return replayCommand(ctx, args[1:], stdout, stderr)
	}
	const name = "dead-letters list"
	fs := newFlagSet(name)
	var fl deadLettersFlags
	defineDeadLettersFlags(fs, &fl)
	if code, ok := parsePGCommand(name, deadLettersListHelp, fs, args[1:], stdout, stderr, &fl.pgURL, &fl.pgURLFile); !ok {
		return code
	}
	f := deadletters.Filter{Group: fl.group}
	if fl.topic != "" {
		f.Topics = []string{fl.topic}
	}
	if fl.since != "" {
		t, err := parseSince(fl.since, time.Now())
		if err != nil {
			fmt.Fprintf(stderr, "kafka2pg dead-letters list: %v\n", err)
			return exitUsage
		}
		f.Since = t
	}
	pool, err := bridge.OpenPool(ctx, fl.pgURL, "kafka2pg-dead-letters")
	if err != nil {
		fmt.Fprintf(stderr, "kafka2pg dead-letters: --pg-url: %v\n", redact.Err(err))
		return exitUsage
	}
	defer pool.Close()
	list, err := deadletters.List(ctx, pool, f, fl.limit)
	if err != nil {
		fmt.Fprintf(stderr, "kafka2pg: %v\n", redact.Err(err))
		return exitError
	}
	printDeadLetters(stdout, list, fl.asJSON)
	return exitOK
}

// parseSince reads an RFC 3339 time or a duration before now.
func parseSince(s string, now time.Time) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	if d, err := time.ParseDuration(s); err == nil && d >= 0 {
		return now.Add(-d), nil
	}
	return time.Time{}, fmt.Errorf("--since %q is neither an RFC 3339 time (2026-11-30T09:00:00Z) nor a duration (90m)", s)
}

func printDeadLetters(w io.Writer, list []deadletters.Letter, asJSON bool) {
	if asJSON {
		enc := json.NewEncoder(w)
		for _, d := range list {
			_ = enc.Encode(map[string]any{
				"id": d.ID, "consumer_group": d.Group, "topic": d.Record.Topic, "partition": d.Record.Partition,
				"offset": d.Record.Offset, "timestamp": d.Record.Timestamp, "key": preview(d.Record.Key, 1<<20),
				"value": preview(d.Record.Value, 1<<20), "target_table": d.Table, "error_kind": d.Kind,
				"error_message": d.Message, "created_at": d.CreatedAt,
			})
		}
		return
	}
	if len(list) == 0 {
		fmt.Fprintln(w, "no dead letters")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tCREATED\tSOURCE\tKIND\tERROR\tVALUE")
	for _, d := range list {
		fmt.Fprintf(tw, "%d\t%s\t%s/%d@%d\t%s\t%s\t%s\n", d.ID, d.CreatedAt.UTC().Format(time.RFC3339), d.Record.Topic,
			d.Record.Partition, d.Record.Offset, d.Kind, preview([]byte(d.Message), 60), preview(d.Record.Value, 40))
	}
	tw.Flush()
}

// preview shows b as text when it is UTF-8, cut to n runes; otherwise its size.
func preview(b []byte, n int) string {
	if b == nil {
		return "NULL"
	}
	if !utf8.Valid(b) {
		return fmt.Sprintf("<%d bytes, not UTF-8>", len(b))
	}
	s := strings.ReplaceAll(strings.ReplaceAll(string(b), "\n", " "), "\t", " ")
	if utf8.RuneCountInString(s) > n {
		s = string([]rune(s)[:n]) + "…"
	}
	return s
}
