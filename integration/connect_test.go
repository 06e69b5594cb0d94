package integration_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// connectOrder is a Kafka Connect record as the JsonConverter writes it
// with schemas.enable=true; v2 of its schema adds the optional note.
func connectOrder(id int, cents int64, note string) []byte {
	fields := `{"type":"int64","optional":false,"field":"id"},` +
		`{"type":"bytes","optional":false,"name":"org.apache.kafka.connect.data.Decimal","version":1,"parameters":{"scale":"2","connect.decimal.precision":"10"},"field":"amount"},` +
		`{"type":"int64","optional":true,"name":"org.apache.kafka.connect.data.Timestamp","version":1,"field":"placed_at"}`
	payload := fmt.Sprintf(`{"id":%d,"amount":"%s","placed_at":%d}`, id, unscaledBase64(cents), 1764576000000+int64(id)*1000)
	if note != "" {
		fields += `,{"type":"string","optional":true,"field":"note"}`
		payload = fmt.Sprintf(`{"id":%d,"amount":"%s","placed_at":%d,"note":%q}`, id, unscaledBase64(cents), 1764576000000+int64(id)*1000, note)
	}
	return fmt.Appendf(nil, `{"schema":{"type":"struct","fields":[%s],"optional":false,"name":"shop.orders"},"payload":%s}`, fields, payload)
}

// unscaledBase64 is a Decimal's unscaled value as the JsonConverter writes
// it: big-endian two's complement, base64.
func unscaledBase64(v int64) string {
	b := []byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}
	for len(b) > 1 && b[0] == 0 && b[1]&0x80 == 0 {
		b = b[1:]
	}
	const enc = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
	var out strings.Builder
	for i := 0; i < len(b); i += 3 {
		var n uint32
		k := min(3, len(b)-i)
		for j := range 3 {
			n <<= 8
			if j < k {
				n |= uint32(b[i+j])
			}
		}
		for j := range 4 {
			if j <= k {
				out.WriteByte(enc[n>>(18-6*j)&63])
			} else {
				out.WriteByte('=')
			}
		}
	}
	return out.String()
}

// TestConnectJSONSinksRouteEachTopicToATypedTable runs format connect_json
// end to end: one topic_regex sink whose table is a part of the topic, so
// two topics land in two tables typed from their records' Connect schema;
// a schema version that adds a field adds its column; a record the schema
// refuses is a dead letter; and an upsert sink of schemaless records,
// typed by its columns, deletes on tombstones.
func TestConnectJSONSinksRouteEachTopicToATypedTable(t *testing.T) {
	parallel(t)
	s := newScenario(t, 1)
	prefix := strings.ReplaceAll(s.table, "_", "")
	east := s.kafka.CreateTopic(t, prefix+".east.orders", 2)
	west := s.kafka.CreateTopic(t, prefix+".west.orders", 1)
	accounts := s.kafka.CreateTopic(t, prefix+"-accounts", 1)
	var recs []*kgo.Record
	wantCents := map[string]int64{}
	for i := range 300 {
		topic, region := east, "east"
		if i%3 == 0 {
			topic, region = west, "west"
		}
		note := ""
		if i >= 200 {
			note = fmt.Sprintf("n%d", i) // schema v2
		}
		cents := int64(i*7919%100000 + 1)
		wantCents[region] += cents
		recs = append(recs, &kgo.Record{Topic: topic, Key: fmt.Appendf(nil, "%d", i), Value: connectOrder(i, cents, note)})
	}
	recs = append(recs, &kgo.Record{Topic: east, Value: []byte(strings.Replace(string(connectOrder(999, 1, "")), `"id":999`, `"id":"x"`, 1))})
	for i := range 20 {
		recs = append(recs, &kgo.Record{Topic: accounts, Key: fmt.Appendf(nil, `{"id":%d}`, i), Value: fmt.Appendf(nil, `{"id":%d,"name":"a%d","seen_at":%d}`, i, i, 1764576000000000+int64(i))})
	}
	for i := range 5 {
		recs = append(recs, &kgo.Record{Topic: accounts, Key: fmt.Appendf(nil, `{"id":%d}`, i)})
	}
	s.kafka.Produce(t, recs...)

	config := fmt.Sprintf(`kafka-brokers: [%s]
kafka-group: %s
pg-url: ${K2P_IT_PG_URL}
metrics-addr: ""
sinks:
  - topic_regex: '%s\.(?P<region>[a-z]+)\.orders-[0-9a-f]{8}'
    format: connect_json
    table: '%s_${region}'
    metadata: {partition: kafka_partition, offset: kafka_offset}
  - topic: %s
    format: connect_json
    table: %s_accounts
    mode: upsert
    key: [id]
    delete_on_tombstone: true
    columns:
      - {name: id, type: bigint, not_null: true}
      - {name: name, type: text}
      - {name: seen_at, connect: io.debezium.time.MicroTimestamp}
`, s.kafka.Brokers(), s.group, prefix, s.table, accounts, s.table)
	path := filepath.Join(t.TempDir(), "kafka2pg.yaml")
	if err := os.WriteFile(path, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	b := startBridgeEnv(t, "connect", []string{"K2P_IT_PG_URL=" + s.pgURL}, "run", "--config", path, "--until-caught-up", "--kafka-fetch-max-wait", "250ms")
	if !b.wait(2 * time.Minute) {
		b.kill(t)
		t.Fatal("the bridge did not catch up in 2 minutes")
	}
	// Caught up: 0, or 3 where --until-caught-up says dead letters were written.
	if code := b.state.ExitCode(); code != 0 && code != 3 {
		t.Fatalf("bridge: %s", b.status())
	}

	for region, want := range wantCents {
		var n, cents, notes int64
		var typ string
		if err := s.db.QueryRow(t.Context(), fmt.Sprintf(`SELECT count(*), (sum(amount) * 100)::bigint, count(note),
			pg_typeof(min(placed_at))::text FROM "%s_%s"`, s.table, region)).Scan(&n, &cents, &notes, &typ); err != nil {
			t.Fatalf("table %s_%s: %v", s.table, region, err)
		}
		wantN := int64(200)
		if region == "west" {
			wantN = 100
		}
		if n != wantN || cents != want || notes == 0 || typ != "timestamp without time zone" {
			t.Errorf("%s: %d rows (want %d), %d cents (want %d), %d notes (want some: schema v2), placed_at %s", region, n, wantN, cents, want, notes, typ)
		}
	}
	var amountType string
	if err := s.db.QueryRow(t.Context(), `SELECT format_type(atttypid, atttypmod) FROM pg_attribute
		WHERE attrelid = $1::regclass AND attname = 'amount'`, fmt.Sprintf(`"%s_east"`, s.table)).Scan(&amountType); err != nil || amountType != "numeric(10,2)" {
		t.Errorf("amount is %q (%v), want numeric(10,2) from the Decimal's parameters", amountType, err)
	}
	var kind string
	if err := s.db.QueryRow(t.Context(), `SELECT error_kind FROM kafka2pg.dead_letters WHERE topic = $1`, east).Scan(&kind); err != nil || kind != "type_mismatch" {
		t.Errorf("dead letter of the bad order: %q (%v), want type_mismatch", kind, err)
	}
	var n, minID int64
	var seen time.Time
	if err := s.db.QueryRow(t.Context(), fmt.Sprintf(`SELECT count(*), min(id), max(seen_at) FROM "%s_accounts"`, s.table)).Scan(&n, &minID, &seen); err != nil {
		t.Fatal(err)
	}
	if n != 15 || minID != 5 || !seen.Equal(time.UnixMicro(1764576000000019).UTC()) {
		t.Errorf("accounts: %d rows from id %d (want 15 from 5: 5 deleted), last seen %v", n, minID, seen)
	}
}
