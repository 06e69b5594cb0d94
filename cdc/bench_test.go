package cdc

import (
	"errors"
	"testing"

	"github.com/kafka2pg/kafka2pg/decode"
	"github.com/kafka2pg/kafka2pg/stream"
)

// Decode per record: a create with the Connect schema wrapper (the schema
// is several times the payload and read, not parsed, once cached), the
// all-types event, and a schemaless one.
func BenchmarkDecode(b *testing.B) {
	for _, c := range []struct {
		name    string
		fixture string
		cfg     Config
	}{
		{"customers_with_schema", "pg_customers_create.json", Config{}},
		{"all_types_with_schema", "pg_all_types_create.json", Config{}},
		{"customers_schemaless", "mysql_customers_update_noschema.json", Config{Columns: []Column{
			{Name: "id", Type: "integer"}, {Name: "first_name", Type: "text"}, {Name: "last_name", Type: "text"}, {Name: "email", Type: "text"}}, Key: []string{"id"}}},
	} {
		b.Run(c.name, func(b *testing.B) { benchDecode(b, mustDecoder(b, c.cfg), fixture(b, c.fixture)) })
	}
}

// benchDecode decodes rec again and again, once its table is grown.
func benchDecode(b *testing.B, d *Decoder, rec stream.Record) {
	var ch stream.Change
	if err := d.Decode(&rec, &ch); err != nil && !errors.Is(err, decode.ErrTableChanged) {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(rec.Key) + len(rec.Value)))
	b.ReportAllocs()
	for b.Loop() {
		if err := d.Decode(&rec, &ch); err != nil {
			b.Fatal(err)
		}
	}
}

// Row of format connect_json, with the schema wrapper.
func BenchmarkConnectMapperRow(b *testing.B) {
	m, err := NewConnectMapper(Config{Table: "orders"})
	if err != nil {
		b.Fatal(err)
	}
	rec := fixture(b, "connect_orders_v1.json")
	row, err := m.Row(&rec, nil)
	if err != nil && !errors.Is(err, decode.ErrTableChanged) {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(rec.Key) + len(rec.Value)))
	b.ReportAllocs()
	for b.Loop() {
		if row, err = m.Row(&rec, row); err != nil {
			b.Fatal(err)
		}
	}
}

// Decode of an Avro event (the wire format, its schema looked up once),
// transcoded to the JsonConverter's JSON and decoded as that.
func BenchmarkDecodeAvro(b *testing.B) {
	d := avroDecoder(b, newAvroRegistry())
	rec := stream.Record{Topic: "shop.public.customers", Key: avroRecord(b, 2, customersKeyAvro, map[string]any{"id": int32(1)}),
		Value: avroEvent(b, "c", nil, avroRow(1, "Sally"))}
	if err := d.ResolveSchemas(b.Context(), []stream.Record{rec}); err != nil {
		b.Fatal(err)
	}
	benchDecode(b, d, rec)
}
