// Package schema turns Kafka records into table rows: the topic-to-table
// mapping, the value decoders and their validation, and the DDL that creates
// the target tables.
//
// It is pure logic: no I/O, no goroutines. It plans statements (CreateSQL)
// and builds rows (Mapper.Row, or AppendRow straight into a binary COPY
// stream); the ingest package runs them. A record that
// cannot become a row is never a panic: Row returns a *DecodeError naming the
// record, the reason and its kind, and ingest dead-letters it.
//
// The mappers, by file:
//
//   - raw.go: RawMapper, the zero-config table (coordinates, key, headers,
//     value as jsonb, text or bytea); the headers' jsonb (HeadersJSON, and
//     HeadersJSONASCII for dead letters on a database that is not UTF-8).
//   - mapping.go, types.go, convert.go, decimal.go, datetime.go, jsonpath.go:
//     JSONMapper, typed columns from JSON paths through one type table
//     (decimal.go numerics, datetime.go dates, times and timestamps, each
//     with a fast path for its common literals). scan*.go read a
//     record in one pass (scan_oracle_test.go keeps the older
//     encoding/json path as the fuzzers' reference).
//   - wire*.go, avro*.go, protobuf.go: the registry mappers (Avro, Protobuf,
//     JSON Schema in the Confluent wire format). Their schemas come through
//     an injected lookup (package registry does the I/O), which
//     ResolveSchemas calls with the batch's ctx before Row (resolve.go): Row
//     does no I/O. Their table grows with new schema versions, which Row
//     reports with ErrTableChanged.
//   - table.go, evolve.go, ident.go: Table, the CREATE and ALTER plans
//     (PlanCreate, PlanEvolve), golden-tested, and QuoteIdent.
//   - binary.go: AppendRow of JSONMapper and RawMapper, the rows in binary
//     COPY format byte for byte as pgx encodes Row's values
//     (FuzzAppendRowMatchesRow), with package pgvalue's field encodings;
//     RawMapper.AppendRowUnchecked, which leaves a JSON value's check to
//     jsonb's input.
//
// Row's values are Go's (string, int64, time.Time, ...) and, for numeric,
// time and uuid, package pgvalue's (pgvalue.Numeric, pgvalue.Time,
// pgvalue.UUID); the type table keys on pgvalue's OIDs. Package pgcopy
// encodes them into the COPY.
//
// Identifiers are always quoted, with QuoteIdent (ident.go). Of ours, it
// imports stream (the record) and pgvalue (Row's values, the type OIDs, the
// field encodings of AppendRow); it does not link pgx.
package schema
