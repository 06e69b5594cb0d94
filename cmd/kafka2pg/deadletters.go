package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/spf13/pflag"

	"github.com/kafka2pg/kafka2pg/ingest"
)

const deadLettersUsage = `Usage:
  kafka2pg dead-letters list   --pg-url URL [--kafka-group G] [--topic T] [--since 2026-11-30T09:00:00Z|1h] [--limit N] [--json]
  kafka2pg dead-letters replay --config FILE | [run's flags] [--table NAME] [--topic T] [--kind K] [--since T] [--id N ...]
                               [--limit N] [--dry-run]

replay runs each dead letter through the sink that wrote it, after you fixed
the table or the configuration: give it run's --config (or run's flags), and
the letters that fit now are written to their table and removed from
kafka2pg.dead_letters in the same transaction; the others stay, with their
new error. See 'kafka2pg dead-letters replay --help'.
`

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
	fs := pflag.NewFlagSet("dead-letters list", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	pgURL := fs.String("pg-url", "", "PostgreSQL URL (env KAFKA2PG_PG_URL or DATABASE_URL)")
	var pgURLFile string
	definePGURLFileFlag(fs, &pgURLFile)
	group := fs.String("kafka-group", "", "only dead letters of this consumer group")
	topic := fs.String("topic", "", "only dead letters of this topic")
	since := fs.String("since", "", "only dead letters created since this RFC 3339 time, or this long ago (e.g. 1h)")
	limit := fs.Int("limit", 50, "at most this many, newest first")
	asJSON := fs.Bool("json", false, "print JSON lines instead of a table")
	fs.Usage = func() { fmt.Fprintf(stderr, "%s\n%s", deadLettersUsage, fs.FlagUsages()) }
	if err := fs.Parse(args[1:]); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return exitOK
		}
		fmt.Fprintf(stderr, "kafka2pg dead-letters list: %v (see 'kafka2pg dead-letters list --help')\n", err)
		return exitUsage
	}
	if err := applyEnv(fs, map[string][]string{"pg-url": {"DATABASE_URL"}}); err != nil {
		fmt.Fprintf(stderr, "kafka2pg dead-letters: %v\n", err)
		return exitUsage
	}
	if err := readPGURLFile(pgURL, pgURLFile); err != nil {
		fmt.Fprintf(stderr, "kafka2pg dead-letters: %v\n", err)
		return exitUsage
	}
	if *pgURL == "" {
		fmt.Fprintln(stderr, "kafka2pg dead-letters: --pg-url is empty: give the PostgreSQL URL (or set KAFKA2PG_PG_URL or DATABASE_URL)")
		return exitUsage
	}
	f := ingest.ListFilter{Group: *group, Topic: *topic, Limit: *limit}
	if *since != "" {
		t, err := parseSince(*since, time.Now())
		if err != nil {
			fmt.Fprintf(stderr, "kafka2pg dead-letters list: %v\n", err)
			return exitUsage
		}
		f.Since = t
	}
	pool, err := newPool(ctx, *pgURL, "kafka2pg-dead-letters")
	if err != nil {
		fmt.Fprintf(stderr, "kafka2pg dead-letters: --pg-url: %v\n", redactErr(err))
		return exitUsage
	}
	defer pool.Close()
	list, err := ingest.ListDeadLetters(ctx, pool, f)
	if err != nil {
		fmt.Fprintf(stderr, "kafka2pg: %v\n", redactErr(err))
		return exitError
	}
	printDeadLetters(stdout, list, *asJSON)
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

func printDeadLetters(w io.Writer, list []ingest.DeadLetter, asJSON bool) {
	if asJSON {
		enc := json.NewEncoder(w)
		for _, d := range list {
			_ = enc.Encode(map[string]any{
				"id": d.ID, "consumer_group": d.Group, "topic": d.Record.Topic, "partition": d.Record.Partition,
				"offset": d.Record.Offset, "timestamp": d.Record.Timestamp, "key": preview(d.Record.Key, 1<<20),
				"value": preview(d.Record.Value, 1<<20), "target_table": d.TargetTable, "error_kind": d.ErrorKind,
				"error_message": d.ErrorMessage, "created_at": d.CreatedAt,
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
			d.Record.Partition, d.Record.Offset, d.ErrorKind, preview([]byte(d.ErrorMessage), 60), preview(d.Record.Value, 40))
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
