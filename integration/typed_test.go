package integration_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestTypedSinksAppendUpsertDeleteAndEvolve drives the typed mapping end to
// end from a YAML config: an append table of typed columns from nested JSON,
// an upsert table keyed by the Kafka key with deletes on tombstones, a
// record that does not fit its column, and an evolution that adds a column.
func TestTypedSinksAppendUpsertDeleteAndEvolve(t *testing.T) {
	parallel(t)
	s := newScenario(t, 3)
	accountsTopic := s.kafka.CreateTopic(t, "kafka2pg-it-accounts", 3)
	created := time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)
	var orders []*kgo.Record
	wantCents := int64(0)
	for i := range 1000 {
		cents := int64(i*137%100000 + 1)
		wantCents += cents
		orders = append(orders, &kgo.Record{Topic: s.topic, Key: fmt.Appendf(nil, "o%d", i), Value: fmt.Appendf(nil,
			`{"id":%d,"amount":%d.%02d,"status":"paid","created_ms":%d,"tags":["a","b%d"],"address":{"city":"c%d"}}`,
			i, cents/100, cents%100, created.Add(time.Duration(i)*time.Second).UnixMilli(), i, i%7)})
	}
	orders = append(orders, &kgo.Record{Topic: s.topic, Key: []byte("bad"), Value: []byte(`{"id":5000,"amount":"lots"}`)})
	s.kafka.Produce(t, orders...)
	var accounts []*kgo.Record
	for i := range 100 {
		accounts = append(accounts, &kgo.Record{Topic: accountsTopic, Key: fmt.Appendf(nil, `{"id":%d}`, i), Value: fmt.Appendf(nil, `{"name":"n%d","balance":%d.50}`, i, i)})
	}
	for i := range 50 { // updates
		accounts = append(accounts, &kgo.Record{Topic: accountsTopic, Key: fmt.Appendf(nil, `{"id":%d}`, i), Value: fmt.Appendf(nil, `{"name":"n%d","balance":%d.75}`, i, 1000+i)})
	}
	for i := 90; i < 100; i++ { // tombstones
		accounts = append(accounts, &kgo.Record{Topic: accountsTopic, Key: fmt.Appendf(nil, `{"id":%d}`, i)})
	}
	s.kafka.Produce(t, accounts...)

	config := func(extraColumn string, evolve bool) string {
		return fmt.Sprintf(`kafka-brokers: [%s]
kafka-group: %s
pg-url: ${K2P_IT_PG_URL}
metrics-addr: ""
sinks:
  - topic: %s
    table: orders_${topic}
    evolve: %v
    columns:
      - {name: id, path: id, type: bigint, not_null: true}
      - {name: amount, path: amount, type: "numeric(12,2)"}
      - {name: status, path: status, type: text}
      - {name: created_at, path: created_ms, type: timestamptz, time_unit: ms}
      - {name: tags, path: tags, type: "text[]"}
      - {name: city, path: address.city, type: text}%s
    metadata: {topic: kafka_topic, partition: kafka_partition, offset: kafka_offset, key: kafka_key, key_format: text}
  - topic: %s
    table: accounts_%s
    mode: upsert
    key: [id]
    delete_on_tombstone: true
    columns:
      - {name: id, from: key, path: id, type: bigint}
      - {name: name, path: name, type: text}
      - {name: balance, path: balance, type: "numeric(12,2)", not_null: true}
`, s.kafka.Brokers(), s.group, s.topic, evolve, extraColumn, accountsTopic, s.table)
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "kafka2pg.yaml")
	if err := os.WriteFile(path, []byte(config("", false)), 0o600); err != nil {
		t.Fatal(err)
	}
	env := []string{"K2P_IT_PG_URL=" + s.pgURL}
	b := startBridgeEnv(t, "typed", env, "run", "--config", path, "--until-caught-up")
	b.requireExit(t, 3, 2*time.Minute) // the bad order is a dead letter

	orderTable := fmt.Sprintf(`"orders_%s"`, tableNameFor(s.topic))
	var n, cents, city3, tags int64
	var status string
	if err := s.db.QueryRow(t.Context(), fmt.Sprintf(`SELECT count(*), (sum(amount) * 100)::bigint,
		count(*) FILTER (WHERE city = 'c3'), count(*) FILTER (WHERE tags[2] = 'b' || id), min(status) FROM %s`, orderTable)).
		Scan(&n, &cents, &city3, &tags, &status); err != nil {
		t.Fatal(err)
	}
	if n != 1000 || cents != wantCents || city3 != 143 || tags != 1000 || status != "paid" {
		t.Errorf("orders: %d rows, %d cents (want 1000, %d), %d in c3 (want 143), %d tags right, status %q", n, cents, wantCents, city3, tags, status)
	}
	var createdAt time.Time
	if err := s.db.QueryRow(t.Context(), fmt.Sprintf(`SELECT created_at FROM %s WHERE id = 42`, orderTable)).Scan(&createdAt); err != nil || !createdAt.Equal(created.Add(42*time.Second)) {
		t.Errorf("created_at of order 42 = %v (%v), want %v", createdAt, err, created.Add(42*time.Second))
	}
	var kind string
	if err := s.db.QueryRow(t.Context(), `SELECT error_kind FROM kafka2pg.dead_letters WHERE topic = $1`, s.topic).Scan(&kind); err != nil || kind != "type_mismatch" {
		t.Errorf("dead letter of the bad order: kind %q (%v), want type_mismatch", kind, err)
	}
	var accountsN int64
	var balance49, balance50 string
	if err := s.db.QueryRow(t.Context(), fmt.Sprintf(`SELECT count(*), max(balance::text) FILTER (WHERE id = 49), max(balance::text) FILTER (WHERE id = 50)
		FROM "accounts_%s"`, s.table)).Scan(&accountsN, &balance49, &balance50); err != nil {
		t.Fatal(err)
	}
	if accountsN != 90 || balance49 != "1049.75" || balance50 != "50.50" {
		t.Errorf("accounts: %d rows (want 90: 100 created, 10 deleted), balance 49 = %s (want 1049.75), 50 = %s (want 50.50)", accountsN, balance49, balance50)
	}

	// Evolve: a new column in the mapping is added to the existing table.
	if err := os.WriteFile(path, []byte(config("\n      - {name: currency, path: currency, type: \"varchar(3)\"}", true)), 0o600); err != nil {
		t.Fatal(err)
	}
	s.kafka.Produce(t, &kgo.Record{Topic: s.topic, Value: []byte(`{"id":2000,"amount":1.00,"currency":"EUR"}`)})
	b = startBridgeEnv(t, "typed-evolved", env, "run", "--config", path, "--until-caught-up")
	b.requireExitZero(t, 2*time.Minute)
	var currency string
	if err := s.db.QueryRow(t.Context(), fmt.Sprintf(`SELECT currency FROM %s WHERE id = 2000`, orderTable)).Scan(&currency); err != nil || currency != "EUR" {
		t.Errorf("evolved column currency = %q (%v), want EUR", currency, err)
	}
}

// tableNameFor mirrors the bridge's topic → table name rule for the tests'
// topic names (lower case letters, digits and '-').
func tableNameFor(topic string) string {
	out := []byte(topic)
	for i, c := range out {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_') {
			out[i] = '_'
		}
	}
	return string(out)
}
