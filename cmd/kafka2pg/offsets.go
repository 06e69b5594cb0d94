package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/spf13/pflag"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafka2pg/kafka2pg/bridge"
	"github.com/kafka2pg/kafka2pg/internal/redact"
	"github.com/kafka2pg/kafka2pg/offsets"
)

// partitionState is one row of `status` and `offsets show`.
type partitionState struct {
	Group          string     `json:"consumer_group"`
	Topic          string     `json:"topic"`
	Partition      int32      `json:"partition"`
	NextOffset     *int64     `json:"next_offset"` // durable in Postgres; null: claimed, nothing written
	Epoch          int64      `json:"epoch"`
	LastCommit     *time.Time `json:"last_commit_at"`
	EndOffset      *int64     `json:"end_offset,omitempty"` // from Kafka now (last stable offset)
	Lag            *int64     `json:"lag,omitempty"`
	KafkaCommitted *int64     `json:"kafka_committed,omitempty"` // the group's offset in Kafka (the mirror)
	Owner          string     `json:"owner,omitempty"`
}

type offsetsFlags struct {
	brokers    []string
	group      string
	topics     []string
	partitions []int32
	pgURL      string
	pgURLFile  string
	asJSON     bool
}

// defineOffsetsFlags defines the flags of status and offsets show.
func defineOffsetsFlags(fs *pflag.FlagSet, f *offsetsFlags) {
	definePGURLFlags(fs, &f.pgURL, &f.pgURLFile)
	fs.StringSliceVar(&f.brokers, "kafka-brokers", nil, "brokers: adds end offsets, lag, Kafka offsets and owners")
	fs.StringVar(&f.group, "kafka-group", "", "only this consumer group (default: every group)")
	fs.StringSliceVar(&f.topics, "topic", nil, "only these topics")
	fs.Int32SliceVar(&f.partitions, "partition", nil, "only these partitions")
	fs.BoolVar(&f.asJSON, "json", false, "print JSON instead of a table")
}

// definePGURLFlags defines --pg-url and --pg-url-file.
func definePGURLFlags(fs *pflag.FlagSet, url, file *string) {
	fs.StringVar(url, "pg-url", "", "PostgreSQL URL (also from DATABASE_URL)")
	definePGURLFileFlag(fs, file)
}

// parsePGCommand parses the flags of a command that reads Postgres: it
// fails when no URL is given, after reading --pg-url-file.
func parsePGCommand(name string, help *commandHelp, fs *pflag.FlagSet, args []string, stdout, stderr io.Writer, url, file *string) (code int, ok bool) {
	if code, ok := parseFlags(name, help, fs, args, stdout, stderr); !ok {
		return code, false
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "kafka2pg %s: unexpected argument %q (see 'kafka2pg %s --help')\n", name, fs.Arg(0), name)
		return exitUsage, false
	}
	if err := readPGURLFile(url, *file); err != nil {
		fmt.Fprintf(stderr, "kafka2pg %s: %v\n", name, err)
		return exitUsage, false
	}
	if *url == "" {
		fmt.Fprintf(stderr, "kafka2pg %s: --pg-url is empty: give the PostgreSQL URL (or set KAFKA2PG_PG_URL or DATABASE_URL)\n", name)
		return exitUsage, false
	}
	for _, n := range oldNameNotices(fs) {
		fmt.Fprintf(stderr, "kafka2pg %s: %s\n", name, n)
	}
	return exitOK, true
}

// statusCommand: kafka2pg status (and offsets show, which is the same view).
func statusCommand(ctx context.Context, name string, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet(name)
	var f offsetsFlags
	defineOffsetsFlags(fs, &f)
	if code, ok := parsePGCommand(name, statusHelp(name), fs, args, stdout, stderr, &f.pgURL, &f.pgURLFile); !ok {
		return code
	}
	pool, err := bridge.OpenPool(ctx, f.pgURL, "kafka2pg-offsets")
	if err != nil {
		fmt.Fprintf(stderr, "kafka2pg %s: --pg-url: %v\n", name, redact.Err(err))
		return exitUsage
	}
	defer pool.Close()
	states, err := loadStates(ctx, pool, f)
	if err != nil {
		fmt.Fprintf(stderr, "kafka2pg: %v\n", redact.Err(err))
		return exitError
	}
	if len(f.brokers) > 0 {
		if err := addKafkaState(ctx, f.brokers, states); err != nil {
			fmt.Fprintf(stderr, "kafka2pg: %v\n", err)
			return exitError
		}
	}
	printStates(stdout, states, f.asJSON)
	return exitOK
}

func loadStates(ctx context.Context, pool *pgxpool.Pool, f offsetsFlags) ([]*partitionState, error) {
	rows, err := offsets.List(ctx, pool, offsets.Filter{Group: f.group, Topics: f.topics, Partitions: f.partitions})
	if err != nil {
		return nil, err
	}
	out := make([]*partitionState, len(rows))
	for i, r := range rows {
		s := &partitionState{Group: r.Group, Topic: r.Topic, Partition: r.Partition, Epoch: r.Epoch}
		if r.NextOffset >= 0 {
			s.NextOffset = &r.NextOffset
		}
		if !r.CommittedAt.IsZero() {
			s.LastCommit = &r.CommittedAt
		}
		out[i] = s
	}
	return out, nil
}

// newAdmin is an admin client of the brokers; opts add TLS and SASL.
func newAdmin(brokers []string, opts ...kgo.Opt) (*kadm.Client, func(), error) {
	cl, err := kgo.NewClient(append(opts, kgo.SeedBrokers(brokers...), kgo.ClientID("kafka2pg-admin"))...)
	if err != nil {
		return nil, nil, fmt.Errorf("--kafka-brokers: %w", err)
	}
	return kadm.NewClient(cl), cl.Close, nil
}

// addKafkaState fills end offsets, lag, the groups' Kafka offsets and the
// owners from Kafka.
func addKafkaState(ctx context.Context, brokers []string, states []*partitionState) error {
	adm, closeAdm, err := newAdmin(brokers)
	if err != nil {
		return err
	}
	defer closeAdm()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var topics, groups []string
	for _, s := range states {
		if !slices.Contains(topics, s.Topic) {
			topics = append(topics, s.Topic)
		}
		if !slices.Contains(groups, s.Group) {
			groups = append(groups, s.Group)
		}
	}
	if len(topics) == 0 {
		return nil
	}
	ends, err := adm.ListCommittedOffsets(ctx, topics...)
	if err != nil {
		return fmt.Errorf("list end offsets of %v: %w", topics, err)
	}
	owners := map[string]string{} // group/topic/partition → owner
	commits := map[string]kadm.OffsetResponses{}
	described, err := adm.DescribeGroups(ctx, groups...)
	if err != nil {
		return fmt.Errorf("describe groups %v: %w", groups, err)
	}
	for _, g := range groups {
		if fo, err := adm.FetchOffsets(ctx, g); err == nil {
			commits[g] = fo
		}
		for _, m := range described[g].Members {
			ca, ok := m.Assigned.AsConsumer()
			if !ok {
				continue
			}
			for _, t := range ca.Topics {
				for _, p := range t.Partitions {
					owners[fmt.Sprintf("%s/%s/%d", g, t.Topic, p)] = fmt.Sprintf("%s@%s", m.ClientID, strings.TrimPrefix(m.ClientHost, "/"))
				}
			}
		}
	}
	for _, s := range states {
		if e, ok := ends.Lookup(s.Topic, s.Partition); ok && e.Err == nil {
			end := e.Offset
			lag := end - max(deref64(s.NextOffset), 0)
			s.EndOffset, s.Lag = &end, &lag
		}
		if o, ok := commits[s.Group].Lookup(s.Topic, s.Partition); ok && o.Err == nil && o.At >= 0 {
			at := o.At
			s.KafkaCommitted = &at
		}
		s.Owner = owners[fmt.Sprintf("%s/%s/%d", s.Group, s.Topic, s.Partition)]
	}
	return nil
}

func deref64(p *int64) int64 {
	if p == nil {
		return -1
	}
	return *p
}

func fmtOpt(p *int64) string {
	if p == nil {
		return "-"
	}
	return strconv.FormatInt(*p, 10)
}

func printStates(w io.Writer, states []*partitionState, asJSON bool) {
	if asJSON {
		if states == nil {
			states = []*partitionState{}
		}
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		_ = enc.Encode(states)
		return
	}
	if len(states) == 0 {
		fmt.Fprintln(w, "no partitions in kafka2pg.offsets match")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "GROUP\tTOPIC\tPARTITION\tNEXT_OFFSET\tEND_OFFSET\tLAG\tKAFKA_COMMITTED\tLAST_COMMIT\tEPOCH\tOWNER")
	for _, s := range states {
		last := "-"
		if s.LastCommit != nil {
			last = s.LastCommit.UTC().Format(time.RFC3339)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%d\t%s\n", s.Group, s.Topic, s.Partition, fmtOpt(s.NextOffset),
			fmtOpt(s.EndOffset), fmtOpt(s.Lag), fmtOpt(s.KafkaCommitted), last, s.Epoch, cmpOr(s.Owner, "-"))
	}
	tw.Flush()
}

func cmpOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
