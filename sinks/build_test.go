package sinks_test

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/kafka2pg/kafka2pg/cdc"
	"github.com/kafka2pg/kafka2pg/decode"
	"github.com/kafka2pg/kafka2pg/internal/sinkstest"
	"github.com/kafka2pg/kafka2pg/sinks"
	"github.com/kafka2pg/kafka2pg/stream"
)

// load decodes a sinks config, failing the test on an error.
func load(t *testing.T, text string) sinks.Config {
	t.Helper()
	return sinkstest.Config(t, text)
}

// build decodes and builds a sinks config without a registry.
func build(t *testing.T, text string) sinks.Set {
	t.Helper()
	set, _ := sinkstest.Build(t, text)
	return set
}

const replicaConfig = `sinks:
  - topic_regex: 'shop\.(?P<schema>[^.]+)\.(?P<table>[^.]+)'
    format: debezium
    schema: 'replica_${schema}'
    table: '${table}'
    source: {table: src_table, position: src_lsn, txid: src_txid, timestamp: src_ts, op: src_op}
    metadata: {offset: kafka_offset}
  - topic: legacy.customers
    format: debezium
    table: customers_legacy
    key: [id]
    columns:
      - {name: id, type: integer, not_null: true}
      - {name: balance, type: "numeric(12,2)"}
      - {name: seen_at, connect: io.debezium.time.MicroTimestamp}
  - topic: connect.orders
    format: connect_json
    mode: upsert
    key: [id]
    delete_on_tombstone: true
    columns:
      - {name: id, type: bigint, not_null: true}
`

func TestAReplicaConfigRoutesEachTopicToADecoderOfItsOwnTable(t *testing.T) {
	set := build(t, replicaConfig)
	legacy := set.Fixed["legacy.customers"]
	if legacy.Changes == nil || legacy.Mapper != nil {
		t.Fatalf("legacy.customers: %+v, want a change decoder", legacy)
	}
	if got := legacy.Table; got.Name != "customers_legacy" || got.Schema != "public" ||
		!slices.Equal(got.ColumnNames(), []string{"id", "balance", "seen_at"}) || !slices.Equal(got.PrimaryKey, []string{"id"}) {
		t.Errorf("legacy.customers table %+v", got)
	}
	if typ := legacy.Table.Columns[1].Type; typ != "numeric(12,2)" {
		t.Errorf("balance is %s, want numeric(12,2) from its type", typ)
	}
	orders := set.Fixed["connect.orders"]
	if _, ok := orders.Mapper.(*cdc.ConnectMapper); !ok || orders.Upsert == nil || !orders.Upsert.DeleteOnTombstone ||
		!slices.Equal(orders.Upsert.Key, []string{"id"}) {
		t.Errorf("connect.orders: %+v, want a ConnectMapper upserting by id", orders)
	}

	customers, ok, err := set.Resolve(t.Context(), "shop.public.customers")
	if err != nil || !ok {
		t.Fatalf("resolve shop.public.customers: %v, %v", ok, err)
	}
	products, _, err := set.Resolve(t.Context(), "shop.inventory.products")
	if err != nil {
		t.Fatal(err)
	}
	if c, p := customers.Table, products.Table; c.Schema != "replica_public" || c.Name != "customers" ||
		p.Schema != "replica_inventory" || p.Name != "products" {
		t.Errorf("tables %s and %s, want replica_public.customers and replica_inventory.products", c.QualifiedName(), p.QualifiedName())
	}
	if customers.Changes == products.Changes {
		t.Error("two topics share one decoder: each table must fold its own schema")
	}
	if want := []string{"src_table", "src_lsn", "src_txid", "src_ts", "src_op", "kafka_offset"}; !slices.Equal(customers.Table.ColumnNames(), want) {
		t.Errorf("before its first event the table has %v, want the metadata columns %v", customers.Table.ColumnNames(), want)
	}
	if _, ok, _ := set.Resolve(t.Context(), "shop.public.customers.extra"); ok {
		t.Error("a topic the regex does not match was resolved")
	}
	if len(set.Patterns) != 1 || set.Patterns[0].Sample.Table.Name == "" {
		t.Errorf("patterns %+v, want one with a sample sink", set.Patterns)
	}

	// The decoder a topic's sink carries is the one its events go through.
	b, err := os.ReadFile(filepath.Join("..", "cdc", "testdata", "pg_customers_create.json"))
	if err != nil {
		t.Fatal(err)
	}
	var f struct{ Key, Value json.RawMessage }
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
	rec := stream.Record{Topic: "shop.public.customers", Key: f.Key, Value: f.Value}
	var ch stream.Change
	if err := customers.Changes.Decode(&rec, &ch); !errors.Is(err, decode.ErrTableChanged) {
		t.Fatalf("the first event: %v, want the table to grow", err)
	}
	if err := customers.Changes.Decode(&rec, &ch); err != nil {
		t.Fatal(err)
	}
	tbl := customers.Changes.Table()
	if tbl.Name != "customers" || !slices.Equal(tbl.PrimaryKey, []string{"id"}) || ch.Op != stream.OpUpsert ||
		ch.Row[slices.Index(tbl.ColumnNames(), "src_table")] != "public.customers" {
		t.Errorf("table %+v, change %+v", tbl, ch)
	}
}

// A template that fits some of a regex's topics and not others is an
// error of the topic that does not fit it, when it comes: the sample
// topic the build checks with is a guess.
func TestResolvingATopicThatTheTemplateCannotNameSaysWhich(t *testing.T) {
	set := build(t, "sinks:\n  - {topic_regex: 'shop\\..*', format: debezium, table: '${topic.3}'}\n")
	if s, _, err := set.Resolve(t.Context(), "shop.public.customers"); err != nil || s.Table.Name != "customers" {
		t.Errorf("resolve shop.public.customers: %v, %v", s.Table.QualifiedName(), err)
	}
	_, _, err := set.Resolve(t.Context(), "shop.customers")
	if err == nil || !strings.Contains(err.Error(), `topic "shop.customers" has 2 dot-separated part(s), so ${topic.3} names none`) {
		t.Errorf("resolve shop.customers: %v", err)
	}
	_, _, err = set.Resolve(t.Context(), "shop.public."+strings.Repeat("t", 64))
	if err == nil || !strings.Contains(err.Error(), `table template "${topic.3}" gives "tttt`) || !strings.Contains(err.Error(), "64 bytes long") {
		t.Errorf("resolve a topic of a long table name: %v", err)
	}
}

// Every error names the field at fault and its line, in the config's own
// words: no command's flag.
func TestErrorsNameTheFieldAndTheLine(t *testing.T) {
	var cfg sinks.Config
	err := yaml.Unmarshal([]byte("sinks:\n  - topic: t\n    columns:\n      - {name: a, type: text, nullable: true}\n"), &cfg)
	var fe *sinks.FieldError
	if !errors.As(err, &fe) || fe.Field != "columns[0].nullable" || fe.Line != 4 || !strings.Contains(fe.Error(), `unknown key "nullable": use one of name, path, type`) {
		t.Errorf("unknown key: %v (%+v)", err, fe)
	}

	cfg = load(t, "sinks:\n  - {topic: a}\n  - {topic: b, mode: sideways}\n  - {topic: a}\n  - {topic: p, format: avro}\n")
	if err := cfg.Validate(); err == nil {
		t.Fatal("Validate passed a bad mode and a topic with two sinks")
	}
	_, err = cfg.Build(t.Context(), nil)
	var got []string
	for _, e := range leaves(err) {
		if !errors.As(e, &fe) {
			t.Fatalf("%v is not a *FieldError", e)
		}
		got = append(got, fe.Error())
	}
	want := []string{
		`sinks[1].mode (line 3): mode "sideways" is not append or upsert`,
		`sinks[2].topic (line 4): topic "a" has two sinks: one sink per topic`,
		`sinks[3].format (line 5): format avro needs a schema registry: give Build a registry client`,
	}
	if !slices.Equal(got, want) {
		t.Errorf("errors\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if strings.Contains(err.Error(), "--") {
		t.Errorf("a library error names a flag: %v", err)
	}

	// Each key at fault is an error of its own, with its path.
	err = load(t, "sinks:\n  - topic: t\n    format: debezium\n    mode: append\n    columns: [{name: a}, {name: b, path: x, type: text}]\n").Validate()
	got = nil
	for _, e := range leaves(err) {
		if errors.As(e, &fe) {
			got = append(got, fe.Field)
		}
	}
	if want := []string{"sinks[0].columns[0]", "sinks[0].columns[1]", "sinks[0].mode"}; !slices.Equal(got, want) {
		t.Errorf("fields %v, want %v (%v)", got, want, err)
	}
}

// The subscription of a config with a pattern is all patterns: the
// literal topics quoted, every pattern anchored.
func TestTopicsAreAllPatternsOnceOneIs(t *testing.T) {
	topics, regex := load(t, "sinks:\n  - {topic: a.b}\n  - {topic: c}\n").Topics()
	if regex || !slices.Equal(topics, []string{"a.b", "c"}) {
		t.Errorf("topics %v, regex %v", topics, regex)
	}
	topics, regex = load(t, "sinks:\n  - {topic: a.b}\n  - {topic_regex: 'shop\\..+'}\n").Topics()
	if !regex || !slices.Equal(topics, []string{`^a\.b$`, `^(?:shop\..+)$`}) {
		t.Errorf("topics %v, regex %v", topics, regex)
	}
}

// leaves are the errors err joins, at any depth.
func leaves(err error) []error {
	j, ok := err.(interface{ Unwrap() []error })
	if !ok {
		return []error{err}
	}
	var out []error
	for _, e := range j.Unwrap() {
		out = append(out, leaves(e)...)
	}
	return out
}
