package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"go.yaml.in/yaml/v3"

	"github.com/kafka2pg/kafka2pg/admin"
	"github.com/kafka2pg/kafka2pg/bridge"
	"github.com/kafka2pg/kafka2pg/internal/redact"
	"github.com/kafka2pg/kafka2pg/reader"
	"github.com/kafka2pg/kafka2pg/registry"
	"github.com/kafka2pg/kafka2pg/schema"
)

// kafka2pg infer samples a topic and prints a sink config that `run
// --config` accepts as is, with the CREATE TABLE it leads to as a comment,
// so `kafka2pg run --config <(kafka2pg infer ...) --pg-url ...` works. The
// inference (admin.Sample, admin.Infer) is a guess from the samples: the
// output is meant to be read and edited, and `kafka2pg check --config`
// shows what it would do.

type inferOptions struct {
	brokers  []string
	group    string
	req      admin.InferRequest
	security reader.Security
	registry registryOptions // for values in the Confluent wire format

	pgURL, pgURLFile string // the database run will write, to avoid a table taken there
	groupGiven       bool
}

func defineInferFlags(fs *pflag.FlagSet, o *inferOptions) {
	fs.StringSliceVar(&o.brokers, "kafka-brokers", nil, "bootstrap brokers, host:port[,host:port]")
	fs.StringVar(&o.req.Topic, "topic", "", "topic to sample")
	fs.IntVar(&o.req.Sample, "sample", 500, "records to sample, spread over the partitions from their start")
	fs.DurationVar(&o.req.Timeout, "timeout", 30*time.Second, "longest the sampling reads before it uses what it has")
	fs.StringVar(&o.req.Table, "pg-table", "", "target table (default: the topic's name)")
	fs.StringVar(&o.req.Mode, "mode", "append", "append (a row per record) or upsert (one per --key-path)")
	fs.StringVar(&o.req.KeyPath, "key-path", "", "upsert: path of the value that identifies a row, e.g. order.id")
	fs.StringVar(&o.req.Nested, "nested", "flatten", "nested objects: flatten (a.b → column a_b) or jsonb")
	fs.StringVar(&o.group, "kafka-group", "", "consumer group written into the config (default: kafka2pg-<table>)")
	definePGURLFlags(fs, &o.pgURL, &o.pgURLFile)
	defineSecurityFlags(fs, &o.security)
	defineRegistryFlags(fs, &o.registry)
}

func inferCommand(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("infer")
	var o inferOptions
	defineInferFlags(fs, &o)
	if code, ok := parseFlags("infer", inferHelp, fs, args, stdout, stderr); !ok {
		return code
	}
	fail := func(code int, err error) int {
		fmt.Fprintf(stderr, "kafka2pg infer: %s\n", cliMessage(err))
		return code
	}
	for _, n := range oldNameNotices(fs) {
		fmt.Fprintf(stderr, "kafka2pg infer: %s\n", n)
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "kafka2pg infer: unexpected argument %q: flags only (did you mean --topic %s?)\n", fs.Arg(0), fs.Arg(0))
		return exitUsage
	}
	if err := readPGURLFile(&o.pgURL, o.pgURLFile); err != nil {
		return fail(exitUsage, err)
	}
	o.req.FixedTable, o.groupGiven = given(fs, "pg-table"), given(fs, "kafka-group")
	if err := o.validate(); err != nil {
		return fail(exitUsage, err)
	}
	k := admin.Kafka{Brokers: o.brokers, Security: o.security}
	if _, err := k.Options(); err != nil {
		return fail(exitUsage, err)
	}
	smp, err := admin.Sample(ctx, k, o.req)
	if err != nil {
		return fail(exitError, err)
	}
	var res admin.Inferred
	if o.pgURL == "" {
		res, err = admin.Infer(ctx, nil, smp, o.req)
		fmt.Fprintln(stderr, "kafka2pg infer: no --pg-url: the table was not looked for in the database (give --pg-url, and infer avoids a table that exists with other columns)")
	} else {
		res, err = o.inferWithDatabase(ctx, smp)
	}
	if taken := (*admin.TablesTakenError)(nil); errors.As(err, &taken) {
		err = fmt.Errorf("%s: choose a table that does not exist yet with --pg-table (e.g. --pg-table %s)", taken.Taken(), taken.Free)
	}
	if err != nil {
		return fail(exitError, err)
	}
	if len(res.Avoided) > 0 {
		fmt.Fprintf(stderr, "kafka2pg infer: %s; this config writes %s instead\n", (&admin.TablesTakenError{Avoided: res.Avoided}).Taken(), res.Table.QualifiedName())
	}
	if !o.groupGiven {
		o.group = "kafka2pg-" + res.Sink.Table
	}
	out, err := o.configText(smp, res)
	if err == nil {
		_, err = io.WriteString(stdout, out)
	}
	if err != nil {
		fmt.Fprintf(stderr, "kafka2pg infer: write the config: %v\n", err)
		return exitError
	}
	return exitOK
}

// validate checks the flags, and fills the request's registry client.
func (o *inferOptions) validate() error {
	var errs []error
	if len(o.brokers) == 0 {
		errs = append(errs, errors.New("--kafka-brokers is empty: give the brokers, e.g. --kafka-brokers localhost:9092"))
	}
	errs = append(errs, o.req.Validate(), o.security.Validate())
	if len(o.registry.urls) > 0 {
		cfg, err := o.registry.config()
		if err == nil {
			o.req.Registry, err = registry.New(cfg)
		}
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// inferWithDatabase is admin.Infer avoiding the tables of --pg-url that
// the sink cannot write.
func (o *inferOptions) inferWithDatabase(ctx context.Context, smp admin.Samples) (admin.Inferred, error) {
	pool, err := bridge.OpenPool(ctx, o.pgURL, "kafka2pg-infer")
	if err != nil {
		return admin.Inferred{}, fmt.Errorf("--pg-url: %w", redact.Err(err))
	}
	defer pool.Close()
	if err := pool.Ping(ctx); err != nil {
		return admin.Inferred{}, fmt.Errorf("connect to Postgres (--pg-url): %w", redact.Err(err))
	}
	return admin.Infer(ctx, pool, smp, o.req)
}

// The printed config: the keys of --config (config.go), empty ones left out.
type inferredConfig struct {
	Brokers  []string           `yaml:"kafka-brokers,flow"`
	Group    string             `yaml:"kafka-group"`
	Registry []string           `yaml:"schema-registry-url,omitempty,flow"`
	Sinks    []inferredSinkYAML `yaml:"sinks"`
}

type inferredSinkYAML struct {
	Topic   string               `yaml:"topic"`
	Table   string               `yaml:"table"`
	Format  string               `yaml:"format,omitempty"`
	Message string               `yaml:"message,omitempty"`
	Mode    string               `yaml:"mode"`
	Key     []string             `yaml:"key,omitempty,flow"`
	Columns []inferredColumnYAML `yaml:"columns,omitempty"`
}

type inferredColumnYAML struct {
	Name    string `yaml:"name"`
	Path    string `yaml:"path"`
	Type    string `yaml:"type"`
	NotNull bool   `yaml:"not_null,omitempty"`
}

// configText is the config infer prints: a header comment on the
// samples, what the database said of the table and the CREATE TABLE that
// run would plan, as comments, then the config as YAML.
func (o *inferOptions) configText(smp admin.Samples, res admin.Inferred) (string, error) {
	sc := res.Sink
	cfg := inferredConfig{Brokers: o.brokers, Group: o.group,
		Sinks: []inferredSinkYAML{{Topic: sc.Topic, Table: sc.Table, Format: sc.Format, Message: sc.Message, Mode: sc.Mode, Key: sc.Key}}}
	for _, c := range sc.Columns {
		cfg.Sinks[0].Columns = append(cfg.Sinks[0].Columns, inferredColumnYAML{Name: c.Name, Path: c.Path, Type: c.Type, NotNull: c.NotNull})
	}
	var b strings.Builder
	if res.SchemaID > 0 {
		cfg.Registry = o.registry.urls
		fmt.Fprintf(&b, "# kafka2pg infer: %d record values of topic %q (%d partitions) are %s in the Schema Registry wire format (schema id %d, subject %q).\n",
			len(smp.Values), sc.Topic, smp.Partitions, sc.Format, res.SchemaID, sc.Topic+"-value")
		b.WriteString("# The columns come from the subject's versions; new versions evolve the table while run runs.\n" +
			"# Add pg-url (or set KAFKA2PG_PG_URL), the registry's credentials and any Kafka TLS/SASL settings.\n")
	} else {
		fmt.Fprintf(&b, "# kafka2pg infer: %d record values of topic %q (%d partitions) sampled", len(smp.Values), sc.Topic, smp.Partitions)
		if res.Skipped > 0 || smp.Tombstones > 0 {
			fmt.Fprintf(&b, "; %d not JSON objects and %d tombstones left out", res.Skipped, smp.Tombstones)
		}
		b.WriteString(".\n")
		if smp.TimedOut {
			b.WriteString("# The sampling stopped at --timeout, before every partition's end.\n")
		}
		b.WriteString("# Types are guesses from the samples: read them, then `kafka2pg check --config FILE`.\n")
		b.WriteString("# Add pg-url (or set KAFKA2PG_PG_URL) and any Kafka TLS/SASL settings.\n")
	}
	switch name := res.Table.QualifiedName(); {
	case res.Exists:
		fmt.Fprintf(&b, "# Table %s exists in the database and takes these rows as it is.\n", name)
	case len(res.Avoided) > 0:
		what := "other columns"
		if res.Avoided[0].ZeroConfig {
			what = "the zero-config table's columns"
		}
		fmt.Fprintf(&b, "# Table %s exists with %s, which this sink cannot write:\n# this config writes %s instead.\n", res.Avoided[0].Table, what, name)
	}
	b.WriteString("#\n# The table run creates:\n#\n")
	for _, line := range strings.Split(strings.TrimRight(schema.PlanSQL(schema.PlanCreate(res.Table)), "\n"), "\n") {
		b.WriteString(strings.TrimRight("#   "+line, " ") + "\n")
	}
	b.WriteString("\n")
	var doc yaml.Node
	if err := doc.Encode(cfg); err != nil {
		return "", fmt.Errorf("encode the config: %w", err)
	}
	flowColumns(&doc)
	var body bytes.Buffer
	enc := yaml.NewEncoder(&body)
	enc.SetIndent(2)
	if err := enc.Encode(&doc); err != nil {
		return "", fmt.Errorf("encode the config: %w", err)
	}
	b.Write(body.Bytes())
	return b.String(), nil
}

// flowColumns writes each column on one line: - {name: ..., path: ..., type: ...}.
func flowColumns(n *yaml.Node) {
	for i := 0; n.Kind == yaml.MappingNode && i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == "columns" && n.Content[i+1].Kind == yaml.SequenceNode {
			for _, item := range n.Content[i+1].Content {
				item.Style = yaml.FlowStyle
			}
		}
	}
	for _, c := range n.Content {
		flowColumns(c)
	}
}
