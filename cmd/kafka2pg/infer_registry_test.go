package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/kafka2pg/kafka2pg/decode"
	"github.com/kafka2pg/kafka2pg/internal/kafkatest"
)

// TestInferReadsTheSchemaOfWireFormatValues samples a topic of Avro
// records: infer names the format and prints the table of the subject,
// and run accepts the config it prints.
func TestInferReadsTheSchemaOfWireFormatValues(t *testing.T) {
	k := kafkatest.New(t)
	fake := newFakeRegistry(t) // payments-value is id 1
	topic := k.CreateTopic(t, "payments", 1)
	fake.SeedSchema(topic+"-value", 1, 10, srSchema(paymentAvro))
	b, err := avro.Marshal(avro.MustParse(paymentAvro), map[string]any{"id": int64(1), "amount": rat("12.50")})
	if err != nil {
		t.Fatal(err)
	}
	k.Produce(t, &kgo.Record{Topic: topic, Value: append(decode.AppendWireHeader(nil, 10, nil), b...)})
	var stdout, stderr bytes.Buffer
	args := []string{"--kafka-brokers", k.Brokers(), "--topic", topic, "--sample", "5", "--timeout", "20s"}
	if code := inferCommand(t.Context(), args, &stdout, &stderr); code != exitError || !strings.Contains(stderr.String(), "give --schema-registry-url") {
		t.Fatalf("without a registry: exit %d, %s", code, stderr.String())
	}
	stdout.Reset()
	stderr.Reset()
	if code := inferCommand(t.Context(), append(args, "--schema-registry-url", fake.URL()), &stdout, &stderr); code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	out := stdout.String()
	for _, want := range []string{"are avro in the Schema Registry wire format (schema id 10", `"amount" numeric(12,2) NOT NULL`, "format: avro", "schema-registry-url: ['" + fake.URL() + "']"} {
		if !strings.Contains(out, want) {
			t.Errorf("the output lacks %q:\n%s", want, out)
		}
	}
	o, errs, ok := loadRegistryConfig(t, out)
	if !ok {
		t.Fatalf("run does not accept the printed config: %s", errs)
	}
	registrySinks(t, o, "the printed config's sinks")
}

// TestInferNamesTheProtobufMessageOfTheSamples samples Protobuf records of
// a schema's second message: the printed sink names it.
func TestInferNamesTheProtobufMessageOfTheSamples(t *testing.T) {
	k := kafkatest.New(t)
	fake := newFakeRegistry(t)
	topic := k.CreateTopic(t, "shipments", 1)
	fake.SeedSchema(topic+"-value", 1, 30, sr.Schema{Type: sr.TypeProtobuf, Schema: shipmentPB})
	// Field 1 of shop.Shipment: id = "s1".
	value := append(decode.AppendWireHeader(nil, 30, []int{1}), 0x0a, 0x02, 's', '1')
	k.Produce(t, &kgo.Record{Topic: topic, Value: value})
	var stdout, stderr bytes.Buffer
	args := []string{"--kafka-brokers", k.Brokers(), "--topic", topic, "--sample", "1", "--timeout", "20s", "--schema-registry-url", fake.URL()}
	if code := inferCommand(t.Context(), args, &stdout, &stderr); code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	for _, want := range []string{"format: protobuf", "message: shop.Shipment", `"to_city" text`} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("the output lacks %q:\n%s", want, stdout.String())
		}
	}
}
