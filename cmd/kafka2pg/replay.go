package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/pflag"

	"github.com/kafka2pg/kafka2pg/admin"
	"github.com/kafka2pg/kafka2pg/deadletters"
	"github.com/kafka2pg/kafka2pg/internal/redact"
	"github.com/kafka2pg/kafka2pg/schema"
	"github.com/kafka2pg/kafka2pg/sinks"
	"github.com/kafka2pg/kafka2pg/stream"
)

// replayFlags are replay's own flags, beside run's.
type replayFlags struct {
	ids       []int64
	kinds     []string
	since     string
	limit     int
	batchSize int
	dryRun    bool
}

func defineReplayFlags(fs *pflag.FlagSet, f *replayFlags) {
	fs.BoolVar(&f.dryRun, "dry-run", false, "change nothing: print what would go where")
	fs.StringSliceVar(&f.kinds, "kind", nil, "only dead letters of these error kinds (check_violation)")
	fs.StringVar(&f.since, "since", "", "only those since this RFC 3339 time, or this long ago (1h)")
	fs.Int64SliceVar(&f.ids, "id", nil, "only these dead letters (repeat or comma-separate)")
	fs.IntVar(&f.limit, "limit", 0, "at most this many, oldest first; 0: all")
	fs.IntVar(&f.batchSize, "batch-size", 1000, "dead letters per transaction")
}

// replayLetterLines is how many dead letters a replay lists one by one.
const replayLetterLines = 20

func replayCommand(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var rf replayFlags
	o, code, ok := loadCommandOptions("dead-letters replay", deadLettersReplayHelp, args, stdout, stderr,
		runLoad{flags: func(fs *pflag.FlagSet) { defineReplayFlags(fs, &rf) }, offline: true})
	if !ok {
		return code
	}
	fail := func(code int, format string, args ...any) int {
		fmt.Fprintf(stderr, "kafka2pg dead-letters replay: "+format+"\n", args...)
		return code
	}
	f := deadletters.Filter{Group: o.cfg.Kafka.Group, Topics: o.onlyTopics, IDs: rf.ids, Kinds: rf.kinds}
	if o.onlyTable != "" {
		f.Table = qualifiedTable(o.onlyTable, o.pgSchema)
	}
	if rf.since != "" {
		t, err := parseSince(rf.since, time.Now())
		if err != nil {
			return fail(exitUsage, "%v", err)
		}
		f.Since = t
	}
	if rf.limit < 0 || rf.batchSize < 1 {
		return fail(exitUsage, "--limit is %d and --batch-size %d: give a limit of 0 (all) or more, and a batch size of 1 or more", rf.limit, rf.batchSize)
	}
	w := o.cfg.Writer
	w.Group, w.WriteTimeoutRows = o.cfg.Kafka.Group, o.cfg.Kafka.BatchMaxRows
	req := admin.ReplayRequest{Filter: f, Writer: w, BatchSize: rf.batchSize, Limit: rf.limit, DryRun: rf.dryRun, Letters: replayLetterLines + 1}
	pool, err := admin.OpenReplayPool(ctx, o.cfg.PostgresURL, req)
	if err != nil {
		return fail(exitUsage, "--pg-url: %v", err)
	}
	defer pool.Close()
	build := func(ctx context.Context, topics []string) (sinks.Set, error) { return offlineSinks(ctx, o, topics) }
	res, err := admin.Replay(ctx, pool, req, build)
	if err == nil || res.Replayed+res.StillBad+res.Kept > 0 { // what committed before a failure
		printReplay(stdout, res, rf.dryRun)
	}
	if fe := (*stream.FieldError)(nil); errors.As(err, &fe) {
		return fail(exitUsage, "%s", cliMessage(err))
	} else if err != nil {
		return fail(exitError, "%v", redact.Err(err))
	}
	if res.Kept > 0 {
		return exitError
	}
	return exitOK
}

// qualifiedTable is the target_table a dead letter records for the table
// the user named: "sales"."orders" as it is, sales.orders, or orders in
// schema def.
func qualifiedTable(name, def string) string {
	if strings.HasPrefix(name, `"`) {
		return name
	}
	if s, t, ok := strings.Cut(name, "."); ok {
		return schema.QuoteIdent(s, t)
	}
	return schema.QuoteIdent(def, name)
}

// printReplay prints what a replay did, or would do, by target table, the
// letters one by one when they are few, and what to do about those kept.
func printReplay(w io.Writer, res deadletters.Report, dryRun bool) {
	total := res.Replayed + res.StillBad + res.Kept
	if total == 0 {
		fmt.Fprintln(w, "no dead letters match")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	if dryRun {
		fmt.Fprintf(w, "dry run: nothing changed. %d dead letter(s), by the table they were written for:\n", total)
		fmt.Fprintln(tw, "TABLE\tTOPICS\tLETTERS\tWOULD REPLAY\tMAPPING STILL REFUSES\tKEPT: NO SINK WRITES IT")
	} else {
		fmt.Fprintln(tw, "TABLE\tTOPICS\tREPLAYED\tSTILL REFUSED\tKEPT: NO SINK WRITES IT")
	}
	for _, t := range res.Tables {
		refused := fmt.Sprint(t.StillBad)
		if t.StillBad > 0 {
			refused += " (" + formatCounts(t.Kinds) + ")"
		}
		name := cmpOr(t.Table, "(none recorded)")
		if dryRun {
			fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\t%d\n", name, strings.Join(t.Topics, ","), t.Replayed+t.StillBad+t.Kept, t.Replayed, refused, t.Kept)
		} else {
			fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%d\n", name, strings.Join(t.Topics, ","), t.Replayed, refused, t.Kept)
		}
	}
	tw.Flush()
	if total <= replayLetterLines {
		fmt.Fprintln(w)
		tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tSOURCE\tWAS\tTABLE\tOUTCOME")
		for _, o := range res.Letters {
			outcome := string(o.Result)
			switch {
			case o.Result == deadletters.StillBad:
				outcome += ": " + o.Kind + ": " + preview([]byte(o.Reason), 80)
			case o.Result == deadletters.Replayed && dryRun:
				outcome = "would replay (the mapping takes it)"
			}
			l := o.Letter
			fmt.Fprintf(tw, "%d\t%s/%d@%d\t%s\t%s\t%s\n", l.ID, l.Record.Topic, l.Record.Partition, l.Record.Offset, l.Kind, cmpOr(l.Table, "-"), outcome)
		}
		tw.Flush()
	}
	fmt.Fprintln(w)
	if dryRun {
		fmt.Fprintf(w, "dry run: %d would be replayed (Postgres may still refuse some: they would stay, with their new error), %d the mapping still refuses, %d kept; run again without --dry-run to replay\n",
			res.Replayed, res.StillBad, res.Kept)
	} else {
		fmt.Fprintf(w, "replayed %d dead letter(s) into their tables; %d still refused (kept, with their new error)\n", res.Replayed, res.StillBad)
	}
	for _, t := range res.Tables {
		if t.Kept == 0 {
			continue
		}
		if t.Table == "" {
			fmt.Fprintf(w, "kept %d dead letter(s) of topic(s) %s: they record no target table, so replay cannot tell which sink wrote them; give replay --id to choose them and the --config of their sink\n",
				t.Kept, strings.Join(t.Topics, ", "))
			continue
		}
		fmt.Fprintf(w, "kept %d dead letter(s) of %s (topic %s): no sink of this configuration writes that table, so they were left as they are; give replay the --config (or --pg-table) of the run whose sink writes %s\n",
			t.Kept, t.Table, strings.Join(t.Topics, ", "), t.Table)
	}
}

// formatCounts is "check_violation=2 type_mismatch=1", by name.
func formatCounts(m map[string]int) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s=%d", k, m[k]))
	}
	return strings.Join(parts, " ")
}
