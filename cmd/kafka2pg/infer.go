package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.yaml.in/yaml/v3"

	"github.com/kafka2pg/kafka2pg/decode"
	"github.com/kafka2pg/kafka2pg/decode/infer"
	"github.com/kafka2pg/kafka2pg/ingest"
	"github.com/kafka2pg/kafka2pg/reader"
	"github.com/kafka2pg/kafka2pg/registry"
	"github.com/kafka2pg/kafka2pg/schema"
	"github.com/kafka2pg/kafka2pg/sinks"
)

// kafka2pg infer samples a topic and prints a sink config that `run
// --config` accepts as is, with the CREATE TABLE it leads to as a comment,
// so `kafka2pg run --config <(kafka2pg infer ...) --pg-url ...` works. The
// inference is a guess from the samples: the output is meant to be read and
// edited, and `kafka2pg check --config` shows what it would do.

type inferOptions struct {
	brokers  []string
	group    string
	topic    string
	sample   int
	table    string
	mode     string
	keyPath  string
	nested   string
	timeout  time.Duration
	security reader.Security
	registry registryOptions // for values in the Confluent wire format

	pgURL, pgURLFile string // the database run will write, to avoid a table taken there
	tableGiven       bool   // --pg-table was given: infer does not pick another name
	groupGiven       bool
	tableNote        string // what the database said of the table, for the header
}

func defineInferFlags(fs *pflag.FlagSet, o *inferOptions) {
	fs.StringSliceVar(&o.brokers, "kafka-brokers", nil, "bootstrap brokers, host:port[,host:port]")
	fs.StringVar(&o.topic, "topic", "", "topic to sample")
	fs.IntVar(&o.sample, "sample", 500, "records to sample, spread over the partitions from their start")
	fs.DurationVar(&o.timeout, "timeout", 30*time.Second, "longest the sampling reads before it uses what it has")
	fs.StringVar(&o.table, "pg-table", "", "target table (default: the topic's name)")
	fs.StringVar(&o.mode, "mode", "append", "append (a row per record) or upsert (one per --key-path)")
	fs.StringVar(&o.keyPath, "key-path", "", "upsert: path of the value that identifies a row, e.g. order.id")
	fs.StringVar(&o.nested, "nested", "flatten", "nested objects: flatten (a.b → column a_b) or jsonb")
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
	for _, n := range oldNameNotices(fs) {
		fmt.Fprintf(stderr, "kafka2pg infer: %s\n", n)
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "kafka2pg infer: unexpected argument %q: flags only (did you mean --topic %s?)\n", fs.Arg(0), fs.Arg(0))
		return exitUsage
	}
	if err := readPGURLFile(&o.pgURL, o.pgURLFile); err != nil {
		fmt.Fprintf(stderr, "kafka2pg infer: %s\n", cliMessage(err))
		return exitUsage
	}
	o.tableGiven, o.groupGiven = given(fs, "pg-table"), given(fs, "kafka-group")
	if err := o.validate(); err != nil {
		fmt.Fprintf(stderr, "kafka2pg infer: %s\n", cliMessage(err))
		return exitUsage
	}
	opts, err := o.security.Options()
	if err != nil {
		fmt.Fprintf(stderr, "kafka2pg infer: %s\n", cliMessage(err))
		return exitUsage
	}
	smp, err := sampleTopic(ctx, append(opts, kgo.SeedBrokers(o.brokers...)), o.topic, o.sample, o.timeout)
	if err != nil {
		fmt.Fprintf(stderr, "kafka2pg infer: %s\n", cliMessage(err))
		return exitError
	}
	var out string
	render := func() (string, ingest.Sink, error) { return o.renderRegistry(ctx, smp) }
	if !wireFormat(smp.values) {
		inf := &infer.Inference{}
		for _, v := range smp.values {
			inf.Observe(v)
		}
		render = func() (string, ingest.Sink, error) { return o.render(ctx, inf, smp) }
	}
	if o.pgURL == "" {
		out, _, err = render()
		fmt.Fprintln(stderr, "kafka2pg infer: no --pg-url: the table was not looked for in the database (give --pg-url, and infer avoids a table that exists with other columns)")
	} else {
		out, err = o.renderAvoidingTakenTables(ctx, render, stderr)
	}
	if err != nil {
		fmt.Fprintf(stderr, "kafka2pg infer: %s\n", cliMessage(err))
		return exitError
	}
	if _, err := io.WriteString(stdout, out); err != nil {
		fmt.Fprintf(stderr, "kafka2pg infer: write the config: %v\n", err)
		return exitError
	}
	return exitOK
}

func (o *inferOptions) validate() error {
	var errs []error
	if len(o.brokers) == 0 {
		errs = append(errs, errors.New("--kafka-brokers is empty: give the brokers, e.g. --kafka-brokers localhost:9092"))
	}
	if o.topic == "" {
		errs = append(errs, errors.New("--topic is empty: name the topic to sample"))
	}
	if o.sample < 1 {
		errs = append(errs, fmt.Errorf("--sample is %d: sample at least 1 record", o.sample))
	}
	if o.table == "" && o.topic != "" {
		o.table = schema.TableNameForTopic(o.topic)
	}
	if o.table != "" {
		if err := schema.ValidateIdent("--pg-table", o.table); err != nil {
			errs = append(errs, err)
		}
	}
	if o.group == "" {
		o.group = "kafka2pg-" + o.table
	}
	switch {
	case o.mode != "append" && o.mode != "upsert":
		errs = append(errs, fmt.Errorf("--mode %q is not append or upsert", o.mode))
	case o.mode == "upsert" && o.keyPath == "":
		errs = append(errs, errors.New("--mode upsert needs --key-path: the path of the value that identifies a row"))
	case o.mode == "append" && o.keyPath != "":
		errs = append(errs, errors.New("--key-path needs --mode upsert"))
	}
	if o.nested != "flatten" && o.nested != "jsonb" {
		errs = append(errs, fmt.Errorf("--nested %q is not flatten or jsonb", o.nested))
	}
	if o.timeout <= 0 {
		errs = append(errs, fmt.Errorf("--timeout is %s: use a positive duration such as 30s", o.timeout))
	}
	if err := o.security.Validate(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// samples is what sampleTopic read.
type samples struct {
	values     [][]byte // record values, tombstones left out
	tombstones int
	partitions int
	timedOut   bool // the timeout ended the sampling before every partition's end
}

// sampleTopic reads up to n records from the start of topic's partitions,
// at most ceil(n / partitions with data) from each, and no further than the
// end offsets seen at start. It joins no group and commits nothing. When
// timeout passes first it returns what it read (timedOut), unless that is
// nothing.
func sampleTopic(ctx context.Context, opts []kgo.Opt, topic string, n int, timeout time.Duration) (*samples, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	admCl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("create Kafka client: %w", err)
	}
	defer admCl.Close()
	adm := kadm.NewClient(admCl)
	topics, err := adm.ListTopics(ctx, topic)
	if err != nil {
		return nil, fmt.Errorf("describe topic %q: %w", topic, err)
	}
	td, ok := topics[topic]
	switch {
	case !ok || errors.Is(td.Err, kerr.UnknownTopicOrPartition):
		return nil, fmt.Errorf("topic %q does not exist: check --topic and --kafka-brokers", topic)
	case td.Err != nil:
		return nil, fmt.Errorf("describe topic %q: %w", topic, td.Err)
	}
	starts, err := adm.ListStartOffsets(ctx, topic)
	if err == nil {
		err = starts.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("list the start offsets of %q: %w", topic, err)
	}
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("list the end offsets of %q: %w", topic, err)
	}
	smp := &samples{partitions: len(td.Partitions)}
	from := map[int32]kgo.Offset{}
	endOf := map[int32]int64{}
	for p, end := range ends[topic] {
		start, ok := starts.Lookup(topic, p)
		if ok && end.Offset > start.Offset {
			from[p] = kgo.NewOffset().At(start.Offset)
			endOf[p] = end.Offset
		}
	}
	if len(from) == 0 {
		return nil, fmt.Errorf("topic %q has no records to sample: produce some first", topic)
	}
	perPartition := (n + len(from) - 1) / len(from)
	cl, err := kgo.NewClient(append(opts, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: from}))...)
	if err != nil {
		return nil, fmt.Errorf("create Kafka client: %w", err)
	}
	defer cl.Close()
	taken := map[int32]int{}
	for len(from) > 0 && len(smp.values)+smp.tombstones < n {
		fetches := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			smp.timedOut = true
			break
		}
		if err := fetches.Err0(); err != nil && !errors.Is(err, context.Canceled) {
			return nil, fmt.Errorf("read %q: %w", topic, err)
		}
		var done []int32
		fetches.EachRecord(func(r *kgo.Record) {
			if _, reading := from[r.Partition]; !reading || len(smp.values)+smp.tombstones >= n {
				return
			}
			if r.Value == nil {
				smp.tombstones++
			} else {
				smp.values = append(smp.values, r.Value)
			}
			taken[r.Partition]++
			if taken[r.Partition] >= perPartition || r.Offset+1 >= endOf[r.Partition] {
				delete(from, r.Partition)
				done = append(done, r.Partition)
			}
		})
		if len(done) > 0 {
			cl.PauseFetchPartitions(map[string][]int32{topic: done})
		}
	}
	if len(smp.values) == 0 {
		return nil, fmt.Errorf("read no record values from %q within --timeout %s", topic, timeout)
	}
	return smp, nil
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

// sink turns the inference into the config's sink, with the key column for
// upsert.
func (o *inferOptions) sink(inf *infer.Inference) (sinks.Sink, error) {
	nested, err := decode.ParseNested(o.nested)
	if err != nil {
		return sinks.Sink{}, fmt.Errorf("--nested: %w", err)
	}
	cols := inf.Columns(nested)
	if len(cols) == 0 {
		return sinks.Sink{}, fmt.Errorf("the %d sampled values have no members to map: a raw sink (kafka2pg run --topic %s) stores them as they are", inf.Docs, o.topic)
	}
	sc := sinks.Sink{Topic: o.topic, Table: o.table, Mode: o.mode}
	keyFound := false
	for _, c := range cols {
		if o.keyPath != "" && (o.keyPath == c.Path || o.keyPath == strings.Join(c.Steps, ".")) {
			keyFound = true
			if !c.NotNull {
				return sinks.Sink{}, fmt.Errorf("--key-path %s is null or missing in some of the %d samples: choose a path every record has", o.keyPath, inf.Docs)
			}
			if c.Type == "jsonb" {
				return sinks.Sink{}, fmt.Errorf("--key-path %s holds objects, arrays or mixed kinds (jsonb): choose a path of scalar values", o.keyPath)
			}
			sc.Key = []string{c.Name}
		}
		sc.Columns = append(sc.Columns, sinks.Column{ColumnSpec: decode.ColumnSpec{Name: c.Name, Path: c.Path, Type: c.Type, NotNull: c.NotNull}})
	}
	if o.keyPath != "" && !keyFound {
		return sinks.Sink{}, fmt.Errorf("--key-path %s is not a column of the inferred sink: use one of the paths printed without it", o.keyPath)
	}
	return sc, nil
}

// render prints the config with a header comment holding the CREATE TABLE
// that `run` would plan for it.
func (o *inferOptions) render(ctx context.Context, inf *infer.Inference, smp *samples) (string, ingest.Sink, error) {
	if inf.Docs == 0 {
		return "", ingest.Sink{}, fmt.Errorf("none of the %d sampled values is a JSON object: typed columns need JSON objects; a raw sink (kafka2pg run --topic %s) stores any value", inf.Skipped, o.topic)
	}
	sc, err := o.sink(inf)
	if err != nil {
		return "", ingest.Sink{}, err
	}
	sink, err := buildSink(ctx, sc, nil)
	if err != nil {
		return "", ingest.Sink{}, fmt.Errorf("the inferred sink does not build (a bug in infer): %w", err)
	}
	cfg := inferredConfig{Brokers: o.brokers, Group: o.group, Sinks: []inferredSinkYAML{{Topic: sc.Topic, Table: sc.Table, Mode: sc.Mode, Key: sc.Key}}}
	for _, c := range sc.Columns {
		cfg.Sinks[0].Columns = append(cfg.Sinks[0].Columns, inferredColumnYAML{Name: c.Name, Path: c.Path, Type: c.Type, NotNull: c.NotNull})
	}
	var doc yaml.Node
	if err := doc.Encode(cfg); err != nil {
		return "", ingest.Sink{}, fmt.Errorf("encode the config: %w", err)
	}
	flowColumns(&doc)
	var head strings.Builder
	fmt.Fprintf(&head, "# kafka2pg infer: %d record values of topic %q (%d partitions) sampled", len(smp.values), o.topic, smp.partitions)
	if inf.Skipped > 0 || smp.tombstones > 0 {
		fmt.Fprintf(&head, "; %d not JSON objects and %d tombstones left out", inf.Skipped, smp.tombstones)
	}
	head.WriteString(".\n")
	if smp.timedOut {
		head.WriteString("# The sampling stopped at --timeout, before every partition's end.\n")
	}
	head.WriteString("# Types are guesses from the samples: read them, then `kafka2pg check --config FILE`.\n")
	head.WriteString("# Add pg-url (or set KAFKA2PG_PG_URL) and any Kafka TLS/SASL settings.\n")
	text, err := o.configText(head.String(), sink.Table, &doc)
	return text, sink, err
}

// configText is the config infer prints: the header comment head, then
// o.tableNote and the CREATE TABLE that run would plan for t, as comments,
// then cfg as YAML.
func (o *inferOptions) configText(head string, t schema.Table, cfg any) (string, error) {
	var body bytes.Buffer
	enc := yaml.NewEncoder(&body)
	enc.SetIndent(2)
	if err := enc.Encode(cfg); err != nil {
		return "", fmt.Errorf("encode the config: %w", err)
	}
	var b strings.Builder
	b.WriteString(head)
	b.WriteString(o.tableNote)
	b.WriteString("#\n# The table run creates:\n#\n")
	for _, line := range strings.Split(strings.TrimRight(schema.PlanSQL(schema.PlanCreate(t)), "\n"), "\n") {
		b.WriteString(strings.TrimRight("#   "+line, " ") + "\n")
	}
	b.WriteString("\n")
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

// wireFormat reports whether every sampled value is in the Confluent wire
// format: a 0 magic byte and a 4-byte schema id. JSON never starts with 0.
func wireFormat(values [][]byte) bool {
	for _, v := range values {
		if len(v) < 5 || v[0] != 0 {
			return false
		}
	}
	return len(values) > 0
}

// renderRegistry prints the sink of a topic whose values carry a schema
// id: format avro or protobuf (as the registry says of the first sampled
// id), and the CREATE TABLE its subject's versions fold into.
func (o *inferOptions) renderRegistry(ctx context.Context, smp *samples) (string, ingest.Sink, error) {
	if o.mode != "append" {
		return "", ingest.Sink{}, errors.New("--mode upsert: for Avro and Protobuf values infer prints an append sink; then set mode: upsert and key: [key_<field>] (the fields of the <topic>-key subject) by hand")
	}
	if len(o.registry.urls) == 0 {
		return "", ingest.Sink{}, fmt.Errorf("the values of %q are in the Schema Registry wire format (magic byte 0, schema id): give --schema-registry-url to read their schema", o.topic)
	}
	cfg, err := o.registry.config()
	if err != nil {
		return "", ingest.Sink{}, err
	}
	c, err := registry.New(cfg)
	if err != nil {
		return "", ingest.Sink{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	id := int(binary.BigEndian.Uint32(smp.values[0][1:5]))
	rs, err := c.SchemaByID(ctx, id)
	if err != nil {
		return "", ingest.Sink{}, fmt.Errorf("the values of %q carry schema id %d: %w", o.topic, id, err)
	}
	format := strings.ToLower(rs.Type)
	if format == "json" {
		format = decode.FormatJSONSchema.String()
	}
	if !(sinks.Sink{Format: format}).NeedsRegistry() {
		return "", ingest.Sink{}, fmt.Errorf("the values of %q carry schema id %d, a %s schema: kafka2pg reads avro, protobuf and json (json_schema)", o.topic, id, rs.Type)
	}
	sc := sinks.Sink{Topic: o.topic, Table: o.table, Format: format, Mode: "append"}
	if format == decode.FormatProtobuf.String() {
		// The sampled records name their message by its indexes; the
		// config names it by its full name when it is not the first.
		_, indexes, err := decode.WireHeader(smp.values[0], true)
		if err != nil {
			return "", ingest.Sink{}, fmt.Errorf("the first sampled value of %q: %w", o.topic, err)
		}
		if len(indexes) != 1 || indexes[0] != 0 {
			if sc.Message, err = decode.ProtobufMessageName(rs, indexes); err != nil {
				return "", ingest.Sink{}, err
			}
		}
	}
	if o.nested != "flatten" {
		sc.Nested = o.nested
	}
	reg, err := (&runOptions{registry: o.registry, sinks: []sinks.Sink{sc}}).connectRegistry()
	if err != nil {
		return "", ingest.Sink{}, err
	}
	sink, err := buildSink(ctx, sc, reg)
	if err != nil {
		return "", ingest.Sink{}, err
	}
	cfgOut := inferredConfig{Brokers: o.brokers, Group: o.group, Registry: o.registry.urls,
		Sinks: []inferredSinkYAML{{Topic: sc.Topic, Table: sc.Table, Format: format, Message: sc.Message, Mode: sc.Mode}}}
	head := fmt.Sprintf("# kafka2pg infer: %d record values of topic %q (%d partitions) are %s in the Schema Registry wire format (schema id %d, subject %q).\n",
		len(smp.values), o.topic, smp.partitions, format, id, o.topic+"-value") +
		"# The columns come from the subject's versions; new versions evolve the table while run runs.\n" +
		"# Add pg-url (or set KAFKA2PG_PG_URL), the registry's credentials and any Kafka TLS/SASL settings.\n"
	text, err := o.configText(head, sink.Table, cfgOut)
	return text, sink, err
}

// buildSink builds the one sink sc as run would (in schema public), its
// error that of the sink.
func buildSink(ctx context.Context, sc sinks.Sink, reg *registry.Client) (ingest.Sink, error) {
	set, err := sinks.Config{Sinks: []sinks.Sink{sc}}.Build(ctx, reg)
	if fe := (*sinks.FieldError)(nil); errors.As(err, &fe) {
		return ingest.Sink{}, fe.Err
	}
	if err != nil {
		return ingest.Sink{}, err
	}
	return set.Fixed[sc.Topic], nil
}
