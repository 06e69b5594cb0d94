package decode

import (
	"context"
	"errors"
	"testing"

	"github.com/kafka2pg/kafka2pg/stream"
)

// TestRowReadsOnlyTheSchemasResolveSchemasFetched: Row does no I/O. A batch's
// new schema ids are fetched by ResolveSchemas with the batch's ctx (a
// cancelled ctx reaches the lookup), each once however many records carry
// it; Row of a record whose id was never resolved is an error, not a bad
// record, and asks the registry nothing.
func TestRowReadsOnlyTheSchemasResolveSchemasFetched(t *testing.T) {
	reg := newFakeRegistry(evolving...)
	var seen []error
	lookup := func(ctx context.Context, id int) (RegisteredSchema, error) {
		seen = append(seen, ctx.Err())
		return reg.lookup(ctx, id)
	}
	m, err := NewRegistryMapper(RegistryMappingSpec{Format: FormatAvro, Table: "orders", Value: evolving[:1], Lookup: lookup})
	if err != nil {
		t.Fatal(err)
	}
	v1 := stream.Record{Topic: "orders", Offset: 1, Value: avroRecord(t, evolving[1].ID, evolving[1].Text, evolvingValues[1])}
	if _, err := m.Row(&v1, nil); !errors.Is(err, errSchemaUnresolved) || errors.Is(err, ErrBadRecord) {
		t.Fatalf("Row of an unresolved id: %v, want errSchemaUnresolved and no bad record", err)
	}
	if reg.calls != 0 {
		t.Fatalf("Row asked the registry %d times", reg.calls)
	}

	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := m.ResolveSchemas(ctx, []stream.Record{v1, v1, v1}); err != nil {
		t.Fatalf("ResolveSchemas: %v", err)
	}
	if len(seen) != 1 || !errors.Is(seen[0], context.Canceled) {
		t.Fatalf("the lookups saw ctx errors %v, want one lookup with the batch's cancelled ctx", seen)
	}
	if _, err := m.Row(&v1, nil); !errors.Is(err, ErrTableChanged) {
		t.Fatalf("Row after ResolveSchemas: %v, want ErrTableChanged (a new column)", err)
	}
	if err := m.ResolveSchemas(t.Context(), []stream.Record{v1}); err != nil || len(seen) != 1 {
		t.Fatalf("ResolveSchemas of a seen id: %v after %d lookups, want none more", err, len(seen))
	}

	reg.down = true
	v2 := stream.Record{Topic: "orders", Offset: 2, Value: avroRecord(t, evolving[2].ID, evolving[2].Text, evolvingValues[2])}
	if err := m.ResolveSchemas(t.Context(), []stream.Record{v2}); err == nil || errors.Is(err, ErrBadRecord) {
		t.Fatalf("ResolveSchemas with the registry down: %v, want an error that is not a bad record", err)
	}
}
