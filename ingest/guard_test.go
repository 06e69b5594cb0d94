package ingest_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/kafka2pg/kafka2pg/ingest"
	"github.com/kafka2pg/kafka2pg/internal/pgtest"
	"github.com/kafka2pg/kafka2pg/internal/sinkstest"
	"github.com/kafka2pg/kafka2pg/stream"
)

// itemsSink is the sink of topic items built from the YAML of one sink
// (an upsert of items(id, name, v) by id, with delete_on_tombstone) and
// extra, more keys of it.
func itemsSink(t *testing.T, extra string) ingest.Sink {
	t.Helper()
	doc := `
sinks:
  - topic: items
    mode: upsert
    key: [id]
    delete_on_tombstone: true
    columns:
      - {name: id, type: bigint, from: key, path: id, not_null: true}
      - {name: name, type: text}
      - {name: v, type: bigint}
`
	for _, line := range strings.Split(strings.TrimSpace(extra), "\n") {
		doc += "    " + line + "\n"
	}
	set, _ := sinkstest.Build(t, doc)
	return set.Fixed["items"]
}

// staleCount is a Tracer that adds up BatchTrace.Stale.
type staleCount struct {
	mu sync.Mutex
	n  int
}

func (s *staleCount) TraceBatchEnd(_ context.Context, t ingest.BatchTrace) {
	s.mu.Lock()
	s.n += t.Stale
	s.mu.Unlock()
}

func (s *staleCount) get() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n
}

// itemsWriter writes topic items through sink, partitions 0 and 1
// claimed: their epochs.
func itemsWriter(t *testing.T, sink ingest.Sink) (*ingest.Writer, *pgxpool.Pool, map[int32]int64, *staleCount) {
	t.Helper()
	return itemsWriterOf(t, "items", sink)
}

// itemsWriterOf writes topic through sink, partitions 0 and 1 claimed:
// their epochs.
func itemsWriterOf(t *testing.T, topic string, sink ingest.Sink) (*ingest.Writer, *pgxpool.Pool, map[int32]int64, *staleCount) {
	t.Helper()
	_, pool := pgtest.MigratedPool(t)
	stale := &staleCount{}
	w := readyWriter(t, pool, ingest.Config{Group: "g", Sinks: map[string]ingest.Sink{topic: sink}, Tracer: stale})
	pos, err := w.Claim(context.Background(), topic, []int32{0, 1})
	if err != nil {
		t.Fatal(err)
	}
	return w, pool, map[int32]int64{0: pos[0].Epoch, 1: pos[1].Epoch}, stale
}

// item is one record of topic items: value "" is a tombstone.
type item struct {
	id    int
	value string
	at    time.Time // the record's timestamp
}

// itemsBatch is a batch of partition p from first.
func itemsBatch(p int32, epoch, first int64, items ...item) *stream.Batch {
	b := &stream.Batch{Topic: "items", Partition: p, Epoch: epoch, PrevOffset: prevOf(first), FirstOffset: first, NextOffset: first + int64(len(items))}
	for i, it := range items {
		r := stream.Record{Topic: "items", Partition: p, Offset: first + int64(i), Timestamp: it.at, Key: fmt.Appendf(nil, `{"id":%d}`, it.id)}
		if it.value != "" {
			r.Value = []byte(it.value)
		}
		b.Records = append(b.Records, r)
	}
	return b
}

// itemsState is the items table as "id=name:v:deleted ...", by id, with
// the deleted column given (its text, or NULL).
func itemsState(t *testing.T, pool *pgxpool.Pool, deleted string) string {
	t.Helper()
	q := fmt.Sprintf(`SELECT coalesce(string_agg(id || '=' || coalesce(name, 'NULL') || ':' || coalesce(v::text, 'NULL') || ':' || coalesce(%s::text, 'NULL'), ' ' ORDER BY id), '') FROM items`, deleted)
	var s string
	if err := pool.QueryRow(context.Background(), q).Scan(&s); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return s
}

func write(t *testing.T, w *ingest.Writer, b *stream.Batch) {
	t.Helper()
	if err := w.Write(context.Background(), b); err != nil {
		t.Fatalf("write %d..%d of partition %d: %v", b.FirstOffset, b.NextOffset, b.Partition, err)
	}
}

// A soft delete marks the row with the tombstone's timestamp (or true), a
// later upsert clears the mark, and a second delete marks it again with
// its own timestamp: in separate batches and within one.
func TestSoftDeleteMarksTheRowAndAnUpsertClearsIt(t *testing.T) {
	t.Parallel()
	t1 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	t2 := t1.Add(time.Hour)
	for _, tc := range []struct {
		name, extra, deleted string
		want                 [3]string
	}{
		{"deleted_at", "delete: soft", "to_char(deleted_at AT TIME ZONE 'UTC', 'HH24:MI')",
			[3]string{"1=a:1:03:04 2=b:1:03:04", "1=c:2:NULL 2=b:1:03:04", "1=c:2:04:04 2=d:3:NULL 3=e:4:04:04"}},
		{"deleted_flag", "delete: soft\ndeleted_flag: is_deleted", "is_deleted",
			[3]string{"1=a:1:true 2=b:1:true", "1=c:2:false 2=b:1:true", "1=c:2:true 2=d:3:false 3=e:4:true"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			w, pool, e, _ := itemsWriter(t, itemsSink(t, tc.extra))
			write(t, w, itemsBatch(0, e[0], 0, item{1, `{"name":"a","v":1}`, t1}, item{2, `{"name":"b","v":1}`, t1}))
			write(t, w, itemsBatch(0, e[0], 2, item{id: 1, at: t1}, item{id: 2, at: t1}))
			if got := itemsState(t, pool, tc.deleted); got != tc.want[0] {
				t.Fatalf("after the deletes: %s, want %s", got, tc.want[0])
			}
			write(t, w, itemsBatch(0, e[0], 4, item{1, `{"name":"c","v":2}`, t2}))
			if got := itemsState(t, pool, tc.deleted); got != tc.want[1] {
				t.Fatalf("after the upsert: %s, want %s", got, tc.want[1])
			}
			// One batch: key 1 deleted again; key 2 deleted, then back; key
			// 3 created, then deleted: its row keeps the created columns.
			write(t, w, itemsBatch(0, e[0], 5, item{id: 1, at: t2}, item{id: 2, at: t2}, item{2, `{"name":"d","v":3}`, t2},
				item{3, `{"name":"e","v":4}`, t2}, item{id: 3, at: t2}))
			if got := itemsState(t, pool, tc.deleted); got != tc.want[2] {
				t.Fatalf("after the second delete: %s, want %s", got, tc.want[2])
			}
		})
	}
}

// Versions of one key delivered out of order, within a batch and across
// partitions and batches: the newest wins, equal versions are skipped as
// applied, and every skipped change is counted. An older update does not
// undo a soft delete; a newer one does.
func TestTheVersionGuardKeepsTheNewestChangeOfAKey(t *testing.T) {
	t.Parallel()
	w, pool, e, stale := itemsWriter(t, itemsSink(t, "delete: soft\nversion: v"))
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	deleted := "deleted_at IS NOT NULL"
	steps := []struct {
		b     *stream.Batch
		want  string
		stale int
	}{
		// One batch, the versions out of order: 3 wins over the later 1 and 2.
		{itemsBatch(0, e[0], 0, item{1, `{"name":"c","v":3}`, at}, item{1, `{"name":"a","v":1}`, at}, item{1, `{"name":"b","v":2}`, at}),
			"1=c:3:false", 2},
		// The other partition, an older and an equal version: skipped by the statement.
		{itemsBatch(1, e[1], 0, item{1, `{"name":"b2","v":2}`, at}), "1=c:3:false", 1},
		{itemsBatch(1, e[1], 1, item{1, `{"name":"c2","v":3}`, at}), "1=c:3:false", 1},
		// Newer: applied.
		{itemsBatch(0, e[0], 3, item{1, `{"name":"d","v":4}`, at}), "1=d:4:false", 0},
		// Deleted, then an older update from the other partition: the row stays deleted, with its version.
		{itemsBatch(0, e[0], 4, item{id: 1, at: at}), "1=d:4:true", 0},
		{itemsBatch(1, e[1], 2, item{1, `{"name":"old","v":2}`, at}), "1=d:4:true", 1},
		// A newer update brings the key back.
		{itemsBatch(1, e[1], 3, item{1, `{"name":"e","v":5}`, at}), "1=e:5:false", 0},
		// A new key created, updated and deleted in one batch, an older
		// version after the delete: marked, with its newest columns.
		{itemsBatch(0, e[0], 5, item{2, `{"name":"x","v":1}`, at}, item{2, `{"name":"y","v":2}`, at}, item{id: 2, at: at}, item{2, `{"name":"old","v":1}`, at}),
			"1=e:5:false 2=y:2:true", 1},
	}
	total := 0
	for i, s := range steps {
		write(t, w, s.b)
		total += s.stale
		if got := itemsState(t, pool, deleted); got != s.want {
			t.Fatalf("step %d: %s, want %s", i, got, s.want)
		}
		if got := stale.get(); got != total {
			t.Fatalf("step %d: %d stale changes counted, want %d", i, got, total)
		}
	}
}

// The batch redone change by change, after Postgres refused a row, keeps
// the guard: the stale change is skipped and counted there too.
func TestTheVersionGuardHoldsChangeByChange(t *testing.T) {
	t.Parallel()
	w, pool, e, stale := itemsWriter(t, itemsSink(t, "delete: soft\nversion: v"))
	refuseNamed(t, pool, "items")
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	write(t, w, itemsBatch(0, e[0], 0, item{1, `{"name":"b","v":2}`, at}))
	write(t, w, itemsBatch(0, e[0], 1, item{2, `{"name":"refused","v":1}`, at}, item{1, `{"name":"a","v":1}`, at}, item{3, `{"name":"c","v":1}`, at}))
	if got := itemsState(t, pool, "deleted_at IS NOT NULL"); got != "1=b:2:false 3=c:1:false" {
		t.Fatalf("%s, want 1=b:2:false 3=c:1:false", got)
	}
	wantCounts(t, pool, stale, 1, 1)
}

// refuseNamed makes table refuse the rows named refused.
func refuseNamed(t *testing.T, pool *pgxpool.Pool, table string) {
	t.Helper()
	if _, err := pool.Exec(context.Background(), fmt.Sprintf(`ALTER TABLE %s ADD CHECK (name <> 'refused')`, table)); err != nil {
		t.Fatal(err)
	}
}

// wantCounts fails unless stale counted staleN changes and the dead
// letters are dead.
func wantCounts(t *testing.T, pool *pgxpool.Pool, stale *staleCount, staleN int, dead int64) {
	t.Helper()
	if got := stale.get(); got != staleN {
		t.Fatalf("%d stale changes counted, want %d", got, staleN)
	}
	if n := queryInt(t, pool, `SELECT count(*) FROM kafka2pg.dead_letters`); n != dead {
		t.Fatalf("%d dead letters, want %d", n, dead)
	}
}

// A table created before delete soft was set gains its deleted column
// with evolve, and its rows stay live.
func TestEvolveAddsTheDeletedColumn(t *testing.T) {
	t.Parallel()
	_, pool := pgtest.MigratedPool(t)
	ctx := context.Background()
	if _, err := pool.Exec(ctx, `CREATE TABLE items (id bigint PRIMARY KEY, name text, v bigint); INSERT INTO items VALUES (1, 'a', 1)`); err != nil {
		t.Fatal(err)
	}
	sink := itemsSink(t, "delete: soft\nevolve: true")
	w := readyWriter(t, pool, ingest.Config{Group: "g", Sinks: map[string]ingest.Sink{"items": sink}})
	pos, err := w.Claim(ctx, "items", []int32{0})
	if err != nil {
		t.Fatal(err)
	}
	if got := itemsState(t, pool, "deleted_at"); got != "1=a:1:NULL" {
		t.Fatalf("after evolve: %s, want 1=a:1:NULL", got)
	}
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	write(t, w, itemsBatch(0, pos[0].Epoch, 0, item{id: 1, at: at}))
	if got := itemsState(t, pool, "deleted_at IS NOT NULL"); got != "1=a:1:true" {
		t.Fatalf("after the delete: %s, want 1=a:1:true", got)
	}
}
