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

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/spf13/pflag"

	"github.com/kafka2pg/kafka2pg/ingest"
	"github.com/kafka2pg/kafka2pg/schema"
)

// deadLettersFlags are the flags of dead-letters list and replay.
type deadLettersFlags struct {
	pgURL, pgURLFile string
	group, topic     string
	// list
	since  string
	limit  int
	asJSON bool
	// replay
	ids                       []int64
	table, pgSchema, valueFmt string
	maxRecordBytes, batchSize int
}

func defineDeadLettersFlags(fs *pflag.FlagSet, action string, f *deadLettersFlags) {
	definePGURLFlags(fs, &f.pgURL, &f.pgURLFile)
	fs.StringVar(&f.group, "kafka-group", "", "only dead letters of this consumer group")
	fs.StringVar(&f.topic, "topic", "", "only dead letters of this topic")
	if action == "list" {
		fs.StringVar(&f.since, "since", "", "only those since this RFC 3339 time, or this long ago (1h)")
		fs.IntVar(&f.limit, "limit", 50, "at most this many, newest first")
		fs.BoolVar(&f.asJSON, "json", false, "print JSON lines instead of a table")
		return
	}
	fs.Int64SliceVar(&f.ids, "id", nil, "only these dead letters (repeat or comma-separate)")
	fs.StringVar(&f.table, "pg-table", "", "target table (default: the topic's name)")
	fs.StringVar(&f.pgSchema, "pg-schema", "public", "schema of the target tables")
	fs.StringVar(&f.valueFmt, "value-format", "json", "json, text or bytes")
	bytesVar(fs, &f.maxRecordBytes, "max-record-bytes", 64<<20, "larger records stay bad records; 0: no limit")
	fs.IntVar(&f.batchSize, "batch-size", 1000, "dead letters per transaction")
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
	action := args[0]
	name := "dead-letters " + action
	fs := newFlagSet(name)
	var fl deadLettersFlags
	defineDeadLettersFlags(fs, action, &fl)
	help := deadLettersListHelp
	if action == "replay" {
		help = deadLettersReplayHelp
	}
	if code, ok := parsePGCommand(name, help, fs, args[1:], stdout, stderr, &fl.pgURL, &fl.pgURLFile); !ok {
		return code
	}
	pgURL, group, topic := &fl.pgURL, &fl.group, &fl.topic
	since, limit, asJSON, ids := fl.since, fl.limit, fl.asJSON, fl.ids
	table, pgSchema, valueFormat, maxRecordBytes, batchSize := fl.table, fl.pgSchema, fl.valueFmt, fl.maxRecordBytes, fl.batchSize
	pcfg, err := pgxpool.ParseConfig(*pgURL)
	if err != nil {
		fmt.Fprintf(stderr, "kafka2pg dead-letters: --pg-url: %v\n", redactErr(err))
		return exitUsage
	}
	if err := configureConn(&pcfg.ConnConfig.Config, "kafka2pg-dead-letters"); err != nil {
		fmt.Fprintf(stderr, "kafka2pg dead-letters: --pg-url: %v\n", err)
		return exitUsage
	}
	pcfg.AfterConnect = registerCodecs // replay copies like run does
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		fmt.Fprintf(stderr, "kafka2pg dead-letters: --pg-url: %v\n", redactErr(err))
		return exitUsage
	}
	defer pool.Close()

	if action == "list" {
		f := ingest.ListFilter{Group: *group, Topic: *topic, Limit: limit}
		if since != "" {
			t, err := parseSince(since, time.Now())
			if err != nil {
				fmt.Fprintf(stderr, "kafka2pg dead-letters list: %v\n", err)
				return exitUsage
			}
			f.Since = t
		}
		list, err := ingest.ListDeadLetters(ctx, pool, f)
		if err != nil {
			fmt.Fprintf(stderr, "kafka2pg: %v\n", redactErr(err))
			return exitError
		}
		printDeadLetters(stdout, list, asJSON)
		return exitOK
	}

	format, err := schema.ParseValueFormat(valueFormat)
	if err != nil {
		fmt.Fprintf(stderr, "kafka2pg dead-letters replay: --value-format: %v\n", err)
		return exitUsage
	}
	topics := []string{*topic}
	if *topic == "" {
		topics, err = deadLetterTopics(ctx, pool, *group)
		if err != nil {
			fmt.Fprintf(stderr, "kafka2pg: %v\n", redactErr(err))
			return exitError
		}
	}
	if len(topics) == 0 {
		fmt.Fprintln(stdout, "no dead letters to replay")
		return exitOK
	}
	sinks := map[string]ingest.Sink{}
	for _, t := range topics {
		name := table
		if name == "" {
			name = schema.TableNameForTopic(t)
		}
		sinks[t] = ingest.Sink{Table: schema.RawTable(pgSchema, name, format), Mapper: schema.RawMapper{Format: format}}
	}
	w, err := ingest.New(pool, ingest.Config{Group: "replay", Sinks: sinks, MaxRecordBytes: maxRecordBytes})
	if err != nil {
		fmt.Fprintf(stderr, "kafka2pg dead-letters replay: %v\n", err)
		return exitUsage
	}
	if err := w.EnsureTables(ctx, false); err != nil {
		fmt.Fprintf(stderr, "kafka2pg dead-letters replay: %v\n", redactErr(err))
		return exitError
	}
	res, err := w.Replay(ctx, ingest.ReplayFilter{Group: *group, Topic: *topic, IDs: ids}, batchSize)
	if err != nil {
		fmt.Fprintf(stderr, "kafka2pg: %v\n", redactErr(err))
		return exitError
	}
	fmt.Fprintf(stdout, "replayed %d dead letter(s) into their tables; %d still refused (kept, with their new error)", res.Replayed, res.StillBad)
	if res.Skipped > 0 {
		fmt.Fprintf(stdout, "; %d skipped (no table for their topic)", res.Skipped)
	}
	fmt.Fprintln(stdout)
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

func deadLetterTopics(ctx context.Context, pool *pgxpool.Pool, group string) ([]string, error) {
	rows, err := pool.Query(ctx, `SELECT DISTINCT topic FROM kafka2pg.dead_letters WHERE $1 = '' OR consumer_group = $1 ORDER BY 1`, group)
	if err != nil {
		return nil, fmt.Errorf("list dead-letter topics: %w", err)
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
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
