package registry_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/hamba/avro/v2"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/sr"
	"github.com/twmb/franz-go/pkg/sr/srfake"

	"github.com/kafka2pg/kafka2pg/decode"
	"github.com/kafka2pg/kafka2pg/ingest"
	"github.com/kafka2pg/kafka2pg/internal/pgtest"
	"github.com/kafka2pg/kafka2pg/migrations"
	"github.com/kafka2pg/kafka2pg/registry"
	"github.com/kafka2pg/kafka2pg/schema"
	"github.com/kafka2pg/kafka2pg/stream"
)

// lastTrace keeps what the last Write did, for a test that writes one
// batch at a time.
type lastTrace struct{ ingest.BatchTrace }

func (l *lastTrace) TraceBatchEnd(_ context.Context, t ingest.BatchTrace) { l.BatchTrace = t }

func newClient(t *testing.T, url string) *registry.Client {
	t.Helper()
	c, err := registry.New(registry.Config{URLs: []string{url}})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestSchemasAreFetchedOnceWithTheirReferences(t *testing.T) {
	fake := srfake.New()
	defer fake.Close()
	var byID atomic.Int32
	fake.Intercept(func(_ http.ResponseWriter, r *http.Request) bool {
		if strings.HasPrefix(r.URL.Path, "/schemas/ids/") {
			byID.Add(1)
		}
		return false
	})
	fake.SeedSchema("money.proto", 1, 1, sr.Schema{Type: sr.TypeProtobuf, Schema: `syntax = "proto3"; package m; message Money { int64 units = 1; }`})
	fake.SeedSchema("orders-value", 1, 2, sr.Schema{Type: sr.TypeProtobuf,
		Schema:     `syntax = "proto3"; import "money.proto"; message Order { m.Money price = 1; }`,
		References: []sr.SchemaReference{{Name: "money.proto", Subject: "money.proto", Version: 1}}})
	c := newClient(t, fake.URL())
	ctx := t.Context()
	for range 3 {
		rs, err := c.SchemaByID(ctx, 2)
		if err != nil {
			t.Fatal(err)
		}
		if rs.Type != "PROTOBUF" || len(rs.References) != 1 || rs.References[0].Name != "money.proto" || !strings.Contains(rs.References[0].Text, "Money") {
			t.Fatalf("schema %+v", rs)
		}
	}
	if n := byID.Load(); n != 1 {
		t.Errorf("the schema of one id was fetched %d times, want once", n)
	}
	_, err := c.SchemaByID(ctx, 404)
	if !errors.Is(err, decode.ErrSchemaNotFound) {
		t.Errorf("an unknown id: %v, want ErrSchemaNotFound", err)
	}
	if _, err := c.Versions(ctx, "nope-value"); !errors.Is(err, registry.ErrSubjectNotFound) {
		t.Errorf("an unknown subject: %v, want ErrSubjectNotFound", err)
	}
	down := newClient(t, "http://127.0.0.1:1")
	if _, err := down.SchemaByID(ctx, 2); err == nil || errors.Is(err, decode.ErrSchemaNotFound) {
		t.Errorf("an unreachable registry: %v, want an error that is not ErrSchemaNotFound", err)
	}
}

func TestConfigErrorsNameTheField(t *testing.T) {
	for _, c := range []struct {
		cfg  registry.Config
		says string
	}{
		{registry.Config{}, "registry.Config.URLs: empty"},
		{registry.Config{URLs: []string{"localhost:8081"}}, "must start with http://"},
		{registry.Config{URLs: []string{"http://x"}, TLSCert: "c"}, "registry.Config.TLSCert: goes with registry.Config.TLSKey"},
		{registry.Config{URLs: []string{"http://x"}, Password: "p"}, "registry.Config.Password: set without registry.Config.User"},
	} {
		err := c.cfg.Validate()
		if err == nil || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%+v: got %v, want %q", c.cfg, err, c.says)
		}
		if fe, ok := errors.AsType[*stream.FieldError](err); !ok || !strings.HasPrefix(fe.Field, "registry.Config.") {
			t.Errorf("%+v: got %v, want a *stream.FieldError on a field of registry.Config", c.cfg, err)
		}
	}
}

// The versions of orders-value: add an optional field, add a field with a
// default, widen int → long, then change a field incompatibly.
var orderVersions = []string{
	`{"type": "record", "name": "Order", "fields": [{"name": "id", "type": "long"}, {"name": "name", "type": "string"}, {"name": "qty", "type": "int"}]}`,
	`{"type": "record", "name": "Order", "fields": [{"name": "id", "type": "long"}, {"name": "name", "type": "string"}, {"name": "qty", "type": "int"},
	  {"name": "email", "type": ["null", "string"], "default": null}]}`,
	`{"type": "record", "name": "Order", "fields": [{"name": "id", "type": "long"}, {"name": "name", "type": "string"}, {"name": "qty", "type": "int"},
	  {"name": "email", "type": ["null", "string"], "default": null}, {"name": "country", "type": "string", "default": "NL"}]}`,
	`{"type": "record", "name": "Order", "fields": [{"name": "id", "type": "long"}, {"name": "name", "type": "string"}, {"name": "qty", "type": "long"},
	  {"name": "email", "type": ["null", "string"], "default": null}, {"name": "country", "type": "string", "default": "NL"}]}`,
	`{"type": "record", "name": "Order", "fields": [{"name": "id", "type": "long"}, {"name": "name", "type": "long"}, {"name": "qty", "type": "long"},
	  {"name": "email", "type": ["null", "string"], "default": null}, {"name": "country", "type": "string", "default": "NL"}]}`,
}

func encode(t *testing.T, id int, text string, v map[string]any) []byte {
	t.Helper()
	b, err := avro.Marshal(avro.MustParse(text), v)
	if err != nil {
		t.Fatal(err)
	}
	return append(decode.AppendWireHeader(nil, id, nil), b...)
}

// TestAnEvolvingSubjectEvolvesTheTableColumnByColumn runs the versions
// through the real writer into Postgres: the mapper starts from version 1,
// each later version arrives in the records of one batch, and the table in
// the catalog is checked column by column after each.
func TestAnEvolvingSubjectEvolvesTheTableColumnByColumn(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	url := pgtest.URL(t)
	if err := migrations.Up(ctx, url); err != nil {
		t.Fatal(err)
	}
	pcfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	// One connection, so that the widening int -> long must be written
	// through the connection that cached int4 before it.
	pcfg.MaxConns = 1
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)

	fake := srfake.New()
	defer fake.Close()
	ids := make([]int, len(orderVersions))
	for i, text := range orderVersions {
		ids[i] = 100 + i
		fake.SeedSchema("orders-value", i+1, ids[i], sr.Schema{Schema: text})
	}
	c := newClient(t, fake.URL())
	m, err := decode.NewRegistryMapper(decode.RegistryMappingSpec{Format: decode.FormatAvro, Schema: "public", Table: "orders",
		Value: []decode.RegisteredSchema{must(c.SchemaByID(ctx, ids[0]))}, Lookup: c.Lookup(),
		Metadata: decode.MetadataSpec{Offset: "kafka_offset"}})
	if err != nil {
		t.Fatal(err)
	}
	var last lastTrace
	w, err := ingest.New(pool, ingest.Config{Group: "g", Sinks: map[string]ingest.Sink{"orders": {Table: m.Table(), Mapper: m, Evolve: true}}, Tracer: &last})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.EnsureTables(ctx, true); err != nil {
		t.Fatal(err)
	}
	pos, err := w.Claim(ctx, "orders", []int32{0})
	if err != nil {
		t.Fatal(err)
	}
	values := []map[string]any{
		{"id": int64(1), "name": "a", "qty": int32(1)},
		{"id": int64(2), "name": "b", "qty": int32(2), "email": "b@x"},
		{"id": int64(3), "name": "c", "qty": int32(3), "email": nil, "country": "BE"},
		{"id": int64(4), "name": "d", "qty": int64(1) << 40, "email": nil, "country": "DE"},
		{"id": int64(5), "name": int64(5), "qty": int64(5), "email": nil, "country": "FR"},
	}
	wantColumns := []string{
		"id bigint NOT NULL, name text NOT NULL, qty integer NOT NULL, kafka_offset bigint NOT NULL",
		"id bigint NOT NULL, name text NOT NULL, qty integer NOT NULL, kafka_offset bigint NOT NULL, email text",
		"id bigint NOT NULL, name text NOT NULL, qty integer NOT NULL, kafka_offset bigint NOT NULL, email text, country text",
		"id bigint NOT NULL, name text NOT NULL, qty bigint NOT NULL, kafka_offset bigint NOT NULL, email text, country text",
		"id bigint NOT NULL, name text NOT NULL, qty bigint NOT NULL, kafka_offset bigint NOT NULL, email text, country text",
	}
	for i, v := range values {
		// Each batch has a record of the new version and one of the first.
		prev := int64(2 * i) // where the batch before left next_offset
		if i == 0 {
			prev = -1
		}
		b := &stream.Batch{Topic: "orders", Partition: 0, Epoch: pos[0].Epoch, PrevOffset: prev, FirstOffset: int64(2 * i), NextOffset: int64(2*i + 2), LeaderEpoch: -1, LogEndOffset: -1,
			Records: []stream.Record{
				{Topic: "orders", Offset: int64(2 * i), Value: encode(t, ids[i], orderVersions[i], v)},
				{Topic: "orders", Offset: int64(2*i + 1), Value: encode(t, ids[0], orderVersions[0], map[string]any{"id": int64(100 + i), "name": "old", "qty": int32(i)})},
			}}
		err := w.Write(ctx, b)
		if err != nil {
			t.Fatalf("version %d: %v", i+1, err)
		}
		res := last.BatchTrace
		if got := catalogColumns(t, pool); got != wantColumns[i] {
			t.Errorf("version %d: the table has\n %s\nwant\n %s", i+1, got, wantColumns[i])
		}
		wantRows, wantDead := 2, 0
		if i == 4 {
			wantRows, wantDead = 1, 1
		}
		if res.Rows != wantRows || res.DeadLetters != wantDead {
			t.Errorf("version %d: %d rows and %d dead letters, want %d and %d", i+1, res.Rows, res.DeadLetters, wantRows, wantDead)
		}
	}
	var rows []string
	r, err := pool.Query(ctx, `SELECT concat_ws('|', id, name, qty, coalesce(email, 'NULL'), coalesce(country, 'NULL')) FROM orders ORDER BY kafka_offset`)
	if err != nil {
		t.Fatal(err)
	}
	for r.Next() {
		var s string
		if err := r.Scan(&s); err != nil {
			t.Fatal(err)
		}
		rows = append(rows, s)
	}
	if err := r.Err(); err != nil {
		t.Fatal(err)
	}
	want := "1|a|1|NULL|NULL 100|old|0|NULL|NULL 2|b|2|b@x|NULL 101|old|1|NULL|NULL 3|c|3|NULL|BE 102|old|2|NULL|NL " +
		"4|d|1099511627776|NULL|DE 103|old|3|NULL|NL 104|old|4|NULL|NL"
	if got := strings.Join(rows, " "); got != want {
		t.Errorf("rows\n %s\nwant\n %s", got, want)
	}
	var kind, msg string
	if err := pool.QueryRow(ctx, `SELECT error_kind, error_message FROM kafka2pg.dead_letters WHERE kafka_offset = 8`).Scan(&kind, &msg); err != nil {
		t.Fatalf("the dead letter of the incompatible version: %v", err)
	}
	if kind != decode.KindSchemaIncompatible || !strings.Contains(msg, "field name changed type from string") {
		t.Errorf("dead letter %s: %s", kind, msg)
	}

	// A schema id the registry does not know is dead-lettered, not dropped.
	b := &stream.Batch{Topic: "orders", Partition: 0, Epoch: pos[0].Epoch, PrevOffset: 10, FirstOffset: 10, NextOffset: 11, LeaderEpoch: -1, LogEndOffset: -1,
		Records: []stream.Record{{Topic: "orders", Offset: 10, Value: encode(t, 999, orderVersions[0], map[string]any{"id": int64(9), "name": "x", "qty": int32(1)})}}}
	if err := w.Write(ctx, b); err != nil || last.DeadLetters != 1 {
		t.Fatalf("unknown schema id: %+v, %v", last.BatchTrace, err)
	}
	if err := pool.QueryRow(ctx, `SELECT error_kind FROM kafka2pg.dead_letters WHERE kafka_offset = 10`).Scan(&kind); err != nil || kind != decode.KindUnknownSchema {
		t.Errorf("the unknown schema's dead letter: %q, %v", kind, err)
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

func catalogColumns(t *testing.T, pool *pgxpool.Pool) string {
	t.Helper()
	rows, err := pool.Query(context.Background(), schema.ExistingColumnsSQL, `"public"."orders"`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var parts []string
	for rows.Next() {
		var c schema.ExistingColumn
		if err := rows.Scan(&c.Name, &c.Type, &c.NotNull, &c.Filled, &c.Generated); err != nil {
			t.Fatal(err)
		}
		s := fmt.Sprintf("%s %s", c.Name, c.Type)
		if c.NotNull {
			s += " NOT NULL"
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, ", ")
}

// TestAnIncompatibleSchemaStopsThePartitionWithOnErrorStop: with --on-error
// stop, the first record of an incompatible version stops the partition
// after the records before it are committed.
func TestAnIncompatibleSchemaStopsThePartitionWithOnErrorStop(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	_, pool := pgtest.MigratedPool(t)
	fake := srfake.New()
	defer fake.Close()
	fake.SeedSchema("orders-value", 1, 201, sr.Schema{Schema: orderVersions[0]})
	fake.SeedSchema("orders-value", 2, 205, sr.Schema{Schema: orderVersions[4]})
	c := newClient(t, fake.URL())
	m, err := decode.NewRegistryMapper(decode.RegistryMappingSpec{Format: decode.FormatAvro, Schema: "public", Table: "orders",
		Value: []decode.RegisteredSchema{must(c.SchemaByID(ctx, 201))}, Lookup: c.Lookup()})
	if err != nil {
		t.Fatal(err)
	}
	w, err := ingest.New(pool, ingest.Config{Group: "g", OnError: ingest.OnErrorStop, Sinks: map[string]ingest.Sink{"orders": {Table: m.Table(), Mapper: m, Evolve: true}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.EnsureTables(ctx, true); err != nil {
		t.Fatal(err)
	}
	pos, err := w.Claim(ctx, "orders", []int32{0})
	if err != nil {
		t.Fatal(err)
	}
	b := &stream.Batch{Topic: "orders", Partition: 0, Epoch: pos[0].Epoch, PrevOffset: -1, FirstOffset: 0, NextOffset: 3, LeaderEpoch: -1, LogEndOffset: -1,
		Records: []stream.Record{
			{Topic: "orders", Offset: 0, Value: encode(t, 201, orderVersions[0], map[string]any{"id": int64(1), "name": "a", "qty": int32(1)})},
			{Topic: "orders", Offset: 1, Value: encode(t, 205, orderVersions[4], map[string]any{"id": int64(2), "name": int64(2), "qty": int64(2), "email": nil, "country": "x"})},
			{Topic: "orders", Offset: 2, Value: encode(t, 201, orderVersions[0], map[string]any{"id": int64(3), "name": "c", "qty": int32(3)})},
		}}
	err = w.Write(ctx, b)
	var stop *stream.StopError
	if !errors.As(err, &stop) || stop.Offset != 1 || stop.Kind != decode.KindSchemaIncompatible {
		t.Fatalf("Write: %v, want a StopError at offset 1 of kind schema_incompatible", err)
	}
	var n int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM orders`).Scan(&n); err != nil || n != 1 {
		t.Errorf("%d rows (%v), want the one before the incompatible record", n, err)
	}
}
