package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/spf13/pflag"

	"github.com/kafka2pg/kafka2pg/admin"
	"github.com/kafka2pg/kafka2pg/bridge"
	"github.com/kafka2pg/kafka2pg/internal/redact"
)

func offsetsCommand(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, offsetsUsage)
		return exitUsage
	}
	switch args[0] {
	case "-h", "--help", "help":
		fmt.Fprint(stdout, offsetsUsage)
		return exitOK
	case "show":
		return statusCommand(ctx, "offsets show", args[1:], stdout, stderr)
	case "reset":
		return resetCommand(ctx, args[1:], stdout, stderr)
	}
	fmt.Fprintf(stderr, "kafka2pg offsets: unknown action %q\n\n%s", args[0], offsetsUsage)
	return exitUsage
}

// resetFlags are reset's own flags, beside run's (reset takes run's flags
// and config file, so that it finds the tables as run does).
type resetFlags struct {
	to              string
	partitions      []int32
	yes             bool
	deleteRows      bool
	allowDuplicates bool
}

func defineResetFlags(fs *pflag.FlagSet, f *resetFlags) {
	fs.StringVar(&f.to, "to", "", "earliest, latest, an offset, or an RFC 3339 time")
	fs.Int32SliceVar(&f.partitions, "partition", nil, "only these partitions")
	fs.BoolVar(&f.yes, "yes", false, "apply the plan (without it, only print it)")
	fs.BoolVar(&f.deleteRows, "delete-rewound-rows", true, "moving back, delete the rows read again, same transaction")
	fs.BoolVar(&f.allowDuplicates, "allow-duplicates", false, "move back where rows read again cannot be deleted")
}

func resetCommand(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var rf resetFlags
	o, code, ok := loadCommandOptions("offsets reset", resetHelp, args, stdout, stderr,
		runLoad{flags: func(fs *pflag.FlagSet) { defineResetFlags(fs, &rf) }, offline: true})
	if !ok {
		return code
	}
	group := o.cfg.Kafka.Group
	var problems []string
	if group == "" {
		problems = append(problems, "--kafka-group is empty: name the group whose offsets move")
	}
	if len(o.cfg.Kafka.Brokers) == 0 {
		problems = append(problems, "--kafka-brokers is empty: reset needs Kafka to find partitions and offsets")
	}
	target, err := parseResetTarget(rf.to)
	if err != nil {
		problems = append(problems, err.Error())
	}
	if len(problems) > 0 {
		for _, p := range problems {
			fmt.Fprintf(stderr, "kafka2pg offsets reset: %s\n", p)
		}
		return exitUsage
	}
	pool, err := bridge.OpenPool(ctx, o.cfg.PostgresURL, "kafka2pg-offsets")
	if err != nil {
		fmt.Fprintf(stderr, "kafka2pg offsets reset: --pg-url: %v\n", redact.Err(err))
		return exitUsage
	}
	defer pool.Close()
	k := admin.Kafka{Brokers: o.cfg.Kafka.Brokers, Security: o.cfg.KafkaSecurity}
	if _, err := k.Options(); err != nil {
		fmt.Fprintf(stderr, "kafka2pg offsets reset: %v\n", err)
		return exitUsage
	}
	topics := o.onlyTopics
	if len(topics) == 0 {
		topics, err = admin.GroupTopics(ctx, pool, group)
		if errors.Is(err, admin.ErrNoOffsets) {
			fmt.Fprintf(stderr, "kafka2pg offsets reset: group %q has no offsets in Postgres: name the topics with --topic\n", group)
			return exitUsage
		}
		if err != nil {
			fmt.Fprintf(stderr, "kafka2pg: %v\n", redact.Err(err))
			return exitError
		}
	}
	set, err := offlineSinks(ctx, o, topics)
	if err != nil {
		fmt.Fprintf(stderr, "kafka2pg offsets reset: %v\n", redact.Err(err))
		return exitError
	}
	plan, err := admin.PlanReset(ctx, pool, k, admin.ResetRequest{Group: group, Topics: topics, Partitions: rf.partitions,
		To: target, DeleteRows: rf.deleteRows, Sinks: set, Specs: o.sinks})
	if err != nil {
		fmt.Fprintf(stderr, "kafka2pg offsets reset: %v\n", redact.Err(err))
		return exitError
	}
	if len(o.sinks) == 0 && o.onlyTable == "" {
		fmt.Fprintln(stdout, "no --config or --pg-table: each topic's table is taken to be its zero-config table, named after the topic; if the bridge runs with a config or --pg-table, give reset the same")
	}
	printPlan(stdout, plan, rf.allowDuplicates)
	if refused := plan.Refused(); refused > 0 && !rf.allowDuplicates {
		fmt.Fprintf(stdout, "\nnothing changed: %d partition(s) would move back into a table where the records read again would be written twice (see above)\n", refused)
		return exitError
	}
	if !rf.yes {
		fmt.Fprintln(stdout, "\nnothing changed: run again with --yes to apply")
		return exitOK
	}
	deleted, err := admin.ApplyReset(ctx, pool, plan)
	if err != nil {
		fmt.Fprintf(stderr, "kafka2pg: %v\n", redact.Err(err))
		return exitError
	}
	fmt.Fprintf(stdout, "\nPostgres: %d partition(s) moved", len(plan.Steps))
	if deleted.Rows+deleted.Letters > 0 {
		fmt.Fprintf(stdout, ", %d row(s) and %d dead letter(s) the records read again will write deleted", deleted.Rows, deleted.Letters)
	}
	fmt.Fprintln(stdout, ", in one transaction; their epochs were bumped, so running bridges re-claim and continue there (after three heartbeats; idle partitions within --fence-check-interval first)")
	if err := admin.MirrorReset(ctx, k, plan); err != nil {
		fmt.Fprintf(stdout, "Kafka group %q: not mirrored now (%v); the bridges mirror the new offsets as they re-claim\n", group, err)
	} else {
		fmt.Fprintf(stdout, "Kafka group %q: offsets mirrored\n", group)
	}
	return exitOK
}

// parseResetTarget parses --to.
func parseResetTarget(s string) (admin.Target, error) {
	switch s {
	case "":
		return admin.Target{}, errors.New("--to is missing: earliest, latest, an offset, or an RFC 3339 time")
	case "earliest":
		return admin.Target{Kind: admin.Earliest}, nil
	case "latest":
		return admin.Target{Kind: admin.Latest}, nil
	}
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		if n < 0 {
			return admin.Target{}, fmt.Errorf("--to %d: an offset cannot be negative", n)
		}
		return admin.Target{Kind: admin.AtOffset, Offset: n}, nil
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return admin.Target{Kind: admin.AtTime, Time: t}, nil
	}
	return admin.Target{}, fmt.Errorf("--to %q is not earliest, latest, an offset or an RFC 3339 time such as 2026-11-30T09:00:00Z", s)
}

// printPlan prints the plan, partition by partition, with what moving back
// does to each table.
func printPlan(w io.Writer, plan admin.ResetPlan, allowDuplicates bool) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "GROUP\tTOPIC\tPARTITION\tNEXT_OFFSET BEFORE\tAFTER\tTABLE\tROWS TO DELETE\tDEAD LETTERS TO DELETE")
	notes := map[string]string{} // table → what moving back does there
	var tables []string
	for _, p := range plan.Steps {
		table, rows, letters := "-", "-", "-"
		if r := p.Rewind; r != nil {
			table = cmpOr(r.Table, "(no sink)")
			switch r.Mode {
			case admin.RewindDelete:
				rows = fmt.Sprint(r.Rows)
			case admin.RewindRefused:
				rows = "REFUSED"
				if allowDuplicates {
					rows = "none (--allow-duplicates)"
				}
			default:
				rows = "none"
			}
			if r.Delete {
				letters = fmt.Sprint(r.Letters)
			}
			if _, seen := notes[table]; !seen {
				tables = append(tables, table)
			}
			notes[table] = r.Why
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%d\t%s\t%s\t%s\n", plan.Group, p.Topic, p.Partition, fmtOpt(p.From), p.To, table, rows, letters)
	}
	tw.Flush()
	for _, t := range tables {
		fmt.Fprintf(w, "%s: %s\n", t, notes[t])
	}
}
