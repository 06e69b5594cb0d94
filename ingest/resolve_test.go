package ingest_test

import (
	"context"
	"errors"
	"testing"

	"github.com/kafka2pg/kafka2pg/decode"
	"github.com/kafka2pg/kafka2pg/ingest"
	"github.com/kafka2pg/kafka2pg/internal/pgtest"
	"github.com/kafka2pg/kafka2pg/stream"
)

// resolvingMapper is the zero-config mapper with a ResolveSchemas that
// records what the writer handed it, and fails while down is set.
type resolvingMapper struct {
	decode.RawMapper
	down    error
	batches [][]stream.Record
	ctxs    []context.Context
}

func (m *resolvingMapper) ResolveSchemas(ctx context.Context, records []stream.Record) error {
	m.ctxs = append(m.ctxs, ctx)
	m.batches = append(m.batches, records)
	return m.down
}

type writeCtxKey struct{}

// TestTheWriterResolvesSchemasBeforeTheTransaction: a mapper that is a
// SchemaResolver gets each batch's records with Write's ctx; its error
// fails the Write with nothing written and the offsets unmoved, and the
// batch is written once the lookups succeed.
func TestTheWriterResolvesSchemasBeforeTheTransaction(t *testing.T) {
	t.Parallel()
	_, pool := pgtest.MigratedPool(t)
	m := &resolvingMapper{RawMapper: decode.RawMapper{Format: decode.ValueJSON}, down: errors.New("registry: connection refused")}
	w, err := ingest.New(pool, ingest.Config{
		Group: "g",
		Sinks: map[string]ingest.Sink{topic: {Table: decode.RawTable("public", topic, decode.ValueJSON), Mapper: m}},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.WithValue(t.Context(), writeCtxKey{}, "write"))
	defer cancel()
	if err := w.EnsureTables(ctx, true); err != nil {
		t.Fatal(err)
	}
	pos := claim(t, w, 0)
	b := batch(0, pos.Epoch, 0, 10)
	if err := w.Write(ctx, b); !errors.Is(err, m.down) {
		t.Fatalf("Write with the registry down = %v, want its error", err)
	}
	if n := queryInt(t, pool, `SELECT count(*) FROM orders`); n != 0 {
		t.Fatalf("%d rows written while the schemas could not be resolved", n)
	}
	m.down = nil
	if err := w.Write(ctx, b); err != nil {
		t.Fatal(err)
	}
	if n := queryInt(t, pool, `SELECT count(*) FROM orders`); n != 10 {
		t.Fatalf("%d rows, want 10", n)
	}
	if len(m.batches) != 2 || len(m.batches[1]) != 10 || m.batches[1][0].Offset != 0 {
		t.Fatalf("ResolveSchemas saw %d batches, want the batch twice", len(m.batches))
	}
	for _, c := range m.ctxs {
		if c.Value(writeCtxKey{}) != "write" {
			t.Fatal("ResolveSchemas did not get Write's ctx")
		}
	}
}
