package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/spf13/pflag"
	"github.com/twmb/franz-go/pkg/kadm"

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

// resetFlags are the flags of offsets reset: offsets show's filters, with
// the group and the brokers required, and the target.
type resetFlags struct {
	offsetsFlags
	to  string
	yes bool
}

func defineResetFlags(fs *pflag.FlagSet, f *resetFlags) {
	definePGURLFlags(fs, &f.pgURL, &f.pgURLFile)
	fs.StringSliceVar(&f.brokers, "kafka-brokers", nil, "brokers, to find the partitions and their offsets")
	fs.StringVar(&f.group, "kafka-group", "", "the consumer group whose offsets move")
	fs.StringVar(&f.to, "to", "", "earliest, latest, an offset, or an RFC 3339 time")
	fs.StringSliceVar(&f.topics, "topic", nil, "only these topics (default: the group's)")
	fs.Int32SliceVar(&f.partitions, "partition", nil, "only these partitions")
	fs.BoolVar(&f.yes, "yes", false, "apply the plan (without it, only print it)")
}

func resetCommand(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("offsets reset")
	var f resetFlags
	defineResetFlags(fs, &f)
	if code, ok := parsePGCommand("offsets reset", resetHelp, fs, args, stdout, stderr, &f.pgURL, &f.pgURLFile); !ok {
		return code
	}
	to, yes := &f.to, &f.yes
	var problems []string
	if f.group == "" {
		problems = append(problems, "--kafka-group is empty: name the group whose offsets move")
	}
	if len(f.brokers) == 0 {
		problems = append(problems, "--kafka-brokers is empty: reset needs Kafka to find partitions and offsets")
	}
	target, err := parseResetTarget(*to)
	if err != nil {
		problems = append(problems, err.Error())
	}
	if len(problems) > 0 {
		for _, p := range problems {
			fmt.Fprintf(stderr, "kafka2pg offsets reset: %s\n", p)
		}
		return exitUsage
	}
	pool, err := newPool(ctx, f.pgURL, "kafka2pg-offsets")
	if err != nil {
		fmt.Fprintf(stderr, "kafka2pg offsets reset: --pg-url: %v\n", redactErr(err))
		return exitUsage
	}
	defer pool.Close()
	adm, closeAdm, err := newAdmin(f.brokers)
	if err != nil {
		fmt.Fprintf(stderr, "kafka2pg offsets reset: %v\n", err)
		return exitUsage
	}
	defer closeAdm()

	topics := f.topics
	if len(topics) == 0 {
		states, err := loadStates(ctx, pool, offsetsFlags{group: f.group})
		if err != nil {
			fmt.Fprintf(stderr, "kafka2pg: %v\n", redactErr(err))
			return exitError
		}
		for _, s := range states {
			if len(topics) == 0 || topics[len(topics)-1] != s.Topic {
				topics = append(topics, s.Topic)
			}
		}
		if len(topics) == 0 {
			fmt.Fprintf(stderr, "kafka2pg offsets reset: group %q has no offsets in Postgres: name the topics with --topic\n", f.group)
			return exitUsage
		}
	}
	plan, err := planReset(ctx, adm, topics, f.partitions, target)
	if err != nil {
		fmt.Fprintf(stderr, "kafka2pg offsets reset: %v\n", err)
		return exitError
	}
	before, err := loadStates(ctx, pool, offsetsFlags{group: f.group, topics: topics})
	if err != nil {
		fmt.Fprintf(stderr, "kafka2pg: %v\n", redactErr(err))
		return exitError
	}
	printPlan(stdout, f.group, plan, before)
	if !*yes {
		fmt.Fprintln(stdout, "\nnothing changed: run again with --yes to apply")
		return exitUsage
	}
	if err := applyReset(ctx, pool, f.group, plan); err != nil {
		fmt.Fprintf(stderr, "kafka2pg: %v\n", redactErr(err))
		return exitError
	}
	fmt.Fprintf(stdout, "\nPostgres: %d partition(s) moved; their epochs were bumped, so running bridges re-claim and continue there\n", len(plan))
	offs := make(kadm.Offsets)
	for _, p := range plan {
		offs.AddOffset(p.topic, p.partition, p.to, -1)
	}
	cctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	if err := adm.CommitAllOffsets(cctx, f.group, offs); err != nil {
		fmt.Fprintf(stdout, "Kafka group %q: not mirrored now (%v); the bridges mirror the new offsets as they re-claim\n", f.group, err)
	} else {
		fmt.Fprintf(stdout, "Kafka group %q: offsets mirrored\n", f.group)
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

func printPlan(w io.Writer, group string, plan []resetStep, before []*partitionState) {
	was := map[string]*int64{}
	for _, s := range before {
		was[fmt.Sprintf("%s/%d", s.Topic, s.Partition)] = s.NextOffset
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "GROUP\tTOPIC\tPARTITION\tNEXT_OFFSET BEFORE\tAFTER")
	for _, p := range plan {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%d\n", group, p.topic, p.partition, fmtOpt(was[fmt.Sprintf("%s/%d", p.topic, p.partition)]), p.to)
	}
	tw.Flush()
}

// applyReset moves every partition of the plan in one transaction, bumping
// the epochs so that whoever owns them now is fenced.
func applyReset(ctx context.Context, pool *pgxpool.Pool, group string, plan []resetStep) error {
	moves := make([]offsets.Move, len(plan))
	for i, p := range plan {
		moves[i] = offsets.Move{Topic: p.topic, Partition: p.partition, NextOffset: p.to}
	}
	return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error { return offsets.Reset(ctx, tx, group, moves) })
}
