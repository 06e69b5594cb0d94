package integration_test

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestSoftDeletesAndVersionsEndToEnd drives an upsert sink with delete:
// soft and version through the binary: revisions of each id in random
// order over 3 partitions (the Kafka key holds the revision, so one id's
// records land in different partitions) end at the newest; a replay of
// old revisions changes nothing and is counted; tombstones mark rows that
// a replay of older revisions cannot bring back, and a newer revision
// does.
func TestSoftDeletesAndVersionsEndToEnd(t *testing.T) {
	parallel(t)
	s := newScenario(t, 3)
	const ids, revisions = 60, 4
	b, metrics := startSinkBridge(t, s, "softversion", `    mode: upsert
    key: [id]
    delete_on_tombstone: true
    delete: soft
    version: rev
    columns:
      - {name: id, from: key, path: id, type: bigint, not_null: true}
      - {name: rev, type: bigint}
      - {name: body, type: text}
`)
	revision := func(id, rev int) *kgo.Record {
		return &kgo.Record{Topic: s.topic, Key: fmt.Appendf(nil, `{"id":%d,"rev":%d}`, id, rev),
			Value: fmt.Appendf(nil, `{"rev":%d,"body":"%d.%d"}`, rev, id, rev)}
	}
	w := &committedWaiter{s: s}
	produce := func(rs []*kgo.Record) {
		t.Helper()
		rand.Shuffle(len(rs), func(i, j int) { rs[i], rs[j] = rs[j], rs[i] })
		w.produce(t, rs)
	}
	stale := func() float64 { return staleChanges(t, metrics) }
	state := func(where string) string {
		t.Helper()
		var live, deleted int64
		var sum int64
		q := fmt.Sprintf(`SELECT count(*) FILTER (WHERE deleted_at IS NULL), count(*) FILTER (WHERE deleted_at IS NOT NULL), coalesce(sum(rev), 0) FROM %q WHERE %s`, s.table, where)
		if err := s.db.QueryRow(t.Context(), q).Scan(&live, &deleted, &sum); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		return fmt.Sprintf("%d live, %d deleted, revisions summing to %d", live, deleted, sum)
	}
	// Every revision of every id, in random order: the newest wins.
	var rs []*kgo.Record
	for id := range ids {
		for rev := 1; rev <= revisions; rev++ {
			rs = append(rs, revision(id, rev))
		}
	}
	produce(rs)
	if got, want := state("body = id || '.' || rev"), fmt.Sprintf("%d live, 0 deleted, revisions summing to %d", ids, ids*revisions); got != want {
		t.Fatalf("after the revisions: %s, want %s", got, want)
	}
	first := stale()
	if first <= 0 || first > ids*(revisions-1) {
		t.Errorf("after the revisions: %v stale changes counted, want 1 to %d", first, ids*(revisions-1))
	}

	// A replay of revision 1 of every id: nothing changes, each counted.
	rs = rs[:0]
	for id := range ids {
		rs = append(rs, revision(id, 1))
	}
	produce(rs)
	if got := stale() - first; got != ids {
		t.Errorf("the replay of revision 1: %v stale changes counted, want %d", got, ids)
	}

	// Tombstones of the even ids; then a replay of their revision 2, which
	// must not bring them back; then revision 5 of every fourth id, which does.
	rs = rs[:0]
	for id := 0; id < ids; id += 2 {
		rs = append(rs, &kgo.Record{Topic: s.topic, Key: fmt.Appendf(nil, `{"id":%d}`, id)})
	}
	produce(rs)
	rs = rs[:0]
	for id := 0; id < ids; id += 2 {
		rs = append(rs, revision(id, 2))
	}
	produce(rs)
	if got, want := state("true"), fmt.Sprintf("%d live, %d deleted, revisions summing to %d", ids/2, ids/2, ids*revisions); got != want {
		t.Fatalf("after the tombstones and the replay: %s, want %s", got, want)
	}
	rs = rs[:0]
	for id := 0; id < ids; id += 4 {
		rs = append(rs, revision(id, 5))
	}
	produce(rs)
	if got, want := state("true"), fmt.Sprintf("%d live, %d deleted, revisions summing to %d", ids/2+ids/4, ids/4, ids*revisions+ids/4); got != want {
		t.Fatalf("after revision 5: %s, want %s", got, want)
	}
	b.signal(t, syscall.SIGTERM)
	b.requireExitZero(t, time.Minute)
}

// committedWaiter produces records to a scenario's bridge and waits until
// it has committed every record produced so far.
type committedWaiter struct {
	s        *scenario
	produced int64
}

func (w *committedWaiter) produce(t *testing.T, rs []*kgo.Record) {
	t.Helper()
	w.s.kafka.Produce(t, rs...)
	w.produced += int64(len(rs))
	pollUntil(t, time.Minute, "the bridge to commit every record", func() (bool, string) {
		n := sumOffsets(t, w.s.db, w.s.group)
		return n == w.produced, fmt.Sprintf("%d of %d offsets committed", n, w.produced)
	})
}

// staleChanges is the bridge's count of changes its version guards skipped.
func staleChanges(t *testing.T, metrics string) float64 {
	t.Helper()
	v, ok := scrapeMetric(t, metrics, "kafka2pg_ingest_stale_changes_skipped_total")
	if !ok {
		t.Fatal("no kafka2pg_ingest_stale_changes_skipped_total")
	}
	return v
}

// TestDebeziumSoftDeletesAndTheSourceVersionEndToEnd drives a debezium sink
// with delete: soft and version through the binary: a snapshot, streamed
// changes with Postgres' source.sequence, then what arrives late (an
// incremental snapshot's reads, a replay of older updates) loses to the
// stored rows, deleted ones included.
func TestDebeziumSoftDeletesAndTheSourceVersionEndToEnd(t *testing.T) {
	parallel(t)
	s := newScenario(t, 1)
	b, metrics := startSinkBridge(t, s, "debezium-softversion", `    format: debezium
    key: [id]
    columns:
      - {name: id, type: integer}
      - {name: name, type: text}
    delete: soft
    version: src_version
`)
	// event is a change of row id at the source's LSN at (sequence
	// [at-5, at]); a snapshot read (op r) has none.
	event := func(op string, id int, name string, at int) *kgo.Record {
		seq := `[null,\"900\"]`
		if op != "r" {
			seq = fmt.Sprintf(`[\"%d\",\"%d\"]`, at-5, at)
		}
		after, before := fmt.Sprintf(`{"id":%d,"name":%q}`, id, name), "null"
		if op == "d" {
			after, before = "null", fmt.Sprintf(`{"id":%d,"name":null}`, id)
		}
		return &kgo.Record{Topic: s.topic, Key: fmt.Appendf(nil, `{"id":%d}`, id),
			Value: fmt.Appendf(nil, `{"before":%s,"after":%s,"op":%q,"source":{"connector":"postgresql","sequence":"%s"}}`, before, after, op, seq)}
	}
	// state is the rows by id: a deleted row keeps the columns of its last
	// upsert, whether the delete came in the upsert's batch or later.
	state := func() string {
		t.Helper()
		var s2 string
		q := fmt.Sprintf(`SELECT string_agg(id || '=' || name || CASE WHEN deleted_at IS NULL THEN '' ELSE '(deleted)' END, ' ' ORDER BY id) FROM %q`, s.table)
		if err := s.db.QueryRow(t.Context(), q).Scan(&s2); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		return s2
	}
	w := &committedWaiter{s: s}
	w.produce(t, []*kgo.Record{event("r", 1, "a", 0), event("r", 2, "b", 0), event("r", 3, "c", 0),
		event("u", 1, "a2", 1010), event("d", 2, "", 1020), event("c", 4, "d", 1030)})
	if got, want := state(), "1=a2 2=b(deleted) 3=c 4=d"; got != want {
		t.Fatalf("after the snapshot and the stream: %s, want %s", got, want)
	}
	before := staleChanges(t, metrics)
	// Late reads of every row (an incremental snapshot), then, in a batch
	// of its own, an update of 2 older than its delete (a replay).
	w.produce(t, []*kgo.Record{event("r", 1, "a", 0), event("r", 2, "b", 0), event("r", 3, "c3", 0), event("r", 4, "d", 0)})
	w.produce(t, []*kgo.Record{event("u", 2, "b-old", 1015)})
	if got, want := state(), "1=a2 2=b(deleted) 3=c 4=d"; got != want {
		t.Errorf("after the late reads and the older update: %s, want %s", got, want)
	}
	if got := staleChanges(t, metrics) - before; got != 5 {
		t.Errorf("%v stale changes counted, want 5: the reads and the older update", got)
	}
	// A newer create brings 2 back.
	w.produce(t, []*kgo.Record{event("c", 2, "b3", 1040)})
	if got, want := state(), "1=a2 2=b3 3=c 4=d"; got != want {
		t.Errorf("after the new create: %s, want %s", got, want)
	}
	b.signal(t, syscall.SIGTERM)
	b.requireExitZero(t, time.Minute)
}

// startSinkBridge starts `run` with one sink of the scenario's topic into
// its table, the sink's other keys in sink (YAML, indented for the sink),
// and metrics on an address of its own, which it returns.
func startSinkBridge(t *testing.T, s *scenario, name, sink string) (*bridge, string) {
	t.Helper()
	metrics := freeAddr(t)
	config := fmt.Sprintf(`kafka-brokers: [%s]
kafka-group: %s
pg-url: ${K2P_IT_PG_URL}
metrics-addr: %q
kafka-fetch-max-wait: 250ms
sinks:
  - topic: %s
    table: %s
%s`, s.kafka.Brokers(), s.group, metrics, s.topic, s.table, sink)
	path := filepath.Join(t.TempDir(), "kafka2pg.yaml")
	if err := os.WriteFile(path, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	return startBridgeEnv(t, name, []string{"K2P_IT_PG_URL=" + s.pgURL}, "run", "--config", path), metrics
}
