package main

import (
	"bytes"
	"math/big"
	"os"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/sr"
	"github.com/twmb/franz-go/pkg/sr/srfake"

	"github.com/kafka2pg/kafka2pg/ingest"
	"github.com/kafka2pg/kafka2pg/internal/kafkatest"
	"github.com/kafka2pg/kafka2pg/internal/pgtest"
	"github.com/kafka2pg/kafka2pg/schema"
)

const (
	paymentAvro  = `{"type": "record", "name": "Payment", "fields": [{"name": "id", "type": "long"}, {"name": "amount", "type": {"type": "bytes", "logicalType": "decimal", "precision": 12, "scale": 2}}]}`
	customerAvro = `{"type": "record", "name": "Customer", "fields": [{"name": "name", "type": "string"}]}`
	customerKey  = `{"type": "record", "name": "CustomerKey", "fields": [{"name": "id", "type": "long"}]}`
	shipmentPB   = `syntax = "proto3"; package shop; import "google/protobuf/timestamp.proto";
message Other { string x = 1; }
message Shipment { string id = 1; google.protobuf.Timestamp sent = 2; message Addr { string city = 1; } Addr to = 3; }`
)

// newFakeRegistry serves the subjects the example of docs/MAPPING.md reads.
func newFakeRegistry(t *testing.T) *srfake.Registry {
	t.Helper()
	fake := srfake.New()
	t.Cleanup(fake.Close)
	fake.SeedSchema("payments-value", 1, 1, sr.Schema{Schema: paymentAvro})
	fake.SeedSchema("customers-value", 1, 2, sr.Schema{Schema: customerAvro})
	fake.SeedSchema("customers-key", 1, 3, sr.Schema{Schema: customerKey})
	fake.SeedSchema("shipments-v2", 1, 4, sr.Schema{Type: sr.TypeProtobuf, Schema: shipmentPB})
	return fake
}

// loadRegistryConfig loads a config file as run does, with extra args.
func loadRegistryConfig(t *testing.T, config string, args ...string) (*runOptions, string, bool) {
	t.Helper()
	t.Setenv("KAFKA2PG_PG_URL", "postgres://app@db/shop")
	path := writeConfig(t, config)
	var stderr bytes.Buffer
	o, _, ok := loadRunOptions("run", runHelp, append([]string{"--config", path}, args...), &stderr, &stderr)
	return o, stderr.String(), ok
}

// mappingExample is the first yaml example of the section under heading of
// docs/MAPPING.md, the page of the config file's mappings.
func mappingExample(t *testing.T, heading string) string {
	t.Helper()
	return docExample(t, "docs/MAPPING.md", heading)
}

// docExample returns the first yaml block after heading in the page at
// path, from the repository's root.
func docExample(t *testing.T, path, heading string) string {
	t.Helper()
	page, err := os.ReadFile("../../" + path)
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(page), "\n"+heading)
	if !ok {
		t.Fatalf("%s has no section %q", path, heading)
	}
	_, rest, ok = strings.Cut(rest, "```yaml\n")
	example, _, ok2 := strings.Cut(rest, "```")
	if !ok || !ok2 {
		t.Fatalf("no yaml example in the section %q of %s", heading, path)
	}
	return example
}

// TestTheMappingRegistryExampleIsValid loads the Avro and Protobuf example
// of docs/MAPPING.md against a fake registry that has its subjects.
func TestTheMappingRegistryExampleIsValid(t *testing.T) {
	example := mappingExample(t, "## Avro and Protobuf with a Schema Registry")
	fake := newFakeRegistry(t)
	t.Setenv("REGISTRY_PASSWORD", "secret")
	o, stderr, ok := loadRegistryConfig(t, example, "--schema-registry-url", fake.URL())
	if !ok {
		t.Fatalf("MAPPING.md example: %s", stderr)
	}
	sinks := registrySinks(t, o, "MAPPING.md example")
	if len(sinks) != 3 {
		t.Fatalf("%d sinks", len(sinks))
	}
	for topic, want := range map[string]string{
		"payments":  "id bigint NOT NULL, amount numeric(12,2) NOT NULL, kafka_partition integer NOT NULL, kafka_offset bigint NOT NULL, kafka_ts timestamp with time zone",
		"customers": "name text NOT NULL, key_id bigint NOT NULL",
		"shipments": "id text NOT NULL, sent timestamp with time zone, to jsonb",
	} {
		if got := columnsOf(sinks[topic].Table); got != want {
			t.Errorf("%s: columns\n %s\nwant\n %s", topic, got, want)
		}
	}
	if u := sinks["customers"].Upsert; u == nil || !u.DeleteOnTombstone || strings.Join(u.Key, ",") != "key_id" {
		t.Errorf("customers upsert %+v", u)
	}
}

// registrySinks connects o's schema registry and builds its sinks; what
// names them in a failure.
func registrySinks(t *testing.T, o *runOptions, what string) map[string]ingest.Sink {
	t.Helper()
	sinks, err := fixedSinks(t, o)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	return sinks
}

func columnsOf(t schema.Table) string {
	var parts []string
	for _, c := range t.Columns {
		s := c.Name + " " + c.Type
		if c.NotNull {
			s += " NOT NULL"
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, ", ")
}

func TestBadRegistrySinksStopBeforeAnythingIsWritten(t *testing.T) {
	fake := newFakeRegistry(t)
	const head = "kafka-brokers: [h:1]\nkafka-group: g\n"
	for _, c := range []struct {
		name, config string
		args         []string
		says         string
	}{
		{"format avro without a registry", head + "sinks:\n  - {topic: payments, format: avro}\n", nil,
			"format avro needs a Schema Registry: set --schema-registry-url"},
		{"columns with format avro", head + "sinks:\n  - {topic: payments, format: avro, columns: [{name: a, type: text}]}\n", []string{"--schema-registry-url", fake.URL()},
			"columns with format avro: the columns come from the registry's schema"},
		{"a registry key on a json sink", head + "sinks:\n  - {topic: payments, subject: x, columns: [{name: a, type: text}]}\n", nil,
			"subject, key_subject, nested and message are for format avro, protobuf or json_schema"},
		{"a registry URL without a scheme", head + "schema-registry-url: registry:8081\nsinks:\n  - {topic: payments, format: protobuf}\n", nil,
			`--schema-registry-url: "registry:8081": the URL must start with http://`},
		{"an unknown nested mode", head + "sinks:\n  - {topic: payments, format: avro, nested: deep}\n", []string{"--schema-registry-url", fake.URL()},
			`nested "deep" is not flatten or jsonb`},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, stderr, ok := loadRegistryConfig(t, c.config, c.args...)
			if ok || !strings.Contains(stderr, c.says) || !strings.Contains(stderr, "nothing was written") {
				t.Fatalf("ok %v, stderr:\n%s\nwant %q", ok, stderr, c.says)
			}
		})
	}
	t.Run("an unknown subject", func(t *testing.T) {
		o, stderr, ok := loadRegistryConfig(t, head+"sinks:\n  - {topic: refunds, format: avro}\n", "--schema-registry-url", fake.URL())
		if !ok {
			t.Fatal(stderr)
		}
		_, err := o.buildSinks(t.Context())
		if err == nil || !strings.Contains(err.Error(), `subject "refunds-value" is not in the schema registry`) || !strings.Contains(err.Error(), "line 4") {
			t.Fatalf("got %v", err)
		}
	})
}

func srSchema(text string) sr.Schema { return sr.Schema{Schema: text} }

func rat(s string) *big.Rat {
	r, ok := new(big.Rat).SetString(s)
	if !ok {
		panic(s)
	}
	return r
}

// TestCheckShowsTheDDLOfRegistrySinks runs check on an Avro sink: the
// table comes from the registry's subject and check prints its DDL.
func TestCheckShowsTheDDLOfRegistrySinks(t *testing.T) {
	k := kafkatest.New(t)
	topic := k.CreateTopic(t, "payments", 1)
	fake := newFakeRegistry(t)
	fake.SeedSchema(topic+"-value", 1, 20, srSchema(paymentAvro))
	config := writeConfig(t, "kafka-brokers: ["+k.Brokers()+"]\nkafka-group: g\nschema-registry-url: "+fake.URL()+
		"\nsinks:\n  - {topic: "+topic+", format: avro, table: pay}\n  - {topic: "+topic+"-missing, format: avro}\n")
	var stdout, stderr bytes.Buffer
	code := checkCommand(t.Context(), []string{"--config", config, "--pg-url", pgtest.URL(t)}, &stdout, &stderr)
	out := stdout.String()
	for _, want := range []string{`CREATE TABLE IF NOT EXISTS "public"."pay"`, `"amount" numeric(12,2) NOT NULL`, `subject "` + topic + `-missing-value" is not in the schema registry`} {
		if !strings.Contains(out, want) {
			t.Errorf("check's output lacks %q:\n%s%s", want, out, stderr.String())
		}
	}
	if code != exitError {
		t.Errorf("exit %d with a missing subject, want %d", code, exitError)
	}
}
