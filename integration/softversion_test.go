package integration_test

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
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
	metrics := freeAddr(t)
	config := fmt.Sprintf(`kafka-brokers: [%s]
kafka-group: %s
pg-url: ${K2P_IT_PG_URL}
metrics-addr: %q
kafka-fetch-max-wait: 250ms
sinks:
  - topic: %s
    table: %s
    mode: upsert
    key: [id]
    delete_on_tombstone: true
    delete: soft
    version: rev
    columns:
      - {name: id, from: key, path: id, type: bigint, not_null: true}
      - {name: rev, type: bigint}
      - {name: body, type: text}
`, s.kafka.Brokers(), s.group, metrics, s.topic, s.table)
	path := filepath.Join(t.TempDir(), "kafka2pg.yaml")
	if err := os.WriteFile(path, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	revision := func(id, rev int) *kgo.Record {
		return &kgo.Record{Topic: s.topic, Key: fmt.Appendf(nil, `{"id":%d,"rev":%d}`, id, rev),
			Value: fmt.Appendf(nil, `{"rev":%d,"body":"%d.%d"}`, rev, id, rev)}
	}
	produced := int64(0)
	produce := func(rs []*kgo.Record) {
		t.Helper()
		rand.Shuffle(len(rs), func(i, j int) { rs[i], rs[j] = rs[j], rs[i] })
		s.kafka.Produce(t, rs...)
		produced += int64(len(rs))
		pollUntil(t, time.Minute, "the bridge to commit every record", func() (bool, string) {
			n := sumOffsets(t, s.db, s.group)
			return n == produced, fmt.Sprintf("%d of %d offsets committed", n, produced)
		})
	}
	stale := func() float64 {
		t.Helper()
		v, _ := scrapeMetric(t, metrics, "kafka2pg_ingest_stale_changes_skipped_total")
		return v
	}
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
	b := startBridgeEnv(t, "softversion", []string{"K2P_IT_PG_URL=" + s.pgURL}, "run", "--config", path)

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
	b.signal(t, 15)
	b.requireExitZero(t, time.Minute)
}
