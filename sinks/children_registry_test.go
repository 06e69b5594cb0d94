package sinks_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/sr"
	"github.com/twmb/franz-go/pkg/sr/srfake"

	"github.com/kafka2pg/kafka2pg/decode"
	"github.com/kafka2pg/kafka2pg/internal/pgtest"
	"github.com/kafka2pg/kafka2pg/registry"
	"github.com/kafka2pg/kafka2pg/sinks"
	"github.com/kafka2pg/kafka2pg/stream"
)

const orderAvro = `{"type": "record", "name": "Order", "fields": [
  {"name": "id", "type": "long"},
  {"name": "items", "type": {"type": "array", "items": {"type": "record", "name": "Item", "fields": [
    {"name": "sku", "type": "string"}, {"name": "qty", "type": "int"}]}}}]}`

// An Avro order's items (an array field, which the registry's mapper
// writes as a jsonb column) become the rows of a child table, read from
// that column: the path's first member.
func TestAnAvroArrayBecomesChildren(t *testing.T) {
	t.Parallel()
	fake := srfake.New()
	t.Cleanup(fake.Close)
	fake.SeedSchema("orders-value", 1, 7, sr.Schema{Schema: orderAvro})
	reg, err := registry.New(registry.Config{URLs: []string{fake.URL()}})
	if err != nil {
		t.Fatal(err)
	}
	set, err := load(t, `sinks:
  - topic: orders
    format: avro
    metadata: {topic: kafka_topic, partition: kafka_partition, offset: kafka_offset}
    children:
      - path: items
        table: order_items
        columns:
          - {name: sku, type: text}
          - {name: qty, type: integer}
`).Build(t.Context(), reg)
	if err != nil {
		t.Fatal(err)
	}
	_, pool := pgtest.MigratedPool(t)
	w, epoch := setWriter(t, pool, set, "g")
	sch := avro.MustParse(orderAvro)
	value := func(id int64, skus ...string) []byte {
		items := []map[string]any{}
		for i, s := range skus {
			items = append(items, map[string]any{"sku": s, "qty": i + 1})
		}
		b, err := avro.Marshal(sch, map[string]any{"id": id, "items": items})
		if err != nil {
			t.Fatal(err)
		}
		return append(decode.AppendWireHeader(nil, 7, nil), b...)
	}
	b := orderBatch(epoch, 0, "", "", "")
	for i, v := range [][]byte{value(1, "a", "b"), value(2), value(3, "c")} {
		b.Records[i] = stream.Record{Topic: "orders", Offset: int64(i), Value: v}
	}
	if err := w.Write(t.Context(), b); err != nil {
		t.Fatal(err)
	}
	got := queryString(t, pool, `SELECT string_agg(format('%s:%s:%s', o.id, i.sku, i.qty), ' ' ORDER BY o.id, i.index)
		FROM orders o JOIN order_items i USING (kafka_topic, kafka_partition, kafka_offset)`)
	if got != "1:a:1 1:b:2 3:c:1" {
		t.Errorf("orders joined to their children: %s", got)
	}

	// In mode upsert, keyed by the Kafka key's id, a record delivered
	// again replaces its order's children.
	fake.SeedSchema("orders-key", 1, 8, sr.Schema{Schema: `{"type": "record", "name": "OrderKey", "fields": [{"name": "id", "type": "long"}]}`})
	set, err = load(t, `sinks:
  - topic: orders
    format: avro
    mode: upsert
    key: [key_id]
    table: orders_by_key
    children:
      - {path: items, table: order_items_by_key, columns: [{name: sku, type: text}]}
`).Build(t.Context(), reg)
	if err != nil {
		t.Fatal(err)
	}
	w, epoch = setWriter(t, pool, set, "g2")
	keyOf := func(id int64) []byte {
		b, err := avro.Marshal(avro.MustParse(`{"type": "record", "name": "OrderKey", "fields": [{"name": "id", "type": "long"}]}`), map[string]any{"id": id})
		if err != nil {
			t.Fatal(err)
		}
		return append(decode.AppendWireHeader(nil, 8, nil), b...)
	}
	for n, values := range [][][]byte{{value(1, "a", "b"), value(2, "c")}, {value(1, "d"), value(2, "c")}} {
		b := orderBatch(epoch, int64(2*n), "", "")
		for i, v := range values {
			b.Records[i] = stream.Record{Topic: "orders", Offset: int64(2*n + i), Key: keyOf(int64(i + 1)), Value: v}
		}
		if err := w.Write(t.Context(), b); err != nil {
			t.Fatal(err)
		}
	}
	got = queryString(t, pool, `SELECT string_agg(format('%s:%s', key_id, sku), ' ' ORDER BY key_id, index) FROM order_items_by_key`)
	if got != "1:d 2:c" {
		t.Errorf("children after order 1 came again with other items: %s", got)
	}

	// A path that starts with no jsonb column of the parent is refused.
	_, err = load(t, "sinks:\n  - topic: orders\n    format: avro\n    metadata: {topic: t, partition: p, offset: o}\n    children:\n      - {path: id, table: c, columns: [{name: a, type: text}]}\n").Build(t.Context(), reg)
	var fe *sinks.FieldError
	if !errors.As(err, &fe) || fe.Field != "sinks[0].children[0].path" || !strings.Contains(err.Error(), `no jsonb column "id"`) {
		t.Errorf("a path of a bigint column: %v, want a FieldError of sinks[0].children[0].path", err)
	}
}
