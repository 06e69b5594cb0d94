package integration_test

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafka2pg/kafka2pg/decode"
)

// poisonKind is one way a record can be impossible to write, and the error
// kind kafka2pg must file it under in kafka2pg.dead_letters.
type poisonKind struct {
	kind  string
	value func(i int) []byte
	noKey bool
	key   string // a fixed key (so a fixed partition); default: one per record
}

// poisonKinds covers what the decoder refuses, what the size limit refuses,
// and what Postgres refuses row by row through the constraints that
// preparePoisonTable adds to the zero-config table.
var poisonKinds = []poisonKind{
	{kind: decode.KindInvalidJSON, value: func(i int) []byte { return fmt.Appendf(nil, `{"poison":%d,`, i) }},
	{kind: decode.KindInvalidUTF8, value: func(i int) []byte { return fmt.Appendf(nil, "{\"s\":\"\xff\xfe%d\"}", i) }},
	{kind: decode.KindUnsupported, value: func(i int) []byte { return fmt.Appendf(nil, `{"s":"nul\u0000%d"}`, i) }},
	{kind: "too_large", value: func(i int) []byte { return fmt.Appendf(nil, `{"pad":"%s","i":%d}`, strings.Repeat("x", 5000), i) }},
	{kind: "numeric_value_out_of_range", value: func(i int) []byte { return fmt.Appendf(nil, `{"n":1e1000000,"i":%d}`, i) }},
	{kind: "check_violation", value: func(i int) []byte { return fmt.Appendf(nil, `{"forbidden":true,"i":%d}`, i) }},
	{kind: "not_null_violation", value: func(i int) []byte { return fmt.Appendf(nil, `{"i":%d}`, i) }, noKey: true},
	{kind: "foreign_key_violation", value: func(i int) []byte { return fmt.Appendf(nil, `{"ref":"missing-%d"}`, i) }},
	{kind: "invalid_text_representation", value: func(i int) []byte { return fmt.Appendf(nil, `{"qty":"many-%d"}`, i) }},
	{kind: "string_data_right_truncation", value: func(i int) []byte { return fmt.Appendf(nil, `{"code":"far-too-long-%d"}`, i) }},
	// Same key as the good original: same partition, later offsets, so the
	// original is always the one that lands.
	{kind: "unique_violation", value: func(i int) []byte { return []byte(`{"uniq":"taken"}`) }, key: uniqueKey},
}

const uniqueKey = "uniq-taken"

// preparePoisonTable creates the scenario's table as the bridge would, plus
// constraints that refuse some rows, so that Postgres errors of several
// SQLSTATEs happen in the middle of COPY. A record with "uniq":"taken" is
// produced once as a good record first: every later one is a duplicate.
func (s *scenario) preparePoisonTable(t testing.TB) {
	t.Helper()
	ddl := []string{
		decode.RawTable("public", s.table, decode.ValueJSON).CreateSQL(),
		`CREATE TABLE refs (id text PRIMARY KEY)`,
		`INSERT INTO refs VALUES ('ok')`,
		fmt.Sprintf(`ALTER TABLE %s
			ALTER COLUMN kafka_key SET NOT NULL,
			ADD CHECK (NOT (value ? 'forbidden')),
			ADD CHECK ((value->>'qty') IS NULL OR (value->>'qty')::int >= 0),
			ADD COLUMN ref text GENERATED ALWAYS AS (value->>'ref') STORED REFERENCES refs (id),
			ADD COLUMN code varchar(8) GENERATED ALWAYS AS (value->>'code') STORED`, tableName(s.table)),
		fmt.Sprintf(`CREATE UNIQUE INDEX ON %s ((value->>'uniq'))`, tableName(s.table)),
	}
	for _, q := range ddl {
		if _, err := s.db.Exec(t.Context(), q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}

// producePoisoned produces good records with perKind records of every poison
// kind scattered among them, and returns where each poison record landed.
func (s *scenario) producePoisoned(t testing.TB, good, perKind int) map[position]string {
	t.Helper()
	type item struct {
		rec  *kgo.Record
		id   int64
		kind string
	}
	var items []item
	first := s.ledger.size() == 0
	rs, ids := s.ledger.newRecords(s.topic, good+1)
	if first {
		// The good original of the unique key, produced before any duplicate.
		rs[0].Key, rs[0].Value = []byte(uniqueKey), []byte(`{"uniq":"taken"}`)
	}
	for i, r := range rs {
		items = append(items, item{rec: r, id: ids[i]})
	}
	for _, k := range poisonKinds {
		for i := range perKind {
			r := &kgo.Record{Topic: s.topic, Key: fmt.Appendf(nil, "poison-%s-%d", k.kind, i), Value: k.value(i)}
			if k.key != "" {
				r.Key = []byte(k.key)
			}
			if k.noKey {
				r.Key = nil
				r.Partition = int32(i) % s.partitions
			}
			items = append(items, item{rec: r, id: -1, kind: k.kind})
		}
	}
	// Keep the good original first; shuffle the rest so poison is spread
	// through every batch and partition.
	rest := items[1:]
	rand.Shuffle(len(rest), func(i, j int) { rest[i], rest[j] = rest[j], rest[i] })
	poison := map[position]string{}
	const chunk = 5000
	for from := 0; from < len(items); from += chunk {
		part := items[from:min(from+chunk, len(items))]
		recs := make([]*kgo.Record, len(part))
		for i, it := range part {
			recs[i] = it.rec
		}
		s.kafka.Produce(t, recs...)
		var goodRecs []*kgo.Record
		var goodIDs []int64
		for _, it := range part {
			if it.kind == "" {
				goodRecs, goodIDs = append(goodRecs, it.rec), append(goodIDs, it.id)
			} else {
				poison[position{it.rec.Partition, it.rec.Offset}] = it.kind
			}
		}
		if err := s.ledger.record(goodRecs, goodIDs); err != nil {
			t.Fatal(err)
		}
	}
	return poison
}

// assertPoisonFiled checks that the table holds exactly the good records,
// once each, and kafka2pg.dead_letters exactly the poison records, once
// each, under the right kind.
func (s *scenario) assertPoisonFiled(t testing.TB, poison map[position]string) {
	t.Helper()
	ctx := t.Context()
	rows, err := s.db.Query(ctx, fmt.Sprintf(`SELECT kafka_partition, kafka_offset, (value->>'id')::bigint FROM %s`, tableName(s.table)))
	if err != nil {
		t.Fatal(err)
	}
	inTable := map[position]int{}
	var p position
	var id *int64
	if _, err := pgx.ForEachRow(rows, []any{&p.partition, &p.offset, &id}, func() error { inTable[p]++; return nil }); err != nil {
		t.Fatal(err)
	}
	entries := s.ledger.entries()
	missing, dup, stray := 0, 0, 0
	for pos := range entries {
		switch n := inTable[pos]; {
		case n == 0:
			missing++
		case n > 1:
			dup++
		}
	}
	for pos := range inTable {
		if _, ok := entries[pos]; !ok {
			stray++
			if kind, isPoison := poison[pos]; isPoison {
				t.Errorf("poison record (%s) at partition %d offset %d landed in the table", kind, pos.partition, pos.offset)
			}
		}
	}
	if missing+dup+stray > 0 {
		t.Errorf("table %s: %d good records missing, %d duplicated, %d rows that are not good records (of %d good)",
			s.table, missing, dup, stray, len(entries))
	}

	rows, err = s.db.Query(ctx, `SELECT partition, kafka_offset, error_kind FROM kafka2pg.dead_letters WHERE consumer_group = $1 AND topic = $2`, s.group, s.topic)
	if err != nil {
		t.Fatal(err)
	}
	filed := map[position][]string{}
	var kind string
	if _, err := pgx.ForEachRow(rows, []any{&p.partition, &p.offset, &kind}, func() error { filed[p] = append(filed[p], kind); return nil }); err != nil {
		t.Fatal(err)
	}
	wrong := 0
	for pos, want := range poison {
		got := filed[pos]
		if len(got) != 1 || got[0] != want {
			wrong++
			if wrong <= 10 {
				t.Errorf("poison at partition %d offset %d: dead letters %v, want exactly one %s", pos.partition, pos.offset, got, want)
			}
		}
	}
	for pos, kinds := range filed {
		if _, ok := poison[pos]; !ok {
			t.Errorf("a good record at partition %d offset %d was dead-lettered as %v", pos.partition, pos.offset, kinds)
		}
	}
	perKind := map[string]int{}
	for _, k := range poison {
		perKind[k]++
	}
	t.Logf("table: %d good rows; dead letters: %d (%d kinds: %v), %d wrong", len(inTable), len(filed), len(perKind), perKind, wrong)
}

var poisonFlags = []string{"--max-record-bytes", "4096"}

func TestPoisonRecordsAreDeadLetteredOnceAndGoodOnesLandOnce(t *testing.T) {
	parallel(t)
	s := newScenario(t, 4)
	s.preparePoisonTable(t)
	poison := s.producePoisoned(t, 100_000, 12)
	start := time.Now()
	s.runUntilCaughtUpCounting(t, "single", 3*time.Minute, append(poisonFlags, fastGroupFlags...)...)
	t.Logf("one run, never restarted, took %v for %d good and %d poison records of %d kinds",
		time.Since(start).Round(time.Millisecond), s.ledger.size(), len(poison), len(poisonKinds))
	s.assertPoisonFiled(t, poison)
	assertDurableOffsets(t, s.db, s.group, s.topic, s.kafka.EndOffsets(t, s.topic))
}

func TestPoisonUnderACrashLoopIsStillFiledOnce(t *testing.T) {
	parallel(t)
	s := newScenario(t, 4)
	s.preparePoisonTable(t)
	flags := append(append([]string{"--batch-max-rows", "200", "--batch-max-wait", "20ms"}, poisonFlags...), fastGroupFlags...)
	poison := map[position]string{}
	for i := range 6 {
		// Every round brings a fresh backlog, so each instance dies mid-stream.
		maps.Copy(poison, s.producePoisoned(t, 8_000, 2))
		before := totalDurable(s.durableOffsets(t))
		b := s.start(t, fmt.Sprintf("poison-crash-%d", i), flags...)
		pollUntil(t, 45*time.Second, "bridge "+b.name+" to commit a batch", func() (bool, string) {
			requireRunning(t, b)
			now := totalDurable(s.durableOffsets(t))
			return b.joined() && now > before, fmt.Sprintf("sum of next_offset %d; joined %v", now, b.joined())
		})
		time.Sleep(randomDuration(10*time.Millisecond, 150*time.Millisecond)) // the chaos schedule
		if !b.kill(t) {
			t.Fatalf("bridge %s ended on its own (%s) before it could be killed", b.name, b.status())
		}
		t.Logf("killed %s: sum of next_offset %d -> %d", b.name, before, totalDurable(s.durableOffsets(t)))
	}
	s.runUntilCaughtUpCounting(t, "final", 3*time.Minute, flags...)
	s.assertPoisonFiled(t, poison)
	assertDurableOffsets(t, s.db, s.group, s.topic, s.kafka.EndOffsets(t, s.topic))
}
