package cdc

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kafka2pg/kafka2pg/pgvalue"

	"github.com/kafka2pg/kafka2pg/decode"
	"github.com/kafka2pg/kafka2pg/schema"
	"github.com/kafka2pg/kafka2pg/stream"
)

// fixture reads a record of testdata/: {"key": ..., "value": ...}, each
// kept byte for byte as the file has it.
func fixture(tb testing.TB, name string) stream.Record {
	tb.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		tb.Fatal(err)
	}
	var f struct{ Key, Value json.RawMessage }
	if err := json.Unmarshal(b, &f); err != nil {
		tb.Fatalf("%s: %v", name, err)
	}
	r := stream.Record{Topic: "shop.public.t", Partition: 0, Offset: 42}
	if string(f.Key) != "null" {
		r.Key = f.Key
	}
	if string(f.Value) != "null" {
		r.Value = f.Value
	}
	return r
}

// decodeGrowing decodes rec, growing the table first when the record asks to,
// after ResolveSchemas of it, as the writer calls them.
func decodeGrowing(tb testing.TB, d *Decoder, rec stream.Record) (event, error) {
	tb.Helper()
	var ev event
	if err := d.ResolveSchemas(context.Background(), []stream.Record{rec}); err != nil {
		return ev, err
	}
	err := decodeEvent(d, &rec, &ev)
	if errors.Is(err, decode.ErrTableChanged) {
		err = decodeEvent(d, &rec, &ev)
	}
	return ev, err
}

func mustDecoder(tb testing.TB, cfg Config) *Decoder {
	tb.Helper()
	if cfg.Table == "" {
		cfg.Table = "customers"
	}
	d, err := NewDecoder(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	return d
}

func TestEachOpBecomesItsChange(t *testing.T) {
	cases := []struct {
		fixture string
		op      stream.Op
		event   byte
		key     []any
		oldKey  []any
		row     []any
	}{
		{"pg_customers_snapshot_r.json", stream.OpUpsert, 'r', []any{int32(1)}, nil, []any{int32(1), "Anne", "Kretchmar", "annek@noanswer.org"}},
		{"pg_customers_create.json", stream.OpUpsert, 'c', []any{int32(2)}, nil, []any{int32(2), "Sally", "Kretchmar", "sally@example.com"}},
		{"pg_customers_update.json", stream.OpUpsert, 'u', []any{int32(1)}, nil, []any{int32(1), "Anne Marie", "Kretchmar", "annek@noanswer.org"}},
		{"pg_customers_update_pk.json", stream.OpUpsert, 'u', []any{int32(10)}, []any{int32(1)}, []any{int32(10), "Anne Marie", "Kretchmar", "annek@noanswer.org"}},
		{"pg_customers_delete.json", stream.OpDelete, 'd', []any{int32(2)}, nil, nil},
		{"pg_customers_tombstone.json", stream.OpNone, 0, nil, nil, nil},
		{"pg_customers_truncate.json", stream.OpTruncate, 't', nil, nil, nil},
		{"pg_message.json", stream.OpNone, 'm', nil, nil, nil},
	}
	d := mustDecoder(t, Config{})
	for _, c := range cases {
		t.Run(c.fixture, func(t *testing.T) {
			ch, err := decodeGrowing(t, d, fixture(t, c.fixture))
			if err != nil {
				t.Fatal(err)
			}
			if ch.Op != c.op || ch.Event != c.event {
				t.Fatalf("op %v event %q, want %v %q", ch.Op, ch.Event, c.op, c.event)
			}
			if !equalValues(ch.Key, c.key) || !equalValues(ch.OldKey, c.oldKey) || !equalValues(ch.Row, c.row) {
				t.Fatalf("key %v old key %v row %v, want %v %v %v", ch.Key, ch.OldKey, ch.Row, c.key, c.oldKey, c.row)
			}
		})
	}
	want := schema.Table{Name: "customers", PrimaryKey: []string{"id"}, Columns: []schema.Column{
		{Name: "id", Type: "integer", NotNull: true}, {Name: "first_name", Type: "text", NotNull: true},
		{Name: "last_name", Type: "text", NotNull: true}, {Name: "email", Type: "text", NotNull: true}}}
	if got := d.Table(); !reflect.DeepEqual(got, want) {
		t.Fatalf("table %+v, want %+v", got, want)
	}
}

func equalValues(a, b []any) bool {
	if len(a) == 0 && len(b) == 0 {
		return true
	}
	return reflect.DeepEqual(a, b)
}

func TestTheFirstEventGrowsTheTableOnce(t *testing.T) {
	d := mustDecoder(t, Config{})
	rec := fixture(t, "pg_customers_create.json")
	var ch stream.Change
	if err := d.Decode(&rec, &ch); !errors.Is(err, decode.ErrTableChanged) {
		t.Fatalf("first decode: %v, want ErrTableChanged", err)
	}
	if err := d.Decode(&rec, &ch); err != nil {
		t.Fatalf("second decode: %v", err)
	}
	if got := d.KeyColumns(); !slices.Equal(got, []string{"id"}) {
		t.Fatalf("key columns %v", got)
	}
}

func TestSourceAndTransactionAreRead(t *testing.T) {
	d := mustDecoder(t, Config{Source: SourceColumns{Table: "src_table", Position: "src_pos", TxID: "src_tx", Timestamp: "src_ts", Op: "src_op"}})
	ch, err := decodeGrowing(t, d, fixture(t, "pg_customers_create.json"))
	if err != nil {
		t.Fatal(err)
	}
	wantSrc := sourceBlock{Connector: "postgresql", Name: "shop", DB: "postgres", Schema: "public", Table: "customers", TsMs: 1559033904863, Snapshot: "false", TxID: 556, LSN: 24023200,
		Sequence: `["24023119","24023128"]`}
	if ch.Source != wantSrc {
		t.Fatalf("source %+v, want %+v", ch.Source, wantSrc)
	}
	if want := (transactionBlock{ID: "571:53195832", TotalOrder: 1, DataCollectionOrder: 1}); ch.Transaction != want {
		t.Fatalf("transaction %+v, want %+v", ch.Transaction, want)
	}
	names := d.Table().ColumnNames()
	if want := []string{"id", "first_name", "last_name", "email", "src_table", "src_pos", "src_tx", "src_ts", "src_op"}; !slices.Equal(names, want) {
		t.Fatalf("columns %v, want %v", names, want)
	}
	wantRow := []any{int32(2), "Sally", "Kretchmar", "sally@example.com", "public.customers", "0/16E90A0", "556", time.UnixMilli(1559033904863).UTC(), "c"}
	if !reflect.DeepEqual(ch.Row, wantRow) {
		t.Fatalf("row %v, want %v", ch.Row, wantRow)
	}
}

func TestAnUnchangedToastValueIsFlaggedNotWritten(t *testing.T) {
	d := mustDecoder(t, Config{})
	ch, err := decodeGrowing(t, d, fixture(t, "pg_customers_toast_update.json"))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(ch.Unavailable, []int{2}) || ch.Row[2] != nil {
		t.Fatalf("unavailable %v row %v, want column 2 flagged and nil", ch.Unavailable, ch.Row)
	}
}

func TestSchemalessEventsTakeTheConfiguredColumns(t *testing.T) {
	_, err := NewDecoder(Config{Table: "customers",
		Columns: []Column{{Name: "id", Type: "integer"}, {Name: "first_name", Type: "text"}, {Name: "email", Type: "varchar"}},
	})
	if err == nil || !strings.Contains(err.Error(), `"varchar" has no Connect type`) {
		t.Fatalf("a column type without a Connect type: %v", err)
	}
	d, err := NewDecoder(Config{Table: "customers",
		Columns: []Column{{Name: "id", Type: "integer"}, {Name: "first_name", Type: "text"}, {Name: "email", Connect: "string"}},
		Key:     []string{"id"},
		Source:  SourceColumns{Position: "pos"},
	})
	if err != nil {
		t.Fatal(err)
	}
	ch, err := decodeGrowing(t, d, fixture(t, "mysql_customers_update_noschema.json"))
	if err != nil {
		t.Fatal(err)
	}
	want := []any{int32(1004), "Anne", "annek@noanswer.org", "mysql-bin.000003:154"}
	if ch.Op != stream.OpUpsert || !reflect.DeepEqual(ch.Row, want) || !reflect.DeepEqual(ch.Key, []any{int32(1004)}) || ch.OldKey != nil {
		t.Fatalf("change %+v, want row %v", ch, want)
	}
	tab := d.Table()
	if !slices.Equal(tab.PrimaryKey, []string{"id"}) || tab.Columns[2].Type != "text" {
		t.Fatalf("table %+v", tab)
	}
}

func TestBadEventsAreDeadLettersWithAKind(t *testing.T) {
	cr := fixture(t, "pg_customers_create.json")
	cases := []struct {
		name  string
		value string
		kind  string
	}{
		{"not json", `{"payload":`, decode.KindInvalidJSON},
		{"not an envelope", `{"id":1,"name":"x"}`, KindNotAnEnvelope},
		{"an unknown op", `{"op":"x","after":null}`, KindUnknownOp},
		{"a string in an integer", strings.Replace(string(cr.Value), `"id":2`, `"id":"2"`, 1), decode.KindTypeMismatch},
		{"an integer too large", strings.Replace(string(cr.Value), `"id":2`, `"id":2147483648`, 1), decode.KindOutOfRange},
		{"a NUL in text", strings.Replace(string(cr.Value), `"Sally"`, `"Sa\u0000lly"`, 1), decode.KindNULByte},
		{"a lone surrogate", strings.Replace(string(cr.Value), `"Sally"`, `"Sa\ud800lly"`, 1), decode.KindUnsupported},
		{"a null in a required column", strings.Replace(string(cr.Value), `"Sally"`, `null`, 1), decode.KindNullValue},
		{"a schema that does not parse", strings.Replace(string(cr.Value), `"type":"int32"`, `"type":"int33"`, 1), KindInvalidSchema},
		{"a create without after", strings.Replace(string(cr.Value), `"after":{`, `"after":null,"x":{`, 1), decode.KindInvalidValue},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := mustDecoder(t, Config{})
			rec := stream.Record{Topic: "t", Key: cr.Key, Value: []byte(c.value)}
			_, err := decodeGrowing(t, d, rec)
			var de *decode.DecodeError
			if !errors.As(err, &de) || !errors.Is(err, decode.ErrBadRecord) {
				t.Fatalf("err %v, want a *decode.DecodeError", err)
			}
			if de.Kind != c.kind {
				t.Fatalf("kind %s (%v), want %s", de.Kind, err, c.kind)
			}
		})
	}
}

func TestAKeylessTableTakesCreatesAndRefusesUpdates(t *testing.T) {
	d := mustDecoder(t, Config{})
	rec := fixture(t, "pg_customers_create.json")
	rec.Key = nil
	ch, err := decodeGrowing(t, d, rec)
	if err != nil || ch.Op != stream.OpUpsert || ch.Key != nil {
		t.Fatalf("create: %v %+v", err, ch)
	}
	up := fixture(t, "pg_customers_update.json")
	up.Key = nil
	var de *decode.DecodeError
	if _, err := decodeGrowing(t, d, up); !errors.As(err, &de) || de.Kind != KindNoKey {
		t.Fatalf("update: %v, want %s", err, KindNoKey)
	}
}

func TestADeleteWithoutRecordKeyTakesTheKeyFromBefore(t *testing.T) {
	d := mustDecoder(t, Config{})
	if _, err := decodeGrowing(t, d, fixture(t, "pg_customers_create.json")); err != nil {
		t.Fatal(err)
	}
	rec := fixture(t, "pg_customers_delete.json")
	rec.Key = nil
	ch, err := decodeGrowing(t, d, rec)
	if err != nil || ch.Op != stream.OpDelete || !reflect.DeepEqual(ch.Key, []any{int32(2)}) {
		t.Fatalf("delete: %v %+v", err, ch)
	}
}

func TestANewFieldGrowsTheTableAndAnIncompatibleOneIsRefused(t *testing.T) {
	d := mustDecoder(t, Config{})
	cr := fixture(t, "pg_customers_create.json")
	if _, err := decodeGrowing(t, d, cr); err != nil {
		t.Fatal(err)
	}
	before := d.Table()
	if !d.HasColumns(before.Columns) {
		t.Fatalf("HasColumns of its own columns %+v: false", before.Columns)
	}
	// The source table gains a column "vip" (boolean, nullable).
	grown := strings.ReplaceAll(string(cr.Value), `{"type":"string","optional":false,"field":"email"}`,
		`{"type":"string","optional":false,"field":"email"},{"type":"boolean","optional":true,"field":"vip"}`)
	grown = strings.Replace(grown, `"email":"sally@example.com"}`, `"email":"sally@example.com","vip":true}`, 1)
	rec := stream.Record{Key: cr.Key, Value: []byte(grown)}
	var ch stream.Change
	if err := d.Decode(&rec, &ch); !errors.Is(err, decode.ErrTableChanged) {
		t.Fatalf("grown: %v, want ErrTableChanged", err)
	}
	tab := d.Table()
	if last := tab.Columns[len(tab.Columns)-1]; last != (schema.Column{Name: "vip", Type: "boolean"}) {
		t.Fatalf("last column %+v", last)
	}
	if d.HasColumns(before.Columns) || !d.HasColumns(tab.Columns) {
		t.Fatalf("HasColumns after a column came: of the columns before %v, of the table now %v",
			d.HasColumns(before.Columns), d.HasColumns(tab.Columns))
	}
	if err := d.Decode(&rec, &ch); err != nil || ch.Row[4] != true {
		t.Fatalf("after the change: %v %v", err, ch.Row)
	}
	// An older event still decodes, NULL in the new column.
	if err := d.Decode(&cr, &ch); err != nil || ch.Row[4] != nil {
		t.Fatalf("old event: %v %v", err, ch.Row)
	}
	// id int32 → string: no column holds both.
	bad := strings.ReplaceAll(string(cr.Value), `{"type":"int32","optional":false,"field":"id"}`, `{"type":"string","optional":false,"field":"id"}`)
	bad = strings.Replace(bad, `"id":2`, `"id":"2"`, 1)
	rec = stream.Record{Key: cr.Key, Value: []byte(bad)}
	var de *decode.DecodeError
	if err := d.Decode(&rec, &ch); !errors.As(err, &de) || de.Kind != decode.KindSchemaIncompatible {
		t.Fatalf("incompatible: %v", err)
	}
	// int32 → int64 widens the column.
	wide := strings.ReplaceAll(string(cr.Value), `{"type":"int32","optional":false,"field":"id"}`, `{"type":"int64","optional":false,"field":"id"}`)
	rec = stream.Record{Key: cr.Key, Value: []byte(wide)}
	if err := d.Decode(&rec, &ch); !errors.Is(err, decode.ErrTableChanged) || d.Table().Columns[0].Type != "bigint" {
		t.Fatalf("widen: %v %+v", err, d.Table().Columns[0])
	}
	if d.HasColumns(tab.Columns) {
		t.Fatalf("HasColumns of the columns before id widened: true")
	}
}

func TestConnectJSONRecordsBecomeTypedRows(t *testing.T) {
	m, err := NewConnectMapper(Config{Table: "orders"})
	if err != nil {
		t.Fatal(err)
	}
	row := func(name string) ([]any, error) {
		rec := fixture(t, name)
		got, err := m.Row(&rec, nil)
		if errors.Is(err, decode.ErrTableChanged) {
			got, err = m.Row(&rec, nil)
		}
		return got, err
	}
	got, err := row("connect_orders_v1.json")
	if err != nil {
		t.Fatal(err)
	}
	want := []any{int64(7), "pen", numeric(1999, -2), time.UnixMilli(1700000000123).UTC()}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("v1 row %v, want %v", got, want)
	}
	if got, err = row("connect_orders_v2.json"); err != nil {
		t.Fatal(err)
	}
	want = []any{int64(8), "ink", numeric(-5, -2), nil, int32(3)}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("v2 row %v, want %v", got, want)
	}
	tab := m.Table()
	if len(tab.PrimaryKey) != 0 || len(m.KeyColumns()) != 0 {
		t.Errorf("an append table got the key %v from the record key", tab.PrimaryKey)
	}
	if tab.Columns[2].Type != "numeric" || tab.Columns[3].Type != "timestamp without time zone" || tab.Columns[4] != (schema.Column{Name: "qty", Type: "integer"}) {
		t.Fatalf("table %+v", tab)
	}
}

func numeric(unscaled int64, exp int32) pgvalue.Numeric {
	return pgvalue.Numeric{Int: bigInt(unscaled), Exp: exp}
}

// A plain Connect record's key is whatever its key converter wrote: a
// string key is no reason to refuse the row.
func TestConnectJSONRowsDoNotNeedAJSONKey(t *testing.T) {
	m, err := NewConnectMapper(Config{Table: "orders"})
	if err != nil {
		t.Fatal(err)
	}
	rec := fixture(t, "connect_orders_v1.json")
	rec.Key = []byte("order-7")
	_, err = m.Row(&rec, nil)
	if errors.Is(err, decode.ErrTableChanged) {
		_, err = m.Row(&rec, nil)
	}
	if err != nil {
		t.Fatal(err)
	}
}
