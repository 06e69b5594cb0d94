package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/spf13/pflag"

	"github.com/kafka2pg/kafka2pg/admin"
	"github.com/kafka2pg/kafka2pg/bridge"
	"github.com/kafka2pg/kafka2pg/internal/redact"
	"github.com/kafka2pg/kafka2pg/reader"
)

type offsetsFlags struct {
	brokers    []string
	security   reader.Security
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
	defineSecurityFlags(fs, &f.security)
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
	k := admin.Kafka{Brokers: f.brokers, Security: f.security}
	states, err := admin.Status(ctx, pool, admin.Filter{Group: f.group, Topics: f.topics, Partitions: f.partitions}, k)
	if err != nil {
		fmt.Fprintf(stderr, "kafka2pg: %v\n", redact.Err(err))
		return exitError
	}
	printStates(stdout, states, f.asJSON)
	return exitOK
}

func fmtOpt(p *int64) string {
	if p == nil {
		return "-"
	}
	return strconv.FormatInt(*p, 10)
}

func printStates(w io.Writer, states []admin.PartitionState, asJSON bool) {
	if asJSON {
		if states == nil {
			states = []admin.PartitionState{}
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
