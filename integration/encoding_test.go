package integration_test

import (
	"bytes"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafka2pg/kafka2pg/decode"
	"github.com/kafka2pg/kafka2pg/internal/pgtest"
)

// On a database whose encoding is not UTF-8, kafka2pg stores the characters
// the records hold, not their UTF-8 bytes read as that encoding, and a
// character the encoding lacks makes its record a dead letter: in the
// zero-config table (jsonb, unchecked) and in a typed table's text column.
// Postgres takes client_encoding from the database unless the client sets
// it, and kafka2pg once did not: "é" was stored as "Ã©" and "中" as three
// LATIN1 characters, without an error. A dead letter whose message or
// headers hold such a character is stored in ASCII (its COPY failed, and
// the partition retried it forever, once client_encoding was UTF8).
func TestADatabaseInAnotherEncodingGetsTheCharactersNotTheirBytes(t *testing.T) {
	parallel(t)
	// The test reads bytes (convert_to) and ASCII only, whatever its
	// connections' client_encoding.
	s := newScenarioOn(t, 1, pgtest.URLWithEncoding(t, "LATIN1"))
	typedTopic := s.kafka.CreateTopic(t, "kafka2pg-it-latin1-typed", 1)
	values := []string{`{"name":"café"}`, `{"name":"中文"}`, `{"name":"na\u00efve"}`, `{"name":"x","n":"中"}`}
	headers := []kgo.RecordHeader{{Key: "clé", Value: []byte("中")}, {Key: "ключ", Value: []byte("\xff")}}
	for _, topic := range []string{s.topic, typedTopic} {
		for i, v := range values {
			r := &kgo.Record{Topic: topic, Key: fmt.Appendf(nil, "k%d", i), Value: []byte(v)}
			if i == 3 {
				r.Headers = headers
			}
			s.kafka.Produce(t, r)
		}
	}
	s.runUntilCaughtUpCounting(t, "latin1-zero-config", 2*time.Minute) // "中" is a dead letter: exit 3
	config := fmt.Sprintf(`kafka-brokers: [%s]
kafka-group: %s-typed
pg-url: ${K2P_IT_PG_URL}
metrics-addr: ""
sinks:
  - topic: %s
    table: typed_%s
    columns:
      - {name: name, path: name, type: text}
      - {name: n, path: n, type: bigint}
    metadata: {offset: kafka_offset}
`, s.kafka.Brokers(), s.group, typedTopic, s.table)
	path := filepath.Join(t.TempDir(), "kafka2pg.yaml")
	if err := os.WriteFile(path, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	startBridgeEnv(t, "latin1-typed", []string{"K2P_IT_PG_URL=" + s.pgURL}, "run", "--config", path, "--until-caught-up").requireExit(t, 3, 2*time.Minute) // its dead letters too

	// The LATIN1 bytes of the names: one byte for é and ï.
	want := map[int64][]byte{0: []byte("caf\xe9"), 2: []byte("na\xefve")}
	for table, name := range map[string]string{
		fmt.Sprintf("%q", s.table):         "value->>'name'",
		fmt.Sprintf(`"typed_%s"`, s.table): "name",
	} {
		if got := storedBytes(t, s, table, name, "LATIN1"); len(got) != len(want) || !bytes.Equal(got[0], want[0]) || !bytes.Equal(got[2], want[2]) {
			t.Errorf("%s: stored %v, want %v (offset 1 a dead letter)", table, got, want)
		}
	}
	// Offset 3: in the zero-config table its headers column lacks 中
	// (Postgres refuses the row), in the typed one n is not a number (the
	// mapping refuses it, quoting the value). Both dead letters keep the
	// headers, in ASCII, and read back as they came.
	for topic, wantKinds := range map[string]map[int64]string{
		s.topic:    {1: "untranslatable_character", 3: "untranslatable_character"},
		typedTopic: {1: "untranslatable_character", 3: "type_mismatch"},
	} {
		rows, err := s.db.Query(t.Context(), `SELECT kafka_offset, error_kind, error_message, headers::text FROM kafka2pg.dead_letters WHERE topic = $1`, topic)
		if err != nil {
			t.Fatal(err)
		}
		kinds := map[int64]string{}
		for rows.Next() {
			var o int64
			var kind, msg string
			var hs *string
			if err := rows.Scan(&o, &kind, &msg, &hs); err != nil {
				t.Fatal(err)
			}
			kinds[o] = kind
			if o != 3 {
				continue
			}
			if kind == "type_mismatch" && !strings.Contains(msg, `\u4E2D`) {
				t.Errorf("%s@3: message %q, want the value quoted with \\u4E2D", topic, msg)
			}
			got, err := decode.ParseHeadersJSON([]byte(*hs))
			if err != nil || len(got) != 2 || got[0].Key != "clé" || string(got[0].Value) != "中" || got[1].Key != "ключ" || string(got[1].Value) != "\xff" {
				t.Errorf("%s@3: headers %s read back as %+v (%v), want the record's", topic, *hs, got, err)
			}
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		if !maps.Equal(kinds, wantKinds) {
			t.Errorf("%s: dead letters %v, want %v", topic, kinds, wantKinds)
		}
	}
}

// A SQL_ASCII database stores any bytes as text, so Postgres checks them
// only against the client's encoding: with kafka2pg's UTF8, a value that is
// not UTF-8, which the zero-config table leaves to Postgres to refuse, is
// still a dead letter (it was stored, the client's encoding then being
// SQL_ASCII too).
func TestASQLASCIIDatabaseStillRefusesBytesThatAreNotUTF8(t *testing.T) {
	parallel(t)
	s := newScenarioOn(t, 1, pgtest.URLWithEncoding(t, "SQL_ASCII"))
	for i, v := range []string{`{"name":"café"}`, "{\"name\":\"\xff\"}"} {
		s.kafka.Produce(t, &kgo.Record{Topic: s.topic, Key: fmt.Appendf(nil, "k%d", i), Value: []byte(v)})
	}
	b := s.start(t, "sql-ascii", "--until-caught-up")
	b.requireExit(t, 3, 2*time.Minute) // a dead letter
	if !b.logged("the database's encoding is SQL_ASCII") {
		t.Error("no warning about SQL_ASCII in the log")
	}
	if code, out := cli(t, append([]string{"check"}, s.args()[1:]...)...); code != 0 || !strings.Contains(out, "warn  postgres: the database's encoding is SQL_ASCII") {
		t.Errorf("kafka2pg check on SQL_ASCII: exit %d, want 0 with the warning:\n%s", code, out)
	}
	if got := storedBytes(t, s, fmt.Sprintf("%q", s.table), "value->>'name'", "SQL_ASCII"); len(got) != 1 || string(got[0]) != "café" {
		t.Errorf("stored %v, want offset 0 only, café in UTF-8", got)
	}
	requireOneDeadLetter(t, s, s.topic, 1, "invalid_utf8")
}

// A topic_regex sink's table is named per topic found later, but Kafka's
// topic names are ASCII: a character of its template the database's
// encoding lacks is known at start, and stops run (and fails check) there
// instead of failing every batch of the topics it finds.
func TestATopicRegexTableTemplateTheDatabaseCannotHoldStopsTheRun(t *testing.T) {
	parallel(t)
	s := newScenarioOn(t, 1, pgtest.URLWithEncoding(t, "LATIN1"))
	s.produce(t, 5)
	config := fmt.Sprintf("kafka-brokers: [%s]\nkafka-group: %s\npg-url: %s\nmetrics-addr: \"\"\nsinks:\n  - topic_regex: %s\n    table: 订单_${topic}\n",
		s.kafka.Brokers(), s.group, s.pgURL, regexp.QuoteMeta(s.topic))
	path := filepath.Join(t.TempDir(), "kafka2pg.yaml")
	if err := os.WriteFile(path, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	b := startBridge(t, "latin1-regex", "run", "--config", path, "--until-caught-up")
	if !b.wait(time.Minute) {
		b.kill(t)
		t.Fatal("still running after a minute, want it stopped at start")
	}
	const want = `the table \"订单_${topic}\" of the sink of topic_regex`
	if b.state.ExitCode() == 0 || !b.logged(want) || !b.logged("lacks a character of its name") {
		t.Errorf("%s, want a failure naming the table template and its topic_regex", b.status())
	}
	if code, out := cli(t, "check", "--config", path); code != 1 || !strings.Contains(out, "FAIL  postgres: the table \"订单_${topic}\"") {
		t.Errorf("kafka2pg check: exit %d, want 1 with the template's FAIL:\n%s", code, out)
	}
	var n int64
	if err := s.db.QueryRow(t.Context(), `SELECT count(*) FROM pg_class WHERE relname LIKE '%'||$1`, tableNameFor(s.topic)).Scan(&n); err != nil || n != 0 {
		t.Errorf("tables for %s: %d (%v), want none", s.topic, n, err)
	}
}

// On SQL_ASCII, jsonb cannot store a \u escape of a character beyond
// ASCII, and Postgres says so with SQLSTATE 0A000, not a data exception:
// such a record is a dead letter of kind untranslatable_character (as a
// character LATIN1 lacks is), not a batch retried for ever.
func TestASQLASCIIDatabaseDeadLettersAJSONBEscapeItCannotStore(t *testing.T) {
	parallel(t)
	s := newScenarioOn(t, 1, pgtest.URLWithEncoding(t, "SQL_ASCII"))
	for i, v := range []string{`{"name":"a"}`, `{"name":"caf\u00e9"}`, `{"name":"\u0041"}`} {
		s.kafka.Produce(t, &kgo.Record{Topic: s.topic, Key: fmt.Appendf(nil, "k%d", i), Value: []byte(v)})
	}
	b := s.start(t, "sql-ascii-escape", "--until-caught-up")
	b.requireExit(t, 3, 2*time.Minute) // a dead letter
	got := storedBytes(t, s, fmt.Sprintf("%q", s.table), "value->>'name'", "SQL_ASCII")
	if len(got) != 2 || string(got[0]) != "a" || string(got[2]) != "A" {
		t.Errorf("stored %v, want offsets 0 and 2 (a and A)", got)
	}
	requireOneDeadLetter(t, s, s.topic, 1, "untranslatable_character")
}

// A header holding U+2028 on SQL_ASCII: encoding/json escapes the
// character (\u2028), which jsonb there cannot store, and the record's
// row, then its dead letter, failed for ever. It is written as it is now.
func TestASQLASCIIDatabaseStoresAHeaderWithALineSeparator(t *testing.T) {
	parallel(t)
	s := newScenarioOn(t, 1, pgtest.URLWithEncoding(t, "SQL_ASCII"))
	s.kafka.Produce(t, &kgo.Record{Topic: s.topic, Key: []byte("k0"), Value: []byte(`{"a":1}`), Headers: []kgo.RecordHeader{{Key: "h", Value: []byte("x\u2028y")}}},
		&kgo.Record{Topic: s.topic, Key: []byte("k1"), Value: []byte(`{"a":2}`)})
	b := s.start(t, "sql-ascii-u2028", "--until-caught-up")
	b.requireExitZero(t, 2*time.Minute)
	got := storedBytes(t, s, fmt.Sprintf("%q", s.table), "kafka_headers->0->>'value'", "SQL_ASCII")
	if len(got) != 2 || string(got[0]) != "x\u2028y" {
		t.Errorf("stored header values %v, want offset 0's x\u2028y (and offset 1's row)", got)
	}
}

// storedBytes reads the text expr of table's rows as bytes in encoding, by
// offset: the test's connections may have any client_encoding.
func storedBytes(t *testing.T, s *scenario, table, expr, encoding string) map[int64][]byte {
	t.Helper()
	rows, err := s.db.Query(t.Context(), fmt.Sprintf(`SELECT kafka_offset, convert_to(%s, $1) FROM %s ORDER BY 1`, expr, table), encoding)
	if err != nil {
		t.Fatal(err)
	}
	got := map[int64][]byte{}
	for rows.Next() {
		var o int64
		var b []byte
		if err := rows.Scan(&o, &b); err != nil {
			t.Fatal(err)
		}
		got[o] = b
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return got
}

func requireOneDeadLetter(t *testing.T, s *scenario, topic string, offset int64, kind string) {
	t.Helper()
	var gotOffset int64
	var gotKind string
	if err := s.db.QueryRow(t.Context(), `SELECT kafka_offset, error_kind FROM kafka2pg.dead_letters WHERE topic = $1`, topic).Scan(&gotOffset, &gotKind); err != nil ||
		gotOffset != offset || gotKind != kind {
		t.Errorf("%s: dead letter at offset %d of kind %q (%v), want one at %d of kind %s", topic, gotOffset, gotKind, err, offset, kind)
	}
}

// On a database whose encoding lacks a character of the consumer group's
// name, run stops at start, naming the group and the fix: kafka2pg.offsets
// keys the offsets by it, and every claim would fail and be retried.
func TestAGroupNameTheDatabaseCannotHoldStopsTheRun(t *testing.T) {
	parallel(t)
	s := newScenarioOn(t, 1, pgtest.URLWithEncoding(t, "LATIN1"))
	s.group += "-组"
	s.produce(t, 10)
	b := s.start(t, "latin1-group", "--until-caught-up")
	if !b.wait(time.Minute) {
		b.kill(t)
		t.Fatal("still running after a minute, want it stopped at start")
	}
	if b.state.ExitCode() == 0 || !b.logged(`--kafka-group: \"`+s.group+`\": the database's encoding, LATIN1, lacks a character of it`) {
		t.Errorf("%s, want a failure naming --kafka-group", b.status())
	}
	// check says so too, and goes on with its other checks.
	code, out := cli(t, append([]string{"check"}, s.args()[1:]...)...)
	if code != 1 || !strings.Contains(out, `FAIL  postgres: --kafka-group: "`+s.group+`": the database's encoding, LATIN1, lacks a character of it`) ||
		!strings.Contains(out, "kafka2pg schema:") {
		t.Errorf("kafka2pg check: exit %d, want 1 with the group's FAIL and the checks after it:\n%s", code, out)
	}
	var n int64
	if err := s.db.QueryRow(t.Context(), `SELECT count(*) FROM kafka2pg.offsets`).Scan(&n); err != nil || n != 0 {
		t.Errorf("kafka2pg.offsets: %d rows (%v), want none", n, err)
	}
}

// A table name the database's encoding lacks a character of stops run at
// start naming the table, its topic, the encoding and the fix, where
// Postgres' 22P05 from CREATE TABLE was all it said before; check says so
// too, and nothing is created.
func TestATableNameTheDatabaseCannotHoldStopsTheRun(t *testing.T) {
	parallel(t)
	s := newScenarioOn(t, 1, pgtest.URLWithEncoding(t, "LATIN1"))
	table := s.table + "_订单"
	s.produce(t, 10)
	b := s.start(t, "latin1-table", "--until-caught-up", "--pg-table", table)
	if !b.wait(time.Minute) {
		b.kill(t)
		t.Fatal("still running after a minute, want it stopped at start")
	}
	const want = "lacks a character of its name: name the table with characters LATIN1 has"
	if b.state.ExitCode() == 0 || !b.logged(want) || !b.logged(`for topic \"`+s.topic+`\"`) {
		t.Errorf("%s, want a failure naming the table and its topic", b.status())
	}
	code, out := cli(t, append(append([]string{"check"}, s.args()[1:]...), "--pg-table", table)...)
	if code != 1 || !strings.Contains(out, "FAIL  postgres: table ") || !strings.Contains(out, want) {
		t.Errorf("kafka2pg check: exit %d, want 1 with the table's FAIL:\n%s", code, out)
	}
	var n int64
	if err := s.db.QueryRow(t.Context(), `SELECT count(*) FROM pg_class WHERE relname LIKE $1`, s.table+"%").Scan(&n); err != nil || n != 0 {
		t.Errorf("tables named %s...: %d (%v), want none", s.table, n, err)
	}
}
