// Package cdc decodes change-data-capture records: Debezium change events
// and plain Kafka Connect records, as the JsonConverter writes them, into
// changes of a typed table (stream.Change). It is pure code, no I/O and no
// driver: the ingest package applies the changes inside its fenced
// transaction. The values it makes are Go's and package pgvalue's, as
// package decode's mappers make them, and package pgcopy hands them to
// pgx.
//
// # The envelope
//
// Debezium writes one record per changed row. Its key is the row's primary
// key (a struct of the key columns); its value is the change envelope:
//
//	{"before": {...} | null,   the row before the change
//	 "after":  {...} | null,   the row after it
//	 "op": "c",                c create, r snapshot read, u update,
//	                           d delete, t truncate, m message
//	 "source": {...},          connector, db, schema, table, ts_ms, snapshot,
//	                           txId and lsn (Postgres), file, pos, gtid (MySQL)
//	 "ts_ms": 1559033904863,   when the connector processed it
//	 "transaction": {"id": "571:53195832", "total_order": 1,
//	                 "data_collection_order": 1} | null}
//
// With schemas.enable=true (the JsonConverter's default) key and value are
// wrapped as {"schema": <Connect schema>, "payload": <the above>}; the
// schema gives every column its type. Without it, Config.Columns types the
// row's fields.
//
// With Confluent's AvroConverter or ProtobufConverter (Config.Format avro,
// protobuf) key and value are in the Confluent wire format, their schemas
// in a Schema Registry (Config.Lookup, called with the batch's ctx from
// ResolveSchemas, which the writer runs before the batch's transaction:
// Decode does no I/O). A registry schema is read back
// into the Connect schema it was made from (wire_avro.go,
// wire_protobuf.go say how, and what Protobuf loses), and each record into
// the JSON the JsonConverter would have written, so that it decodes to the
// same change as its JSON twin.
//
// # What each op becomes
//
// Decoder.Decode fills a stream.Change:
//
//   - c, r: OpUpsert of the after row (Row) by its key (Key).
//   - u: OpUpsert of the after row; when the before image holds the key
//     columns and they differ from after's, OldKey is the old key, to be
//     deleted first (a primary-key change).
//   - d: OpDelete by the key, from the record key, else from before.
//   - t: OpTruncate.
//   - m (a logical decoding message), and a tombstone (a null value, which
//     follows every delete for log compaction): OpNone. A message carries no
//     row of the table; dead-lettering it would only bury real bad records.
//
// The writer applies a batch's changes in offset order, the last change of
// each key winning: an upsert with OldKey is a delete of OldKey and an
// upsert of Key; changes before a batch's last truncate need not be applied
// at all. Unavailable lists columns whose value Debezium left out (an
// unchanged TOASTed value, sent as the unavailable.value.placeholder): an
// update keeps their stored value. A table without key columns takes
// creates and snapshot reads as appends and refuses updates and deletes
// (KindNoKey): they cannot be applied to the right row.
//
// A truncate has a null key, so Kafka may put it in any partition; on a
// topic with several partitions its order against the other partitions'
// changes is Kafka's, not the source's.
//
// # The table
//
// The table is the fold of the row schemas the records carry, as the
// registry mappers fold schema versions: the first schema's fields are the
// columns (NOT NULL where the field is required), then the Config.Source
// and Config.Kafka metadata columns; a later schema's new field is a new
// nullable column at the end, a widened field (int32 to int64, float to
// double, a wider Decimal) alters its column, a dropped field leaves its
// column nullable, and any other change makes that schema's records bad
// records of kind schema_incompatible. Decode returns an error wrapping
// decode.ErrTableChanged when a record changes the table; Table then
// describes it, and the record decodes once the table is there. The
// primary key is the record key's fields (Config.Key overrides), settled
// by the first record with a row.
//
// # The type table
//
// One table (types.go) maps each Connect type to its column:
//
//	int8, int16                 smallint        (Postgres has no 1-byte integer)
//	int32, int64                integer, bigint
//	float, double               real, double precision ("NaN", "Infinity", "-Infinity" kept)
//	boolean, string, bytes      boolean, text, bytea (base64 in JSON)
//	Decimal (scale)             numeric(p,s) with connect.decimal.precision, else numeric;
//	                            base64 big-endian two's complement, or a JSON number
//	VariableScaleDecimal        numeric ({"scale", "value"})
//	Date, io.debezium.time.Date date (days; Debezium's infinity sentinels kept)
//	Time, Time, MicroTime,      time (milli-, micro-, nanoseconds past midnight; 24:00 allowed)
//	NanoTime
//	Timestamp, Timestamp,       timestamp without time zone (milli-, micro-, nanoseconds
//	MicroTimestamp, NanoTimestamp since the epoch; Debezium's sentinels become ±infinity)
//	ZonedTimestamp              timestamp with time zone (ISO-8601 with offset; "infinity")
//	ZonedTime                   time with time zone (pgvalue.TimeTZ)
//	IsoDate, IsoTime,           date, time, timestamp
//	IsoTimestamp
//	Year                        integer
//	MicroDuration, NanoDuration interval (of that many microseconds)
//	Interval                    interval (P1Y2M3DT4H5M6.78S: months, days and time apart)
//	Json                        jsonb
//	Uuid                        uuid
//	Enum, Xml                   text, xml
//	EnumSet                     text[] (a MySQL SET)
//	Bits (length)               bit varying(length): the length's bits, leading zeros kept
//	                            (a bit varying source column's, known with
//	                            column.propagate.source.type: its own bits)
//	geometry.Geometry,          bytea: the WKB, as PostGIS EWKB when there is an SRID
//	Geography, Point            (ST_GeomFromEWKB(col) or col::geometry reads it)
//	array                       T[] when the items map to a scalar column, else jsonb
//	map, struct                 jsonb, with the types inside converted (a Decimal is a
//	                            number, a date "2024-02-29")
//
// Names are Connect's (org.apache.kafka.connect.data.*) and Debezium's
// (io.debezium.time.*, io.debezium.data.*); an unknown name, or a name on
// another primitive type, falls back to the primitive. Postgres keeps
// microseconds: nanoseconds are truncated toward negative infinity, so a
// value never moves into the next second or day, and values before 1970
// truncate like values after. Values beyond Postgres' ranges (dates before
// 4714 BC, Decimals with more integer digits than numeric(p,s) holds) are
// bad records with their reason, not rows the server refuses. A null stays
// NULL: a schema default never replaces it.
//
// The values are Go's (int16, int32, int64, float32, float64, bool,
// string, []byte, time.Time, []string, []any for an array) and package
// pgvalue's for the types Go lacks: pgvalue.Numeric, Time, TimeTZ,
// Interval, UUID, Bits, and pgvalue.Infinity for a date's or a
// timestamp's infinity and -infinity.
//
// # Errors
//
// A record that cannot become a change is a *decode.DecodeError (errors.Is
// decode.ErrBadRecord) naming the column and one of the kinds of package
// decode (invalid_json, type_mismatch, out_of_range, null_value,
// schema_incompatible, ...) or of this package (KindNotAnEnvelope,
// KindUnknownOp, KindNoKey, KindInvalidSchema); never a panic (FuzzDecode).
//
// # Speed
//
// A record is read once, by a pull reader led by the compiled schema,
// without a tree of the document. A record's schema is compiled the first
// time its JSON text is seen; after that a record whose bytes at its
// schema member start with the text of the schema last seen has that
// schema, so the schema Debezium repeats in every record costs a
// comparison of bytes, neither a parse nor a scan. The values a record
// does not need (most of source) are validated and skipped, the source
// block's strings reuse the previous record's when they are equal, and
// the row's strings share one arena: decoding allocates only the row's
// values.
package cdc
