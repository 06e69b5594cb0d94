package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/spf13/pflag"
	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/kafka2pg/kafka2pg/bridge"
	"github.com/kafka2pg/kafka2pg/ingest"
	"github.com/kafka2pg/kafka2pg/internal/redact"
	"github.com/kafka2pg/kafka2pg/offsets"
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
	secOpts, err := o.cfg.KafkaSecurity.Options()
	if err != nil {
		fmt.Fprintf(stderr, "kafka2pg offsets reset: %v\n", err)
		return exitUsage
	}
	adm, closeAdm, err := newAdmin(o.cfg.Kafka.Brokers, secOpts...)
	if err != nil {
		fmt.Fprintf(stderr, "kafka2pg offsets reset: %v\n", err)
		return exitUsage
	}
	defer closeAdm()

	topics := o.onlyTopics
	if len(topics) == 0 {
		states, err := loadStates(ctx, pool, offsetsFlags{group: group})
		if err != nil {
			fmt.Fprintf(stderr, "kafka2pg: %v\n", redact.Err(err))
			return exitError
		}
		for _, s := range states {
			if len(topics) == 0 || topics[len(topics)-1] != s.Topic {
				topics = append(topics, s.Topic)
			}
		}
		if len(topics) == 0 {
			fmt.Fprintf(stderr, "kafka2pg offsets reset: group %q has no offsets in Postgres: name the topics with --topic\n", group)
			return exitUsage
		}
	}
	plan, err := planReset(ctx, adm, topics, rf.partitions, target)
	if err != nil {
		fmt.Fprintf(stderr, "kafka2pg offsets reset: %v\n", err)
		return exitError
	}
	before, err := loadStates(ctx, pool, offsetsFlags{group: group, topics: topics})
	if err != nil {
		fmt.Fprintf(stderr, "kafka2pg: %v\n", redact.Err(err))
		return exitError
	}
	rewinds, err := planRewinds(ctx, pool, o, plan, before, rf.deleteRows)
	if err != nil {
		fmt.Fprintf(stderr, "kafka2pg offsets reset: %v\n", redact.Err(err))
		return exitError
	}
	if len(o.sinks) == 0 && o.onlyTable == "" {
		fmt.Fprintln(stdout, "no --config or --pg-table: each topic's table is taken to be its zero-config table, named after the topic; if the bridge runs with a config or --pg-table, give reset the same")
	}
	refused := printPlan(stdout, group, plan, before, rewinds, rf.allowDuplicates)
	if refused > 0 && !rf.allowDuplicates {
		fmt.Fprintf(stdout, "\nnothing changed: %d partition(s) would move back into a table where the records read again would be written twice (see above)\n", refused)
		return exitError
	}
	if !rf.yes {
		fmt.Fprintln(stdout, "\nnothing changed: run again with --yes to apply")
		return exitOK
	}
	deleted, err := applyReset(ctx, pool, group, plan, rewinds)
	if err != nil {
		fmt.Fprintf(stderr, "kafka2pg: %v\n", redact.Err(err))
		return exitError
	}
	fmt.Fprintf(stdout, "\nPostgres: %d partition(s) moved", len(plan))
	if deleted.rows+deleted.letters > 0 {
		fmt.Fprintf(stdout, ", %d row(s) and %d dead letter(s) the records read again will write deleted", deleted.rows, deleted.letters)
	}
	fmt.Fprintln(stdout, ", in one transaction; their epochs were bumped, so running bridges re-claim and continue there (after three heartbeats; idle partitions within --fence-check-interval first)")
	offs := make(kadm.Offsets)
	for _, p := range plan {
		offs.AddOffset(p.topic, p.partition, p.to, -1)
	}
	cctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	if err := adm.CommitAllOffsets(cctx, group, offs); err != nil {
		fmt.Fprintf(stdout, "Kafka group %q: not mirrored now (%v); the bridges mirror the new offsets as they re-claim\n", group, err)
	} else {
		fmt.Fprintf(stdout, "Kafka group %q: offsets mirrored\n", group)
	}
	return exitOK
}

type resetTarget struct {
	kind   string // earliest, latest, offset, time
	offset int64
	at     time.Time
}

func parseResetTarget(s string) (resetTarget, error) {
	switch s {
	case "":
		return resetTarget{}, errors.New("--to is missing: earliest, latest, an offset, or an RFC 3339 time")
	case "earliest", "latest":
		return resetTarget{kind: s}, nil
	}
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		if n < 0 {
			return resetTarget{}, fmt.Errorf("--to %d: an offset cannot be negative", n)
		}
		return resetTarget{kind: "offset", offset: n}, nil
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return resetTarget{kind: "time", at: t}, nil
	}
	return resetTarget{}, fmt.Errorf("--to %q is not earliest, latest, an offset or an RFC 3339 time such as 2026-11-30T09:00:00Z", s)
}

type resetStep struct {
	topic     string
	partition int32
	to        int64
}

func planReset(ctx context.Context, adm *kadm.Client, topics []string, only []int32, target resetTarget) ([]resetStep, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	starts, err := adm.ListStartOffsets(ctx, topics...)
	if err != nil {
		return nil, fmt.Errorf("list start offsets of %v: %w", topics, err)
	}
	ends, err := adm.ListEndOffsets(ctx, topics...)
	if err != nil {
		return nil, fmt.Errorf("list end offsets of %v: %w", topics, err)
	}
	var at kadm.ListedOffsets
	if target.kind == "time" {
		if at, err = adm.ListOffsetsAfterMilli(ctx, target.at.UnixMilli(), topics...); err != nil {
			return nil, fmt.Errorf("list offsets at %s: %w", target.at.Format(time.RFC3339), err)
		}
	}
	var plan []resetStep
	var errs []error
	for _, t := range topics {
		if _, ok := ends[t]; !ok {
			errs = append(errs, fmt.Errorf("topic %q does not exist", t))
			continue
		}
	}
	ends.Each(func(e kadm.ListedOffset) {
		if len(only) > 0 && !containsInt32(only, e.Partition) {
			return
		}
		if e.Err != nil {
			errs = append(errs, fmt.Errorf("%s/%d: %w", e.Topic, e.Partition, e.Err))
			return
		}
		s, _ := starts.Lookup(e.Topic, e.Partition)
		step := resetStep{topic: e.Topic, partition: e.Partition}
		switch target.kind {
		case "earliest":
			step.to = s.Offset
		case "latest":
			step.to = e.Offset
		case "offset":
			step.to = target.offset
			if step.to < s.Offset || step.to > e.Offset {
				errs = append(errs, fmt.Errorf("%s/%d: offset %d is outside the log [%d, %d]", e.Topic, e.Partition, step.to, s.Offset, e.Offset))
				return
			}
		case "time":
			a, ok := at.Lookup(e.Topic, e.Partition)
			if !ok || a.Err != nil {
				errs = append(errs, fmt.Errorf("%s/%d: no offset for %s", e.Topic, e.Partition, target.at.Format(time.RFC3339)))
				return
			}
			step.to = a.Offset
		}
		plan = append(plan, step)
	})
	if len(only) > 0 {
		for _, p := range only {
			found := false
			for _, s := range plan {
				found = found || s.partition == p
			}
			if !found && len(errs) == 0 {
				errs = append(errs, fmt.Errorf("--partition %d does not exist in %v", p, topics))
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	sort.Slice(plan, func(i, j int) bool {
		if plan[i].topic != plan[j].topic {
			return plan[i].topic < plan[j].topic
		}
		return plan[i].partition < plan[j].partition
	})
	return plan, nil
}

func containsInt32(xs []int32, x int32) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}

// rewind is what moving one partition back does to its table.
type rewind struct {
	target        rewindTarget
	from          int64 // the new next_offset: rows at or past it were written by records read again
	del           bool  // --delete-rewound-rows: the dead letters, and the rows where target.mode is rewindDelete
	rows, letters int64 // counted for the plan
}

// planRewinds finds, for every step of the plan that moves a partition
// back, its table and what the reset does there (planRewind), and counts
// the rows and dead letters it would delete. Keyed by topic/partition.
func planRewinds(ctx context.Context, pool *pgxpool.Pool, o *runOptions, plan []resetStep, before []*partitionState, deleteRows bool) (map[string]*rewind, error) {
	was := map[string]*int64{}
	var topics []string
	for _, s := range before {
		was[stepKey(s.Topic, s.Partition)] = s.NextOffset
	}
	for _, p := range plan {
		if !slices.Contains(topics, p.topic) {
			topics = append(topics, p.topic)
		}
	}
	set, err := offlineSinks(ctx, o, topics)
	if err != nil {
		return nil, err
	}
	sinkOf := func(topic string) (ingest.Sink, bool, error) {
		if s, ok := set.Fixed[topic]; ok {
			return s, true, nil
		}
		return set.Resolve(ctx, topic)
	}
	targets := map[string]rewindTarget{}
	out := map[string]*rewind{}
	for _, p := range plan {
		w := was[stepKey(p.topic, p.partition)]
		if w == nil || p.to >= *w {
			continue // not back: nothing was written at or past the new offset
		}
		t, ok := targets[p.topic]
		if !ok {
			sink, found, err := sinkOf(p.topic)
			if err != nil {
				return nil, err
			}
			var gathered []string // other topics into the same table
			for other, s := range set.Fixed {
				if other != p.topic && found && s.Table.QualifiedName() == sink.Table.QualifiedName() {
					gathered = append(gathered, other)
				}
			}
			slices.Sort(gathered)
			if t, err = planRewind(ctx, pool, o, p.topic, sink, found, deleteRows, gathered); err != nil {
				return nil, err
			}
			targets[p.topic] = t
		}
		r := &rewind{target: t, from: p.to, del: deleteRows}
		if deleteRows {
			if r.rows, r.letters, err = countRewound(ctx, pool, t, o.cfg.Kafka.Group, p.topic, p.partition, p.to); err != nil {
				return nil, err
			}
		}
		out[stepKey(p.topic, p.partition)] = r
	}
	return out, nil
}

func stepKey(topic string, partition int32) string { return fmt.Sprintf("%s/%d", topic, partition) }

// printPlan prints the plan, partition by partition, with what moving back
// does to each table, and returns how many partitions would move back
// into a table that would get duplicates.
func printPlan(w io.Writer, group string, plan []resetStep, before []*partitionState, rewinds map[string]*rewind, allowDuplicates bool) (refused int) {
	was := map[string]*int64{}
	for _, s := range before {
		was[stepKey(s.Topic, s.Partition)] = s.NextOffset
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "GROUP\tTOPIC\tPARTITION\tNEXT_OFFSET BEFORE\tAFTER\tTABLE\tROWS TO DELETE\tDEAD LETTERS TO DELETE")
	notes := map[string]string{} // table → what moving back does there
	var tables []string
	for _, p := range plan {
		k := stepKey(p.topic, p.partition)
		table, rows, letters := "-", "-", "-"
		if r := rewinds[k]; r != nil {
			table = cmpOr(r.target.table, "(no sink)")
			switch r.target.mode {
			case rewindDelete:
				rows = fmt.Sprint(r.rows)
			case rewindRefused:
				refused++
				rows = "REFUSED"
				if allowDuplicates {
					rows = "none (--allow-duplicates)"
				}
			default:
				rows = "none"
			}
			if r.del {
				letters = fmt.Sprint(r.letters)
			}
			if _, seen := notes[table]; !seen {
				tables = append(tables, table)
			}
			notes[table] = r.target.why
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%d\t%s\t%s\t%s\n", group, p.topic, p.partition, fmtOpt(was[k]), p.to, table, rows, letters)
	}
	tw.Flush()
	for _, t := range tables {
		fmt.Fprintf(w, "%s: %s\n", t, notes[t])
	}
	return refused
}

// deletedCounts is what a reset deleted.
type deletedCounts struct{ rows, letters int64 }

// applyReset moves every partition of the plan in one transaction, and
// deletes what the records read again wrote (rewinds). The offsets rows
// come first, in the plan's (topic, partition) order, as a combined write
// fences them: once they are locked no writer of those partitions is in
// flight (it committed before, and its rows are seen and deleted) or can
// commit after (its fence finds the new epoch).
func applyReset(ctx context.Context, pool *pgxpool.Pool, group string, plan []resetStep, rewinds map[string]*rewind) (deletedCounts, error) {
	var d deletedCounts
	moves := make([]offsets.Move, len(plan))
	for i, p := range plan {
		moves[i] = offsets.Move{Topic: p.topic, Partition: p.partition, NextOffset: p.to}
	}
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		d = deletedCounts{}
		if err := offsets.Reset(ctx, tx, group, moves); err != nil {
			return err
		}
		for _, p := range plan {
			r := rewinds[stepKey(p.topic, p.partition)]
			if r == nil || !r.del {
				continue
			}
			rows, letters, err := deleteRewound(ctx, tx, r.target, group, p.topic, p.partition, r.from)
			if err != nil {
				return err
			}
			d.rows, d.letters = d.rows+rows, d.letters+letters
		}
		return nil
	})
	return d, err
}
