package ingest

import (
	"context"

	"github.com/kafka2pg/kafka2pg/stream"
)

// SchemaResolver is a RowMapper or ChangeDecoder whose records name
// schemas it fetches over the network (decode.RegistryMapper, cdc.Decoder
// of format avro or protobuf). The writer calls ResolveSchemas with each
// batch's records and Write's ctx before the batch's transaction, so that
// Row, KeyRow and Decode only read what it fetched: no transaction waits
// on the registry, and the lookups end with the write. An error is the
// registry's: Write returns it, and the batch is written again later.
type SchemaResolver interface {
	ResolveSchemas(ctx context.Context, records []stream.Record) error
}

// resolveSchemas runs the sink's SchemaResolvers, if any, on records.
func resolveSchemas(ctx context.Context, sink Sink, records []stream.Record) error {
	for _, m := range [2]any{sink.Mapper, sink.Changes} {
		if r, ok := m.(SchemaResolver); ok {
			if err := r.ResolveSchemas(ctx, records); err != nil {
				return err
			}
		}
	}
	return nil
}
