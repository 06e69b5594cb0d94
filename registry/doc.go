// Package registry fetches schemas from a Confluent-compatible Schema
// Registry (Confluent, Redpanda, Apicurio's ccompat API, Karapace) for the
// registry mappers of package schema, and caches them.
//
// The Confluent wire format itself (magic byte 0, 4-byte big-endian schema
// id, Protobuf message indexes) is read by schema (decode.AppendWireHeader
// writes it), because reading it is pure logic that runs per record; this
// package does the I/O: the schemas of an id (with their references,
// resolved transitively) and the versions of a subject.
//
// Invariants: a schema id names one immutable schema, so a fetched id is
// cached for the life of the Client and never fetched again; a registry
// that answers 404 for an id yields an error wrapping
// decode.ErrSchemaNotFound (the record is a bad record), any other failure
// a plain error (the batch is retried). Subjects' version lists are not
// cached: they change.
//
// Goroutines: none. A Client is safe for concurrent use; concurrent misses
// of one id may fetch it twice, which is harmless.
//
// Imports: franz-go's pkg/sr (the HTTP client) and schema (the types the
// lookup returns). Never ingest or reader.
package registry
