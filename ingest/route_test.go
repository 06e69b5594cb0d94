package ingest_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/kafka2pg/kafka2pg/deadletters"
	"github.com/kafka2pg/kafka2pg/ingest"
	"github.com/kafka2pg/kafka2pg/internal/pgtest"
	"github.com/kafka2pg/kafka2pg/internal/sinkstest"
	"github.com/kafka2pg/kafka2pg/stream"
)

// routedWriter builds the sinks config text and returns a writer of its
// sinks with partitions 0 and 1 of topic claimed, and their epochs.
func routedWriter(t *testing.T, pool *pgxpool.Pool, text, topic string, cfg ingest.Config) (*ingest.Writer, map[int32]int64) {
	t.Helper()
	set, _ := sinkstest.Build(t, text)
	cfg.Group, cfg.Sinks = "g", set.Fixed
	w := readyWriter(t, pool, cfg)
	pos, err := w.Claim(context.Background(), topic, []int32{0, 1})
	if err != nil {
		t.Fatal(err)
	}
	return w, map[int32]int64{0: pos[0].Epoch, 1: pos[1].Epoch}
}

// rec is a record of a routed test: its value and headers (key, value,
// ...).
type rec struct {
	value   string // "": a tombstone
	headers []string
}

// routedBatch is a batch of partition p of topic from first.
func routedBatch(topic string, p int32, epoch, first int64, recs ...rec) *stream.Batch {
	b := &stream.Batch{Topic: topic, Partition: p, Epoch: epoch, PrevOffset: prevOf(first), FirstOffset: first, NextOffset: first + int64(len(recs))}
	for i, x := range recs {
		r := stream.Record{Topic: topic, Partition: p, Offset: first + int64(i), Key: fmt.Appendf(nil, `{"id":%d}`, first+int64(i))}
		if x.value != "" {
			r.Value = []byte(x.value)
		}
		for j := 0; j+1 < len(x.headers); j += 2 {
			r.Headers = append(r.Headers, stream.Header{Key: x.headers[j], Value: []byte(x.headers[j+1])})
		}
		b.Records = append(b.Records, r)
	}
	return b
}

// tableRows is how many rows each of tables has, "a=1 b=2", "a=-" for a
// table that does not exist.
func tableRows(t *testing.T, pool *pgxpool.Pool, tables ...string) string {
	t.Helper()
	var out []string
	for _, tb := range tables {
		if queryInt(t, pool, `SELECT count(*) FROM pg_tables WHERE schemaname = 'public' AND tablename = $1`, tb) == 0 {
			out = append(out, tb+"=-")
			continue
		}
		out = append(out, fmt.Sprintf("%s=%d", tb, queryInt(t, pool, fmt.Sprintf(`SELECT count(*) FROM public.%q`, tb))))
	}
	return strings.Join(out, " ")
}

// A sink routed by a field of the value writes one batch into the tables
// its records name, creating them on first use, in the batch's one
// transaction: its offsets and all its rows together.
func TestARoutedBatchFillsTheTablesItsFieldsNameInOneTransaction(t *testing.T) {
	t.Parallel()
	_, pool := pgtest.MigratedPool(t)
	w, epochs := routedWriter(t, pool, `sinks:
  - topic: events
    table: events_${value.type}
    columns:
      - {name: id, type: bigint, from: key, path: id}
      - {name: type, type: text}
`, "events", ingest.Config{})
	ctx := context.Background()
	if got := w.RoutedTables(); len(got) != 1 || got[`"public"."events_${value.type}"`] != 0 {
		t.Errorf("RoutedTables before the first record = %v, want the sink at 0", got)
	}
	if got := tableRows(t, pool, "events_click", "events_view", `events_${value.type}`); got != "events_click=- events_view=- events_${value.type}=-" {
		t.Fatalf("before the first record: %s; want no table (routed tables are created on first use)", got)
	}
	b := routedBatch("events", 0, epochs[0], 0, rec{value: `{"type":"click"}`}, rec{value: `{"type":"view"}`}, rec{value: `{"type":"click"}`})
	if err := w.Write(ctx, b); err != nil {
		t.Fatal(err)
	}
	if got := tableRows(t, pool, "events_click", "events_view"); got != "events_click=2 events_view=1" {
		t.Errorf("after a batch of two types: %s; want events_click=2 events_view=1", got)
	}
	// A new type in the next batch: its table comes without a restart.
	if err := w.Write(ctx, routedBatch("events", 0, epochs[0], 3, rec{value: `{"type":"buy"}`}, rec{value: `{"type":"view"}`})); err != nil {
		t.Fatal(err)
	}
	if got := tableRows(t, pool, "events_click", "events_view", "events_buy"); got != "events_click=2 events_view=2 events_buy=1" {
		t.Errorf("after a batch with a new type: %s", got)
	}
	if n := queryInt(t, pool, `SELECT next_offset FROM kafka2pg.offsets WHERE topic = 'events' AND partition = 0`); n != 5 {
		t.Errorf("next_offset = %d, want 5", n)
	}
	// A batch whose fence fails writes into none of its tables.
	err := w.Write(ctx, routedBatch("events", 0, epochs[0]-1, 5, rec{value: `{"type":"click"}`}, rec{value: `{"type":"fresh"}`}))
	if !errors.Is(err, stream.ErrFenced) {
		t.Fatalf("a write of an old epoch: %v, want fenced", err)
	}
	if got := tableRows(t, pool, "events_click", "events_fresh"); got != "events_click=2 events_fresh=0" {
		t.Errorf("after a fenced batch: %s; want events_click=2 events_fresh=0 (the table was prepared, no row written)", got)
	}
}

// A sink routed by a header, in upsert mode: each tenant's table holds
// the last row of each key, and a tombstone (routed by its header)
// deletes.
func TestAnUpsertSinkRoutedByAHeader(t *testing.T) {
	t.Parallel()
	_, pool := pgtest.MigratedPool(t)
	w, epochs := routedWriter(t, pool, `sinks:
  - topic: orders
    table: ${header.tenant}_orders
    mode: upsert
    key: [id]
    delete_on_tombstone: true
    columns:
      - {name: id, type: bigint, from: key, path: id, not_null: true}
      - {name: total, type: numeric}
`, "orders", ingest.Config{})
	ctx := context.Background()
	b := routedBatch("orders", 1, epochs[1], 0,
		rec{`{"total":1}`, []string{"tenant", "acme"}}, rec{`{"total":2}`, []string{"tenant", "globex"}}, rec{`{"total":3}`, []string{"tenant", "acme"}})
	b.Records[2].Key = []byte(`{"id":0}`) // the same key as the first: the last wins
	got, err := trace(w).write(ctx, w, b)
	if err != nil {
		t.Fatal(err)
	}
	if got.Isolated {
		t.Error("a batch with no row Postgres refuses was applied one record at a time: want one change set per table")
	}
	if got := rowsOf(t, pool, "acme_orders", "id", "total"); got != "0=0:3" {
		t.Errorf("acme_orders = %q, want 0=0:3", got)
	}
	if got := rowsOf(t, pool, "globex_orders", "id", "total"); got != "1=1:2" {
		t.Errorf("globex_orders = %q, want 1=1:2", got)
	}
	tomb := routedBatch("orders", 1, epochs[1], 3, rec{"", []string{"tenant", "acme"}})
	tomb.Records[0].Key = []byte(`{"id":0}`)
	if err := w.Write(ctx, tomb); err != nil {
		t.Fatal(err)
	}
	if got := rowsOf(t, pool, "acme_orders", "id", "total"); got != "" {
		t.Errorf("acme_orders after the tombstone of key 0 = %q, want empty", got)
	}
}

// A routed upsert batch is applied as one change set per table; a row
// Postgres refuses in one table makes its record a dead letter naming
// that table, and every other record of the batch lands, in both tables,
// as does a record the mapping refuses.
func TestARoutedUpsertBatchDeadLettersARefusedRowAndWritesTheRest(t *testing.T) {
	t.Parallel()
	_, pool := pgtest.MigratedPool(t)
	ctx := context.Background()
	if _, err := pool.Exec(ctx, `CREATE TABLE acme_orders (id bigint PRIMARY KEY, total numeric CHECK (total < 100))`); err != nil {
		t.Fatal(err)
	}
	w, epochs := routedWriter(t, pool, `sinks:
  - topic: orders
    table: ${header.tenant}_orders
    mode: upsert
    key: [id]
    columns:
      - {name: id, type: bigint, from: key, path: id, not_null: true}
      - {name: total, type: numeric}
`, "orders", ingest.Config{})
	tr := trace(w)
	b := routedBatch("orders", 0, epochs[0], 0,
		rec{`{"total":1}`, []string{"tenant", "acme"}}, rec{`{"total":500}`, []string{"tenant", "acme"}},
		rec{`{"total":2}`, []string{"tenant", "globex"}}, rec{`{"total":`, []string{"tenant", "acme"}},
		rec{`{"total":3}`, []string{"tenant", "acme"}})
	got, err := tr.write(ctx, w, b)
	if err != nil {
		t.Fatal(err)
	}
	if got.Rows != 3 || got.DeadLetters != 2 || !got.Isolated {
		t.Errorf("trace: rows %d, dead letters %d (%v), isolated %v; want 3, 2 and the batch applied again one record at a time", got.Rows, got.DeadLetters, got.DeadLetterKinds, got.Isolated)
	}
	if got := rowsOf(t, pool, "acme_orders", "id", "total"); got != "0=0:1 4=4:3" {
		t.Errorf("acme_orders = %q, want 0=0:1 4=4:3", got)
	}
	if got := rowsOf(t, pool, "globex_orders", "id", "total"); got != "2=2:2" {
		t.Errorf("globex_orders = %q, want 2=2:2", got)
	}
	rows, err := pool.Query(ctx, `SELECT kafka_offset, target_table FROM kafka2pg.dead_letters ORDER BY kafka_offset`)
	if err != nil {
		t.Fatal(err)
	}
	letters, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (string, error) {
		var off int64
		var table string
		err := r.Scan(&off, &table)
		return fmt.Sprintf("%d %s", off, table), err
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := `1 "public"."acme_orders",3 "public"."acme_orders"`; strings.Join(letters, ",") != want {
		t.Errorf("dead letters %q, want %q", strings.Join(letters, ","), want)
	}
	if n := queryInt(t, pool, `SELECT next_offset FROM kafka2pg.offsets WHERE topic = 'orders' AND partition = 0`); n != 5 {
		t.Errorf("next_offset %d, want 5", n)
	}
}

// A routed upsert sink with a version column keeps the newest version of
// each key in its table, and counts the older change it skips as stale,
// as an unrouted sink does.
func TestARoutedUpsertSinkCountsTheChangesItsVersionSkips(t *testing.T) {
	t.Parallel()
	_, pool := pgtest.MigratedPool(t)
	stale := &staleCount{}
	w, epochs := routedWriter(t, pool, `sinks:
  - topic: prices
    table: ${header.tenant}_prices
    mode: upsert
    key: [id]
    version: v
    columns:
      - {name: id, type: bigint, from: key, path: id, not_null: true}
      - {name: v, type: bigint}
`, "prices", ingest.Config{Tracer: stale})
	ctx := context.Background()
	newer := routedBatch("prices", 0, epochs[0], 0, rec{`{"v":2}`, []string{"tenant", "acme"}})
	if err := w.Write(ctx, newer); err != nil {
		t.Fatal(err)
	}
	older := routedBatch("prices", 0, epochs[0], 1, rec{`{"v":1}`, []string{"tenant", "acme"}}, rec{`{"v":1}`, []string{"tenant", "acme"}})
	older.Records[0].Key = []byte(`{"id":0}`) // key 0's v 1 is older than its stored v 2
	if err := w.Write(ctx, older); err != nil {
		t.Fatal(err)
	}
	if got := rowsOf(t, pool, "acme_prices", "id", "v"); got != "0=0:2 2=2:1" {
		t.Errorf("acme_prices = %q, want 0=0:2 2=2:1 (key 0 keeps its newer version)", got)
	}
	if got := stale.get(); got != 1 {
		t.Errorf("%d stale changes counted, want 1 (key 0's older version)", got)
	}
}

// A record whose field makes no table name is a dead letter of kind
// route with the reason; the batch's other records are written.
func TestARecordThatNamesNoTableIsADeadLetter(t *testing.T) {
	t.Parallel()
	_, pool := pgtest.MigratedPool(t)
	w, epochs := routedWriter(t, pool, "sinks:\n  - {topic: events, table: 'events_${value.type}'}\n", "events", ingest.Config{})
	tr := trace(w)
	ctx := context.Background()
	got, err := tr.write(ctx, w, routedBatch("events", 0, epochs[0], 0,
		rec{value: `{"type":"click"}`}, rec{value: `{"other":1}`}, rec{value: `{"type":"a b"}`}, rec{value: `{"type":null}`}, rec{value: `{"type":"view"}`}))
	if err != nil {
		t.Fatal(err)
	}
	if got.Rows != 2 || strings.Join(got.DeadLetterKinds, ",") != "route,route,route" {
		t.Errorf("trace: rows %d, dead letters %v; want 2 and three of kind route", got.Rows, got.DeadLetterKinds)
	}
	for off, want := range map[int]string{1: "the value has no field type", 2: "a routed name refuses", 3: "${value.type} is null"} {
		var table, reason string
		if err := pool.QueryRow(ctx, `SELECT target_table, error_message FROM kafka2pg.dead_letters WHERE kafka_offset = $1 AND error_kind = 'route'`, off).Scan(&table, &reason); err != nil {
			t.Fatalf("the dead letter of offset %d: %v", off, err)
		}
		if !strings.Contains(reason, want) || table != `"public"."events_${value.type}"` {
			t.Errorf("the dead letter of offset %d: table %s, reason %q; want the sink's template and %q", off, table, reason, want)
		}
	}
	if got := tableRows(t, pool, "events_click", "events_view"); got != "events_click=1 events_view=1" {
		t.Errorf("tables: %s", got)
	}
}

// Past the cap of tables, records of new tables are dead letters of kind
// route_limit; the tables that count go on being written.
func TestTheTableCapTurnsARunawayTemplateIntoDeadLetters(t *testing.T) {
	t.Parallel()
	_, pool := pgtest.MigratedPool(t)
	w, epochs := routedWriter(t, pool, "sinks:\n  - {topic: events, table: 't_${value.n}'}\n", "events", ingest.Config{MaxTablesPerSink: 3})
	tr := trace(w)
	ctx := context.Background()
	var recs []rec
	for i := range 10 {
		recs = append(recs, rec{value: fmt.Sprintf(`{"n":%d}`, i%5)})
	}
	got, err := tr.write(ctx, w, routedBatch("events", 0, epochs[0], 0, recs...))
	if err != nil {
		t.Fatal(err)
	}
	if got.Rows != 6 || got.DeadLetters != 4 || strings.Count(strings.Join(got.DeadLetterKinds, ","), ingest.KindRouteLimit) != 4 {
		t.Errorf("trace: rows %d, dead letters %v; want 6 rows and 4 of kind %s", got.Rows, got.DeadLetterKinds, ingest.KindRouteLimit)
	}
	if got := tableRows(t, pool, "t_0", "t_1", "t_2", "t_3", "t_4"); got != "t_0=2 t_1=2 t_2=2 t_3=- t_4=-" {
		t.Errorf("tables: %s; want three of 2 rows, and no table past the cap", got)
	}
	if n := queryInt(t, pool, `SELECT count(*) FROM kafka2pg.dead_letters WHERE error_kind = 'route_limit' AND target_table IN ('"public"."t_3"', '"public"."t_4"') AND error_message LIKE '%reached its 3 tables%'`); n != 4 {
		t.Errorf("dead letters of kind route_limit naming their table: %d, want 4", n)
	}
	if got := w.RoutedTables(); len(got) != 1 || got[`"public"."t_${value.n}"`] != 3 {
		t.Errorf("RoutedTables = %v, want 3 of the sink's template", got)
	}
}

// Partitions meeting a new table at once create it once, and every row
// lands.
func TestPartitionsRoutingToOneNewTableAtOnceDoNotRace(t *testing.T) {
	t.Parallel()
	_, pool := pgtest.MigratedPool(t)
	w, epochs := routedWriter(t, pool, "sinks:\n  - {topic: events, table: 'e_${header.k}'}\n", "events", ingest.Config{})
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for p := range int32(2) {
		wg.Go(func() {
			var recs []rec
			for i := range 50 {
				recs = append(recs, rec{`{}`, []string{"k", fmt.Sprint(i % 7)}})
			}
			errs[p] = w.Write(ctx, routedBatch("events", p, epochs[p], 0, recs...))
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	if n := queryInt(t, pool, `SELECT count(*) FROM pg_tables WHERE tablename LIKE 'e\_%'`); n != 7 {
		t.Errorf("tables: %d, want 7", n)
	}
	total := int64(0)
	for i := range 7 {
		total += queryInt(t, pool, fmt.Sprintf(`SELECT count(*) FROM public."e_%d"`, i))
	}
	if total != 100 {
		t.Errorf("rows: %d, want 100", total)
	}
}

// With on-error stop, a record that names no table commits the records
// before it, in every table, and stops there.
func TestARoutedSinkStopsAtItsFirstBadRecord(t *testing.T) {
	t.Parallel()
	_, pool := pgtest.MigratedPool(t)
	w, epochs := routedWriter(t, pool, "sinks:\n  - {topic: events, table: 'e_${value.t}'}\n", "events", ingest.Config{OnError: ingest.OnErrorStop})
	err := w.Write(context.Background(), routedBatch("events", 0, epochs[0], 0,
		rec{value: `{"t":"a"}`}, rec{value: `{"t":"b"}`}, rec{value: `{"t":"?"}`}, rec{value: `{"t":"a"}`}))
	var stop *stream.StopError
	if !errors.As(err, &stop) || stop.Offset != 2 || stop.Kind != ingest.KindRoute {
		t.Fatalf("write: %v; want a stop at offset 2 of kind route", err)
	}
	if got := tableRows(t, pool, "e_a", "e_b"); got != "e_a=1 e_b=1" {
		t.Errorf("tables: %s; want e_a=1 e_b=1", got)
	}
	if n := queryInt(t, pool, `SELECT next_offset FROM kafka2pg.offsets WHERE topic = 'events' AND partition = 0`); n != 2 {
		t.Errorf("next_offset = %d, want 2", n)
	}
}

// Letters of kind route_limit replay into their tables once the cap is
// raised; letters of kind route whose record still names no table stay.
func TestRoutedLettersReplayOnceTheyRoute(t *testing.T) {
	t.Parallel()
	_, pool := pgtest.MigratedPool(t)
	const text = "sinks:\n  - {topic: events, table: 't_${value.n}'}\n"
	w, epochs := routedWriter(t, pool, text, "events", ingest.Config{MaxTablesPerSink: 1})
	ctx := context.Background()
	if err := w.Write(ctx, routedBatch("events", 0, epochs[0], 0, rec{value: `{"n":1}`}, rec{value: `{"n":2}`}, rec{value: `{"n":"x y"}`})); err != nil {
		t.Fatal(err)
	}
	if n := queryInt(t, pool, `SELECT count(*) FROM kafka2pg.dead_letters`); n != 2 {
		t.Fatalf("dead letters: %d, want 2 (one route_limit, one route)", n)
	}
	raised, _ := routedWriter(t, pool, text, "events", ingest.Config{})
	rr, err := raised.Replay(ctx, deadletters.Filter{Group: "g"}, ingest.ReplayOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if rr.Replayed != 1 || rr.Kept != 1 {
		t.Errorf("replay: %+v; want 1 replayed, 1 kept", rr)
	}
	if got := tableRows(t, pool, "t_1", "t_2"); got != "t_1=1 t_2=1" {
		t.Errorf("tables after the replay: %s; want t_1=1 t_2=1", got)
	}
	if n := queryInt(t, pool, `SELECT count(*) FROM kafka2pg.dead_letters WHERE error_kind = 'route'`); n != 1 {
		t.Errorf("letters of kind route left: %d, want 1", n)
	}
}

// BenchmarkWriteRouted is BenchmarkWrite's batches of 1,000 records into
// a zero-config sink routed by a header, over 1 and over 20 tables.
func BenchmarkWriteRouted(b *testing.B) {
	for _, tables := range []int{1, 20} {
		b.Run(fmt.Sprintf("tables=%d", tables), func(b *testing.B) {
			benchRouted(b, "sinks:\n  - {topic: orders, table: 'orders_${header.h}'}\n", tables,
				func(i int) []byte { return []byte(fmt.Sprint("k", i)) },
				func(int) []byte { return []byte(`{"id":12345,"name":"a customer","amount":"12.50","tags":["a","b"]}`) })
		})
	}
}

// BenchmarkWriteRoutedUpsert is batches of 1,000 upserts of the same
// 1,000 keys (updates after the first batch) into a sink routed by a
// header over 1 and over 20 tables, against the same sink unrouted
// (tables=0).
func BenchmarkWriteRoutedUpsert(b *testing.B) {
	for _, tables := range []int{0, 1, 20} {
		b.Run(fmt.Sprintf("tables=%d", tables), func(b *testing.B) {
			table := "orders_${header.h}"
			if tables == 0 {
				table = "orders"
			}
			benchRouted(b, `sinks:
  - topic: orders
    table: '`+table+`'
    mode: upsert
    key: [id]
    columns:
      - {name: id, type: bigint, from: key, path: id, not_null: true}
      - {name: name, type: text}
      - {name: amount, type: numeric}
`, max(tables, 1), func(i int) []byte { return fmt.Appendf(nil, `{"id":%d}`, i) }, func(int) []byte { return []byte(`{"name":"a customer","amount":"12.50"}`) })
		})
	}
}

// BenchmarkWriteChildren is batches of 1,000 upserts of orders with 3
// items and 2 tags each, into the order table and two child tables.
func BenchmarkWriteChildren(b *testing.B) {
	benchRouted(b, `sinks:
  - topic: orders
    mode: upsert
    key: [id]
    columns:
      - {name: id, type: bigint, not_null: true}
      - {name: customer, type: text}
      - {name: total, type: "numeric(12,2)"}
    children:
      - path: items
        table: order_items
        columns:
          - {name: sku, type: text, not_null: true}
          - {name: qty, type: integer}
          - {name: price, type: "numeric(12,2)", path: price.amount}
      - path: tags
        table: order_tags
        columns:
          - {name: tag, type: text, path: $}
`, 1, func(i int) []byte { return fmt.Appendf(nil, "k%d", i) }, func(i int) []byte {
		return fmt.Appendf(nil, `{"id":%d,"customer":"ann","total":12.5,"items":[{"sku":"a","qty":2,"price":{"amount":5}},{"sku":"b","qty":1,"price":{"amount":2.5}},{"sku":"c","qty":4,"price":{"amount":1}}],"tags":["gift","new"]}`, i)
	})
}

// benchRouted writes batches of 1,000 records through the sink of text,
// record i with key(i), value(i), and header h = i % tables.
func benchRouted(b *testing.B, text string, tables int, key, value func(i int) []byte) {
	const rows = 1000
	_, pool := pgtest.MigratedPool(b)
	set, _ := sinkstest.Build(b, text)
	w := readyWriter(b, pool, ingest.Config{Group: "g", Sinks: set.Fixed})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pos, err := w.Claim(ctx, topic, []int32{0})
	if err != nil {
		b.Fatal(err)
	}
	records := make([]stream.Record, rows)
	for i := range records {
		records[i] = stream.Record{Topic: topic, Key: key(i), Value: value(i), Headers: []stream.Header{{Key: "h", Value: fmt.Append(nil, i%tables)}}}
	}
	writeBatches(ctx, b, w, pos[0].Epoch, records)
}

// With Notify, a routed batch announces each table it wrote on the
// table's own channel, with that table's rows.
func TestARoutedBatchNotifiesEachTable(t *testing.T) {
	t.Parallel()
	_, pool := pgtest.MigratedPool(t)
	w, epochs := routedWriter(t, pool, "sinks:\n  - {topic: events, table: 'e_${value.t}'}\n", "events", ingest.Config{Notify: true})
	ctx := context.Background()
	listener, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer listener.Release()
	if _, err := listener.Exec(ctx, `LISTEN "kafka2pg_e_a"; LISTEN "kafka2pg_e_b"; LISTEN "kafka2pg_e_${value.t}"`); err != nil {
		t.Fatal(err)
	}
	if err := w.Write(ctx, routedBatch("events", 0, epochs[0], 0, rec{value: `{"t":"a"}`}, rec{value: `{"t":"b"}`}, rec{value: `{"t":"a"}`}, rec{value: `{}`})); err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for range 2 {
		wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		n, err := listener.Conn().WaitForNotification(wctx)
		cancel()
		if err != nil {
			t.Fatalf("the notifications so far %v, then: %v", got, err)
		}
		var p struct{ Rows float64 }
		if err := json.Unmarshal([]byte(n.Payload), &p); err != nil {
			t.Fatal(err)
		}
		got[n.Channel] = p.Rows
	}
	if got["kafka2pg_e_a"] != 2 || got["kafka2pg_e_b"] != 1 {
		t.Errorf("notifications: %v; want 2 rows on kafka2pg_e_a and 1 on kafka2pg_e_b", got)
	}
	sctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	if n, err := listener.Conn().WaitForNotification(sctx); err == nil {
		t.Errorf("a third notification, on %s: %s", n.Channel, n.Payload)
	}
}

// A routed table that exists already is evolved on its first record when
// the sink says evolve: the column the mapping writes and it lacks is
// added, and the record lands.
func TestAnExistingRoutedTableIsEvolvedOnItsFirstRecord(t *testing.T) {
	t.Parallel()
	_, pool := pgtest.MigratedPool(t)
	if _, err := pool.Exec(context.Background(), `CREATE TABLE events_click (id bigint)`); err != nil {
		t.Fatal(err)
	}
	w, epochs := routedWriter(t, pool, `sinks:
  - topic: events
    table: events_${value.type}
    evolve: true
    columns:
      - {name: id, type: bigint, from: key, path: id}
      - {name: type, type: text}
`, "events", ingest.Config{})
	if err := w.Write(context.Background(), routedBatch("events", 0, epochs[0], 0, rec{value: `{"type":"click"}`}, rec{value: `{"type":"view"}`})); err != nil {
		t.Fatal(err)
	}
	if got := rowsOf(t, pool, "events_click", "id", "type"); got != "0=0:click" {
		t.Errorf("events_click = %q, want 0=0:click (its type column added)", got)
	}
	if got := rowsOf(t, pool, "events_view", "id", "type"); got != "1=1:view" {
		t.Errorf("events_view = %q, want 1=1:view", got)
	}
}

// With creating tables off, a record routed to a table that does not
// exist is a dead letter of kind route, and the records of tables that
// exist are written.
func TestARecordRoutedToAMissingTableWithCreateOffIsADeadLetter(t *testing.T) {
	t.Parallel()
	_, pool := pgtest.MigratedPool(t)
	if _, err := pool.Exec(context.Background(), `CREATE TABLE e_a (kafka_topic text NOT NULL, kafka_partition integer NOT NULL, kafka_offset bigint NOT NULL,
		kafka_timestamp timestamptz, kafka_key bytea, kafka_headers jsonb, value jsonb)`); err != nil {
		t.Fatal(err)
	}
	w, epochs := routedWriter(t, pool, "sinks:\n  - {topic: events, table: 'e_${value.t}', create: false}\n", "events", ingest.Config{})
	tr := trace(w)
	got, err := tr.write(context.Background(), w, routedBatch("events", 0, epochs[0], 0, rec{value: `{"t":"a"}`}, rec{value: `{"t":"b"}`}))
	if err != nil {
		t.Fatal(err)
	}
	if got.Rows != 1 || strings.Join(got.DeadLetterKinds, ",") != ingest.KindRoute {
		t.Errorf("trace: rows %d, dead letters %v; want 1 and one of kind route", got.Rows, got.DeadLetterKinds)
	}
	if n := queryInt(t, pool, `SELECT count(*) FROM kafka2pg.dead_letters WHERE target_table = '"public"."e_b"' AND error_message LIKE '%does not exist, and creating tables is off%'`); n != 1 {
		t.Errorf("dead letters naming e_b and why: %d, want 1", n)
	}
	if got := w.RoutedTables(); got[`"public"."e_${value.t}"`] != 1 {
		t.Errorf("RoutedTables = %v, want 1 (e_a; the missing e_b does not count)", got)
	}
}
