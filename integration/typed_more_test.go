package integration_test

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kgo"
)

// More end-to-end tests of typed sinks from a YAML --config (issue #4): an
// upsert table under a crash loop checked against a fold of the stream, many
// topics into typed and raw tables at once, and COPY into a declaratively
// partitioned table.

// writeSinksConfig writes a --config file holding only the sinks (the rest
// of the configuration comes from flags) and returns its path.
func writeSinksConfig(t testing.TB, sinks string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kafka2pg.yaml")
	if err := os.WriteFile(path, []byte("sinks:\n"+sinks), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// configArgs returns the `kafka2pg run` command line for a bridge that
// takes its sinks from the config file at path, plus extra.
func (s *scenario) configArgs(path string, extra ...string) []string {
	return append([]string{
		"run",
		"--config", path,
		"--kafka-brokers", s.kafka.Brokers(),
		"--kafka-group", s.group,
		"--pg-url", s.pgURL,
		"--kafka-fetch-max-wait", "250ms",
		"--metrics-addr=",
		"--log-level", cmp.Or(os.Getenv(logLevelEnv), "info"),
	}, extra...)
}

// accountOp is one acknowledged record of the account stream: an upsert of
// the key's row or, when tombstone, the deletion of the key.
type accountOp struct {
	id        int
	tombstone bool
	balance   string // numeric(12,2) as Postgres prints it
	name      string
	version   int64
	at        position
}

// accountProducer writes a random stream of upserts and tombstones over a
// fixed set of keys, in small synchronous batches, and keeps every record
// Kafka acknowledged with its partition and offset.
type accountProducer struct {
	*producer
	ops []accountOp // owned by the goroutine until done is closed
}

// startAccountProducer produces batches of batch records over keys ids,
// pausing between batches, until limit records or stop. The goroutine is
// stopped and joined when the test ends at the latest.
func (s *scenario) startAccountProducer(t testing.TB, keys, batch int, pause time.Duration, limit int) *accountProducer {
	t.Helper()
	return s.startKeyedProducer(t, keys, batch, pause, limit, func(op *accountOp) []byte {
		cents := rand.N(10_000_000)
		op.balance = fmt.Sprintf("%d.%02d", cents/100, cents%100)
		op.name = fmt.Sprintf("n%d-é'v%d", op.id, op.version)
		return fmt.Appendf(nil, `{"balance":%s,"name":"%s","version":%d}`, op.balance, op.name, op.version)
	})
}

// startKeyedProducer is startAccountProducer for any values: a record of
// key {"id": op.id} is a tombstone (15%) or has the value value makes of
// op, which it may complete; op.version counts the records from 1.
func (s *scenario) startKeyedProducer(t testing.TB, keys, batch int, pause time.Duration, limit int, value func(op *accountOp) []byte) *accountProducer {
	t.Helper()
	p := &accountProducer{}
	var version int64
	p.producer = startProducing(t, batch, pause, limit, func(ctx context.Context, n int) error {
		rs := make([]*kgo.Record, n)
		ops := make([]accountOp, n)
		for i := range rs {
			version++
			op := accountOp{id: rand.N(keys), version: version, tombstone: rand.N(100) < 15}
			rs[i] = &kgo.Record{Topic: s.topic, Key: fmt.Appendf(nil, `{"id":%d}`, op.id)}
			if !op.tombstone {
				rs[i].Value = value(&op)
			}
			ops[i] = op
		}
		if err := s.kafka.TryProduce(ctx, rs...); err != nil {
			return err
		}
		for i, r := range rs {
			ops[i].at = position{r.Partition, r.Offset}
		}
		p.ops = append(p.ops, ops...)
		return nil
	})
	return p
}

// stopAndCheck stops the producer after its current batch, waits for it,
// fails the test if producing failed, and returns the acknowledged records.
func (p *accountProducer) stopAndCheck(t testing.TB) []accountOp {
	t.Helper()
	p.producer.stopAndCheck(t)
	return p.ops
}

// finished reports whether the producer has ended (limit reached or failed).
func (p *accountProducer) finished() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// crashLoopFold starts kills bridges one after the other, named
// name-crash-N, each run with the config file and flags, while prod
// produces over keys ids, and SIGKILLs each: every third while it claims
// or starts fetching, the others 10-300ms after they committed a batch
// (or, once prod has finished and they caught up, on an idle bridge).
// Then it stops prod, lets a last bridge catch up, and folds what prod
// acknowledged (foldAccounts) up to the topic's end offsets, which the
// stream must have deleted keys before.
func (s *scenario) crashLoopFold(t testing.TB, name string, kills, keys int, prod *accountProducer, config string, flags []string) (
	ops []accountOp, want map[int]accountOp, tombstones int, ends map[int32]int64) {
	t.Helper()
	loopStart := time.Now()
	args := s.configArgs(config, flags...)
	for i := range kills {
		before := totalDurable(s.durableOffsets(t))
		b := startBridge(t, fmt.Sprintf("%s-crash-%d", name, i), args...)
		if i%3 == 2 {
			// Die while claiming or starting to fetch. On kfake only after
			// joining: see TestCrashLoopKeepsExactlyOnce.
			if s.kafka.Fake() {
				if !b.waitLog("partitions assigned", 45*time.Second) {
					t.Fatalf("bridge %s never joined the group (%s)", b.name, b.status())
				}
				time.Sleep(randomDuration(0, 300*time.Millisecond)) // the chaos schedule
			} else {
				time.Sleep(randomDuration(100*time.Millisecond, 900*time.Millisecond))
			}
		} else {
			pollUntil(t, 45*time.Second, "bridge "+b.name+" to commit a batch", func() (bool, string) {
				requireRunning(t, b)
				now := totalDurable(s.durableOffsets(t))
				// A finished producer leaves nothing to catch up on: then
				// the kill lands on an idle bridge.
				caughtUp := prod.finished() && now == prod.count.Load()
				return b.joined() && (now > before || caughtUp), fmt.Sprintf("sum of next_offset %d, %d when it started; joined %v", now, before, b.joined())
			})
			time.Sleep(randomDuration(10*time.Millisecond, 300*time.Millisecond)) // the chaos schedule
		}
		requireRunning(t, b)
		if !b.kill(t) {
			t.Fatalf("bridge %s: ended on its own (%s) before it could be killed", b.name, b.status())
		}
		t.Logf("killed %s %v after start: sum of next_offset %d -> %d, %d produced so far",
			b.name, time.Since(b.started).Round(time.Millisecond), before, totalDurable(s.durableOffsets(t)), prod.count.Load())
	}
	ops = prod.stopAndCheck(t)
	t.Logf("%d kills in %v while %d records were produced", kills, time.Since(loopStart).Round(time.Millisecond), len(ops))
	final := startBridge(t, name+"-final", s.configArgs(config, append([]string{"--until-caught-up"}, flags...)...)...)
	final.requireExitZero(t, 2*time.Minute)

	ends = s.kafka.EndOffsets(t, s.topic)
	s.requireAllPartitionsHaveData(t, ends)
	want, tombstones = foldAccounts(t, ops, ends)
	if tombstones == 0 || len(want) == keys {
		t.Fatalf("test setup: %d tombstones, %d of %d keys live at the end: the stream must delete keys", tombstones, len(want), keys)
	}
	return ops, want, tombstones, ends
}

// foldAccounts computes the table an upsert sink must end with: the stream
// applied partition by partition in offset order, each key keeping its last
// upsert unless a later tombstone deleted it. It fails the test when the
// stream cannot be folded unambiguously: a key in two partitions, or
// offsets that do not cover [0, ends[p]) exactly.
func foldAccounts(t testing.TB, ops []accountOp, ends map[int32]int64) (rows map[int]accountOp, tombstones int) {
	t.Helper()
	sorted := slices.SortedFunc(slices.Values(ops), func(a, b accountOp) int {
		return cmp.Or(cmp.Compare(a.at.partition, b.at.partition), cmp.Compare(a.at.offset, b.at.offset))
	})
	home := map[int]int32{}
	next := map[int32]int64{}
	rows = map[int]accountOp{}
	for _, op := range sorted {
		if p, ok := home[op.id]; ok && p != op.at.partition {
			t.Fatalf("test setup: key %d was produced to partitions %d and %d: the fold by partition is ambiguous", op.id, p, op.at.partition)
		}
		home[op.id] = op.at.partition
		if op.at.offset != next[op.at.partition] {
			t.Fatalf("test setup: partition %d: acknowledged offset %d, want %d (every record of the topic must come from this producer)",
				op.at.partition, op.at.offset, next[op.at.partition])
		}
		next[op.at.partition]++
		if op.tombstone {
			tombstones++
			delete(rows, op.id)
			continue
		}
		rows[op.id] = op
	}
	if !maps.Equal(next, ends) {
		t.Fatalf("test setup: acknowledged records end at %s, the topic at %s", formatOffsets(next), formatOffsets(ends))
	}
	return rows, tombstones
}

func TestUpsertAndDeleteUnderACrashLoopEqualTheFoldOfTheStream(t *testing.T) {
	parallel(t)
	const (
		partitions = 4
		keys       = 300
		kills      = 8
	)
	s := newScenario(t, partitions)
	config := writeSinksConfig(t, fmt.Sprintf(`  - topic: %s
    table: %s
    mode: upsert
    key: [id]
    delete_on_tombstone: true
    columns:
      - {name: id, from: key, path: id, type: bigint}
      - {name: balance, path: balance, type: "numeric(12,2)"}
      - {name: name, path: name, type: text}
      - {name: version, path: version, type: bigint}
`, s.topic, s.table))
	flags := append([]string{"--batch-max-rows", "200", "--batch-max-wait", "20ms"}, fastGroupFlags...)
	prod := s.startAccountProducer(t, keys, 25, 30*time.Millisecond, 60_000)

	ops, want, tombstones, ends := s.crashLoopFold(t, "upsert", kills, keys, prod, config, flags)
	assertAccountsEqualFold(t, s, want)
	assertDurableOffsets(t, s.db, s.group, s.topic, ends)
	t.Logf("%d records (%d tombstones) over %d keys fold to %d rows", len(ops), tombstones, keys, len(want))
}

// assertAccountsEqualFold compares the upsert table with the fold: every
// live key's row has the values of its last upsert, and no other key has a
// row.
func assertAccountsEqualFold(t testing.TB, s *scenario, want map[int]accountOp) {
	t.Helper()
	q := fmt.Sprintf(`SELECT id, balance::text, name, version FROM %s`, tableName(s.table))
	rows, err := s.db.Query(t.Context(), q)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	var (
		id            int
		balance, name string
		version       int64
		diffs         []string
	)
	seen := map[int]bool{}
	_, err = pgx.ForEachRow(rows, []any{&id, &balance, &name, &version}, func() error {
		seen[id] = true
		w, ok := want[id]
		switch {
		case !ok:
			diffs = append(diffs, fmt.Sprintf("key %d has a row (version %d) but its last record is a tombstone, or it was never produced", id, version))
		case balance != w.balance || name != w.name || version != w.version:
			diffs = append(diffs, fmt.Sprintf("key %d: row (%s, %q, version %d), want (%s, %q, version %d) from partition %d offset %d",
				id, balance, name, version, w.balance, w.name, w.version, w.at.partition, w.at.offset))
		}
		return nil
	})
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	for _, id := range slices.Sorted(maps.Keys(want)) {
		if !seen[id] {
			w := want[id]
			diffs = append(diffs, fmt.Sprintf("key %d: no row, want (%s, %q, version %d) from partition %d offset %d",
				id, w.balance, w.name, w.version, w.at.partition, w.at.offset))
		}
	}
	if len(diffs) > 0 {
		slices.Sort(diffs)
		t.Errorf("%s differs from the fold of the stream in %d keys (of %d rows, %d wanted); the first:\n  %s",
			q, len(diffs), len(seen), len(want), strings.Join(diffs[:min(len(diffs), 15)], "\n  "))
	}
}

// queryOne runs a query that returns one row and scans it into dest,
// failing the test with the query when it does not.
func queryOne(t testing.TB, s *scenario, q string, dest ...any) {
	t.Helper()
	if err := s.db.QueryRow(t.Context(), q).Scan(dest...); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}

func TestManyTopicsAtOnceIntoTypedAndRawTables(t *testing.T) {
	parallel(t)
	s := newScenario(t, 3)
	orders := s.topic
	clicks := s.kafka.CreateTopic(t, "kafka2pg-it-clicks", 2)
	accounts := s.kafka.CreateTopic(t, "kafka2pg-it-accounts", 2)
	inventory := s.kafka.CreateTopic(t, "kafka2pg-it-inventory", 1)
	rawJSON := s.kafka.CreateTopic(t, "kafka2pg-it-rawjson", 2)
	rawText := s.kafka.CreateTopic(t, "kafka2pg-it-rawtext", 1)
	rawBytes := s.kafka.CreateTopic(t, "kafka2pg-it-rawbytes", 2)
	topics := []string{orders, clicks, accounts, inventory, rawJSON, rawText, rawBytes}
	rawSchema := "raw_" + strings.TrimPrefix(s.table, "it_")
	config := writeSinksConfig(t, fmt.Sprintf(`  - topic: %[1]s
    table: orders_%[8]s
    columns:
      - {name: id, path: id, type: bigint, not_null: true}
      - {name: amount, path: amount, type: "numeric(12,2)"}
      - {name: status, path: status, type: text}
    metadata: {partition: kafka_partition, offset: kafka_offset}
  - topic: %[2]s
    table: clicks_%[8]s
    columns:
      - {name: user_name, from: key, path: user, type: text}
      - {name: url, path: page.url, type: text}
      - {name: at, path: at, type: timestamptz}
      - {name: tags, path: tags, type: "text[]"}
  - topic: %[3]s
    table: accounts_%[8]s
    mode: upsert
    key: [id]
    delete_on_tombstone: true
    columns:
      - {name: id, from: key, path: id, type: bigint}
      - {name: name, path: name, type: text}
      - {name: balance, path: balance, type: "numeric(12,2)"}
  - topic: %[4]s
    table: inventory_%[8]s
    mode: upsert
    key: [sku]
    columns:
      - {name: sku, path: sku, type: text, not_null: true}
      - {name: qty, path: qty, type: integer}
  - topic: %[5]s
    table: rawjson_%[8]s
  - topic: %[6]s
    table: rawtext_%[8]s
    format: text
  - topic: %[7]s
    schema: %[9]s
    table: rawbytes
    format: bytes
`, orders, clicks, accounts, inventory, rawJSON, rawText, rawBytes, s.table, rawSchema))

	// Records by topic, each topic's in the order they must be produced.
	byTopic := map[string][]*kgo.Record{}
	add := func(r *kgo.Record) { byTopic[r.Topic] = append(byTopic[r.Topic], r) }
	for i := range 600 {
		add(&kgo.Record{Topic: orders, Key: fmt.Appendf(nil, "o%d", i), Value: fmt.Appendf(nil, `{"id":%d,"amount":%d.25,"status":"s%d"}`, i, i, i%3)})
	}
	clickAt := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	for i := range 400 {
		add(&kgo.Record{Topic: clicks, Key: fmt.Appendf(nil, `{"user":"u%d"}`, i%10), Value: fmt.Appendf(nil,
			`{"page":{"url":"/p/%d"},"at":"%s","tags":["t%d","x"]}`, i, clickAt.Add(time.Duration(i)*time.Minute).Format(time.RFC3339), i)})
	}
	for i := range 200 {
		add(&kgo.Record{Topic: accounts, Key: fmt.Appendf(nil, `{"id":%d}`, i), Value: fmt.Appendf(nil, `{"name":"a%d","balance":%d.10}`, i, i)})
	}
	for i := range 50 {
		add(&kgo.Record{Topic: accounts, Key: fmt.Appendf(nil, `{"id":%d}`, i), Value: fmt.Appendf(nil, `{"name":"A%d","balance":%d.99}`, i, 1000+i)})
	}
	for i := 180; i < 200; i++ {
		add(&kgo.Record{Topic: accounts, Key: fmt.Appendf(nil, `{"id":%d}`, i)})
	}
	for round := range 3 {
		for i := range 50 {
			add(&kgo.Record{Topic: inventory, Value: fmt.Appendf(nil, `{"sku":"sku-%d","qty":%d}`, i, round*100+i)})
		}
	}
	for i := range 300 {
		add(&kgo.Record{Topic: rawJSON, Key: fmt.Appendf(nil, "j%d", i), Value: fmt.Appendf(nil, `{"n":%d,"nested":{"ok":true}}`, i)})
	}
	for i := range 200 {
		add(&kgo.Record{Topic: rawText, Value: fmt.Appendf(nil, "line %d: héllo", i)})
	}
	var bytesRecs []*kgo.Record
	for i := range 250 {
		r := &kgo.Record{Topic: rawBytes, Key: fmt.Appendf(nil, "b%d", i), Value: []byte{0xff, 0x00, byte(i), 0xfe}}
		bytesRecs = append(bytesRecs, r)
		add(r)
	}
	// Interleave the topics, keeping each topic's order (updates after
	// creates, tombstones last).
	total := 0
	for _, l := range byTopic {
		total += len(l)
	}
	var rs []*kgo.Record
	for i := 0; len(rs) < total; i++ {
		for _, topic := range topics {
			if i < len(byTopic[topic]) {
				rs = append(rs, byTopic[topic][i])
			}
		}
	}
	s.kafka.Produce(t, rs...)
	s.requireAllPartitionsHaveData(t, s.kafka.EndOffsets(t, orders))

	b := startBridge(t, "many-topics", s.configArgs(config, "--until-caught-up", "--batch-max-rows", "100")...)
	b.requireExitZero(t, 2*time.Minute)

	tbl := func(name string) string { return tableName(name + "_" + s.table) }
	checks := []struct {
		name  string
		query string
		want  string
	}{
		{"orders: every record once, amounts and statuses",
			fmt.Sprintf(`SELECT count(*), count(DISTINCT (kafka_partition, kafka_offset)), sum(amount)::text, count(*) FILTER (WHERE status = 's' || id %% 3), max(id) FROM %s`, tbl("orders")),
			"600 600 179850.00 600 599"},
		{"clicks: key, nested path, timestamps and arrays",
			fmt.Sprintf(`SELECT count(*), count(*) FILTER (WHERE user_name = 'u3'), max(url) FILTER (WHERE at = '2026-03-01 13:07:00+00'), count(*) FILTER (WHERE tags = ARRAY['t' || substr(url, 4), 'x']) FROM %s`, tbl("clicks")),
			"400 40 /p/67 400"},
		{"accounts: created, updated, deleted",
			fmt.Sprintf(`SELECT count(*), max(name || ' ' || balance::text) FILTER (WHERE id = 49), max(name || ' ' || balance::text) FILTER (WHERE id = 50), count(*) FILTER (WHERE id >= 180) FROM %s`, tbl("accounts")),
			"180 A49 1049.99 a50 50.10 0"},
		{"inventory: the last quantity of each sku",
			fmt.Sprintf(`SELECT count(*), sum(qty), max(qty) FILTER (WHERE sku = 'sku-7') FROM %s`, tbl("inventory")),
			"50 11225 207"},
		{"raw json: every record once, value as jsonb",
			fmt.Sprintf(`SELECT count(*), count(DISTINCT (kafka_partition, kafka_offset)), sum((value->>'n')::int), count(*) FILTER (WHERE value->'nested'->>'ok' = 'true' AND kafka_key = ('j' || (value->>'n'))::bytea) FROM %s`, tbl("rawjson")),
			"300 300 44850 300"},
		{"raw text: every line once, as text",
			fmt.Sprintf(`SELECT count(*), count(DISTINCT value), max(value) FILTER (WHERE value LIKE 'line 42:%%') FROM %s`, tbl("rawtext")),
			"200 200 line 42: héllo"},
		{"raw bytes in its own schema: every value once",
			fmt.Sprintf(`SELECT count(*), count(DISTINCT value), count(*) FILTER (WHERE length(value) = 4 AND get_byte(value, 0) = 255 AND get_byte(value, 1) = 0) FROM %s`, pgx.Identifier{rawSchema, "rawbytes"}.Sanitize()),
			"250 250 250"},
	}
	for _, c := range checks {
		rows, err := s.db.Query(t.Context(), c.query)
		if err != nil {
			t.Errorf("%s: %s: %v", c.name, c.query, err)
			continue
		}
		var got []string
		_, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (struct{}, error) {
			vals, err := r.Values()
			for _, v := range vals {
				got = append(got, fmt.Sprint(v))
			}
			return struct{}{}, err
		})
		if g := strings.Join(got, " "); err != nil || g != c.want {
			t.Errorf("%s: %s\n  = %q (%v), want %q", c.name, c.query, g, err, c.want)
		}
	}
	// A sample of the bytes, compared with what was produced where it landed.
	for _, r := range bytesRecs[:5] {
		var value []byte
		queryOne(t, s, fmt.Sprintf(`SELECT value FROM %s WHERE kafka_partition = %d AND kafka_offset = %d`,
			pgx.Identifier{rawSchema, "rawbytes"}.Sanitize(), r.Partition, r.Offset), &value)
		if !bytes.Equal(value, r.Value) {
			t.Errorf("raw bytes at partition %d offset %d = %x, want %x", r.Partition, r.Offset, value, r.Value)
		}
	}
	for _, topic := range topics {
		assertDurableOffsets(t, s.db, s.group, topic, s.kafka.EndOffsets(t, topic))
	}
}

func TestCopyIntoADeclarativelyPartitionedTable(t *testing.T) {
	parallel(t)
	s := newScenario(t, 3)
	months := []time.Time{
		time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC),
		time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC),
	}
	child := func(month time.Time) string { return fmt.Sprintf("%s_%s", s.table, month.Format("2006_01")) }
	defaultChild := s.table + "_default"
	ddl := []string{fmt.Sprintf(`CREATE TABLE %s (
    id bigint NOT NULL,
    created_at timestamptz NOT NULL,
    amount numeric(12,2),
    kafka_partition integer NOT NULL,
    kafka_offset bigint NOT NULL
) PARTITION BY RANGE (created_at)`, tableName(s.table))}
	for _, m := range months {
		ddl = append(ddl, fmt.Sprintf(`CREATE TABLE %s PARTITION OF %s FOR VALUES FROM ('%s') TO ('%s')`,
			tableName(child(m)), tableName(s.table), m.Format(time.RFC3339), m.AddDate(0, 1, 0).Format(time.RFC3339)))
	}
	ddl = append(ddl, fmt.Sprintf(`CREATE TABLE %s PARTITION OF %s DEFAULT`, tableName(defaultChild), tableName(s.table)))
	for _, q := range ddl {
		if _, err := s.db.Exec(t.Context(), q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	config := writeSinksConfig(t, fmt.Sprintf(`  - topic: %s
    table: %s
    create: false
    columns:
      - {name: id, path: id, type: bigint, not_null: true}
      - {name: created_at, path: created_at, type: timestamptz, not_null: true}
      - {name: amount, path: amount, type: "numeric(12,2)"}
    metadata: {partition: kafka_partition, offset: kafka_offset}
`, s.topic, s.table))

	// Spread over the three months, plus the edges of the ranges (an upper
	// bound is exclusive; an offset other than Z moves the instant) and a
	// few records after the last month, which belong to the default
	// partition.
	var created []string
	span := months[2].AddDate(0, 1, 0).Sub(months[0])
	for range 3000 {
		created = append(created, months[0].Add(rand.N(span)).Truncate(time.Microsecond).Format(time.RFC3339Nano))
	}
	created = append(created,
		"2026-01-31T23:59:59.999999Z", "2026-02-01T00:00:00Z", "2026-03-01T00:30:00+01:00",
		"2026-04-01T00:00:00Z", "2026-05-17T10:00:00+02:00", "2025-12-31T23:59:59Z")
	rs := make([]*kgo.Record, len(created))
	for i, c := range created {
		rs[i] = &kgo.Record{Topic: s.topic, Key: fmt.Appendf(nil, "k%d", i), Value: fmt.Appendf(nil, `{"id":%d,"created_at":"%s","amount":%d.50}`, i, c, i)}
	}
	s.kafka.Produce(t, rs...)
	s.requireAllPartitionsHaveData(t, s.kafka.EndOffsets(t, s.topic))
	want := map[position]string{} // where each record must land
	perChild := map[string]int{}
	for i, r := range rs {
		at, err := time.Parse(time.RFC3339Nano, created[i])
		if err != nil {
			t.Fatal(err)
		}
		name := defaultChild
		for _, m := range months {
			if !at.Before(m) && at.Before(m.AddDate(0, 1, 0)) {
				name = child(m)
			}
		}
		want[position{r.Partition, r.Offset}] = name
		perChild[name]++
	}

	b := startBridge(t, "partitioned", s.configArgs(config, "--until-caught-up", "--batch-max-rows", "200")...)
	b.requireExitZero(t, 2*time.Minute)

	q := fmt.Sprintf(`SELECT kafka_partition, kafka_offset, tableoid::regclass::text FROM %s`, tableName(s.table))
	rows, err := s.db.Query(t.Context(), q)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	var (
		p     position
		where string
	)
	got := map[position][]string{}
	gotPerChild := map[string]int{}
	if _, err := pgx.ForEachRow(rows, []any{&p.partition, &p.offset, &where}, func() error {
		got[p] = append(got[p], where)
		gotPerChild[where]++
		return nil
	}); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	var diffs []string
	for pos, w := range want {
		if g := got[pos]; len(g) != 1 || g[0] != w {
			diffs = append(diffs, fmt.Sprintf("partition %d offset %d (created_at %s): in %v, want once in %s",
				pos.partition, pos.offset, created[slices.IndexFunc(rs, func(r *kgo.Record) bool { return r.Partition == pos.partition && r.Offset == pos.offset })], g, w))
		}
	}
	for pos, g := range got {
		if _, ok := want[pos]; !ok {
			diffs = append(diffs, fmt.Sprintf("partition %d offset %d: a row in %v that was never produced", pos.partition, pos.offset, g))
		}
	}
	if len(diffs) > 0 {
		slices.Sort(diffs)
		t.Errorf("%s: %d records not exactly once in their partition; the first:\n  %s", q, len(diffs), strings.Join(diffs[:min(len(diffs), 15)], "\n  "))
	}
	if !maps.Equal(gotPerChild, perChild) {
		t.Errorf("rows per partition %v, want %v", gotPerChild, perChild)
	}
	if perChild[defaultChild] != 3 || len(perChild) != 4 {
		t.Fatalf("test setup: rows per partition %v: every partition, the default one with 3, must get rows", perChild)
	}
	assertDurableOffsets(t, s.db, s.group, s.topic, s.kafka.EndOffsets(t, s.topic))
	t.Logf("%d records into %v", len(rs), gotPerChild)
}
