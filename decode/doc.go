// Package decode turns Kafka records into table rows: the mappers of JSON
// values (typed columns through JSON paths), of the zero-config table, and
// of the schema registry's formats (Avro, Protobuf, JSON Schema). It does
// no I/O and starts no goroutines; package ingest runs the COPY and
// package registry reads the registry.
//
// # Mappers
//
// A mapper has a Table (package schema's model, which ingest creates and
// evolves with schema's plans) and a Row, the record's values in the
// table's column order:
//
//   - RawMapper (raw.go): the zero-config table, RawTable: the record's
//     coordinates, key, headers (HeadersJSON) and value as jsonb, text or
//     bytea (ValueFormat).
//   - JSONMapper (mapping.go, from a MappingSpec): typed columns from JSON
//     paths (jsonpath.go), through the converters of schema's type table
//     (types.go, convert.go, decimal.go, datetime.go). scan*.go read a
//     record in one pass.
//   - RegistryMapper (wire_mapper.go, from a RegistryMappingSpec): Avro
//     (avro*.go), Protobuf (protobuf*.go) or JSON Schema (wire_jsonschema.go)
//     in the Confluent wire format (wire.go). Its table grows with new
//     schema versions, which Row reports with ErrTableChanged.
//
// Row's values are Go's (string, int64, float64, bool, time.Time, []byte
// for jsonb and bytea, netip.Prefix for inet, slices for arrays, nil for
// NULL) and package pgvalue's for numeric, time and uuid.
//
// # Rows straight into COPY
//
// JSONMapper and RawMapper also have AppendRow, which writes the row as
// the fields of a binary COPY tuple, byte for byte what package pgcopy
// writes for Row's values (FuzzAppendRowMatchesRow), without boxing a
// value; a column whose type is not the mapping's own goes through the
// caller's pgvalue.FieldEncoder. RawMapper.AppendRowUnchecked leaves the
// check of a JSON value to jsonb's input.
//
// # Filters
//
// CompileFilter compiles a sink's where expression (github.com/expr-lang/expr,
// type-checked against value, key and headers) once; Filter.Keep decodes
// a record's value as JSON and evaluates it, letting the deletes the spec
// names through unevaluated. A record it cannot evaluate is a DecodeError
// of KindFilter.
//
// # Errors
//
// A record that cannot become a row is never a panic: Row returns a
// *DecodeError naming the record, the column, the reason and its Kind,
// which errors.Is matches to ErrBadRecord; ingest dead-letters it. Any
// other error is not the record's, and the batch is retried.
//
// # Schema lookups
//
// The registry formats read their schemas through a SchemaLookup, which
// takes the batch's ctx: ResolveSchemas (resolve.go) fetches the ids a
// batch carries before its transaction, and Row only reads what it
// fetched.
package decode
