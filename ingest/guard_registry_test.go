package ingest_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/kafka2pg/kafka2pg/decode"
	"github.com/kafka2pg/kafka2pg/ingest"
	"github.com/kafka2pg/kafka2pg/internal/sinkstest"
	"github.com/kafka2pg/kafka2pg/stream"
)

// A registry format's upsert sink (json_schema here) takes soft deletes
// and the version as a json sink does: LiveMapper adds the deleted column
// to the subject's table, and the schemas still resolve through it.
func TestSoftDeleteAndVersionOfARegistrySink(t *testing.T) {
	t.Parallel()
	value := decode.RegisteredSchema{ID: 7, Type: "JSON", Text: `{"type":"object","properties":{"rev":{"type":"integer"},"name":{"type":"string"}}}`}
	key := decode.RegisteredSchema{ID: 8, Type: "JSON", Text: `{"type":"object","properties":{"id":{"type":"integer"}},"required":["id"]}`}
	lookup := func(_ context.Context, id int) (decode.RegisteredSchema, error) {
		if id == key.ID {
			return key, nil
		}
		return value, nil
	}
	m, err := decode.NewRegistryMapper(decode.RegistryMappingSpec{Format: decode.FormatJSONSchema, Schema: "public", Table: "items",
		Value: []decode.RegisteredSchema{value}, Key: []decode.RegisteredSchema{key}, KeyColumns: []string{"key_id"},
		DeleteOnTombstone: true, Lookup: lookup})
	if err != nil {
		t.Fatal(err)
	}
	lm := ingest.NewLiveMapper(m, ingest.Deleted{Column: "deleted_at"})
	sink := ingest.Sink{Table: lm.Table(), Mapper: lm, Evolve: true, Deleted: &ingest.Deleted{Column: "deleted_at"}, Version: "rev",
		Upsert: &ingest.Upsert{Key: m.KeyColumns(), DeleteOnTombstone: true}}
	w, pool, e, stale := itemsWriterOf(t, "items", sink)
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	rec := func(offset int64, id, rev int, name string) stream.Record {
		r := stream.Record{Topic: "items", Offset: offset, Timestamp: at, Key: fmt.Appendf(decode.AppendWireHeader(nil, key.ID, nil), `{"id":%d}`, id)}
		if name != "" {
			r.Value = fmt.Appendf(decode.AppendWireHeader(nil, value.ID, nil), `{"rev":%d,"name":%q}`, rev, name)
		}
		return r
	}
	batch := func(first int64, rs ...stream.Record) *stream.Batch {
		return &stream.Batch{Topic: "items", Epoch: e[0], PrevOffset: prevOf(first), FirstOffset: first, NextOffset: first + int64(len(rs)), Records: rs}
	}
	state := func() string {
		t.Helper()
		var s string
		q := `SELECT string_agg(key_id || '=' || name || ':' || rev || ':' || (deleted_at IS NOT NULL), ' ' ORDER BY key_id) FROM items`
		if err := pool.QueryRow(context.Background(), q).Scan(&s); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		return s
	}
	write(t, w, batch(0, rec(0, 1, 2, "b"), rec(1, 1, 1, "a"), rec(2, 2, 1, "x")))
	if got, want := state(), "1=b:2:false 2=x:1:false"; got != want {
		t.Fatalf("after the first batch: %s, want %s", got, want)
	}
	write(t, w, batch(3, rec(3, 2, 0, "")))
	write(t, w, batch(4, rec(4, 2, 1, "x-again"), rec(5, 1, 3, "c")))
	if got, want := state(), "1=c:3:false 2=x:1:true"; got != want {
		t.Fatalf("after the delete and the replay: %s, want %s", got, want)
	}
	if got := stale.get(); got != 2 {
		t.Fatalf("%d stale changes counted, want 2", got)
	}
}

// A connect_json upsert sink takes soft deletes and a version among its
// typed columns.
func TestSoftDeleteAndVersionOfAConnectJSONSink(t *testing.T) {
	t.Parallel()
	doc := `
sinks:
  - topic: items
    format: connect_json
    mode: upsert
    key: [id]
    delete_on_tombstone: true
    delete: soft
    version: rev
    columns:
      - {name: id, type: bigint, not_null: true}
      - {name: rev, type: bigint}
      - {name: name, type: text}
`
	set, _ := sinkstest.Build(t, doc)
	w, pool, e, stale := itemsWriterOf(t, "items", set.Fixed["items"])
	rec := func(offset int64, id, rev int, name string) stream.Record {
		r := stream.Record{Topic: "items", Offset: offset, Timestamp: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), Key: fmt.Appendf(nil, `{"id":%d}`, id)}
		if name != "" {
			r.Value = fmt.Appendf(nil, `{"id":%d,"rev":%d,"name":%q}`, id, rev, name)
		}
		return r
	}
	batch := func(first int64, rs ...stream.Record) *stream.Batch {
		return &stream.Batch{Topic: "items", Epoch: e[0], PrevOffset: prevOf(first), FirstOffset: first, NextOffset: first + int64(len(rs)), Records: rs}
	}
	write(t, w, batch(0, rec(0, 1, 2, "b"), rec(1, 1, 1, "a")))
	write(t, w, batch(2, rec(2, 1, 0, "")))
	write(t, w, batch(3, rec(3, 1, 1, "a-again")))
	var got string
	q := `SELECT string_agg(id || '=' || name || ':' || rev || ':' || (deleted_at IS NOT NULL), ' ' ORDER BY id) FROM items`
	if err := pool.QueryRow(context.Background(), q).Scan(&got); err != nil {
		t.Fatal(err)
	}
	if want := "1=b:2:true"; got != want {
		t.Fatalf("%s, want %s", got, want)
	}
	if n := stale.get(); n != 2 {
		t.Fatalf("%d stale changes counted, want 2", n)
	}
}
