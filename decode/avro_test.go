package decode

import (
	"context"
	"errors"
	"fmt"
	"math/big"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hamba/avro/v2"
	"github.com/jackc/pgx/v5"

	"github.com/kafka2pg/kafka2pg/internal/pgtest"

	"github.com/kafka2pg/kafka2pg/schema"
	"github.com/kafka2pg/kafka2pg/stream"
)

// fakeRegistry is a SchemaLookup over a map, counting lookups.
type fakeRegistry struct {
	mu      sync.Mutex
	schemas map[int]RegisteredSchema
	calls   int
	down    bool // every lookup fails as if the registry were unreachable
}

func newFakeRegistry(schemas ...RegisteredSchema) *fakeRegistry {
	f := &fakeRegistry{schemas: map[int]RegisteredSchema{}}
	for _, s := range schemas {
		f.schemas[s.ID] = s
	}
	return f
}

func (f *fakeRegistry) lookup(_ context.Context, id int) (RegisteredSchema, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if f.down {
		return RegisteredSchema{}, errors.New("dial tcp 127.0.0.1:1: connection refused")
	}
	s, ok := f.schemas[id]
	if !ok {
		return s, fmt.Errorf("schema id %d: %w", id, ErrSchemaNotFound)
	}
	return s, nil
}

// rowOf is m.Row of r after m.ResolveSchemas of r, as the writer calls
// them for a batch.
func rowOf(m *RegistryMapper, r *stream.Record, dst []any) ([]any, error) {
	if err := m.ResolveSchemas(context.Background(), []stream.Record{*r}); err != nil {
		return nil, err
	}
	return m.Row(r, dst)
}

// keyRowOf is m.KeyRow of r after m.ResolveSchemas of r.
func keyRowOf(m *RegistryMapper, r *stream.Record) ([]any, error) {
	if err := m.ResolveSchemas(context.Background(), []stream.Record{*r}); err != nil {
		return nil, err
	}
	return m.KeyRow(r)
}

// avroRecord encodes v with schema text in the wire format of id.
func avroRecord(t testing.TB, id int, text string, v any) []byte {
	t.Helper()
	s, err := avro.Parse(text)
	if err != nil {
		t.Fatalf("parse %s: %v", text, err)
	}
	b, err := avro.Marshal(s, v)
	if err != nil {
		t.Fatalf("encode %v: %v", v, err)
	}
	return append(AppendWireHeader(nil, id, nil), b...)
}

const logicalSchema = `{"type": "record", "name": "Edge", "namespace": "k2p", "fields": [
  {"name": "dec", "type": {"type": "bytes", "logicalType": "decimal", "precision": 38, "scale": 10}},
  {"name": "decf", "type": {"type": "fixed", "name": "D", "size": 16, "logicalType": "decimal", "precision": 38, "scale": 0}},
  {"name": "dec0", "type": {"type": "bytes", "logicalType": "decimal", "precision": 4, "scale": 4}},
  {"name": "u", "type": {"type": "string", "logicalType": "uuid"}},
  {"name": "d", "type": {"type": "int", "logicalType": "date"}},
  {"name": "tms", "type": {"type": "int", "logicalType": "time-millis"}},
  {"name": "tus", "type": {"type": "long", "logicalType": "time-micros"}},
  {"name": "tsms", "type": {"type": "long", "logicalType": "timestamp-millis"}},
  {"name": "tsus", "type": {"type": "long", "logicalType": "timestamp-micros"}},
  {"name": "ltms", "type": {"type": "long", "logicalType": "local-timestamp-millis"}},
  {"name": "ltus", "type": {"type": "long", "logicalType": "local-timestamp-micros"}},
  {"name": "i", "type": "int"},
  {"name": "l", "type": "long"},
  {"name": "f", "type": "float"},
  {"name": "db", "type": "double"},
  {"name": "s", "type": "string"},
  {"name": "by", "type": "bytes"},
  {"name": "b", "type": "boolean"},
  {"name": "e", "type": {"type": "enum", "name": "Color", "symbols": ["RED", "GREEN"]}},
  {"name": "opt", "type": ["null", "long"], "default": null},
  {"name": "addr", "type": ["null", {"type": "record", "name": "Addr", "fields": [
      {"name": "city", "type": "string"}, {"name": "zip", "type": ["null", "string"]}]}], "default": null},
  {"name": "tags", "type": {"type": "array", "items": "string"}},
  {"name": "attrs", "type": {"type": "map", "values": "long"}},
  {"name": "choice", "type": ["null", "string", "long"]}
]}`

func rat(s string) *big.Rat {
	r, ok := new(big.Rat).SetString(s)
	if !ok {
		panic(s)
	}
	return r
}

// edgeRecords are values at the edges of each type, with what Postgres
// reads back as text for the columns that matter.
var edgeRecords = []struct {
	name  string
	value map[string]any
	want  map[string]string // column → ::text; absent columns are not checked
}{
	{"the largest values", map[string]any{
		"dec": rat("9999999999999999999999999999.9999999999"), "decf": rat("99999999999999999999999999999999999999"), "dec0": rat("0.9999"),
		"u": "123e4567-e89b-12d3-a456-426614174000", "d": time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC),
		"tms": 24*time.Hour - time.Millisecond, "tus": 24*time.Hour - time.Microsecond,
		"tsms": time.Date(2262, 4, 11, 23, 47, 16, 854e6, time.UTC), "tsus": time.Date(2262, 4, 11, 23, 47, 16, 854775e3, time.UTC),
		"ltms": time.Date(2262, 4, 11, 23, 47, 16, 854e6, time.UTC), "ltus": time.Date(2262, 4, 11, 23, 47, 16, 854775e3, time.UTC),
		"i": int32(2147483647), "l": int64(9223372036854775807), "f": float32(3.4028235e38), "db": 1.7976931348623157e308,
		"s": "héllo wörld", "by": []byte{0, 0xff}, "b": true, "e": "GREEN", "opt": int64(7),
		"addr": map[string]any{"k2p.Addr": map[string]any{"city": "Utrecht", "zip": map[string]any{"string": "3511"}}}, "tags": []any{"a", "b"}, "attrs": map[string]any{"x": int64(1)},
		"choice": map[string]any{"long": int64(5)},
	}, map[string]string{
		"dec": "9999999999999999999999999999.9999999999", "decf": "99999999999999999999999999999999999999", "dec0": "0.9999",
		"u": "123e4567-e89b-12d3-a456-426614174000", "d": "9999-12-31", "tms": "23:59:59.999", "tus": "23:59:59.999999",
		"tsms": "2262-04-11 23:47:16.854+00", "tsus": "2262-04-11 23:47:16.854775+00",
		"ltms": "2262-04-11 23:47:16.854", "ltus": "2262-04-11 23:47:16.854775",
		"i": "2147483647", "l": "9223372036854775807", "f": "3.4028235e+38", "db": "1.7976931348623157e+308",
		"s": "héllo wörld", "by": `\x00ff`, "b": "true", "e": "GREEN", "opt": "7", "addr_city": "Utrecht", "addr_zip": "3511",
		"tags": `["a", "b"]`, "attrs": `{"x": 1}`, "choice": `{"long": 5}`,
	}},
	{"the smallest and negative values, before 1970, nulls", map[string]any{
		"dec": rat("-0.0000000001"), "decf": rat("-99999999999999999999999999999999999999"), "dec0": rat("-0.0001"),
		"u": "00000000-0000-0000-0000-000000000000", "d": time.Date(1969, 12, 31, 0, 0, 0, 0, time.UTC),
		"tms": time.Duration(0), "tus": time.Duration(0),
		"tsms": time.Date(1969, 12, 31, 23, 59, 59, 999e6, time.UTC), "tsus": time.Date(1969, 12, 31, 23, 59, 59, 999999e3, time.UTC),
		"ltms": time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC), "ltus": time.Date(1969, 12, 31, 23, 59, 59, 999999e3, time.UTC),
		"i": int32(-2147483648), "l": int64(-9223372036854775808), "f": float32(-1.5), "db": -0.1,
		"s": "", "by": []byte{}, "b": false, "e": "RED", "opt": nil, "addr": nil, "tags": []any{}, "attrs": map[string]any{},
		"choice": nil,
	}, map[string]string{
		"dec": "-0.0000000001", "decf": "-99999999999999999999999999999999999999", "dec0": "-0.0001",
		"u": "00000000-0000-0000-0000-000000000000", "d": "1969-12-31", "tms": "00:00:00", "tus": "00:00:00",
		"tsms": "1969-12-31 23:59:59.999+00", "tsus": "1969-12-31 23:59:59.999999+00",
		"ltms": "0001-01-01 00:00:00", "ltus": "1969-12-31 23:59:59.999999",
		"i": "-2147483648", "l": "-9223372036854775808", "f": "-1.5", "db": "-0.1", "s": "", "by": `\x`, "b": "false", "e": "RED",
		"opt": "NULL", "addr_city": "NULL", "addr_zip": "NULL", "tags": "[]", "attrs": "{}", "choice": "NULL",
	}},
}

func TestAvroTypesMapToTheirColumns(t *testing.T) {
	reg := newFakeRegistry(RegisteredSchema{ID: 1, Type: "AVRO", Text: logicalSchema})
	m, err := NewRegistryMapper(RegistryMappingSpec{Format: FormatAvro, Table: "edges", Value: []RegisteredSchema{reg.schemas[1]}, Lookup: reg.lookup,
		Metadata: MetadataSpec{Offset: "kafka_offset"}})
	if err != nil {
		t.Fatal(err)
	}
	got := schema.PlanSQL(schema.PlanCreate(m.Table()))
	want := `CREATE TABLE IF NOT EXISTS "edges" (
    "dec" numeric(38,10) NOT NULL,
    "decf" numeric(38,0) NOT NULL,
    "dec0" numeric(4,4) NOT NULL,
    "u" uuid NOT NULL,
    "d" date NOT NULL,
    "tms" time without time zone NOT NULL,
    "tus" time without time zone NOT NULL,
    "tsms" timestamp with time zone NOT NULL,
    "tsus" timestamp with time zone NOT NULL,
    "ltms" timestamp without time zone NOT NULL,
    "ltus" timestamp without time zone NOT NULL,
    "i" integer NOT NULL,
    "l" bigint NOT NULL,
    "f" real NOT NULL,
    "db" double precision NOT NULL,
    "s" text NOT NULL,
    "by" bytea NOT NULL,
    "b" boolean NOT NULL,
    "e" text NOT NULL,
    "opt" bigint,
    "addr_city" text,
    "addr_zip" text,
    "tags" jsonb NOT NULL,
    "attrs" jsonb NOT NULL,
    "choice" jsonb,
    "kafka_offset" bigint NOT NULL
);
`
	if got != want {
		t.Errorf("the table of the schema:\n%s\nwant:\n%s", got, want)
	}
}

// TestAvroEdgeValuesRoundTripThroughPostgres writes the edge records with
// binary COPY into the table the schema makes and reads every column back
// as text.
func TestAvroEdgeValuesRoundTripThroughPostgres(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, "SET TIME ZONE 'UTC'"); err != nil {
		t.Fatal(err)
	}
	rs := RegisteredSchema{ID: 7, Type: "AVRO", Text: logicalSchema}
	reg := newFakeRegistry(rs)
	m, err := NewRegistryMapper(RegistryMappingSpec{Format: FormatAvro, Table: "edges", Value: []RegisteredSchema{rs}, Lookup: reg.lookup,
		Metadata: MetadataSpec{Offset: "kafka_offset"}})
	if err != nil {
		t.Fatal(err)
	}
	tbl := m.Table()
	for _, stmt := range schema.PlanCreate(tbl) {
		if _, err := conn.Exec(ctx, stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	var rows [][]any
	for i, rec := range edgeRecords {
		r := &stream.Record{Topic: "edges", Offset: int64(i), Value: avroRecord(t, 7, logicalSchema, rec.value)}
		row, err := rowOf(m, r, nil)
		if err != nil {
			t.Fatalf("%s: %v", rec.name, err)
		}
		rows = append(rows, slices.Clone(row))
	}
	if _, err := conn.CopyFrom(ctx, tbl.Ident(), tbl.ColumnNames(), pgx.CopyFromRows(rows)); err != nil {
		t.Fatal(err)
	}
	for i, rec := range edgeRecords {
		for col, want := range rec.want {
			var got string
			q := fmt.Sprintf("SELECT coalesce(%s::text, 'NULL') FROM edges WHERE kafka_offset = $1", pgx.Identifier{col}.Sanitize())
			if err := conn.QueryRow(ctx, q, i).Scan(&got); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
			if got != want {
				t.Errorf("%s: column %s = %s, want %s", rec.name, col, got, want)
			}
		}
	}
	if reg.calls != 0 {
		t.Errorf("the registry was asked %d times for a schema the mapper was built with", reg.calls)
	}
}

func TestAvroBadRecordsSayWhy(t *testing.T) {
	const text = `{"type": "record", "name": "R", "fields": [{"name": "id", "type": "long"}, {"name": "s", "type": "string"}]}`
	rs := RegisteredSchema{ID: 1, Text: text}
	reg := newFakeRegistry(rs)
	m, err := NewRegistryMapper(RegistryMappingSpec{Format: FormatAvro, Table: "t", Value: []RegisteredSchema{rs}, Lookup: reg.lookup})
	if err != nil {
		t.Fatal(err)
	}
	good := avroRecord(t, 1, text, map[string]any{"id": int64(1), "s": "x"})
	cases := []struct {
		name  string
		value []byte
		kind  string
		says  string
	}{
		{"a value without the magic byte", []byte(`{"id": 1}`), KindInvalidWireFormat, "magic byte"},
		{"an empty value", []byte{}, KindInvalidWireFormat, "empty"},
		{"an unknown schema id", append(AppendWireHeader(nil, 99, nil), good[5:]...), KindUnknownSchema, "schema id 99"},
		{"a truncated value", good[:len(good)-1], KindInvalidWireFormat, "does not decode"},
		{"a string with a NUL byte", avroRecord(t, 1, text, map[string]any{"id": int64(1), "s": "a\x00b"}), KindNULByte, "field s"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := rowOf(m, &stream.Record{Topic: "t", Value: c.value}, nil)
			var de *DecodeError
			if !errors.As(err, &de) || de.Kind != c.kind || !strings.Contains(err.Error(), c.says) {
				t.Fatalf("got %v, want a %s bad record saying %q", err, c.kind, c.says)
			}
		})
	}
	t.Run("an unreachable registry is not a bad record", func(t *testing.T) {
		reg.down = true
		defer func() { reg.down = false }()
		_, err := rowOf(m, &stream.Record{Topic: "t", Value: append(AppendWireHeader(nil, 2, nil), good[5:]...)}, nil)
		if err == nil || errors.Is(err, ErrBadRecord) || !strings.Contains(err.Error(), "connection refused") {
			t.Fatalf("got %v, want a plain error that is not ErrBadRecord", err)
		}
	})
}

func TestAvroKeysMakeKeyColumnsAndTombstonesHaveAKeyRow(t *testing.T) {
	const value = `{"type": "record", "name": "V", "fields": [{"name": "name", "type": "string"}]}`
	const key = `{"type": "record", "name": "K", "fields": [{"name": "id", "type": "long"}, {"name": "region", "type": "string"}]}`
	vs, ks := RegisteredSchema{ID: 1, Text: value}, RegisteredSchema{ID: 2, Text: key}
	reg := newFakeRegistry(vs, ks)
	m, err := NewRegistryMapper(RegistryMappingSpec{Format: FormatAvro, Table: "t", Value: []RegisteredSchema{vs}, Key: []RegisteredSchema{ks},
		KeyColumns: []string{"key_id", "key_region"}, DeleteOnTombstone: true, Lookup: reg.lookup})
	if err != nil {
		t.Fatal(err)
	}
	if got := m.Table().ColumnNames(); !slices.Equal(got, []string{"name", "key_id", "key_region"}) {
		t.Fatalf("columns %v", got)
	}
	k := avroRecord(t, 2, key, map[string]any{"id": int64(42), "region": "eu"})
	row, err := rowOf(m, &stream.Record{Key: k, Value: avroRecord(t, 1, value, map[string]any{"name": "n"})}, nil)
	if err != nil || fmt.Sprint(row) != "[n 42 eu]" {
		t.Fatalf("row %v, %v", row, err)
	}
	tomb := &stream.Record{Key: k}
	if !m.IsTombstone(tomb) {
		t.Fatal("a record without value is a tombstone")
	}
	kr, err := keyRowOf(m, tomb)
	if err != nil || fmt.Sprint(kr) != "[42 eu]" {
		t.Fatalf("key row %v, %v", kr, err)
	}
	// In append mode the key's columns are nullable: a record may have no
	// key, whatever the key's schema says.
	appendMode, err := NewRegistryMapper(RegistryMappingSpec{Format: FormatAvro, Table: "t", Value: []RegisteredSchema{vs}, Key: []RegisteredSchema{ks}, Lookup: reg.lookup})
	if err != nil {
		t.Fatal(err)
	}
	if got := describeColumns(appendMode.Table()); got != "name text NOT NULL, key_id bigint, key_region text" {
		t.Errorf("append mode columns %s", got)
	}
	if row, err := rowOf(appendMode, &stream.Record{Value: avroRecord(t, 1, value, map[string]any{"name": "n"})}, nil); err != nil || fmt.Sprint(row) != "[n <nil> <nil>]" {
		t.Errorf("a record without key in append mode: %v, %v", row, err)
	}
	if _, err := NewRegistryMapper(RegistryMappingSpec{Format: FormatAvro, Table: "t", Value: []RegisteredSchema{vs}, Key: []RegisteredSchema{ks},
		KeyColumns: []string{"name"}, DeleteOnTombstone: true, Lookup: reg.lookup}); err == nil || !strings.Contains(err.Error(), "tombstone does not have") {
		t.Fatalf("a value column as the key of delete_on_tombstone: got %v", err)
	}
}

func TestAvroKeyThatIsNotARecordIsOneKeyColumn(t *testing.T) {
	const value = `{"type": "record", "name": "V", "fields": [{"name": "n", "type": "long"}]}`
	vs, ks := RegisteredSchema{ID: 1, Text: value}, RegisteredSchema{ID: 2, Text: `"string"`}
	m, err := NewRegistryMapper(RegistryMappingSpec{Format: FormatAvro, Table: "t", Value: []RegisteredSchema{vs}, Key: []RegisteredSchema{ks},
		KeyColumns: []string{"key"}, DeleteOnTombstone: true, Lookup: newFakeRegistry(vs, ks).lookup})
	if err != nil {
		t.Fatal(err)
	}
	if got := describeColumns(m.Table()); got != "n bigint NOT NULL, key text NOT NULL" {
		t.Fatalf("columns %s", got)
	}
	kr, err := keyRowOf(m, &stream.Record{Key: avroRecord(t, 2, `"string"`, "k-1")})
	if err != nil || fmt.Sprint(kr) != "[k-1]" {
		t.Fatalf("key row %v, %v", kr, err)
	}
	// A record without key cannot fill the key column.
	var de *DecodeError
	if _, err := rowOf(m, &stream.Record{Value: avroRecord(t, 1, value, map[string]any{"n": int64(1)})}, nil); !errors.As(err, &de) || de.Kind != KindNullValue {
		t.Fatalf("a record without key: %v", err)
	}
}

// TestAvroDecimalsAtPostgresLimits round-trips decimals of the largest
// precision Postgres takes, and maps a larger one to unconstrained numeric.
func TestAvroDecimalsAtPostgresLimits(t *testing.T) {
	t.Parallel()
	const text = `{"type": "record", "name": "D", "fields": [
		{"name": "p1000", "type": {"type": "bytes", "logicalType": "decimal", "precision": 1000, "scale": 500}},
		{"name": "p1200", "type": {"type": "bytes", "logicalType": "decimal", "precision": 1200, "scale": 3}}]}`
	rs := RegisteredSchema{ID: 1, Text: text}
	m, err := NewRegistryMapper(RegistryMappingSpec{Format: FormatAvro, Table: "decimals", Value: []RegisteredSchema{rs}, Lookup: newFakeRegistry(rs).lookup})
	if err != nil {
		t.Fatal(err)
	}
	if got := describeColumns(m.Table()); got != "p1000 numeric(1000,500) NOT NULL, p1200 numeric NOT NULL" {
		t.Fatalf("columns %s", got)
	}
	nines := "-" + strings.Repeat("9", 500) + "." + strings.Repeat("9", 500)
	big1200 := strings.Repeat("7", 1197) + ".123"
	row, err := rowOf(m, &stream.Record{Value: avroRecord(t, 1, text, map[string]any{"p1000": rat(nines), "p1200": rat(big1200)})}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	tbl := m.Table()
	for _, stmt := range schema.PlanCreate(tbl) {
		if _, err := conn.Exec(ctx, stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	if _, err := conn.CopyFrom(ctx, tbl.Ident(), tbl.ColumnNames(), pgx.CopyFromRows([][]any{row})); err != nil {
		t.Fatal(err)
	}
	var p1000, p1200 string
	if err := conn.QueryRow(ctx, `SELECT p1000::text, p1200::text FROM decimals`).Scan(&p1000, &p1200); err != nil {
		t.Fatal(err)
	}
	if p1000 != nines || p1200 != big1200 {
		t.Errorf("read back\n %s\n %s\nwant\n %s\n %s", p1000, p1200, nines, big1200)
	}
}

// BenchmarkAvroRow maps one record of the edge schema (26 columns of every
// type, a nested record, jsonb) per op, from parallel goroutines as
// partitions do.
func BenchmarkAvroRow(b *testing.B) {
	rs := RegisteredSchema{ID: 7, Type: "AVRO", Text: logicalSchema}
	m, err := NewRegistryMapper(RegistryMappingSpec{Format: FormatAvro, Table: "edges", Value: []RegisteredSchema{rs}, Lookup: newFakeRegistry(rs).lookup,
		Metadata: MetadataSpec{Partition: "kafka_partition", Offset: "kafka_offset"}})
	if err != nil {
		b.Fatal(err)
	}
	value := avroRecord(b, 7, logicalSchema, edgeRecords[0].value)
	b.ReportAllocs()
	b.SetBytes(int64(len(value)))
	b.RunParallel(func(pb *testing.PB) {
		var dst []any
		r := &stream.Record{Topic: "edges", Value: value}
		for pb.Next() {
			row, err := m.Row(r, dst)
			if err != nil {
				panic(err)
			}
			dst = row
		}
	})
}
