package integration_test

import (
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bufbuild/protocompile"
	"github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"
	"github.com/twmb/franz-go/pkg/sr/srfake"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/dynamicpb"

	"github.com/kafka2pg/kafka2pg/decode"
)

// registryURLEnv points the registry tests at a real Confluent-compatible
// Schema Registry; unset, they serve franz-go's srfake over HTTP in the
// test process, which the bridge subprocess reaches like any registry.
const registryURLEnv = "KAFKA2PG_TEST_SCHEMA_REGISTRY_URL"

// testRegistry registers schemas for a test, in a real registry or srfake.
type testRegistry struct {
	url string
	cl  *sr.Client
}

func newTestRegistry(t testing.TB) *testRegistry {
	t.Helper()
	url := os.Getenv(registryURLEnv)
	if url == "" {
		fake := srfake.New()
		t.Cleanup(fake.Close)
		url = fake.URL()
	}
	cl, err := sr.NewClient(sr.URLs(url))
	if err != nil {
		t.Fatal(err)
	}
	return &testRegistry{url: url, cl: cl}
}

// register adds a version to subject and returns its id.
func (r *testRegistry) register(t testing.TB, subject, text string) int {
	t.Helper()
	ss, err := r.cl.CreateSchema(t.Context(), subject, sr.Schema{Schema: text})
	if err != nil {
		t.Fatalf("register %s: %v", subject, err)
	}
	return ss.ID
}

// avroValue encodes v in the wire format of schema id.
func avroValue(t testing.TB, id int, text string, v map[string]any) []byte {
	t.Helper()
	b, err := avro.Marshal(avro.MustParse(text), v)
	if err != nil {
		t.Fatalf("encode %v: %v", v, err)
	}
	return append(decode.AppendWireHeader(nil, id, nil), b...)
}

const (
	paymentV1 = `{"type": "record", "name": "Payment", "namespace": "it", "fields": [
		{"name": "seq", "type": "long"},
		{"name": "amount", "type": {"type": "bytes", "logicalType": "decimal", "precision": 12, "scale": 2}},
		{"name": "at", "type": {"type": "long", "logicalType": "timestamp-micros"}}]}`
	// Version 2 adds an optional field while the crash loop runs.
	paymentV2 = `{"type": "record", "name": "Payment", "namespace": "it", "fields": [
		{"name": "seq", "type": "long"},
		{"name": "amount", "type": {"type": "bytes", "logicalType": "decimal", "precision": 12, "scale": 2}},
		{"name": "at", "type": {"type": "long", "logicalType": "timestamp-micros"}},
		{"name": "note", "type": ["null", "string"], "default": null}]}`
)

// writeRegistryConfig writes a run config file and returns its path.
func writeRegistryConfig(t testing.TB, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kafka2pg.yaml")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestRegistryAvroCrashLoopKeepsExactlyOnce SIGKILLs the bridge over and
// over while a producer writes Avro records, and halfway through registers
// a second version of the subject (half the later records use it) whose
// records need a new column: every
// produced record must be in the table exactly once, with its values.
func TestRegistryAvroCrashLoopKeepsExactlyOnce(t *testing.T) {
	parallel(t)
	const (
		partitions = 3
		kills      = 6
		total      = 20_000 // 50 every 50ms: about 20s, while the kills go on
	)
	s := newScenario(t, partitions)
	reg := newTestRegistry(t)
	v1 := reg.register(t, s.topic+"-value", paymentV1)
	base := time.Date(1969, 12, 31, 23, 0, 0, 0, time.UTC)

	var produced atomic.Int64
	var v2 atomic.Int64 // the id of version 2 once registered
	var wg sync.WaitGroup
	stop := make(chan struct{})
	var prodErr error
	prodDone := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(prodDone)
		for seq := int64(0); seq < total; {
			if seq == total/2 {
				ss, err := reg.cl.CreateSchema(t.Context(), s.topic+"-value", sr.Schema{Schema: paymentV2})
				if err != nil {
					prodErr = fmt.Errorf("register version 2: %w", err)
					return
				}
				v2.Store(int64(ss.ID))
			}
			var rs []*kgo.Record
			for range 50 {
				v := map[string]any{"seq": seq, "amount": big.NewRat(seq%100000-50000, 100), "at": base.Add(time.Duration(seq) * time.Microsecond)}
				id, text := v1, paymentV1
				if id2 := int(v2.Load()); id2 != 0 && seq%2 == 0 {
					id, text = id2, paymentV2
					v["note"] = fmt.Sprintf("n%d", seq)
				}
				rs = append(rs, &kgo.Record{Topic: s.topic, Value: avroValue(t, id, text, v)})
				seq++
			}
			if err := s.kafka.TryProduce(t.Context(), rs...); err != nil {
				prodErr = err
				return
			}
			produced.Add(int64(len(rs)))
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()
	config := writeRegistryConfig(t, fmt.Sprintf(`kafka-brokers: [%s]
kafka-group: %s
pg-url: %q
schema-registry-url: %s
metrics-addr: ""
batch-max-rows: 300
batch-max-wait: 50ms
kafka-fetch-max-wait: 250ms
sinks:
  - topic: %s
    table: %s
    format: avro
    metadata: {partition: kafka_partition, offset: kafka_offset}
`, s.kafka.Brokers(), s.group, s.pgURL, reg.url, s.topic, s.table))
	flags := append([]string{"run", "--config", config}, fastGroupFlags...)
	killed := 0
	for i := range kills {
		before := totalDurable(s.durableOffsets(t))
		b := startBridge(t, fmt.Sprintf("avro-crash-%02d", i), flags...)
		pollUntil(t, 60*time.Second, "bridge "+b.name+" to commit a batch", func() (bool, string) {
			requireRunning(t, b)
			now := totalDurable(s.durableOffsets(t))
			select {
			case <-prodDone: // nothing more may come to commit
				return b.joined() && (now > before || now == produced.Load()), fmt.Sprintf("sum of next_offset %d, %d when it started, all %d produced; joined %v", now, before, produced.Load(), b.joined())
			default:
			}
			return b.joined() && now > before, fmt.Sprintf("sum of next_offset %d, %d when it started; joined %v", now, before, b.joined())
		})
		time.Sleep(randomDuration(100*time.Millisecond, 900*time.Millisecond)) // the chaos schedule
		requireRunning(t, b)
		if !b.kill(t) {
			t.Fatalf("bridge %s ended on its own (%s)", b.name, b.status())
		}
		killed++
	}
	close(stop)
	wg.Wait()
	if prodErr != nil {
		t.Fatalf("producer: %v", prodErr)
	}
	n := produced.Load()
	b := startBridge(t, "avro-final", append(flags, "--until-caught-up")...)
	b.requireExitZero(t, 3*time.Minute)

	ends := s.kafka.EndOffsets(t, s.topic)
	var inKafka int64
	for _, e := range ends {
		inKafka += e
	}
	if inKafka != n {
		t.Fatalf("Kafka has %d records, the producer wrote %d", inKafka, n)
	}
	tbl := fmt.Sprintf("%q", s.table)
	var rows, seqs, positions, wrongAmount, wrongAt, notes, wrongNotes int64
	if err := s.db.QueryRow(t.Context(), fmt.Sprintf(`SELECT count(*), count(DISTINCT seq), count(DISTINCT (kafka_partition, kafka_offset)),
		count(*) FILTER (WHERE amount <> ((seq %% 100000) - 50000) / 100.0),
		count(*) FILTER (WHERE at <> '1969-12-31 23:00:00+00'::timestamptz + seq * interval '1 microsecond'),
		count(note), count(*) FILTER (WHERE note IS NOT NULL AND note <> 'n' || seq)
		FROM %s`, tbl)).Scan(&rows, &seqs, &positions, &wrongAmount, &wrongAt, &notes, &wrongNotes); err != nil {
		t.Fatal(err)
	}
	if rows != n || seqs != n || positions != n || wrongAmount != 0 || wrongAt != 0 || wrongNotes != 0 {
		t.Errorf("%d rows, %d distinct seqs, %d distinct positions (want %d each); %d wrong amounts, %d wrong times, %d wrong notes",
			rows, seqs, positions, n, wrongAmount, wrongAt, wrongNotes)
	}
	if notes == 0 {
		t.Errorf("no row has a note, though version 2 was registered halfway")
	}
	assertDurableOffsets(t, s.db, s.group, s.topic, ends)
	t.Logf("%d Avro records through %d kills, %d of them of version 2", n, killed, notes)
}

// TestRegistryAvroKeysUpsertAndTombstonesDelete writes an upsert table
// keyed by the Avro key's field: updates replace rows, tombstones delete
// them, and a record of a schema id the registry does not know is
// dead-lettered, not dropped.
func TestRegistryAvroKeysUpsertAndTombstonesDelete(t *testing.T) {
	parallel(t)
	s := newScenario(t, 2)
	reg := newTestRegistry(t)
	const (
		valueText = `{"type": "record", "name": "Account", "fields": [{"name": "name", "type": "string"},
			{"name": "balance", "type": {"type": "bytes", "logicalType": "decimal", "precision": 12, "scale": 2}}]}`
		keyText = `{"type": "record", "name": "AccountKey", "fields": [{"name": "id", "type": "long"}]}`
	)
	vid := reg.register(t, s.topic+"-value", valueText)
	kid := reg.register(t, s.topic+"-key", keyText)
	key := func(id int64) []byte { return avroValue(t, kid, keyText, map[string]any{"id": id}) }
	var rs []*kgo.Record
	for i := range int64(100) {
		rs = append(rs, &kgo.Record{Topic: s.topic, Key: key(i), Value: avroValue(t, vid, valueText, map[string]any{"name": fmt.Sprint("n", i), "balance": big.NewRat(i*100+50, 100)})})
	}
	for i := range int64(50) {
		rs = append(rs, &kgo.Record{Topic: s.topic, Key: key(i), Value: avroValue(t, vid, valueText, map[string]any{"name": fmt.Sprint("u", i), "balance": big.NewRat(-i*100-75, 100)})})
	}
	for i := int64(90); i < 100; i++ {
		rs = append(rs, &kgo.Record{Topic: s.topic, Key: key(i)}) // tombstones
	}
	unknown := avroValue(t, 987654, valueText, map[string]any{"name": "ghost", "balance": big.NewRat(1, 1)})
	rs = append(rs, &kgo.Record{Topic: s.topic, Key: key(500), Value: unknown})
	s.kafka.Produce(t, rs...)

	config := writeRegistryConfig(t, fmt.Sprintf(`kafka-brokers: [%s]
kafka-group: %s
pg-url: %q
schema-registry-url: %s
metrics-addr: ""
sinks:
  - topic: %s
    table: %s
    format: avro
    mode: upsert
    key: [key_id]
    delete_on_tombstone: true
`, s.kafka.Brokers(), s.group, s.pgURL, reg.url, s.topic, s.table))
	b := startBridge(t, "avro-upsert", "run", "--config", config, "--until-caught-up")
	b.requireExit(t, 3, 2*time.Minute) // the record of an unknown schema id is a dead letter

	var n int64
	var b49, b50, n49 string
	if err := s.db.QueryRow(t.Context(), fmt.Sprintf(`SELECT count(*), max(balance::text) FILTER (WHERE key_id = 49),
		max(balance::text) FILTER (WHERE key_id = 50), max(name) FILTER (WHERE key_id = 49) FROM %q`, s.table)).Scan(&n, &b49, &b50, &n49); err != nil {
		t.Fatal(err)
	}
	if n != 90 || b49 != "-49.75" || b50 != "50.50" || n49 != "u49" {
		t.Errorf("%d rows (want 90: 100 created, 10 deleted); key 49 = %s %s (want u49 -49.75); key 50 = %s (want 50.50)", n, n49, b49, b50)
	}
	var kind, msg string
	if err := s.db.QueryRow(t.Context(), `SELECT error_kind, error_message FROM kafka2pg.dead_letters WHERE topic = $1`, s.topic).Scan(&kind, &msg); err != nil {
		t.Fatalf("the dead letter of the unknown schema id: %v", err)
	}
	if kind != decode.KindUnknownSchema || !strings.Contains(msg, "987654") {
		t.Errorf("dead letter %s: %s", kind, msg)
	}
	assertDurableOffsets(t, s.db, s.group, s.topic, s.kafka.EndOffsets(t, s.topic))
}

// TestRegistryProtobufRecordsLandTyped writes Protobuf records of the
// second message of a schema (message index [1]) with a well-known type
// and a nested message through the binary.
func TestRegistryProtobufRecordsLandTyped(t *testing.T) {
	parallel(t)
	s := newScenario(t, 2)
	reg := newTestRegistry(t)
	const text = `syntax = "proto3";
package it;
import "google/protobuf/timestamp.proto";
message Unused { string x = 1; }
message Event {
  int64 id = 1;
  google.protobuf.Timestamp at = 2;
  message Where { string city = 1; }
  Where where = 3;
  repeated string tags = 4;
}`
	ss, err := reg.cl.CreateSchema(t.Context(), s.topic+"-value", sr.Schema{Type: sr.TypeProtobuf, Schema: text})
	if err != nil {
		t.Fatal(err)
	}
	c := protocompile.Compiler{Resolver: protocompile.WithStandardImports(&protocompile.SourceResolver{
		Accessor: protocompile.SourceAccessorFromMap(map[string]string{"event.proto": text})})}
	files, err := c.Compile(t.Context(), "event.proto")
	if err != nil {
		t.Fatal(err)
	}
	md := files[0].Messages().ByName("Event")
	var rs []*kgo.Record
	for i := range 100 {
		msg := dynamicpb.NewMessage(md)
		doc := fmt.Sprintf(`{"id": "%d", "at": "2026-11-30T12:00:00.%06dZ", "where": {"city": "c%d"}, "tags": ["t%d"]}`, i, i, i%3, i)
		if err := protojson.Unmarshal([]byte(doc), msg); err != nil {
			t.Fatal(err)
		}
		b, err := proto.Marshal(msg)
		if err != nil {
			t.Fatal(err)
		}
		rs = append(rs, &kgo.Record{Topic: s.topic, Value: append(decode.AppendWireHeader(nil, ss.ID, []int{1}), b...)})
	}
	s.kafka.Produce(t, rs...)
	config := writeRegistryConfig(t, fmt.Sprintf(`kafka-brokers: [%s]
kafka-group: %s
pg-url: %q
schema-registry-url: %s
metrics-addr: ""
sinks:
  - {topic: %s, table: %s, format: protobuf, message: it.Event}
`, s.kafka.Brokers(), s.group, s.pgURL, reg.url, s.topic, s.table))
	b := startBridge(t, "protobuf", "run", "--config", config, "--until-caught-up")
	b.requireExitZero(t, 2*time.Minute)
	var n, c1, wrongAt int64
	var tags string
	if err := s.db.QueryRow(t.Context(), fmt.Sprintf(`SELECT count(*), count(*) FILTER (WHERE where_city = 'c1'),
		count(*) FILTER (WHERE at <> '2026-11-30 12:00:00+00'::timestamptz + id * interval '1 microsecond'),
		max(tags::text) FILTER (WHERE id = 7) FROM %q`, s.table)).Scan(&n, &c1, &wrongAt, &tags); err != nil {
		t.Fatal(err)
	}
	if n != 100 || c1 != 33 || wrongAt != 0 || tags != `["t7"]` {
		t.Errorf("%d rows (want 100), %d in c1 (want 33), %d wrong timestamps, tags of 7 %s", n, c1, wrongAt, tags)
	}
}
