// Package schema turns Kafka records into table rows: the topic-to-table
// mapping, the value decoders and their validation, and the DDL that creates
// the target tables.
//
// It is pure logic: no I/O, no goroutines. It plans statements (CreateSQL)
// and builds rows (Mapper.Row); the ingest package runs them. A record that
// cannot become a row is never a panic: Row returns a *DecodeError naming the
// record, the reason and its kind, and ingest dead-letters it.
//
// Identifiers are always quoted with pgx.Identifier.Sanitize. It imports
// nothing of ours.
package schema
