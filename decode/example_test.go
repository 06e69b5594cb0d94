package decode_test

import (
	"fmt"
	"time"

	"github.com/kafka2pg/kafka2pg/decode"
	"github.com/kafka2pg/kafka2pg/schema"
	"github.com/kafka2pg/kafka2pg/stream"
)

// A JSONMapper maps a record's JSON value to typed columns: its Table is
// what to create, its Row the values to COPY.
func ExampleJSONMapper() {
	m, err := decode.NewJSONMapper(decode.MappingSpec{Schema: "sales", Table: "orders",
		Columns: []decode.ColumnSpec{
			{Name: "id", Path: "id", Type: "bigint", NotNull: true},
			{Name: "customer", Path: "customer.name", Type: "text"},
			{Name: "total", Path: "total", Type: "numeric(12,2)"},
			{Name: "placed_at", Path: "at", Type: "timestamptz"},
		},
		Metadata: decode.MetadataSpec{Offset: "kafka_offset"}})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(schema.PlanSQL(schema.PlanCreate(m.Table())))
	row, err := m.Row(&stream.Record{Topic: "orders", Offset: 42,
		Value: []byte(`{"id": 7, "customer": {"name": "Ann"}, "total": 12.345, "at": "2026-12-03T10:00:00Z"}`)}, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	for i, c := range m.Table().Columns {
		v := row[i]
		if t, ok := v.(time.Time); ok {
			v = t.Format(time.RFC3339)
		}
		fmt.Printf("%s = %v\n", c.Name, v)
	}
	_, err = m.Row(&stream.Record{Topic: "orders", Offset: 43, Value: []byte(`{"id": "seven"}`)}, nil)
	fmt.Println(err)
	// Output:
	// CREATE SCHEMA IF NOT EXISTS "sales";
	//
	// CREATE TABLE IF NOT EXISTS "sales"."orders" (
	//     "id" bigint NOT NULL,
	//     "customer" text,
	//     "total" numeric(12,2),
	//     "placed_at" timestamp with time zone,
	//     "kafka_offset" bigint NOT NULL
	// );
	//
	// id = 7
	// customer = Ann
	// total = 12.35
	// placed_at = 2026-12-03T10:00:00Z
	// kafka_offset = 42
	// decode orders/0@43: column "id": type_mismatch: path id of the value: "seven" is not a number: a bigint column takes a JSON number (or a string holding one)
}
