package sinks

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"regexp"

	"github.com/kafka2pg/kafka2pg/cdc"
	"github.com/kafka2pg/kafka2pg/decode"
	"github.com/kafka2pg/kafka2pg/ingest"
	"github.com/kafka2pg/kafka2pg/registry"
	"github.com/kafka2pg/kafka2pg/schema"
)

// Set is a built Config: the sinks of the topics it names, and the
// patterns that build the sinks of the topics they match. It is what
// bridge.Config takes.
type Set struct {
	// Fixed maps each named topic to its sink.
	Fixed map[string]ingest.Sink
	// Patterns build the sinks of the topics a TopicRegex matches, in
	// the order of the config: the first that matches a topic wins.
	Patterns []Pattern

	// specs are the configurations Fixed's sinks were built from, and
	// schema the default schema they were built with (diff.go).
	specs  map[string]Sink
	schema string
	// Appliers are the sources of the sinks with transactions, one per
	// transaction topic: each needs an ingest.Applier.
	Appliers []ingest.ApplierConfig
}

// Pattern is a topic_regex sink, built per topic by Set.Resolve.
type Pattern struct {
	// Regex is the sink's TopicRegex, and Table its table's name as
	// configured (a template), for messages.
	Regex, Table string
	// Sample is the sink built for a sample topic that the pattern
	// matches: the names of the sinks its topics get differ from
	// Sample's in ASCII only (Kafka names topics in [a-zA-Z0-9._-]), so
	// a check of the database's encoding can check them before any topic
	// comes. Its Table is zero when the columns come from a schema
	// registry, which knows no sample topic.
	Sample ingest.Sink

	re   *regexp.Regexp
	spec Sink
	b    builder
	// router routes every topic's records when the templates read the
	// records: one for the pattern, so that its tables count together.
	router *contentRouter
}

// Validate checks c without building what needs a schema registry: every
// sink is checked, and those of formats avro, protobuf and json_schema
// (and debezium's value_format avro and protobuf) are checked without
// their subjects. Errors are *FieldError, joined.
func (c Config) Validate() error {
	// Nothing blocks: without a registry, building reads nothing.
	_, err := c.build(context.Background(), builder{schema: c.schema(), check: true})
	return err
}

// Build builds c's sinks. reg is the schema registry of the sinks that
// need one (NeedsRegistry), whose tables are read from it with ctx; nil
// when none does. Patterns keep reg to build their topics' sinks. Errors
// are *FieldError, joined; none is returned before every sink is tried.
func (c Config) Build(ctx context.Context, reg *registry.Client) (Set, error) {
	return c.build(ctx, builder{schema: c.schema(), reg: reg})
}

func (c Config) schema() string { return cmp.Or(c.Schema, "public") }

func (c Config) build(ctx context.Context, b builder) (Set, error) {
	set := Set{Fixed: map[string]ingest.Sink{}, specs: map[string]Sink{}, schema: b.schema}
	var errs []error
	for i, sc := range c.Sinks {
		at := func(key string, err error) error {
			return fieldErrors(fmt.Sprintf("sinks[%d]%s", i, key), sc.Line, err)
		}
		switch {
		case sc.Topic != "" && sc.TopicRegex != "":
			errs = append(errs, at("", errors.New("a sink has topic or topic_regex, not both")))
		case sc.TopicRegex != "":
			p, err := b.pattern(ctx, sc)
			if err != nil {
				errs = append(errs, at("", err))
				continue
			}
			set.Patterns = append(set.Patterns, p)
		default:
			sink, err := b.sink(ctx, sc)
			if errors.Is(err, errRegistryLater) {
				continue // checked; built once there is a registry
			}
			if err != nil {
				errs = append(errs, at("", err))
				continue
			}
			if _, dup := set.Fixed[sc.Topic]; dup {
				errs = append(errs, at(".topic", fmt.Errorf("topic %q has two sinks: one sink per topic", sc.Topic)))
				continue
			}
			set.Fixed[sc.Topic] = sink
			set.specs[sc.Topic] = sc
		}
	}
	errs = append(errs, c.addTransactionTopics(&set)...)
	return set, errors.Join(errs...)
}

// Resolve builds the sink of a topic that no sink names: the first
// pattern whose anchored TopicRegex matches it builds it, its table and
// schema named by their templates, its subjects read from the registry
// with ctx. false when no pattern matches. It is ingest.Config.Resolve.
func (s Set) Resolve(ctx context.Context, topic string) (ingest.Sink, bool, error) {
	for _, p := range s.Patterns {
		if p.re != nil && p.re.MatchString(topic) {
			sc := p.spec
			sc.Topic = topic
			sink, err := p.b.sink(ctx, sc)
			if err == nil && p.router != nil {
				sink.Router = p.router
			}
			return sink, err == nil, err
		}
	}
	return ingest.Sink{}, false, nil
}

// keyError is an error of one key of a sink (key is its path in the
// sink: "mode", "columns[2]"), which fieldErrors makes a FieldError of.
type keyError struct {
	key  string
	line int // the key's line; 0: the sink's
	err  error
}

func keyErr(key string, err error) error { return &keyError{key: key, err: err} }

func (e *keyError) Error() string { return e.err.Error() }
func (e *keyError) Unwrap() error { return e.err }

// fieldErrors is err of the sink at path (sinks[i]) and line as
// FieldErrors, one per error it joins, each with the path of its key when
// it names one.
func fieldErrors(path string, line int, err error) error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []error
		for _, e := range j.Unwrap() {
			out = append(out, fieldErrors(path, line, e))
		}
		return errors.Join(out...)
	}
	if ke, ok := err.(*keyError); ok {
		return &FieldError{Field: path + "." + ke.key, Line: cmp.Or(ke.line, line), Err: ke.err}
	}
	return &FieldError{Field: path, Line: line, Err: err}
}

// builder builds sinks: schema is the default schema; reg the registry
// (nil: none). With check, the sinks that need a registry are checked
// without it and not built (errRegistryLater).
type builder struct {
	schema string
	reg    *registry.Client
	check  bool
}

// errRegistryLater says a registry sink's config is valid but its table
// needs the registry, which a check does not read.
var errRegistryLater = errors.New("the sink needs the schema registry")

// errNoRegistry is the error of a sink that needs a registry Build was
// not given.
func errNoRegistry(key, format string) error {
	return fmt.Errorf("%s %s needs a schema registry: give Build a registry client", key, format)
}

// pattern checks the topic_regex sink sc by building it for a sample
// topic that the regex matches (topicLike), so that its templates meet a
// topic of the shape they expect.
func (b builder) pattern(ctx context.Context, sc Sink) (Pattern, error) {
	re, err := sinkRegex(sc.TopicRegex)
	if err != nil {
		return Pattern{}, keyErr("topic_regex", err)
	}
	p := Pattern{Regex: sc.TopicRegex, Table: cmp.Or(sc.Table, "${topic}"), re: re, spec: sc, b: b}
	if p.router, err = newContentRouter(sc, b.schema); err != nil {
		return Pattern{}, err
	}
	probe := b
	probe.check = true // the registry has no subject of a sample topic
	sc.Topic = topicLike(sc.TopicRegex, re)
	sample, err := probe.sink(ctx, sc)
	if errors.Is(err, errTopicShape) {
		// The templates parse, and only the sample does not fit them:
		// check the rest with plain names, and each topic's names when
		// it comes.
		sc.Table, sc.Schema = "probe", ""
		sample, err = probe.sink(ctx, sc)
	}
	switch {
	case errors.Is(err, errRegistryLater):
		return p, nil
	case err != nil:
		return Pattern{}, err
	}
	p.Sample = sample
	return p, nil
}

func (b builder) sink(ctx context.Context, sc Sink) (ingest.Sink, error) {
	if !changeFormat(sc.Format) {
		if errs := checkTransactions(sc); len(errs) > 0 {
			return ingest.Sink{}, errors.Join(errs...)
		}
	}
	filter, err := sinkFilter(sc)
	if err != nil {
		return ingest.Sink{}, err
	}
	if err := checkPartitionBy(sc); err != nil {
		return ingest.Sink{}, err
	}
	router, err := newContentRouter(sc, b.schema)
	if err != nil {
		return ingest.Sink{}, err
	}
	sink, err := b.mapping(ctx, sc)
	if err == nil {
		sink, err = partitioned(sc, sink)
	}
	if err == nil && filter != nil {
		sink.Filter = filter
	}
	if err == nil && router != nil {
		sink.Router = router
	}
	return sink, err
}

// sinkFilter compiles sc's where (nil without one), with what lets the
// sink's deletes through it.
func sinkFilter(sc Sink) (*decode.Filter, error) {
	if sc.Where == "" {
		return nil, nil
	}
	switch {
	case changeFormat(sc.Format) && sc.ValueFormat != "" && sc.ValueFormat != "json":
		return nil, keyErr("where", fmt.Errorf("where reads the value as JSON, and value_format %s is not: remove where", sc.ValueFormat))
	case !changeFormat(sc.Format) && sc.Format != "" && sc.Format != "json":
		return nil, keyErr("where", fmt.Errorf("where reads the value as JSON, and format %s is not: remove where, or use format json, debezium or connect_json", sc.Format))
	}
	f, err := decode.CompileFilter(decode.FilterSpec{Where: sc.Where, Envelope: changeFormat(sc.Format),
		PassTombstones: sc.Format == formatDebezium || sc.DeleteOnTombstone, PassDeletes: sc.Format == formatDebezium})
	if err != nil {
		line := 0
		var ee *decode.ExprError
		if sc.whereLine > 0 && errors.As(err, &ee) {
			line = sc.whereLine + ee.Line - 1
		}
		return nil, &keyError{key: "where", line: line, err: err}
	}
	return f, nil
}

// mapping builds sc's sink without its filter.
func (b builder) mapping(ctx context.Context, sc Sink) (ingest.Sink, error) {
	if sc.Topic == "" {
		return ingest.Sink{}, errors.New("topic is missing: name the topic this sink reads")
	}
	var (
		re     *regexp.Regexp
		groups []string
	)
	if sc.TopicRegex != "" {
		var err error
		if re, err = sinkRegex(sc.TopicRegex); err != nil {
			return ingest.Sink{}, err
		}
		groups = groupNames(sc.TopicRegex)
	}
	schemaName := b.schema
	if sc.Schema != "" {
		var err error
		if schemaName, err = routeName("schema", sc.Schema, sc.Topic, re, groups); err != nil {
			return ingest.Sink{}, keyErr("schema", err)
		}
	} else if err := schema.ValidateIdent("schema", schemaName); err != nil {
		return ingest.Sink{}, keyErr("schema", err)
	}
	table, err := routeName("table", cmp.Or(sc.Table, "${topic}"), sc.Topic, re, groups)
	if err != nil {
		return ingest.Sink{}, keyErr("table", err)
	}
	if changeFormat(sc.Format) {
		if sc.Format != formatDebezium {
			if err := noChildren(sc, "format "+sc.Format+" has no after image to read them from"); err != nil {
				return ingest.Sink{}, err
			}
		}
		children, err := changeChildren(sc, schemaName, table, re, groups)
		if err != nil {
			return ingest.Sink{}, err
		}
		sink, err := b.changeSink(sc, schemaName, table)
		sink.Children = children
		return sink, err
	}
	if sc.ValueFormat != "" || sc.Source != (cdc.SourceColumns{}) || sc.UnavailableValue != "" {
		return ingest.Sink{}, fmt.Errorf("value_format, source and unavailable_value are for format debezium (and unavailable_value for connect_json), not %q: remove them, or set the format", sc.Format)
	}
	mode := cmp.Or(sc.Mode, "append")
	if mode != "append" && mode != "upsert" {
		return ingest.Sink{}, keyErr("mode", fmt.Errorf("mode %q is not append or upsert", mode))
	}
	noCreate := sc.Create != nil && !*sc.Create
	if mode != "upsert" && guardKeys(sc) {
		if _, err := guardedUpsert(sc, mode, ingest.Sink{}); err != nil {
			return ingest.Sink{}, err
		}
	}
	if registryFormat(sc.Format) {
		sink, err := b.registrySink(ctx, sc, schemaName, table, mode, noCreate)
		if errors.Is(err, errRegistryLater) {
			// The children's paths and columns, checked against a
			// stand-in for the table the registry will tell.
			_, cerr := buildChildren(sc, schema.Table{Schema: schemaName, Name: table}, standInKey, true, re, groups,
				func(cm *decode.ChildMapper) ingest.Child { return ingest.Child{} })
			return sink, cmp.Or(cerr, err)
		}
		if err != nil {
			return sink, err
		}
		sink.Children, err = registryChildren(sc, sink, re, groups)
		return sink, err
	} else if sc.Subject != "" || sc.KeySubject != "" || sc.Nested != "" || sc.Message != "" {
		return ingest.Sink{}, fmt.Errorf("subject, key_subject, nested and message are for format avro, protobuf or json_schema, not %q: remove them, or set the format", sc.Format)
	}
	typed := len(sc.Columns) > 0 || !metadataEmpty(sc.Metadata)
	if !typed {
		if mode == "upsert" || len(sc.Key) > 0 || sc.DeleteOnTombstone {
			return ingest.Sink{}, keyErr("columns", errors.New("mode upsert, key and delete_on_tombstone need columns: declare the columns the key is made of"))
		}
		if err := noChildren(sc, "this sink has no columns"); err != nil {
			return ingest.Sink{}, err
		}
		format, err := decode.ParseValueFormat(sc.Format)
		if err != nil {
			return ingest.Sink{}, keyErr("format", fmt.Errorf("format: %w", err))
		}
		return ingest.Sink{Table: decode.RawTable(schemaName, table, format), Mapper: decode.RawMapper{Format: format},
			NoCreate: noCreate, Evolve: sc.Evolve}, nil
	}
	if sc.Format != "" && sc.Format != "json" {
		return ingest.Sink{}, keyErr("format", fmt.Errorf("format %q with columns: typed columns are read from JSON; use format: json, or drop the columns", sc.Format))
	}
	spec := decode.MappingSpec{Schema: schemaName, Table: table, DeleteOnTombstone: sc.DeleteOnTombstone, Metadata: sc.Metadata}
	if mode == "upsert" {
		if len(sc.Key) == 0 {
			return ingest.Sink{}, keyErr("key", errors.New("mode upsert needs key: the columns that identify a row"))
		}
		spec.Key = sc.Key
	} else if len(sc.Key) > 0 || sc.DeleteOnTombstone {
		return ingest.Sink{}, keyErr("mode", errors.New("key and delete_on_tombstone need mode: upsert"))
	}
	for j, c := range sc.Columns {
		if c.Connect != "" {
			return ingest.Sink{}, keyErr(fmt.Sprintf("columns[%d].connect", j), fmt.Errorf("column %q: connect is for format debezium and connect_json: remove it (type alone types a JSON column)", c.Name))
		}
		spec.Columns = append(spec.Columns, c.ColumnSpec)
	}
	m, err := decode.NewJSONMapper(spec)
	if err != nil {
		return ingest.Sink{}, err
	}
	sink := ingest.Sink{Table: m.Table(), Mapper: m, NoCreate: noCreate, Evolve: sc.Evolve}
	if mode == "upsert" {
		sink.Upsert = &ingest.Upsert{Key: m.KeyColumns(), DeleteOnTombstone: sc.DeleteOnTombstone}
	}
	if sink.Children, err = childSinks(sc, m.Table(), m.KeyColumns(), re, groups); err != nil {
		return ingest.Sink{}, err
	}
	return guardedUpsert(sc, mode, sink)
}
