package ingest_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/kafka2pg/kafka2pg/cdc"
	"github.com/kafka2pg/kafka2pg/decode"
	"github.com/kafka2pg/kafka2pg/ingest"
	"github.com/kafka2pg/kafka2pg/internal/pgtest"
	"github.com/kafka2pg/kafka2pg/stream"
)

// filteredSink is a typed sink of topic events into events(id, type),
// writing only the records of type order; upsert by the key's id with
// delete_on_tombstone when upsert is set.
func filteredSink(t *testing.T, upsert bool) ingest.Sink {
	t.Helper()
	spec := decode.MappingSpec{Schema: "public", Table: "events", Columns: []decode.ColumnSpec{
		{Name: "id", Type: "bigint", From: "key", Path: "id"}, {Name: "type", Type: "text"},
	}}
	if upsert {
		spec.Key, spec.DeleteOnTombstone = []string{"id"}, true
	}
	m, err := decode.NewJSONMapper(spec)
	if err != nil {
		t.Fatal(err)
	}
	f, err := decode.CompileFilter(decode.FilterSpec{Where: `value.type == "order"`, PassTombstones: upsert})
	if err != nil {
		t.Fatal(err)
	}
	sink := ingest.Sink{Table: m.Table(), Mapper: m, Filter: f}
	if upsert {
		sink.Upsert = &ingest.Upsert{Key: m.KeyColumns(), DeleteOnTombstone: true}
	}
	return sink
}

// eventBatch is a batch of topic events from first, one record per value
// (nil: a tombstone), each keyed {"id": ids[i]}.
func eventBatch(epoch, first int64, ids []int, values []string) *stream.Batch {
	b := &stream.Batch{Topic: "events", Epoch: epoch, PrevOffset: prevOf(first), FirstOffset: first, NextOffset: first + int64(len(values))}
	for i, v := range values {
		r := stream.Record{Topic: "events", Offset: first + int64(i), Key: fmt.Appendf(nil, `{"id":%d}`, ids[i])}
		if v != "" {
			r.Value = []byte(v)
		}
		b.Records = append(b.Records, r)
	}
	return b
}

// A filter that drops 90% of a batch writes the rest; the dropped offsets
// advance with the batch and are counted; a value the filter cannot read
// is a dead letter of kind filter; a batch the filter drops whole still
// moves next_offset.
func TestAFilterDropsRecordsAndTheirOffsetsAdvance(t *testing.T) {
	_, pool := pgtest.MigratedPool(t)
	w, epoch := claimed(t, pool, ingest.Config{Group: "g", Sinks: map[string]ingest.Sink{"events": filteredSink(t, false)}}, "events")
	tr := trace(w)
	ctx := context.Background()
	var ids []int
	var values []string
	for i := range 100 {
		typ := "view"
		if i%10 == 0 {
			typ = "order"
		}
		ids, values = append(ids, i), append(values, fmt.Sprintf(`{"type":%q}`, typ))
	}
	values[99] = `not json`
	got, err := tr.write(ctx, w, eventBatch(epoch, 0, ids, values))
	if err != nil {
		t.Fatal(err)
	}
	if got.Rows != 10 || got.Filtered != 89 || got.DeadLetters != 1 || len(got.DeadLetterKinds) != 1 || got.DeadLetterKinds[0] != decode.KindFilter {
		t.Fatalf("trace = rows %d, filtered %d, dead letters %d %v; want 10, 89, 1 [filter]", got.Rows, got.Filtered, got.DeadLetters, got.DeadLetterKinds)
	}
	if n := queryInt(t, pool, `SELECT count(*) FROM events WHERE type = 'order' AND id % 10 = 0`); n != 10 {
		t.Errorf("orders in events: %d, want 10", n)
	}
	if n := queryInt(t, pool, `SELECT count(*) FROM events`); n != 10 {
		t.Errorf("rows in events: %d, want 10", n)
	}
	if n := queryInt(t, pool, `SELECT count(*) FROM kafka2pg.dead_letters WHERE error_kind = 'filter' AND kafka_offset = 99`); n != 1 {
		t.Errorf("dead letters of kind filter at offset 99: %d, want 1", n)
	}
	if n := queryInt(t, pool, `SELECT next_offset FROM kafka2pg.offsets WHERE topic = 'events'`); n != 100 {
		t.Errorf("next_offset = %d, want 100", n)
	}
	got, err = tr.write(ctx, w, eventBatch(epoch, 100, []int{100, 101}, []string{`{"type":"view"}`, `{"type":"view"}`}))
	if err != nil {
		t.Fatal(err)
	}
	if got.Rows != 0 || got.Filtered != 2 {
		t.Fatalf("trace of a batch the filter drops whole = rows %d, filtered %d; want 0, 2", got.Rows, got.Filtered)
	}
	if n := queryInt(t, pool, `SELECT next_offset FROM kafka2pg.offsets WHERE topic = 'events'`); n != 102 {
		t.Errorf("next_offset after a batch filtered whole = %d, want 102", n)
	}
}

// The tombstone of a key whose last record no longer matches bypasses the
// filter: the row that stopped matching is deleted.
func TestATombstoneBypassesTheFilter(t *testing.T) {
	_, pool := pgtest.MigratedPool(t)
	w, epoch := claimed(t, pool, ingest.Config{Group: "g", Sinks: map[string]ingest.Sink{"events": filteredSink(t, true)}}, "events")
	ctx := context.Background()
	if err := w.Write(ctx, eventBatch(epoch, 0, []int{1, 2}, []string{`{"type":"order"}`, `{"type":"order"}`})); err != nil {
		t.Fatal(err)
	}
	if err := w.Write(ctx, eventBatch(epoch, 2, []int{1}, []string{`{"type":"cancelled"}`})); err != nil {
		t.Fatal(err)
	}
	if n := queryInt(t, pool, `SELECT count(*) FROM events WHERE id = 1 AND type = 'order'`); n != 1 {
		t.Fatalf("the row of key 1 after a record the filter drops: %d rows of type order, want 1 (left as it was)", n)
	}
	if err := w.Write(ctx, eventBatch(epoch, 3, []int{1}, []string{""})); err != nil {
		t.Fatal(err)
	}
	if n := queryInt(t, pool, `SELECT count(*) FROM events WHERE id = 1`); n != 0 {
		t.Errorf("rows of key 1 after its tombstone: %d, want 0", n)
	}
	if n := queryInt(t, pool, `SELECT count(*) FROM events WHERE id = 2`); n != 1 {
		t.Errorf("rows of key 2: %d, want 1", n)
	}
	if n := queryInt(t, pool, `SELECT next_offset FROM kafka2pg.offsets WHERE topic = 'events'`); n != 4 {
		t.Errorf("next_offset = %d, want 4", n)
	}
}

// Debezium's delete of a key whose last change no longer matches bypasses
// the filter (its after is null): the row that stopped matching is
// deleted.
func TestADebeziumDeleteBypassesTheFilter(t *testing.T) {
	_, pool := pgtest.MigratedPool(t)
	d, err := cdc.NewDecoder(cdc.Config{Schema: "public", Table: "customers"})
	if err != nil {
		t.Fatal(err)
	}
	f, err := decode.CompileFilter(decode.FilterSpec{Where: `value.after.qty > 0`, Envelope: true, PassTombstones: true, PassDeletes: true})
	if err != nil {
		t.Fatal(err)
	}
	cfg := ingest.Config{Group: "g", Sinks: map[string]ingest.Sink{"customers": {Table: d.Table(), Changes: d, Evolve: true, Filter: f}}}
	w, epoch := claimed(t, pool, cfg, "customers")
	tr := trace(w)
	ctx := context.Background()
	if err := w.Write(ctx, changeBatch("customers", epoch, 0, ev{op: "c", id: 1, after: cust(1, "Ann", 5)}, ev{op: "c", id: 2, after: cust(2, "Bob", 5)})); err != nil {
		t.Fatal(err)
	}
	got, err := tr.write(ctx, w, changeBatch("customers", epoch, 2, ev{op: "u", id: 1, before: cust(1, "Ann", 5), after: cust(1, "Ann", 0)}))
	if err != nil {
		t.Fatal(err)
	}
	if got.Filtered != 1 || customers(t, pool) != "1=Ann:5 2=Bob:5" {
		t.Fatalf("after an update the filter drops: filtered %d, rows %q; want 1 and the row left as it was", got.Filtered, customers(t, pool))
	}
	got, err = tr.write(ctx, w, changeBatch("customers", epoch, 3, ev{op: "d", id: 1, before: cust(1, "Ann", 0)}, ev{id: 1}))
	if err != nil {
		t.Fatal(err)
	}
	if got.Filtered != 0 || got.DeadLetters != 0 || customers(t, pool) != "2=Bob:5" {
		t.Errorf("after the delete of key 1 and its tombstone: filtered %d, dead letters %d, rows %q; want 0, 0, 2=Bob:5", got.Filtered, got.DeadLetters, customers(t, pool))
	}
	if n := queryInt(t, pool, `SELECT next_offset FROM kafka2pg.offsets WHERE topic = 'customers'`); n != 5 {
		t.Errorf("next_offset = %d, want 5", n)
	}
}
