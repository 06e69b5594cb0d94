// Package sinks is the sink model: how a topic becomes a table. A Config
// is the YAML a user writes (the kafka2pg command's `sinks` key), and its
// types are the specs themselves: a Sink's columns are decode.ColumnSpec,
// its metadata decode.MetadataSpec, its source block cdc.SourceColumns,
// decoded as they are. Build turns a Config into a Set of ingest sinks,
// which bridge.Config takes:
//
//	var cfg sinks.Config
//	err := yaml.Unmarshal(data, &cfg)     // unknown keys are errors, with their line
//	set, err := cfg.Build(ctx, reg)       // reg: a *registry.Client, or nil
//	topics, regex := cfg.Topics()         // reader.Config.Topics and TopicsAreRegex
//	b, err := bridge.New(bridge.Config{Sinks: set, ...}, log, metrics)
//
// # Formats
//
// A sink without columns is the zero-config table: the record's
// coordinates, key, headers and value (json, text or bytes). With
// columns, a JSON value is mapped to typed columns (decode.NewJSONMapper),
// appended or upserted by Key. Formats avro, protobuf and json_schema take
// their columns from a schema registry's subject; debezium and
// connect_json are Kafka Connect records (package cdc), debezium's change
// events applied as their op says.
//
// # Routing
//
// A sink names one Topic, or a TopicRegex: each topic the pattern matches
// gets a table of its own, named by the sink's Table and Schema, which are
// templates of the topic's name:
//
//	${topic}     the topic's name made a plain identifier (schema.TableNameForTopic)
//	${topic.N}   its N-th dot-separated part as it is: 1 the first, -1 the last
//	${NAME}      what the TopicRegex's named group (?P<NAME>...) matched
//
// They may also read the record: ${value.FIELD} and ${header.KEY} make
// the sink routed by content (route_content.go): its ingest.Sink has a
// Router, which names each record's table, and the writer creates each
// table on its first record. One Router serves all the topics of a
// topic_regex sink.
//
// Set.Resolve builds such a topic's sink when the writer first meets it
// (ingest.Config.Resolve). A pattern is checked at Build with a sample
// topic it matches, and that sample (Pattern.Sample) stands for its
// topics' names in the database's encoding check.
//
// # Filters
//
// A sink's Where (decode.FilterSpec, expr-lang's language) is compiled
// when the sink is built, so that Validate and Build refuse an expression
// that does not compile with its position (a FieldError on the sink's
// where key, with the key's line). The built sink's ingest.Sink.Filter
// drops the records it is false for; the deletes of upsert sinks with
// delete_on_tombstone and of debezium sinks bypass it.
//
// # Reference
//
// Keys lists every key of the YAML, each mapping's (a sink, a column, the
// metadata, a debezium source block) with its YAML type and its meaning
// (KeyDocs), read from the types' yaml tags: the kafka2pg command's
// configuration reference prints it.
//
// # Invariants
//
//   - Validate and Build check every sink before returning, and their
//     errors are *FieldError, joined: the field path (sinks[2]), the
//     sink's line in the YAML, and what to do. They name the config's keys,
//     never a command's flags.
//   - Validate reads nothing. Build reads the registry, with its ctx, for
//     the sinks that need one (Sink.NeedsRegistry), and Resolve with its
//     own: no ctx is kept. A Set is immutable and safe for concurrent
//     Resolve calls.
//   - A Sink's Schema defaults to Config.Schema, then public.
//
// Package sinks imports ingest (the Sink it builds), decode and cdc (the
// mappers and their specs), registry (the schema registry client) and
// schema; it imports neither reader nor bridge, and starts no goroutine.
package sinks
