package integration_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafka2pg/kafka2pg/decode"
	"github.com/kafka2pg/kafka2pg/schema"
)

// TestReplayWritesEachDeadLetterIntoTheTableOfItsOwnSink runs two typed
// sinks (an append table with partition and offset columns, an upsert
// table) and a zero-config sink, each with a CHECK that refuses a tenth of
// its records. The topic of the first also has a zero-config table, as
// after the quick start: a replay with zero-config flags must keep the
// typed sink's dead letters (the old replay wrote them into that table).
// After the CHECKs are dropped, a dry run changes nothing, and a replay
// with the run's --config writes every dead letter into its own table,
// none elsewhere.
func TestReplayWritesEachDeadLetterIntoTheTableOfItsOwnSink(t *testing.T) {
	parallel(t)
	s := newScenario(t, 3)
	const n, bad = 600, 60 // per topic; bad: the ids that are multiples of 10
	appendTopic := s.kafka.CreateTopic(t, "kafka2pg-it-append", 3)
	upsertTopic := s.kafka.CreateTopic(t, "kafka2pg-it-upsert", 3)
	appendTable, upsertTable := s.table+"_append", s.table+"_upsert"
	quickStart := schema.TableNameForTopic(appendTopic) // the zero-config table of the append topic
	for _, q := range []string{
		`CREATE TABLE ` + tableName(appendTable) + ` (id bigint NOT NULL, qty integer, kafka_partition integer NOT NULL, kafka_offset bigint NOT NULL, CHECK (id % 10 <> 0))`,
		`CREATE TABLE ` + tableName(upsertTable) + ` (id bigint PRIMARY KEY, qty integer, CHECK (id % 10 <> 0))`,
		decode.RawTable("public", s.table, decode.ValueJSON).CreateSQL(),
		`ALTER TABLE ` + tableName(s.table) + ` ADD CONSTRAINT no_tens CHECK ((value->>'id')::bigint % 10 <> 0)`,
		decode.RawTable("public", quickStart, decode.ValueJSON).CreateSQL(),
	} {
		if _, err := s.db.Exec(t.Context(), q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	for _, topic := range []string{appendTopic, upsertTopic} {
		produceIDs(t, s, topic, n)
	}
	s.produce(t, n) // the zero-config topic: the ledger's records, ids 1 to n
	config := writeConfig(t, fmt.Sprintf(`kafka-brokers: [%s]
kafka-group: %s
metrics-addr: ""
sinks:
  - topic: %s
    table: %s
    columns:
      - {name: id, path: id, type: bigint, not_null: true}
      - {name: qty, path: qty, type: integer}
    metadata: {partition: kafka_partition, offset: kafka_offset}
  - topic: %s
    table: %s
    mode: upsert
    key: [id]
    columns:
      - {name: id, path: id, type: bigint, not_null: true}
      - {name: qty, path: qty, type: integer}
  - topic: %s
    table: %s
`, s.kafka.Brokers(), s.group, appendTopic, appendTable, upsertTopic, upsertTable, s.topic, s.table))
	b := startBridge(t, "three-sinks", "run", "--config", config, "--pg-url", s.pgURL, "--until-caught-up", "--kafka-fetch-max-wait", "250ms")
	b.requireExit(t, 3, 2*time.Minute)

	tables := []string{appendTable, upsertTable, s.table}
	counts := func() string {
		t.Helper()
		var parts []string
		for _, tbl := range append(tables, quickStart) {
			var rows, letters int
			err := s.db.QueryRow(t.Context(), `SELECT (SELECT count(*) FROM `+tableName(tbl)+`),
				(SELECT count(*) FROM kafka2pg.dead_letters WHERE target_table = $1)`, tableName(tbl)).Scan(&rows, &letters)
			if err != nil {
				t.Fatal(err)
			}
			parts = append(parts, fmt.Sprintf("%s: %d rows, %d letters", tbl, rows, letters))
		}
		var all int
		if err := s.db.QueryRow(t.Context(), `SELECT count(*) FROM kafka2pg.dead_letters`).Scan(&all); err != nil {
			t.Fatal(err)
		}
		return strings.Join(parts, "; ") + fmt.Sprintf("; %d letters in all", all)
	}
	want := func(good int, letters int) string {
		var parts []string
		for _, tbl := range tables {
			parts = append(parts, fmt.Sprintf("%s: %d rows, %d letters", tbl, good, letters))
		}
		return strings.Join(parts, "; ") + fmt.Sprintf("; %s: 0 rows, 0 letters; %d letters in all", quickStart, 3*letters)
	}
	afterRun := want(n-bad, bad)
	if got := counts(); got != afterRun {
		t.Fatalf("after the run:\n got %s\nwant %s", got, afterRun)
	}

	// The old way, zero-config flags for the append topic: its letters
	// were written for the typed table, which no zero-config sink writes.
	code, out := cli(t, "dead-letters", "replay", "--pg-url", s.pgURL, "--kafka-group", s.group, "--topic", appendTopic)
	t.Logf("replay with zero-config flags: exit %d\n%s", code, out)
	if code != 1 || !strings.Contains(out, fmt.Sprintf(`kept %d dead letter(s) of %s`, bad, tableName(appendTable))) {
		t.Errorf("replay with zero-config flags: exit %d, want 1 naming the %d letters of %s it kept", code, bad, appendTable)
	}
	if got := counts(); got != afterRun {
		t.Fatalf("a replay that had no sink for the letters changed something:\n got %s\nwant %s", got, afterRun)
	}

	// The cause fixed, a dry run changes nothing and says what goes where.
	for _, tbl := range tables {
		if _, err := s.db.Exec(t.Context(), fmt.Sprintf(`ALTER TABLE %s DROP CONSTRAINT %s`, tableName(tbl), checkName(t, s, tbl))); err != nil {
			t.Fatal(err)
		}
	}
	code, out = cli(t, "dead-letters", "replay", "--config", config, "--pg-url", s.pgURL, "--dry-run")
	t.Logf("replay --dry-run:\n%s", out)
	if code != 0 || !strings.Contains(out, fmt.Sprintf("dry run: %d would be replayed", 3*bad)) {
		t.Errorf("replay --dry-run: exit %d, want 0 and %d to replay", code, 3*bad)
	}
	for _, tbl := range tables {
		if !strings.Contains(out, tableName(tbl)) {
			t.Errorf("the dry run does not name %s", tbl)
		}
	}
	if got := counts(); got != afterRun {
		t.Fatalf("the dry run changed something:\n got %s\nwant %s", got, afterRun)
	}

	code, out = cli(t, "dead-letters", "replay", "--config", config, "--pg-url", s.pgURL, "--batch-size", "25")
	t.Logf("replay --config:\n%s", out)
	if code != 0 || !strings.Contains(out, fmt.Sprintf("replayed %d dead letter(s) into their tables; 0 still refused", 3*bad)) {
		t.Errorf("replay --config: exit %d, want 0 and all %d replayed", code, 3*bad)
	}
	if got, wantAll := counts(), want(n, 0); got != wantAll {
		t.Errorf("after the replay:\n got %s\nwant %s", got, wantAll)
	}
	// Each table holds each record once: ids 0..n-1 (the append table at
	// the positions Kafka gave them), and the zero-config table the
	// ledger's records at their offsets.
	for _, tbl := range []string{appendTable, upsertTable} {
		var distinct, lo, hi int
		if err := s.db.QueryRow(t.Context(), `SELECT count(DISTINCT id), min(id), max(id) FROM `+tableName(tbl)).Scan(&distinct, &lo, &hi); err != nil {
			t.Fatal(err)
		}
		if distinct != n || lo != 0 || hi != n-1 {
			t.Errorf("%s: %d distinct ids from %d to %d, want %d from 0 to %d", tbl, distinct, lo, hi, n, n-1)
		}
	}
	var positions, ends int64
	if err := s.db.QueryRow(t.Context(), `SELECT count(DISTINCT (kafka_partition, kafka_offset)) FROM `+tableName(appendTable)).Scan(&positions); err != nil {
		t.Fatal(err)
	}
	for _, e := range s.kafka.EndOffsets(t, appendTopic) {
		ends += e
	}
	if positions != ends {
		t.Errorf("%s: %d distinct (partition, offset), want the topic's %d", appendTable, positions, ends)
	}
	zeroEnds := s.kafka.EndOffsets(t, s.topic)
	assertExactlyOnce(t, s.db, s.table, s.topic, zeroEnds)
	assertMatchesLedger(t, s.db, s.table, s.topic, s.ledger, zeroEnds)
}

// produceIDs produces n records to topic, keys k0... and values
// {"id":i,"qty":i%7}.
func produceIDs(t testing.TB, s *scenario, topic string, n int) {
	t.Helper()
	var rs []*kgo.Record
	for i := range n {
		rs = append(rs, &kgo.Record{Topic: topic, Key: fmt.Appendf(nil, "k%d", i), Value: fmt.Appendf(nil, `{"id":%d,"qty":%d}`, i, i%7)})
	}
	s.kafka.Produce(t, rs...)
}

// checkName is the name of the one CHECK constraint of table.
func checkName(t testing.TB, s *scenario, table string) string {
	t.Helper()
	var name string
	if err := s.db.QueryRow(t.Context(), `SELECT conname FROM pg_constraint WHERE conrelid = to_regclass($1) AND contype = 'c'`,
		tableName(table)).Scan(&name); err != nil {
		t.Fatalf("the CHECK of %s: %v", table, err)
	}
	return pgx.Identifier{name}.Sanitize()
}

// TestAReplayKilledMidwayThenRunAgainReplaysEachDeadLetterOnce files every
// record as a dead letter (--max-record-bytes under their size), slows each
// COPY of the replay down with a trigger, kills the replay with SIGKILL
// after some batches committed (most likely inside the next one), and runs
// it again: the table then holds every record exactly once and no dead
// letter is left.
func TestAReplayKilledMidwayThenRunAgainReplaysEachDeadLetterOnce(t *testing.T) {
	parallel(t)
	s := newScenario(t, 3)
	const n = 3000
	s.produce(t, n)
	b := s.start(t, "too-small", "--until-caught-up", "--max-record-bytes", "100") // every value is about 200 bytes
	b.requireExit(t, 3, 2*time.Minute)
	if got := s.deadLetterCount(t); got != n {
		t.Fatalf("%d dead letters after the run, want %d", got, n)
	}
	for _, q := range []string{
		`CREATE FUNCTION public.slow_copy() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN PERFORM pg_sleep(0.1); RETURN NULL; END $$`,
		`CREATE TRIGGER slow_copy BEFORE INSERT ON ` + tableName(s.table) + ` FOR EACH STATEMENT EXECUTE FUNCTION public.slow_copy()`,
	} {
		if _, err := s.db.Exec(t.Context(), q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	replay := append(s.args()[1:], "--batch-size", "50") // run's flags, the default --max-record-bytes: the cause is fixed
	killed := startBridge(t, "replay-killed", append([]string{"dead-letters", "replay"}, replay...)...)
	pollUntil(t, time.Minute, "some batches of the replay to commit, and the next one to be open", func() (bool, string) {
		requireRunning(t, killed)
		left := s.deadLetterCount(t)
		var open int
		if err := s.db.QueryRow(t.Context(), `SELECT count(*) FROM pg_stat_activity WHERE application_name = 'kafka2pg-dead-letters'
			AND datname = current_database() AND xact_start IS NOT NULL`).Scan(&open); err != nil {
			return false, err.Error()
		}
		return left <= n-200 && open > 0, fmt.Sprintf("%d dead letters left, %d replay transactions open", left, open)
	})
	killed.kill(t)
	var rows, left int64
	if err := s.db.QueryRow(t.Context(), `SELECT count(*) FROM `+tableName(s.table)).Scan(&rows); err != nil {
		t.Fatal(err)
	}
	left = s.deadLetterCount(t)
	t.Logf("replay killed: %d rows in the table, %d dead letters left", rows, left)
	if rows+left != n || left == 0 {
		t.Fatalf("after the kill: %d rows and %d dead letters, want %d together and some letters left", rows, left, n)
	}
	// The killed replay's transaction holds its letters until Postgres
	// sees the connection gone; a replay now would skip them (FOR UPDATE
	// SKIP LOCKED) and leave them for the next.
	pollUntil(t, 30*time.Second, "the killed replay's session to end", func() (bool, string) {
		var sessions int
		if err := s.db.QueryRow(t.Context(), `SELECT count(*) FROM pg_stat_activity WHERE application_name = 'kafka2pg-dead-letters' AND datname = current_database()`).Scan(&sessions); err != nil {
			return false, err.Error()
		}
		return sessions == 0, fmt.Sprintf("%d sessions", sessions)
	})
	if _, err := s.db.Exec(t.Context(), `DROP TRIGGER slow_copy ON `+tableName(s.table)); err != nil {
		t.Fatal(err)
	}
	again := startBridge(t, "replay-again", append([]string{"dead-letters", "replay"}, replay...)...)
	again.requireExitZero(t, 2*time.Minute)
	if !again.logged(fmt.Sprintf("replayed %d dead letter(s)", left)) {
		t.Errorf("the second replay did not replay the %d letters left", left)
	}
	if got := s.deadLetterCount(t); got != 0 {
		t.Errorf("%d dead letters left after the second replay, want 0", got)
	}
	ends := s.kafka.EndOffsets(t, s.topic)
	assertExactlyOnce(t, s.db, s.table, s.topic, ends)
	assertMatchesLedger(t, s.db, s.table, s.topic, s.ledger, ends)
}
