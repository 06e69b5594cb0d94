package ingest_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/kafka2pg/kafka2pg/cdc"
	"github.com/kafka2pg/kafka2pg/deadletters"
	"github.com/kafka2pg/kafka2pg/ingest"
	"github.com/kafka2pg/kafka2pg/internal/cdctest"
	"github.com/kafka2pg/kafka2pg/internal/pgtest"
	"github.com/kafka2pg/kafka2pg/stream"
)

// Debezium change events of a source table customers(id int PRIMARY KEY,
// name text, qty smallint), as the JsonConverter writes them with schemas.

const (
	custKeySchema = `{"type":"struct","fields":[{"type":"int32","optional":false,"field":"id"}],"optional":false,"name":"shop.public.customers.Key"}`
	custFields    = `{"type":"int32","optional":false,"field":"id"},{"type":"string","optional":true,"field":"name"},{"type":"int16","optional":true,"field":"qty"}`
	custFieldsV2  = custFields + `,{"type":"string","optional":true,"field":"note"}`
)

func custValueSchema(fields string) string {
	row := `{"type":"struct","fields":[` + fields + `],"optional":true,"name":"shop.public.customers.Value","field":"%s"}`
	return `{"type":"struct","fields":[` + fmt.Sprintf(row, "before") + `,` + fmt.Sprintf(row, "after") +
		`,{"type":"string","optional":false,"field":"op"},{"type":"int64","optional":true,"field":"ts_ms"}],"optional":false,"name":"shop.public.customers.Envelope"}`
}

// ev is one change event: op, the key's id (0: a null key), before and
// after as JSON ("" for null); op "" is the tombstone of id.
type ev struct {
	op            string
	id            int
	before, after string
	fields        string // the row's schema fields; custFields when ""
}

func (e ev) record(topic string, offset int64) stream.Record {
	r := stream.Record{Topic: topic, Offset: offset}
	if e.id != 0 {
		r.Key = fmt.Appendf(nil, `{"schema":%s,"payload":{"id":%d}}`, custKeySchema, e.id)
	}
	if e.op == "" {
		return r
	}
	fields := e.fields
	if fields == "" {
		fields = custFields
	}
	orNull := func(s string) string {
		if s == "" {
			return "null"
		}
		return s
	}
	r.Value = fmt.Appendf(nil, `{"schema":%s,"payload":{"before":%s,"after":%s,"op":%q,"ts_ms":1}}`,
		custValueSchema(fields), orNull(e.before), orNull(e.after), e.op)
	return r
}

func changeBatch(topic string, epoch, first int64, evs ...ev) *stream.Batch {
	b := &stream.Batch{Topic: topic, Epoch: epoch, PrevOffset: prevOf(first), FirstOffset: first, NextOffset: first + int64(len(evs))}
	for i, e := range evs {
		b.Records = append(b.Records, e.record(topic, first+int64(i)))
	}
	return b
}

// changeWriter is a writer of one format debezium sink, topic customers
// into table customers, claimed; it returns the epoch.
func changeWriter(t *testing.T, cfg ingest.Config) (*ingest.Writer, *pgxpool.Pool, int64) {
	t.Helper()
	_, pool := pgtest.MigratedPool(t)
	d, err := cdc.NewDecoder(cdc.Config{Schema: "public", Table: "customers"})
	if err != nil {
		t.Fatal(err)
	}
	cfg.Group = "g"
	cfg.Sinks = map[string]ingest.Sink{"customers": {Table: d.Table(), Changes: d, Evolve: true}}
	w, e := claimed(t, pool, cfg, "customers")
	return w, pool, e
}

func customers(t *testing.T, pool *pgxpool.Pool) string {
	return rowsOf(t, pool, "customers", "name", "qty")
}

func cust(id int, name string, qty int) string {
	return fmt.Sprintf(`{"id":%d,"name":%q,"qty":%d}`, id, name, qty)
}

func TestChangeEventsApplyEachOpLastChangePerKeyWinning(t *testing.T) {
	t.Parallel()
	w, pool, e := changeWriter(t, ingest.Config{})
	ctx := t.Context()
	if err := w.Write(ctx, changeBatch("customers", e, 0,
		ev{op: "r", id: 1, after: cust(1, "ann", 1)},
		ev{op: "c", id: 2, after: cust(2, "bob", 2)},
		ev{op: "c", id: 3, after: cust(3, "cy", 3)},
		ev{op: "u", id: 2, before: cust(2, "bob", 2), after: cust(2, "bo", 20)},
		ev{op: "d", id: 3, before: `{"id":3,"name":null,"qty":null}`},
		ev{op: "", id: 3},  // the tombstone after the delete
		ev{op: "d", id: 9}, // a delete of a key never seen: nothing
	)); err != nil {
		t.Fatal(err)
	}
	if got := customers(t, pool); got != "1=ann:1 2=bo:20" {
		t.Fatalf("after batch 1: %q", got)
	}
	if pk := queryInt(t, pool, `SELECT count(*) FROM pg_index WHERE indrelid = 'customers'::regclass AND indisprimary`); pk != 1 {
		t.Errorf("customers has %d primary keys, want the record key's", pk)
	}
	// A key change (delete the old key, upsert the new), a delete and a
	// create of one key in one batch, and a delete by before when the
	// record key is null.
	if err := w.Write(ctx, changeBatch("customers", e, 7,
		ev{op: "u", id: 10, before: cust(1, "ann", 1), after: cust(10, "ann", 1)},
		ev{op: "d", id: 2, before: cust(2, "bo", 20)},
		ev{op: "c", id: 2, after: cust(2, "bob again", 5)},
		ev{op: "c", id: 4, after: cust(4, "di", 4)},
		ev{op: "d", before: cust(4, "di", 4)},
	)); err != nil {
		t.Fatal(err)
	}
	if got := customers(t, pool); got != "2=bob again:5 10=ann:1" {
		t.Fatalf("after batch 2: %q", got)
	}
	if n := queryInt(t, pool, `SELECT next_offset FROM kafka2pg.offsets WHERE topic = 'customers'`); n != 12 {
		t.Errorf("next_offset = %d, want 12", n)
	}
}

// A partition may start with records that tell no table (a tombstone
// left by compaction, a truncate, a bad record): their batch moves the
// offsets, and the table comes with the first row.
func TestABatchBeforeTheFirstRowOnlyMovesTheOffsets(t *testing.T) {
	t.Parallel()
	w, pool, e := changeWriter(t, ingest.Config{})
	ctx := t.Context()
	b := changeBatch("customers", e, 0, ev{op: "", id: 1}, ev{op: "t"}, ev{op: "c", id: 2})
	b.Records[2].Value = []byte(`{"not":"an envelope"}`)
	if err := w.Write(ctx, b); err != nil {
		t.Fatal(err)
	}
	if n := queryInt(t, pool, `SELECT count(*) FROM kafka2pg.dead_letters`); n != 1 {
		t.Errorf("%d dead letters, want 1", n)
	}
	if err := w.Write(ctx, changeBatch("customers", e, 3, ev{op: "c", id: 1, after: cust(1, "ann", 1)})); err != nil {
		t.Fatal(err)
	}
	if got := customers(t, pool); got != "1=ann:1" {
		t.Fatalf("rows %q", got)
	}
	if n := queryInt(t, pool, `SELECT next_offset FROM kafka2pg.offsets WHERE topic = 'customers'`); n != 4 {
		t.Errorf("next_offset = %d, want 4", n)
	}
}

func TestATruncateVoidsTheChangesBeforeItInTheBatch(t *testing.T) {
	t.Parallel()
	w, pool, e := changeWriter(t, ingest.Config{})
	ctx := t.Context()
	if err := w.Write(ctx, changeBatch("customers", e, 0, ev{op: "c", id: 1, after: cust(1, "ann", 1)})); err != nil {
		t.Fatal(err)
	}
	if err := w.Write(ctx, changeBatch("customers", e, 1,
		ev{op: "c", id: 2, after: cust(2, "bob", 2)},
		ev{op: "t"},
		ev{op: "c", id: 3, after: cust(3, "cy", 3)},
		ev{op: "u", id: 3, after: cust(3, "cy", 30)},
	)); err != nil {
		t.Fatal(err)
	}
	if got := customers(t, pool); got != "3=cy:30" {
		t.Fatalf("after the truncate: %q", got)
	}
}

func TestAnUnavailableToastedValueKeepsTheStoredOne(t *testing.T) {
	t.Parallel()
	w, pool, e := changeWriter(t, ingest.Config{})
	ctx := t.Context()
	if err := w.Write(ctx, changeBatch("customers", e, 0,
		ev{op: "c", id: 1, after: cust(1, "a long toasted text", 1)},
		ev{op: "c", id: 2, after: cust(2, "bob", 2)},
	)); err != nil {
		t.Fatal(err)
	}
	if err := w.Write(ctx, changeBatch("customers", e, 2,
		ev{op: "u", id: 1, after: cust(1, "__debezium_unavailable_value", 7)},
		ev{op: "u", id: 2, after: cust(2, "bo", 3)},
		ev{op: "c", id: 5, after: cust(5, "__debezium_unavailable_value", 5)}, // no stored row: NULL
	)); err != nil {
		t.Fatal(err)
	}
	if got := customers(t, pool); got != "1=a long toasted text:7 2=bo:3 5=NULL:5" {
		t.Fatalf("after the update: %q", got)
	}
}

func TestANewFieldEvolvesTheTable(t *testing.T) {
	t.Parallel()
	w, pool, e := changeWriter(t, ingest.Config{})
	ctx := t.Context()
	if err := w.Write(ctx, changeBatch("customers", e, 0,
		ev{op: "c", id: 1, after: cust(1, "ann", 1)},
		ev{op: "u", id: 1, after: `{"id":1,"name":"ann","qty":2,"note":"vip"}`, fields: custFieldsV2},
		ev{op: "c", id: 2, after: `{"id":2,"name":"bob","qty":3,"note":null}`, fields: custFieldsV2},
	)); err != nil {
		t.Fatal(err)
	}
	var notes string
	if err := pool.QueryRow(ctx, `SELECT string_agg(id || '=' || coalesce(note, 'NULL'), ' ' ORDER BY id) FROM customers`).Scan(&notes); err != nil {
		t.Fatal(err)
	}
	if notes != "1=vip 2=NULL" || customers(t, pool) != "1=ann:2 2=bob:3" {
		t.Fatalf("notes %q, rows %q", notes, customers(t, pool))
	}
}

func TestAChangePostgresRefusesIsADeadLetterOrStops(t *testing.T) {
	t.Parallel()
	batch := func(e int64) *stream.Batch {
		return changeBatch("customers", e, 0,
			ev{op: "c", id: 1, after: cust(1, "ann", 1)},
			ev{op: "c", id: 2, after: cust(2, "bob", -2)},
			ev{op: "u", id: 1, after: cust(1, "ann", 2)},
		)
	}
	prepare := func(t *testing.T, w *ingest.Writer, pool *pgxpool.Pool, e int64) {
		// The table comes with the first event; then a constraint the
		// source does not have.
		if err := w.Write(t.Context(), changeBatch("customers", e, 0, ev{op: "c", id: 1, after: cust(1, "ann", 1)})); err != nil {
			t.Fatal(err)
		}
		if _, err := pool.Exec(t.Context(), `TRUNCATE customers; ALTER TABLE customers ADD CHECK (qty >= 0); UPDATE kafka2pg.offsets SET next_offset = NULL`); err != nil {
			t.Fatal(err)
		}
	}
	t.Run("dead letter", func(t *testing.T) {
		w, pool, e := changeWriter(t, ingest.Config{})
		prepare(t, w, pool, e)
		if err := w.Write(t.Context(), batch(e)); err != nil {
			t.Fatal(err)
		}
		if got := customers(t, pool); got != "1=ann:2" {
			t.Errorf("rows %q", got)
		}
		if n := queryInt(t, pool, `SELECT kafka_offset FROM kafka2pg.dead_letters WHERE topic = 'customers' AND error_kind = 'check_violation'`); n != 1 {
			t.Errorf("dead letter of offset %d, want 1", n)
		}
		// Replaying it out of its place among its row's changes could
		// undo later ones: refused, saying why.
		if _, err := w.Replay(t.Context(), deadletters.Filter{}, ingest.ReplayOptions{}); !errors.Is(err, ingest.ErrChangeReplay) || !strings.Contains(err.Error(), "rewind") {
			t.Errorf("Replay = %v, want ErrChangeReplay", err)
		}
		if n := queryInt(t, pool, `SELECT count(*) FROM kafka2pg.dead_letters`); n != 1 {
			t.Errorf("%d dead letters after the refused replay, want 1", n)
		}
	})
	t.Run("stop", func(t *testing.T) {
		w, pool, e := changeWriter(t, ingest.Config{OnError: ingest.OnErrorStop})
		prepare(t, w, pool, e)
		var stop *stream.StopError
		if err := w.Write(t.Context(), batch(e)); !errors.As(err, &stop) || stop.Offset != 1 {
			t.Fatalf("Write = %v, want a stop at offset 1", err)
		}
		if got := customers(t, pool); got != "1=ann:1" {
			t.Errorf("rows %q", got)
		}
		if n := queryInt(t, pool, `SELECT next_offset FROM kafka2pg.offsets WHERE topic = 'customers'`); n != 1 {
			t.Errorf("next_offset = %d, want 1", n)
		}
	})
}

// The events a real Debezium connector recorded (cdc/testdata/recorded)
// written through the writer, in one batch and record by record, give the
// source's final rows.
func TestRecordedDebeziumEventsReplicateTheSourceRows(t *testing.T) {
	t.Parallel()
	for _, table := range []string{"accounts", "order_lines", "toasty"} {
		for _, size := range []int{1000, 1} {
			t.Run(fmt.Sprintf("%s by %d", table, size), func(t *testing.T) {
				records := recordedRecords(t, table)
				_, pool := pgtest.MigratedPool(t)
				d, err := cdc.NewDecoder(cdc.Config{Schema: "public", Table: table})
				if err != nil {
					t.Fatal(err)
				}
				w, e := claimed(t, pool, ingest.Config{Group: "g", Sinks: map[string]ingest.Sink{table: {Table: d.Table(), Changes: d, Evolve: true}}}, table)
				for at := 0; at < len(records); at += size {
					end := min(at+size, len(records))
					b := &stream.Batch{Topic: table, Epoch: e, PrevOffset: prevOf(int64(at)), FirstOffset: int64(at), NextOffset: int64(end), Records: records[at:end]}
					if err := w.Write(t.Context(), b); err != nil {
						t.Fatal(err)
					}
				}
				if n := queryInt(t, pool, `SELECT count(*) FROM kafka2pg.dead_letters`); n != 0 {
					t.Errorf("%d dead letters", n)
				}
				want := expectedRows(t, table)
				got := replicaRows(t, pool, table, d.Table().ColumnNames(), want)
				if !slices.Equal(got, want) {
					t.Errorf("replica:\n%s\nsource:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
				}
			})
		}
	}
}

const recordedDir = "../cdc/testdata/recorded/"

func recordedRecords(t *testing.T, table string) []stream.Record {
	t.Helper()
	return cdctest.Events(t, recordedDir, "default", table, table)
}

// expectedRows are the source's final rows, each its columns' text as
// JSON with sorted keys, sorted.
func expectedRows(t *testing.T, table string) []string {
	t.Helper()
	var out []string
	for _, row := range cdctest.Rows(t, recordedDir, "default", table, "final") {
		s, _ := json.Marshal(row) // sorted keys
		out = append(out, string(s))
	}
	slices.Sort(out)
	return out
}

// replicaRows are the replica's rows as expectedRows has them: the
// source's columns as text.
func replicaRows(t *testing.T, pool *pgxpool.Pool, table string, cols []string, want []string) []string {
	t.Helper()
	var names []string
	if len(want) > 0 {
		var m map[string]any
		_ = json.Unmarshal([]byte(want[0]), &m)
		for c := range m {
			names = append(names, c)
		}
	} else {
		names = cols
	}
	var sel []string
	for _, c := range names {
		sel = append(sel, fmt.Sprintf("'%s', %q::text", c, c))
	}
	rows, err := pool.Query(t.Context(), fmt.Sprintf(`SELECT json_build_object(%s)::text FROM %q`, strings.Join(sel, ", "), table))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		var m map[string]*string
		if err := json.Unmarshal([]byte(s), &m); err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(m)
		out = append(out, string(b))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	slices.Sort(out)
	return out
}

// At every start a change decoder learns its table from each partition's
// first event, so every partition meets a "change". Only a change that ran
// DDL is one: a restart on an unchanged table logs none, and the
// partitions after the first take the topic's sink as it is.
func TestARestartOnAnUnchangedTableLogsNoTableChange(t *testing.T) {
	_, pool := pgtest.MigratedPool(t)
	ctx := t.Context()
	start := func() (*ingest.Writer, *bytes.Buffer, map[int32]stream.Position) {
		d, err := cdc.NewDecoder(cdc.Config{Schema: "public", Table: "customers"})
		if err != nil {
			t.Fatal(err)
		}
		var logs bytes.Buffer
		w := readyWriter(t, pool, ingest.Config{Group: "g", Logger: slog.New(slog.NewTextHandler(&logs, nil)),
			Sinks: map[string]ingest.Sink{"customers": {Table: d.Table(), Changes: d, Evolve: true}}})
		pos, err := w.Claim(ctx, "customers", []int32{0, 1, 2})
		if err != nil {
			t.Fatal(err)
		}
		return w, &logs, pos
	}
	write := func(w *ingest.Writer, pos map[int32]stream.Position, p int32, id int) {
		t.Helper()
		b := changeBatch("customers", pos[p].Epoch, max(pos[p].NextOffset, 0), ev{op: "c", id: id, after: cust(id, "x", id)})
		b.Partition, b.PrevOffset = p, pos[p].NextOffset
		for i := range b.Records {
			b.Records[i].Partition = p
		}
		if err := w.Write(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	w, logs, pos := start()
	for p := range int32(3) {
		write(w, pos, p, int(p)+1)
	}
	if n := strings.Count(logs.String(), "table changed with the topic's schema"); n != 1 {
		t.Fatalf("first start: %d INFO lines of a table change, want 1 (the CREATE TABLE):\n%s", n, logs)
	}
	w, logs, pos = start() // a restart: the table exists as the events need it
	for p := range int32(3) {
		write(w, pos, p, int(p)+10)
	}
	if n := strings.Count(logs.String(), "table changed with the topic's schema"); n != 0 {
		t.Fatalf("after a restart on an unchanged table: %d INFO lines of a table change, want 0:\n%s", n, logs)
	}
	if got := queryInt(t, pool, `SELECT count(*) FROM customers`); got != 6 {
		t.Fatalf("%d rows, want 6", got)
	}
}
