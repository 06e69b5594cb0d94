package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"math/big"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"
	"github.com/twmb/franz-go/pkg/sr/srfake"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/dynamicpb"

	"github.com/kafka2pg/kafka2pg/decode"
	"github.com/kafka2pg/kafka2pg/ingest"
	"github.com/kafka2pg/kafka2pg/internal/kafkatest"
	"github.com/kafka2pg/kafka2pg/pgvalue"
	"github.com/kafka2pg/kafka2pg/stream"
)

const cdcConfigHead = "kafka-brokers: [h:1]\nkafka-group: g\npg-url: postgres://x@127.0.0.1:1/db\nsinks:\n"

func TestChangeSinksRefuseWhatTheirFormatDoesNotTake(t *testing.T) {
	cases := []struct {
		name, sinks string
		want        []string
	}{
		{"debezium in append mode", "  - {topic: t, format: debezium, mode: append}\n",
			[]string{`line 5`, `mode "append": format debezium applies each event as its op says`, "remove mode"}},
		{"debezium with delete_on_tombstone", "  - {topic: t, format: debezium, delete_on_tombstone: true}\n",
			[]string{"delete_on_tombstone: format debezium deletes on d events"}},
		{"debezium with a subject", "  - {topic: t, format: debezium, subject: s}\n",
			[]string{"subject, key_subject, nested and message are for formats avro, protobuf and json_schema", "by its id"}},
		{"a column with a path", "  - topic: t\n    format: debezium\n    columns:\n      - {name: id, path: after.id, type: bigint}\n",
			[]string{`column "id": format debezium columns take name, type, connect and not_null`, "path, from, time_unit, default and on_missing are for format json"}},
		{"a column without a type", "  - topic: t\n    format: debezium\n    columns:\n      - {name: id}\n",
			[]string{`column "id": give its type`}},
		{"a column type without a Connect type", "  - topic: t\n    format: debezium\n    columns:\n      - {name: code, type: varchar(3)}\n",
			[]string{`column "code": type "varchar(3)" has no Connect type to read it from: set connect`}},
		{"an unknown Connect type", "  - topic: t\n    format: debezium\n    columns:\n      - {name: at, connect: io.debezium.time.Millenium}\n",
			[]string{`connect "io.debezium.time.Millenium" is neither a Connect type nor a logical or semantic type`}},
		{"an unknown value_format", "  - {topic: t, format: debezium, value_format: xml}\n",
			[]string{`value_format "xml" is not json, avro or protobuf`}},
		{"avro without a registry", "  - {topic: t, format: debezium, value_format: avro}\n",
			[]string{"value_format avro needs a Schema Registry: set --schema-registry-url"}},
		{"a source column twice", "  - topic: t\n    format: debezium\n    source: {table: src, op: src}\n",
			[]string{`column "src" is defined twice`}},
		{"a source column that is a metadata column", "  - topic: t\n    format: debezium\n    source: {op: kafka_offset}\n    metadata: {offset: kafka_offset}\n",
			[]string{`column "kafka_offset" is defined twice`}},
		{"an unknown source key", "  - topic: t\n    format: debezium\n    source: {lsn: l}\n",
			[]string{`:7: unknown key "lsn": use one of table, position, txid, timestamp, op`}},
		{"connect_json with source", "  - {topic: t, format: connect_json, source: {op: o}}\n",
			[]string{"source: format connect_json has no envelope"}},
		{"connect_json from the AvroConverter", "  - {topic: t, format: connect_json, value_format: avro}\n",
			[]string{`value_format "avro": format connect_json reads the JsonConverter's JSON`, "format avro or protobuf"}},
		{"connect_json upsert without a key", "  - {topic: t, format: connect_json, mode: upsert}\n",
			[]string{"mode upsert needs key"}},
		{"connect_json upsert of an untyped key", "  - {topic: t, format: connect_json, mode: upsert, key: [id]}\n",
			[]string{`key column "id" is not in columns`, "type the key columns in columns"}},
		{"connect_json with a key in append mode", "  - {topic: t, format: connect_json, key: [id]}\n",
			[]string{"key and delete_on_tombstone need mode: upsert"}},
		{"a json sink with debezium's keys", "  - {topic: t, value_format: json, unavailable_value: x}\n",
			[]string{"value_format, source and unavailable_value are for format debezium"}},
		{"a json column with connect", "  - topic: t\n    columns:\n      - {name: id, path: id, type: bigint, connect: int64}\n",
			[]string{`column "id": connect is for format debezium and connect_json`}},
		{"a template of an unknown group", "  - {topic_regex: 'shop\\.(?P<schema>\\w+)\\.(?P<table>\\w+)', format: debezium, table: '${tabel}'}\n",
			[]string{`:5 refers to ${tabel}, which is not set in the environment`, `or name a group (?P<NAME>...) of topic_regex (it has ["schema" "table"])`}},
		{"a template of a bad part", "  - {topic_regex: 'shop\\..*', format: debezium, table: '${topic.x}'}\n",
			[]string{`sink of topic_regex "shop\\..*" at line 5`, `table template "${topic.x}": ${topic.x} names no part of the topic`}},
		{"a schema template of a topic sink", "  - {topic: a.b, format: debezium, schema: '${topic.3}'}\n",
			[]string{`schema template "${topic.3}": topic "a.b" has 2 dot-separated part(s)`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv("KAFKA2PG_PG_URL", "")
			t.Setenv("DATABASE_URL", "")
			code, stderr := runWithConfig(t, cdcConfigHead+c.sinks, "--metrics-addr=")
			if code != exitUsage {
				t.Errorf("exit %d, want %d", code, exitUsage)
			}
			for _, w := range c.want {
				if !strings.Contains(stderr, w) {
					t.Errorf("stderr:\n%s\nlacks %q", stderr, w)
				}
			}
		})
	}
}

// loadCheck loads a config as check does, without connecting.
func loadCheck(t *testing.T, config string, args ...string) (*runOptions, string, bool) {
	t.Helper()
	t.Setenv("KAFKA2PG_PG_URL", "postgres://app@db/shop")
	var stderr bytes.Buffer
	o, _, ok := loadRunOptions("check", checkHelp, append([]string{"--config", writeConfig(t, config)}, args...), &stderr, &stderr)
	return o, stderr.String(), ok
}

// resolver is the Resolve of o's sinks, built as run builds them.
func resolver(t testing.TB, o *runOptions) func(topic string) (ingest.Sink, bool, error) {
	set, err := o.buildSinks(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return func(topic string) (ingest.Sink, bool, error) { return set.Resolve(t.Context(), topic) }
}

// fixtureRecord reads one of cdc's fixtures: {"key": ..., "value": ...}.
func fixtureRecord(t *testing.T, b []byte) stream.Record {
	t.Helper()
	var f struct{ Key, Value json.RawMessage }
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
	return stream.Record{Key: f.Key, Value: f.Value}
}

// run takes format debezium sinks, and stops like any run when Postgres
// cannot be reached: with --until-caught-up, once no write has committed
// for --caught-up-timeout, exit 1 naming the connection. (Without it run
// retries connection trouble until stopped, for every format: an
// unreachable broker or Postgres is not a reason to stop by itself.)
func TestRunOfDebeziumSinksStopsWhenPostgresIsUnreachable(t *testing.T) {
	t.Setenv("KAFKA2PG_PG_URL", "")
	t.Setenv("DATABASE_URL", "")
	k := kafkatest.New(t)
	topic := k.CreateTopic(t, "shop.public.customers", 1)
	b, err := os.ReadFile(filepath.Join("..", "..", "cdc", "testdata", "pg_customers_create.json"))
	if err != nil {
		t.Fatal(err)
	}
	rec := fixtureRecord(t, b)
	k.Produce(t, &kgo.Record{Topic: topic, Key: rec.Key, Value: rec.Value})
	config := "kafka-brokers: [" + k.Brokers() + "]\nkafka-group: g\nsinks:\n  - {topic: " + topic + ", format: debezium, table: customers}\n"
	start := time.Now()
	done := make(chan struct{})
	var code int
	var stderr string
	go func() {
		defer close(done)
		code, stderr = runWithConfig(t, config, "--pg-url", "postgres://x@127.0.0.1:1/db?connect_timeout=2", "--metrics-addr=",
			"--until-caught-up", "--caught-up-timeout=3s")
	}()
	select {
	case <-done:
	case <-time.After(90 * time.Second):
		t.Fatal("run of a debezium sink against an unreachable Postgres did not stop in 90s")
	}
	if code != exitError || !strings.Contains(stderr, "127.0.0.1") {
		t.Errorf("exit %d after %s, stderr:\n%s", code, time.Since(start), stderr)
	}
}

// itemsAvro and itemsProto are Debezium envelopes of an items table as the
// AvroConverter and the ProtobufConverter register them.
const (
	itemsAvro = `{"type":"record","name":"Envelope","namespace":"shop.public.items","fields":[
 {"name":"before","type":["null",{"type":"record","name":"Value","fields":[
   {"name":"id","type":"long"},
   {"name":"price","type":["null",{"type":"bytes","scale":2,"precision":8,"connect.version":1,"connect.parameters":{"scale":"2","connect.decimal.precision":"8"},"connect.name":"org.apache.kafka.connect.data.Decimal","logicalType":"decimal"}],"default":null},
   {"name":"at","type":["null",{"type":"long","connect.version":1,"connect.name":"io.debezium.time.MicroTimestamp"}],"default":null}
  ],"connect.name":"shop.public.items.Value"}],"default":null},
 {"name":"after","type":["null","Value"],"default":null},
 {"name":"op","type":"string"}
],"connect.name":"shop.public.items.Envelope"}`
	itemsKeyAvro = `{"type":"record","name":"Key","namespace":"shop.public.items","fields":[{"name":"id","type":"long"}]}`
	itemsProto   = `syntax = "proto3";
package shop.public.items;
import "confluent/type/decimal.proto";
import "google/protobuf/timestamp.proto";
message Envelope {
  Value before = 1;
  Value after = 2;
  string op = 3;
  message Value {
    int64 id = 1;
    confluent.type.Decimal price = 2;
    google.protobuf.Timestamp at = 3;
  }
}`
	itemsKeyProto = `syntax = "proto3";
package shop.public.items;
message Key { int64 id = 1; }`
)

// A debezium sink of value_format avro or protobuf finds each record's
// schema in the registry by its id: the events of the in-process registry
// (srfake) become the changes of a table typed from their schema.
func TestDebeziumSinksOfRegistryFormatsReadTheirSchemasByID(t *testing.T) {
	fake := srfake.New()
	t.Cleanup(fake.Close)
	fake.SeedSchema("shop.public.items-value", 1, 31, sr.Schema{Schema: itemsAvro})
	fake.SeedSchema("shop.public.items-key", 1, 32, sr.Schema{Schema: itemsKeyAvro})
	fake.SeedSchema("shop.proto.items-value", 1, 41, sr.Schema{Type: sr.TypeProtobuf, Schema: itemsProto})
	fake.SeedSchema("shop.proto.items-key", 1, 42, sr.Schema{Type: sr.TypeProtobuf, Schema: itemsKeyProto})
	o, stderr, ok := loadCheck(t, `kafka-brokers: [h:1]
kafka-group: g
sinks:
  - {topic: shop.public.items, format: debezium, value_format: avro}
  - {topic: shop.proto.items, format: debezium, value_format: protobuf, table: proto_items}
`, "--schema-registry-url", fake.URL())
	if !ok {
		t.Fatalf("refused: %s", stderr)
	}
	sinks := registrySinks(t, o, "sinks")

	avroSchema := avro.MustParse(itemsAvro)
	row := map[string]any{"id": int64(7), "price": big.NewRat(1250, 100), "at": int64(1709164800123456)}
	value, err := avro.Marshal(avroSchema, map[string]any{"op": "c", "before": nil, "after": map[string]any{"shop.public.items.Value": row}})
	if err != nil {
		t.Fatal(err)
	}
	key, err := avro.Marshal(avro.MustParse(itemsKeyAvro), map[string]any{"id": int64(7)})
	if err != nil {
		t.Fatal(err)
	}
	avroRec := stream.Record{Topic: "shop.public.items", Key: append(decode.AppendWireHeader(nil, 32, nil), key...),
		Value: append(decode.AppendWireHeader(nil, 31, nil), value...)}

	protoRec := stream.Record{Topic: "shop.proto.items",
		Key:   protoWire(t, 42, itemsKeyProto, `{"id": "7"}`),
		Value: protoWire(t, 41, itemsProto, `{"op": "c", "after": {"id": "7", "price": {"value": "BOI=", "scale": 2}, "at": "2024-02-29T00:00:00.123456Z"}}`)}

	for _, c := range []struct {
		topic, table, price string
		rec                 stream.Record
		indexes             []int // the wire header's message indexes
	}{
		{"shop.public.items", "shop_public_items", "numeric(8,2)", avroRec, nil},
		{"shop.proto.items", "proto_items", "numeric", protoRec, []int{0}},
	} {
		t.Run(c.topic, func(t *testing.T) {
			d := sinks[c.topic].Changes
			if d == nil {
				t.Fatalf("sink %+v, want a change decoder", sinks[c.topic])
			}
			// As the writer does before each batch's transaction.
			resolve := func(r stream.Record) {
				t.Helper()
				if err := d.(ingest.SchemaResolver).ResolveSchemas(t.Context(), []stream.Record{r}); err != nil {
					t.Fatal(err)
				}
			}
			resolve(c.rec)
			var ch stream.Change
			if err := d.Decode(&c.rec, &ch); !errors.Is(err, decode.ErrTableChanged) {
				t.Fatalf("first event: %v", err)
			}
			if err := d.Decode(&c.rec, &ch); err != nil {
				t.Fatal(err)
			}
			tbl := d.Table()
			if tbl.Name != c.table || !slices.Equal(tbl.ColumnNames(), []string{"id", "price", "at"}) || tbl.Columns[1].Type != c.price ||
				tbl.Columns[2].Type != "timestamp without time zone" || !slices.Equal(d.KeyColumns(), []string{"id"}) {
				t.Fatalf("table %+v, key %v", tbl, d.KeyColumns())
			}
			wantRow := []any{int64(7), pgvalue.Numeric{Int: big.NewInt(1250), Exp: -2}, time.UnixMicro(1709164800123456).UTC()}
			if ch.Op != stream.OpUpsert || !reflect.DeepEqual(ch.Row, wantRow) || !reflect.DeepEqual(ch.Key, []any{int64(7)}) {
				t.Fatalf("change %+v, want the row %v", ch, wantRow)
			}
			// A schema id the registry does not have is a dead letter.
			unknown := c.rec
			header := len(decode.AppendWireHeader(nil, 1, c.indexes))
			unknown.Value = append(decode.AppendWireHeader(nil, 999, c.indexes), c.rec.Value[header:]...)
			resolve(unknown)
			var de *decode.DecodeError
			if err := d.Decode(&unknown, &ch); !errors.As(err, &de) || de.Kind != decode.KindUnknownSchema {
				t.Fatalf("unknown schema id: %v", err)
			}
		})
	}
}

// protoWire is the wire format of the protojson text of the first message
// of a Protobuf schema.
func protoWire(t *testing.T, id int, text, value string) []byte {
	t.Helper()
	md, err := decode.ProtobufMessage(decode.RegisteredSchema{ID: id, Type: "PROTOBUF", Text: text}, []int{0}, "")
	if err != nil {
		t.Fatal(err)
	}
	m := dynamicpb.NewMessage(md)
	if err := protojson.Unmarshal([]byte(value), m); err != nil {
		t.Fatal(err)
	}
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return append(decode.AppendWireHeader(nil, id, []int{0}), b...)
}

// The example of Kafka Connect and Debezium sinks in docs/MAPPING.md is a config
// check accepts, and that routes and decodes as it says.
func TestTheMappingChangeExampleIsValid(t *testing.T) {
	example := mappingExample(t, "## Kafka Connect and Debezium topics")
	fake := srfake.New()
	t.Cleanup(fake.Close)
	t.Setenv("DATABASE_URL", "postgres://app@db/shop")
	o, stderr, ok := loadCheck(t, example, "--schema-registry-url", fake.URL())
	if !ok {
		t.Fatalf("MAPPING.md example: %s", stderr)
	}
	sinks := registrySinks(t, o, "MAPPING.md example")
	if sinks["legacy.customers"].Changes == nil || sinks["connect.orders"].Upsert == nil {
		t.Fatalf("sinks %+v", sinks)
	}
	s, ok, err := resolver(t, o)("shop.billing.invoices")
	if err != nil || !ok || s.Changes == nil || s.Table.QualifiedName() != `"replica_billing"."invoices"` {
		t.Fatalf("shop.billing.invoices: %v %v %+v", ok, err, s.Table)
	}
}

// The replication examples of README.md and docs/CDC.md are configs check
// accepts, and route a table's topic to its table as their comments say.
func TestTheReplicationExamplesAreValid(t *testing.T) {
	for _, doc := range []struct{ path, heading string }{
		{"README.md", "### Replicating a database (CDC)"},
		{"docs/CDC.md", "## Configuration"},
	} {
		t.Run(doc.path, func(t *testing.T) {
			t.Setenv("DATABASE_URL", "postgres://app@db/shop")
			o, stderr, ok := loadCheck(t, docExample(t, doc.path, doc.heading))
			if !ok {
				t.Fatalf("%s example: %s", doc.path, stderr)
			}
			s, ok, err := resolver(t, o)("shop.public.customers")
			if err != nil || !ok || s.Changes == nil || s.Table.QualifiedName() != `"replica"."customers"` {
				t.Fatalf("shop.public.customers: %v %v %+v", ok, err, s.Table)
			}
		})
	}
}
