package main

import (
	"context"
	"errors"
	"fmt"
	"regexp"

	"github.com/kafka2pg/kafka2pg/decode"
	"github.com/kafka2pg/kafka2pg/ingest"
	"github.com/kafka2pg/kafka2pg/internal/pgsession"
	"github.com/kafka2pg/kafka2pg/schema"
)

// buildSinks turns the flags (zero-config: every --topic into its raw
// table) or the config file's sinks (typed columns, upsert, evolve) into
// ingest sinks, one per topic. Every error names the sink's line, the key,
// the value and the fix, and comes before anything is written.
func buildSinks(o *runOptions) (map[string]ingest.Sink, error) {
	sinks := map[string]ingest.Sink{}
	if len(o.sinks) == 0 {
		format := o.valueFormat
		for _, topic := range o.cfg.Kafka.Topics {
			name := o.table
			if name == "" {
				name = schema.TableNameForTopic(topic)
			}
			sinks[topic] = ingest.Sink{Table: decode.RawTable(o.pgSchema, name, format), Mapper: decode.RawMapper{Format: format}}
		}
		return sinks, nil
	}
	var errs []error
	for _, sc := range o.sinks {
		if sc.TopicRegex != "" {
			// Checked now with a sample topic name, built per topic later.
			if _, err := buildProbe(o, sc); err != nil && !errors.Is(err, errRegistryLater) {
				errs = append(errs, fmt.Errorf("--config %s: sink of topic_regex %q at line %d: %w", o.configPath, sc.TopicRegex, sc.Line, err))
			}
			continue
		}
		sink, err := buildSink(o, sc)
		if errors.Is(err, errRegistryLater) {
			continue // checked; built once the registry is connected
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("--config %s: sink of topic %q at line %d: %w", o.configPath, sc.Topic, sc.Line, err))
			continue
		}
		if _, dup := sinks[sc.Topic]; dup {
			errs = append(errs, fmt.Errorf("--config %s: line %d: topic %q has two sinks: one sink per topic", o.configPath, sc.Line, sc.Topic))
			continue
		}
		sinks[sc.Topic] = sink
	}
	return sinks, errors.Join(errs...)
}

// regexProbes are the config's topic_regex sinks built for a sample topic;
// those whose columns come from the schema registry are left out (their
// columns are known once a topic's subject is read).
func regexProbes(o *runOptions) []pgsession.Probe {
	var out []pgsession.Probe
	for _, sc := range o.sinks {
		if sc.TopicRegex == "" {
			continue
		}
		if s, err := buildProbe(o, sc); err == nil {
			table := sc.Table
			if table == "" {
				table = "${topic}"
			}
			out = append(out, pgsession.Probe{Regex: sc.TopicRegex, Table: table, Sink: s})
		}
	}
	return out
}

// buildProbe builds the topic_regex sink sc for a sample topic that the
// regex matches (topicLike), so that its templates meet a topic of the
// shape they expect.
func buildProbe(o *runOptions, sc sinkConfig) (ingest.Sink, error) {
	re, err := sinkRegex(sc.TopicRegex)
	if err != nil {
		return ingest.Sink{}, err
	}
	sc.Topic = topicLike(sc.TopicRegex, re)
	sink, err := buildSink(o, sc)
	if errors.Is(err, errTopicShape) {
		// The templates parse, and only the sample does not fit them:
		// check the rest with plain names, and each topic's names when
		// it comes.
		sc.Table, sc.Schema = "probe", ""
		sink, err = buildSink(o, sc)
	}
	return sink, err
}

func buildSink(o *runOptions, sc sinkConfig) (ingest.Sink, error) {
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
	schemaName := o.pgSchema
	if sc.Schema != "" {
		var err error
		if schemaName, err = routeName("schema", sc.Schema, sc.Topic, re, groups); err != nil {
			return ingest.Sink{}, err
		}
	} else if err := schema.ValidateIdent("schema", schemaName); err != nil {
		return ingest.Sink{}, err
	}
	tmpl := sc.Table
	if tmpl == "" {
		tmpl = "${topic}"
	}
	table, err := routeName("table", tmpl, sc.Topic, re, groups)
	if err != nil {
		return ingest.Sink{}, err
	}
	if changeFormat(sc.Format) {
		return buildChangeSink(o, sc, schemaName, table)
	}
	if sc.ValueFormat != "" || !sc.Source.empty() || sc.UnavailableValue != "" {
		return ingest.Sink{}, fmt.Errorf("value_format, source and unavailable_value are for format debezium (and unavailable_value for connect_json), not %q: remove them, or set the format", sc.Format)
	}
	mode := sc.Mode
	if mode == "" {
		mode = "append"
	}
	if mode != "append" && mode != "upsert" {
		return ingest.Sink{}, fmt.Errorf("mode %q is not append or upsert", mode)
	}
	noCreate := sc.Create != nil && !*sc.Create
	if registryFormat(sc.Format) {
		sink, ok, err := buildRegistrySink(o, sc, schemaName, table, mode, noCreate)
		if err == nil && !ok {
			err = errRegistryLater
		}
		return sink, err
	} else if sc.Subject != "" || sc.KeySubject != "" || sc.Nested != "" || sc.Message != "" {
		return ingest.Sink{}, fmt.Errorf("subject, key_subject, nested and message are for format avro, protobuf or json_schema, not %q: remove them, or set the format", sc.Format)
	}
	typed := len(sc.Columns) > 0 || !sc.Metadata.empty()
	if !typed {
		if mode == "upsert" || len(sc.Key) > 0 || sc.DeleteOnTombstone {
			return ingest.Sink{}, errors.New("mode upsert, key and delete_on_tombstone need columns: declare the columns the key is made of")
		}
		format, err := decode.ParseValueFormat(sc.Format)
		if err != nil {
			return ingest.Sink{}, fmt.Errorf("format: %w", err)
		}
		return ingest.Sink{Table: decode.RawTable(schemaName, table, format), Mapper: decode.RawMapper{Format: format},
			NoCreate: noCreate, Evolve: sc.Evolve}, nil
	}
	if sc.Format != "" && sc.Format != "json" {
		return ingest.Sink{}, fmt.Errorf("format %q with columns: typed columns are read from JSON; use format: json, or drop the columns", sc.Format)
	}
	spec := decode.MappingSpec{Schema: schemaName, Table: table, DeleteOnTombstone: sc.DeleteOnTombstone, Metadata: metadataSpec(sc.Metadata)}
	if mode == "upsert" {
		if len(sc.Key) == 0 {
			return ingest.Sink{}, errors.New("mode upsert needs key: the columns that identify a row")
		}
		spec.Key = sc.Key
	} else if len(sc.Key) > 0 || sc.DeleteOnTombstone {
		return ingest.Sink{}, errors.New("key and delete_on_tombstone need mode: upsert")
	}
	for _, c := range sc.Columns {
		if c.Connect != "" {
			return ingest.Sink{}, fmt.Errorf("column %q: connect is for format debezium and connect_json: remove it (type alone types a JSON column)", c.Name)
		}
		spec.Columns = append(spec.Columns, decode.ColumnSpec{Name: c.Name, Path: c.Path, Type: c.Type, From: c.From,
			TimeUnit: c.TimeUnit, NotNull: c.NotNull, Default: c.Default, OnMissing: c.OnMissing})
	}
	m, err := decode.NewJSONMapper(spec)
	if err != nil {
		return ingest.Sink{}, err
	}
	sink := ingest.Sink{Table: m.Table(), Mapper: m, NoCreate: noCreate, Evolve: sc.Evolve}
	if mode == "upsert" {
		sink.Upsert = &ingest.Upsert{Key: m.KeyColumns(), DeleteOnTombstone: sc.DeleteOnTombstone}
	}
	return sink, nil
}

// errRegistryLater says a registry sink's config is valid but its table
// needs the registry, which buildSinks reaches only once runOptions.schemas
// is set (connectRegistry).
var errRegistryLater = errors.New("the sink needs the schema registry")

func (m metadataConfig) empty() bool {
	return m.Topic == "" && m.Partition == "" && m.Offset == "" && m.Timestamp == "" && m.TimestampType == "" &&
		m.Key == "" && m.KeyFormat == "" && m.Headers == "" && len(m.Header) == 0
}

// sinkResolver returns the ingest.Config.Resolve of the config's regex
// sinks: the first sink whose anchored topic_regex matches a topic builds
// that topic's sink, its table and schema named by their templates
// (routing.go).
func sinkResolver(o *runOptions) func(topic string) (ingest.Sink, bool, error) {
	type regexSink struct {
		re *regexp.Regexp
		sc sinkConfig
	}
	var rs []regexSink
	for _, sc := range o.sinks {
		if sc.TopicRegex != "" {
			re, err := sinkRegex(sc.TopicRegex)
			if err != nil {
				continue // buildSinks refused it
			}
			rs = append(rs, regexSink{re, sc})
		}
	}
	if len(rs) == 0 {
		return nil
	}
	return func(topic string) (ingest.Sink, bool, error) {
		for _, r := range rs {
			if r.re.MatchString(topic) {
				sc := r.sc
				sc.Topic = topic
				s, err := buildSink(o, sc)
				return s, err == nil, err
			}
		}
		return ingest.Sink{}, false, nil
	}
}

// offlineSinks are the sinks of a command that works on what run wrote
// (dead-letters replay, offsets reset), built as run builds them: the
// config's, or, without sinks in it, the zero-config sink of each of
// topics unless --topic named them. The registry is connected first, for
// the sinks of avro and protobuf subjects.
func offlineSinks(ctx context.Context, o *runOptions, topics []string) (map[string]ingest.Sink, error) {
	if len(o.sinks) == 0 && len(o.cfg.Kafka.Topics) == 0 {
		o.cfg.Kafka.Topics = topics // as run with --topic for each
	}
	if err := o.connectRegistry(ctx); err != nil {
		return nil, err
	}
	return buildSinks(o)
}
