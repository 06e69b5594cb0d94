package admin

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafka2pg/kafka2pg/decode"
	"github.com/kafka2pg/kafka2pg/decode/infer"
	"github.com/kafka2pg/kafka2pg/ingest"
	"github.com/kafka2pg/kafka2pg/registry"
	"github.com/kafka2pg/kafka2pg/schema"
	"github.com/kafka2pg/kafka2pg/sinks"
	"github.com/kafka2pg/kafka2pg/stream"
)

// InferRequest says which topic to sample and what sink to guess for it.
// Its errors name its fields (admin.InferRequest.KeyPath).
type InferRequest struct {
	Topic   string
	Sample  int           // records to sample, spread over the partitions from their start
	Timeout time.Duration // the longest the sampling reads, and the registry is asked
	// Table is the table's name (default: schema.TableNameForTopic of
	// Topic). Infer writes another when the database holds a table of
	// that name that the sink cannot write, unless FixedTable.
	Table      string
	FixedTable bool
	Mode       string // append or upsert
	KeyPath    string // upsert: the path of the value that identifies a row
	Nested     string // flatten or jsonb (decode.ParseNested)
	// Registry reads the schemas of values in the Schema Registry wire
	// format; nil: such values are an error.
	Registry *registry.Client
}

// Validate checks r and fills the table's default name.
func (r *InferRequest) Validate() error {
	var errs []error
	if r.Topic == "" {
		errs = append(errs, stream.FieldErrorf("admin.InferRequest.Topic", "empty: name the topic to sample"))
	}
	if r.Sample < 1 {
		errs = append(errs, stream.FieldErrorf("admin.InferRequest.Sample", "%d: sample at least 1 record", r.Sample))
	}
	if r.Table == "" && r.Topic != "" {
		r.Table = schema.TableNameForTopic(r.Topic)
	}
	if r.Table != "" {
		if err := schema.ValidateIdent("admin.InferRequest.Table", r.Table); err != nil {
			errs = append(errs, err)
		}
	}
	switch {
	case r.Mode != "append" && r.Mode != "upsert":
		errs = append(errs, stream.FieldErrorf("admin.InferRequest.Mode", "%q is not append or upsert", r.Mode))
	case r.Mode == "upsert" && r.KeyPath == "":
		errs = append(errs, stream.FieldErrorf("admin.InferRequest.KeyPath", "empty: mode upsert needs the path of the value that identifies a row"))
	case r.Mode == "append" && r.KeyPath != "":
		errs = append(errs, stream.FieldErrorf("admin.InferRequest.KeyPath", "%q: a key path needs mode upsert", r.KeyPath))
	}
	if r.Nested != "flatten" && r.Nested != "jsonb" {
		errs = append(errs, stream.FieldErrorf("admin.InferRequest.Nested", "%q is not flatten or jsonb", r.Nested))
	}
	if r.Timeout <= 0 {
		errs = append(errs, stream.FieldErrorf("admin.InferRequest.Timeout", "%s: use a positive duration such as 30s", r.Timeout))
	}
	return errors.Join(errs...)
}

// Samples is what Sample read.
type Samples struct {
	Values     [][]byte // record values, tombstones left out
	Tombstones int
	Partitions int
	TimedOut   bool // the timeout ended the sampling before every partition's end
}

// Sample reads up to r.Sample records from the start of r.Topic's
// partitions, at most ceil(r.Sample / partitions with data) from each,
// and no further than the end offsets seen at start. It joins no group
// and commits nothing. When r.Timeout passes first it returns what it
// read (TimedOut), unless that is nothing.
func Sample(ctx context.Context, k Kafka, r InferRequest) (Samples, error) {
	topic, n := r.Topic, r.Sample
	opts, err := k.Options()
	if err != nil {
		return Samples{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, r.Timeout)
	defer cancel()
	adm, closeAdm, err := k.Client()
	if err != nil {
		return Samples{}, err
	}
	defer closeAdm()
	topics, err := adm.ListTopics(ctx, topic)
	if err != nil {
		return Samples{}, fmt.Errorf("describe topic %q: %w", topic, err)
	}
	td, ok := topics[topic]
	switch {
	case !ok || errors.Is(td.Err, kerr.UnknownTopicOrPartition):
		return Samples{}, stream.FieldErrorf("admin.InferRequest.Topic", "topic %q does not exist: check it and reader.Config.Brokers", topic)
	case td.Err != nil:
		return Samples{}, fmt.Errorf("describe topic %q: %w", topic, td.Err)
	}
	starts, err := adm.ListStartOffsets(ctx, topic)
	if err == nil {
		err = starts.Error()
	}
	if err != nil {
		return Samples{}, fmt.Errorf("list the start offsets of %q: %w", topic, err)
	}
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return Samples{}, fmt.Errorf("list the end offsets of %q: %w", topic, err)
	}
	smp := Samples{Partitions: len(td.Partitions)}
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
		return Samples{}, fmt.Errorf("topic %q has no records to sample: produce some first", topic)
	}
	perPartition := (n + len(from) - 1) / len(from)
	cl, err := kgo.NewClient(append(opts, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: from}))...)
	if err != nil {
		return Samples{}, fmt.Errorf("create Kafka client: %w", err)
	}
	defer cl.Close()
	taken := map[int32]int{}
	for len(from) > 0 && len(smp.Values)+smp.Tombstones < n {
		fetches := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			smp.TimedOut = true
			break
		}
		if err := fetches.Err0(); err != nil && !errors.Is(err, context.Canceled) {
			return Samples{}, fmt.Errorf("read %q: %w", topic, err)
		}
		var done []int32
		fetches.EachRecord(func(rec *kgo.Record) {
			if _, reading := from[rec.Partition]; !reading || len(smp.Values)+smp.Tombstones >= n {
				return
			}
			if rec.Value == nil {
				smp.Tombstones++
			} else {
				smp.Values = append(smp.Values, rec.Value)
			}
			taken[rec.Partition]++
			if taken[rec.Partition] >= perPartition || rec.Offset+1 >= endOf[rec.Partition] {
				delete(from, rec.Partition)
				done = append(done, rec.Partition)
			}
		})
		if len(done) > 0 {
			cl.PauseFetchPartitions(map[string][]int32{topic: done})
		}
	}
	if len(smp.Values) == 0 {
		return Samples{}, stream.FieldErrorf("admin.InferRequest.Timeout", "read no record values from %q within %s", topic, r.Timeout)
	}
	return smp, nil
}

// Inferred is the sink Infer guessed, and what it found on the way.
type Inferred struct {
	// Sink is the sink of the config, in schema public: JSON values'
	// typed columns, or the format of values in the wire format.
	Sink sinks.Sink
	// Table is the table run plans for Sink (schema.PlanCreate).
	Table schema.Table
	// Docs and Skipped are the JSON objects the columns come from and the
	// other values left out, for JSON values.
	Docs, Skipped int
	// SchemaID is the schema id of the first wire-format value; 0 for
	// JSON values.
	SchemaID int
	// Exists: the database holds Table and it takes the sink's rows.
	Exists bool
	// Avoided are the tables of the names tried first that exist with
	// columns the sink cannot write, and why: Sink writes another.
	Avoided []Avoided
}

// Avoided is a table Infer did not write into.
type Avoided struct {
	Table      string // its quoted, qualified name
	Reason     string
	ZeroConfig bool // it has the zero-config table's columns
}

// TablesTakenError is Infer's error when every name it may choose is a
// table the sink cannot write.
type TablesTakenError struct {
	Avoided []Avoided
	Free    string // a name no table has, to choose instead
}

func (e *TablesTakenError) Error() string {
	return fmt.Sprintf("%s: choose a table that does not exist yet (e.g. %s)", e.Taken(), e.Free)
}

// Taken says which tables exist with other columns, and why.
func (e *TablesTakenError) Taken() string {
	var parts []string
	for _, a := range e.Avoided {
		parts = append(parts, fmt.Sprintf("table %s exists with other columns (%s)", a.Table, a.Reason))
	}
	return strings.Join(parts, "; ")
}

// Infer guesses the sink of samples, as r says: typed columns for JSON
// objects (package decode/infer), or for values in the Schema Registry
// wire format the format (avro, protobuf, json_schema) and the subject's
// table. Given a pool (nil: none), it avoids a table the database holds
// with columns the sink cannot write, such as the topic's zero-config
// table, picking <table>_typed (Avoided says so), unless r.FixedTable.
// It reads nothing but the registry and the catalog.
func Infer(ctx context.Context, pool *pgxpool.Pool, smp Samples, r InferRequest) (Inferred, error) {
	if err := r.Validate(); err != nil {
		return Inferred{}, err
	}
	guess := func() (Inferred, ingest.Sink, error) { return inferRegistry(ctx, smp, r) }
	if !wireFormat(smp.Values) {
		inf := &infer.Inference{}
		for _, v := range smp.Values {
			inf.Observe(v)
		}
		guess = func() (Inferred, ingest.Sink, error) { return inferJSON(ctx, inf, r) }
	}
	if pool == nil {
		res, _, err := guess()
		return res, err
	}
	return avoidTakenTables(ctx, pool, &r, guess)
}

// inferJSON guesses the typed columns of the JSON objects inf saw, with
// the key column for upsert.
func inferJSON(ctx context.Context, inf *infer.Inference, r InferRequest) (Inferred, ingest.Sink, error) {
	res := Inferred{Docs: inf.Docs, Skipped: inf.Skipped}
	if inf.Docs == 0 {
		return res, ingest.Sink{}, fmt.Errorf("none of the %d sampled values is a JSON object: typed columns need JSON objects; a raw sink (a sink without columns) stores any value", inf.Skipped)
	}
	nested, err := decode.ParseNested(r.Nested)
	if err != nil {
		return res, ingest.Sink{}, stream.FieldErrorf("admin.InferRequest.Nested", "%w", err)
	}
	cols := inf.Columns(nested)
	if len(cols) == 0 {
		return res, ingest.Sink{}, fmt.Errorf("the %d sampled values have no members to map: a raw sink (a sink without columns) stores them as they are", inf.Docs)
	}
	sc := sinks.Sink{Topic: r.Topic, Table: r.Table, Mode: r.Mode}
	keyFound := false
	for _, c := range cols {
		if r.KeyPath != "" && (r.KeyPath == c.Path || r.KeyPath == strings.Join(c.Steps, ".")) {
			keyFound = true
			if !c.NotNull {
				return res, ingest.Sink{}, stream.FieldErrorf("admin.InferRequest.KeyPath", "%s is null or missing in some of the %d samples: choose a path every record has", r.KeyPath, inf.Docs)
			}
			if c.Type == "jsonb" {
				return res, ingest.Sink{}, stream.FieldErrorf("admin.InferRequest.KeyPath", "%s holds objects, arrays or mixed kinds (jsonb): choose a path of scalar values", r.KeyPath)
			}
			sc.Key = []string{c.Name}
		}
		sc.Columns = append(sc.Columns, sinks.Column{ColumnSpec: decode.ColumnSpec{Name: c.Name, Path: c.Path, Type: c.Type, NotNull: c.NotNull}})
	}
	if r.KeyPath != "" && !keyFound {
		return res, ingest.Sink{}, stream.FieldErrorf("admin.InferRequest.KeyPath", "%s is not a column of the inferred sink: use one of the paths inferred without it", r.KeyPath)
	}
	sink, err := buildSink(ctx, sc, nil)
	if err != nil {
		return res, ingest.Sink{}, fmt.Errorf("the inferred sink does not build (a bug in infer): %w", err)
	}
	res.Sink, res.Table = sc, sink.Table
	return res, sink, nil
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

// inferRegistry guesses the sink of a topic whose values carry a schema
// id: format avro, protobuf or json_schema (as the registry says of the
// first sampled id), and the table its subject's versions fold into.
func inferRegistry(ctx context.Context, smp Samples, r InferRequest) (Inferred, ingest.Sink, error) {
	if r.Mode != "append" {
		return Inferred{}, ingest.Sink{}, stream.FieldErrorf("admin.InferRequest.Mode", "upsert: for Avro and Protobuf values infer gives an append sink; then set mode: upsert and key: [key_<field>] (the fields of the <topic>-key subject) by hand")
	}
	if r.Registry == nil {
		return Inferred{}, ingest.Sink{}, stream.FieldErrorf("registry.Config.URLs", "the values of %q are in the Schema Registry wire format (magic byte 0, schema id): give registry.Config.URLs to read their schema", r.Topic)
	}
	ctx, cancel := context.WithTimeout(ctx, r.Timeout)
	defer cancel()
	id := int(binary.BigEndian.Uint32(smp.Values[0][1:5]))
	rs, err := r.Registry.SchemaByID(ctx, id)
	if err != nil {
		return Inferred{}, ingest.Sink{}, fmt.Errorf("the values of %q carry schema id %d: %w", r.Topic, id, err)
	}
	format := strings.ToLower(rs.Type)
	if format == "json" {
		format = decode.FormatJSONSchema.String()
	}
	if !(sinks.Sink{Format: format}).NeedsRegistry() {
		return Inferred{}, ingest.Sink{}, fmt.Errorf("the values of %q carry schema id %d, a %s schema: kafka2pg reads avro, protobuf and json (json_schema)", r.Topic, id, rs.Type)
	}
	sc := sinks.Sink{Topic: r.Topic, Table: r.Table, Format: format, Mode: "append"}
	if format == decode.FormatProtobuf.String() {
		// The sampled records name their message by its indexes; the
		// config names it by its full name when it is not the first.
		_, indexes, err := decode.WireHeader(smp.Values[0], true)
		if err != nil {
			return Inferred{}, ingest.Sink{}, fmt.Errorf("the first sampled value of %q: %w", r.Topic, err)
		}
		if len(indexes) != 1 || indexes[0] != 0 {
			if sc.Message, err = decode.ProtobufMessageName(rs, indexes); err != nil {
				return Inferred{}, ingest.Sink{}, err
			}
		}
	}
	if r.Nested != "flatten" {
		sc.Nested = r.Nested
	}
	sink, err := buildSink(ctx, sc, r.Registry)
	if err != nil {
		return Inferred{}, ingest.Sink{}, err
	}
	return Inferred{Sink: sc, Table: sink.Table, SchemaID: id}, sink, nil
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
