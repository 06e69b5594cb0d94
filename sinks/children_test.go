package sinks_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.yaml.in/yaml/v3"

	"github.com/kafka2pg/kafka2pg/deadletters"
	"github.com/kafka2pg/kafka2pg/ingest"
	"github.com/kafka2pg/kafka2pg/internal/pgtest"
	"github.com/kafka2pg/kafka2pg/sinks"
	"github.com/kafka2pg/kafka2pg/stream"
)

const ordersUpsert = `sinks:
  - topic: orders
    mode: upsert
    key: [id]
    columns:
      - {name: id, type: bigint}
      - {name: customer, type: text}
    children:
      - path: items
        table: order_items
        index_column: item_index
        columns:
          - {name: sku, type: text, not_null: true}
          - {name: qty, type: integer}
`

const ordersAppend = `sinks:
  - topic: orders
    columns:
      - {name: id, type: bigint}
    metadata: {topic: kafka_topic, partition: kafka_partition, offset: kafka_offset}
    children:
      - path: items
        table: order_items
        columns:
          - {name: sku, type: text}
          - {name: qty, type: integer}
`

// childWriter builds config's sinks into a writer on a database of its
// own, its tables created and partition 0 of topic orders claimed.
func childWriter(t *testing.T, config string) (*ingest.Writer, *pgxpool.Pool, int64) {
	t.Helper()
	_, pool := pgtest.MigratedPool(t)
	w, epoch := setWriter(t, pool, build(t, config), "g")
	return w, pool, epoch
}

// setWriter is a writer of set's sinks for group on pool, its tables
// created and partition 0 of topic orders claimed: its epoch.
func setWriter(t *testing.T, pool *pgxpool.Pool, set sinks.Set, group string) (*ingest.Writer, int64) {
	t.Helper()
	w, err := ingest.New(pool, ingest.Config{Group: group, Sinks: set.Fixed})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.EnsureTables(t.Context(), true); err != nil {
		t.Fatal(err)
	}
	pos, err := w.Claim(t.Context(), "orders", []int32{0})
	if err != nil {
		t.Fatal(err)
	}
	return w, pos[0].Epoch
}

// orderBatch is a batch of topic orders from offset first, one record a
// value ("" is a tombstone), keyed by the order's id when it has one.
func orderBatch(epoch, first int64, values ...string) *stream.Batch {
	prev := first
	if first == 0 {
		prev = -1
	}
	b := &stream.Batch{Topic: "orders", Epoch: epoch, PrevOffset: prev, FirstOffset: first, NextOffset: first + int64(len(values))}
	for i, v := range values {
		r := stream.Record{Topic: "orders", Offset: first + int64(i)}
		if v != "" {
			r.Value = []byte(v)
		}
		b.Records = append(b.Records, r)
	}
	return b
}

// order is the JSON of order id with n items, sku "<id>-<i>", qty i+q.
func order(id, n, q int) string {
	items := make([]string, n)
	for i := range items {
		items[i] = fmt.Sprintf(`{"sku":"%d-%d","qty":%d}`, id, i, i+q)
	}
	return fmt.Sprintf(`{"id":%d,"customer":"c%d","items":[%s]}`, id, id, strings.Join(items, ","))
}

func queryString(t *testing.T, pool *pgxpool.Pool, q string) string {
	t.Helper()
	var s string
	if err := pool.QueryRow(context.Background(), q).Scan(&s); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return s
}

// childrenOf is the children of the orders as "id:sku×qty,...;" by id and
// index: each order's children in array order.
func childrenOf(t *testing.T, pool *pgxpool.Pool, key string) string {
	t.Helper()
	return queryString(t, pool, fmt.Sprintf(`SELECT coalesce(string_agg(o, ';' ORDER BY k), '') FROM (
		SELECT %[1]s AS k, %[1]s::text || ':' || string_agg(sku || 'x' || coalesce(qty::text, 'NULL'), ',' ORDER BY %[2]s) AS o
		FROM order_items GROUP BY %[1]s) x`, key, map[string]string{"id": "item_index", "kafka_offset": "index"}[key]))
}

func TestOrdersWithZeroToFiftyItemsLandWithTheirChildren(t *testing.T) {
	t.Parallel()
	w, pool, e := childWriter(t, ordersUpsert)
	var values []string
	want := 0
	for id := range 51 {
		values = append(values, order(id, id, 0)) // order id has id items
		want += id
	}
	if err := w.Write(t.Context(), orderBatch(e, 0, values...)); err != nil {
		t.Fatal(err)
	}
	if n := queryString(t, pool, `SELECT count(*)::text FROM orders`); n != "51" {
		t.Errorf("orders: %s rows, want 51", n)
	}
	if n := queryString(t, pool, `SELECT count(*)::text FROM order_items`); n != fmt.Sprint(want) {
		t.Errorf("order_items: %s rows, want %d", n, want)
	}
	// Every order's children are its items in array order, indexes 0..n-1.
	bad := queryString(t, pool, `SELECT coalesce(string_agg(format('%s@%s', id, item_index), ' '), '') FROM order_items
		WHERE sku <> id || '-' || item_index OR qty <> item_index OR item_index >= id`)
	if bad != "" {
		t.Errorf("children that are not their order's item at its index: %s", bad)
	}
	pk := queryString(t, pool, `SELECT pg_get_constraintdef(oid) FROM pg_constraint WHERE conrelid = 'order_items'::regclass AND contype = 'p'`)
	if pk != "PRIMARY KEY (id, item_index)" {
		t.Errorf("order_items' primary key: %q", pk)
	}
}

func TestARedeliveredOrderReplacesItsChildren(t *testing.T) {
	t.Parallel()
	w, pool, e := childWriter(t, ordersUpsert)
	if err := w.Write(t.Context(), orderBatch(e, 0, order(1, 3, 0), order(2, 2, 0))); err != nil {
		t.Fatal(err)
	}
	// Order 1 again, with fewer items, twice in one batch (the last
	// wins), order 2 again unchanged, order 3 new.
	if err := w.Write(t.Context(), orderBatch(e, 2, order(1, 5, 10), order(2, 2, 0), order(1, 2, 100), order(3, 1, 0))); err != nil {
		t.Fatal(err)
	}
	want := "1:1-0x100,1-1x101;2:2-0x0,2-1x1;3:3-0x0"
	if got := childrenOf(t, pool, "id"); got != want {
		t.Errorf("children after redelivery:\n got %s\nwant %s", got, want)
	}
}

func TestADeletedOrderTakesItsChildren(t *testing.T) {
	t.Parallel()
	config := strings.Replace(ordersUpsert, "    key: [id]\n    columns:\n      - {name: id, type: bigint}",
		"    key: [id]\n    delete_on_tombstone: true\n    columns:\n      - {name: id, type: bigint, from: key, path: $}", 1)
	w, pool, e := childWriter(t, config)
	b := orderBatch(e, 0, order(1, 2, 0), order(2, 2, 0), "")
	for i, k := range []string{"1", "2", "1"} {
		b.Records[i].Key = []byte(k)
	}
	if err := w.Write(t.Context(), b); err != nil {
		t.Fatal(err)
	}
	if got := childrenOf(t, pool, "id"); got != "2:2-0x0,2-1x1" {
		t.Errorf("children after order 1's tombstone: %s", got)
	}
	b = orderBatch(e, 3, "")
	b.Records[0].Key = []byte("2")
	if err := w.Write(t.Context(), b); err != nil {
		t.Fatal(err)
	}
	if got := childrenOf(t, pool, "id") + queryString(t, pool, `SELECT count(*)::text FROM orders`); got != "0" {
		t.Errorf("children and orders after both tombstones: %q", got)
	}
}

func TestAnItemOfTheWrongTypeMakesTheWholeOrderADeadLetter(t *testing.T) {
	t.Parallel()
	w, pool, e := childWriter(t, ordersUpsert)
	wrong := `{"id":2,"customer":"c2","items":[{"sku":"2-0","qty":1},{"sku":"2-1","qty":"many"}]}`
	scalar := `{"id":3,"customer":"c3","items":[{"sku":"3-0","qty":1},7]}`
	notArray := `{"id":4,"customer":"c4","items":{"sku":"4-0"}}`
	if err := w.Write(t.Context(), orderBatch(e, 0, order(1, 2, 0), wrong, scalar, notArray, order(5, 1, 0))); err != nil {
		t.Fatal(err)
	}
	if got := queryString(t, pool, `SELECT string_agg(id::text, ',' ORDER BY id) FROM orders`); got != "1,5" {
		t.Errorf("orders written: %s, want 1,5", got)
	}
	if got := childrenOf(t, pool, "id"); got != "1:1-0x0,1-1x1;5:5-0x0" {
		t.Errorf("children written: %s", got)
	}
	letters := queryString(t, pool, `SELECT string_agg(kafka_offset || '=' || error_kind, ' ' ORDER BY kafka_offset) FROM kafka2pg.dead_letters`)
	if letters != "1=type_mismatch 2=type_mismatch 3=type_mismatch" {
		t.Errorf("dead letters: %s", letters)
	}
	msg := queryString(t, pool, `SELECT error_message FROM kafka2pg.dead_letters WHERE kafka_offset = 1`)
	if !strings.Contains(msg, `"order_items"`) || !strings.Contains(msg, "element 1 of items") {
		t.Errorf("the dead letter of the bad item does not name the child table and the element: %s", msg)
	}
}

// A child row Postgres refuses (here a CHECK the user added) makes its
// record a dead letter whole, through the isolating path, and the others
// land with their children.
func TestAChildRowPostgresRefusesMakesItsOrderADeadLetter(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, config, key string }{
		{"upsert", ordersUpsert, "id"},
		{"append", ordersAppend, "kafka_offset"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			w, pool, e := childWriter(t, tc.config)
			if _, err := pool.Exec(t.Context(), `ALTER TABLE order_items ADD CHECK (qty < 50)`); err != nil {
				t.Fatal(err)
			}
			if err := w.Write(t.Context(), orderBatch(e, 0, order(1, 2, 0), order(2, 2, 49), order(3, 1, 0))); err != nil {
				t.Fatal(err)
			}
			if got := queryString(t, pool, `SELECT string_agg(id::text, ',' ORDER BY id) FROM orders`); got != "1,3" {
				t.Errorf("orders written: %s, want 1,3", got)
			}
			if got := queryString(t, pool, `SELECT string_agg(sku, ',' ORDER BY sku) FROM order_items`); got != "1-0,1-1,3-0" {
				t.Errorf("children written: %s", got)
			}
			if got := queryString(t, pool, `SELECT string_agg(kafka_offset || '=' || error_kind, ' ') FROM kafka2pg.dead_letters`); got != "1=check_violation" {
				t.Errorf("dead letters: %s", got)
			}
		})
	}
}

// A dead letter of an order replays with its children, once the cause is
// fixed, and one whose item is still bad stays, writing nothing.
func TestAReplayedOrderLandsWithItsChildren(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, config string }{
		{"upsert", ordersUpsert},
		{"append", ordersAppend},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			w, pool, e := childWriter(t, tc.config)
			if _, err := pool.Exec(t.Context(), `ALTER TABLE order_items ADD CONSTRAINT small CHECK (qty < 50)`); err != nil {
				t.Fatal(err)
			}
			wrong := `{"id":3,"customer":"c3","items":[{"sku":"3-0","qty":"many"}]}`
			if err := w.Write(t.Context(), orderBatch(e, 0, order(1, 1, 0), order(2, 2, 49), wrong)); err != nil {
				t.Fatal(err)
			}
			if _, err := pool.Exec(t.Context(), `ALTER TABLE order_items DROP CONSTRAINT small`); err != nil {
				t.Fatal(err)
			}
			rep, err := w.Replay(t.Context(), deadletters.Filter{Group: "g"}, ingest.ReplayOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if rep.Replayed != 1 || rep.StillBad != 1 {
				t.Errorf("replay: %+v, want 1 replayed (order 2) and 1 still bad (order 3)", rep)
			}
			if got := queryString(t, pool, `SELECT string_agg(id::text, ',' ORDER BY id) FROM orders`); got != "1,2" {
				t.Errorf("orders after the replay: %s, want 1,2", got)
			}
			if got := queryString(t, pool, `SELECT string_agg(sku || 'x' || qty, ',' ORDER BY sku) FROM order_items`); got != "1-0x0,2-0x49,2-1x50" {
				t.Errorf("children after the replay: %s", got)
			}
		})
	}
}

func TestAppendModeChildrenJoinByTheRecordsCoordinates(t *testing.T) {
	t.Parallel()
	w, pool, e := childWriter(t, ordersAppend)
	if err := w.Write(t.Context(), orderBatch(e, 0, order(1, 2, 0), `{"id":2}`, order(1, 1, 5))); err != nil {
		t.Fatal(err)
	}
	got := queryString(t, pool, `SELECT string_agg(format('%s@%s:%s', o.id, o.kafka_offset, i.sku), ' ' ORDER BY o.kafka_offset, i.index)
		FROM orders o JOIN order_items i USING (kafka_topic, kafka_partition, kafka_offset)`)
	if got != "1@0:1-0 1@0:1-1 1@2:1-0" {
		t.Errorf("orders joined to their children: %s", got)
	}
}

func TestChildrenConfigErrorsNameTheField(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, config, field, says string }{
		{"append without coordinates", strings.Replace(ordersAppend, "    metadata: {topic: kafka_topic, partition: kafka_partition, offset: kafka_offset}\n", "", 1),
			"sinks[0].children", "metadata"},
		{"no path", strings.Replace(ordersUpsert, "      - path: items\n        table", "      - table", 1), "sinks[0].children[0].path", "path is missing"},
		{"a bad path", strings.Replace(ordersUpsert, "path: items", "path: 'items['", 1), "sinks[0].children[0]", "not closed"},
		{"an element column named like the index", strings.Replace(ordersUpsert, "{name: qty, type: integer}", "{name: item_index, type: integer}", 1),
			"sinks[0].children[0]", "item_index"},
		{"a child table named like the parent", strings.Replace(ordersUpsert, "table: order_items", "table: orders", 1), "sinks[0].children[0].table", "written twice"},
		{"an unknown key", strings.Replace(ordersUpsert, "index_column:", "index_col:", 1), "children[0].index_col", "unknown key"},
		{"format connect_json", "sinks:\n  - topic: orders\n    format: connect_json\n    children:\n      - {path: items, table: order_items, columns: [{name: sku, type: text}]}\n",
			"sinks[0].children", "format connect_json"},
		{"format debezium with value_format avro", "sinks:\n  - topic: orders\n    format: debezium\n    value_format: avro\n    children:\n      - {path: items, table: order_items, columns: [{name: sku, type: text}]}\n",
			"sinks[0].children", "value_format avro"},
		{"with version", strings.Replace(ordersUpsert, "    key: [id]\n", "    key: [id]\n    version: id\n", 1), "sinks[0].children", "children with version"},
		{"with delete: soft", strings.NewReplacer("    key: [id]\n", "    key: [id]\n    delete_on_tombstone: true\n    delete: soft\n", "{name: id, type: bigint}", "{name: id, type: bigint, from: key, path: id}").Replace(ordersUpsert), "sinks[0].children", "children with delete: soft"},
		{"a raw sink", "sinks:\n  - topic: orders\n    children:\n      - {path: items, table: order_items, columns: [{name: sku, type: text}]}\n",
			"sinks[0].children", "no columns"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var cfg sinks.Config
			err := yaml.Unmarshal([]byte(tc.config), &cfg)
			if err == nil {
				err = cfg.Validate()
			}
			var fe *sinks.FieldError
			if !errors.As(err, &fe) || fe.Field != tc.field || !strings.Contains(err.Error(), tc.says) {
				t.Errorf("error %v (field %v), want a FieldError of %s saying %q", err, fieldOf(fe), tc.field, tc.says)
			}
		})
	}
}

func fieldOf(fe *sinks.FieldError) string {
	if fe == nil {
		return "none"
	}
	return fe.Field
}

// Debezium change events of a source table orders(id int PRIMARY KEY,
// items jsonb), as the JsonConverter writes them with schemas: the jsonb
// column is a string holding the array (io.debezium.data.Json).
const (
	dbzKeySchema = `{"type":"struct","fields":[{"type":"int32","optional":false,"field":"id"}],"optional":false,"name":"shop.public.orders.Key"}`
	dbzRow       = `{"type":"struct","fields":[{"type":"int32","optional":false,"field":"id"},{"type":"string","optional":true,"name":"io.debezium.data.Json","field":"items"}],"optional":true,"name":"shop.public.orders.Value","field":"%s"}`
)

// dbz is the record of a change event of order id: op c, u, d or t;
// items the after image's array as JSON ("" for null), or the
// placeholder of an unchanged TOASTed value.
func dbz(op string, id int, items string) stream.Record {
	schema := `{"type":"struct","fields":[` + fmt.Sprintf(dbzRow, "before") + `,` + fmt.Sprintf(dbzRow, "after") +
		`,{"type":"string","optional":false,"field":"op"},{"type":"int64","optional":true,"field":"ts_ms"}],"optional":false,"name":"shop.public.orders.Envelope"}`
	after := "null"
	if op == "c" || op == "u" {
		it := "null"
		if items != "" {
			q, _ := json.Marshal(items)
			it = string(q)
		}
		after = fmt.Sprintf(`{"id":%d,"items":%s}`, id, it)
	}
	before := "null"
	if op == "d" {
		before = fmt.Sprintf(`{"id":%d,"items":null}`, id)
	}
	r := stream.Record{Topic: "orders", Value: fmt.Appendf(nil, `{"schema":%s,"payload":{"before":%s,"after":%s,"op":%q,"ts_ms":1}}`, schema, before, after, op)}
	if op != "t" {
		r.Key = fmt.Appendf(nil, `{"schema":%s,"payload":{"id":%d}}`, dbzKeySchema, id)
	}
	return r
}

func dbzBatch(epoch, first int64, records ...stream.Record) *stream.Batch {
	b := orderBatch(epoch, first, make([]string, len(records))...)
	for i := range records {
		records[i].Offset = first + int64(i)
		b.Records[i] = records[i]
	}
	return b
}

func TestADebeziumAfterImageWithAnArrayBecomesChildren(t *testing.T) {
	t.Parallel()
	w, pool, e := childWriter(t, `sinks:
  - topic: orders
    format: debezium
    children:
      - path: items
        table: order_items
        index_column: item_index
        columns:
          - {name: sku, type: text, not_null: true}
          - {name: qty, type: integer}
`)
	item := func(sku string, qty int) string { return fmt.Sprintf(`{"sku":%q,"qty":%d}`, sku, qty) }
	if err := w.Write(t.Context(), dbzBatch(e, 0,
		dbz("c", 1, "["+item("a", 1)+","+item("b", 2)+"]"),
		dbz("c", 2, "["+item("c", 3)+"]"),
		dbz("u", 1, "["+item("d", 4)+"]"),           // replaces 1's
		dbz("d", 2, ""),                             // takes 2's
		dbz("c", 3, "["+item("e", 5)+"]"),           //
		dbz("u", 3, "__debezium_unavailable_value"), // unchanged TOASTed items: 3's stay
		dbz("c", 4, `[{"sku":"f","qty":"many"}]`),   // a bad item: a dead letter, no order 4
		dbz("c", 5, ""),                             // no items
	)); err != nil {
		t.Fatal(err)
	}
	assertOrders(t, pool, "after the first batch", "1:dx4;3:ex5", "1,3,5", "6=type_mismatch")

	// A truncate empties the children with the table; a child row
	// Postgres refuses makes its change a dead letter, through the
	// change-by-change path.
	if _, err := pool.Exec(t.Context(), `ALTER TABLE order_items ADD CHECK (qty < 50)`); err != nil {
		t.Fatal(err)
	}
	if err := w.Write(t.Context(), dbzBatch(e, 8,
		dbz("t", 0, ""),
		dbz("c", 6, "["+item("g", 6)+"]"),
		dbz("c", 7, "["+item("h", 70)+"]"),
		dbz("u", 6, "["+item("i", 7)+","+item("j", 8)+"]"),
	)); err != nil {
		t.Fatal(err)
	}
	assertOrders(t, pool, "after the truncate", "6:ix7,jx8", "6", "6=type_mismatch 10=check_violation")
	// The same on the fast path, which no refused row sends elsewhere.
	if err := w.Write(t.Context(), dbzBatch(e, 12,
		dbz("c", 8, "["+item("k", 9)+"]"),
		dbz("t", 0, ""),
		dbz("c", 9, "["+item("l", 10)+"]"),
		dbz("u", 9, "["+item("m", 11)+"]"),
	)); err != nil {
		t.Fatal(err)
	}
	assertOrders(t, pool, "after a truncate on the fast path", "9:mx11", "9", "6=type_mismatch 10=check_violation")
}

// assertOrders compares the children of the orders (childrenOf), their
// ids and the dead letters (offset=kind) with what they should be when.
func assertOrders(t *testing.T, pool *pgxpool.Pool, when, children, ids, letters string) {
	t.Helper()
	got := [3]string{childrenOf(t, pool, "id"),
		queryString(t, pool, `SELECT coalesce(string_agg(id::text, ',' ORDER BY id), '') FROM orders`),
		queryString(t, pool, `SELECT coalesce(string_agg(kafka_offset || '=' || error_kind, ' ' ORDER BY kafka_offset), '') FROM kafka2pg.dead_letters`)}
	if want := [3]string{children, ids, letters}; got != want {
		t.Errorf("%s: children, orders and dead letters\n got %q\nwant %q", when, got, want)
	}
}
