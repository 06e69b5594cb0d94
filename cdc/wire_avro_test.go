package cdc

import (
	"context"
	"errors"
	"fmt"
	"math/big"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hamba/avro/v2"
	"github.com/kafka2pg/kafka2pg/pgvalue"

	"github.com/kafka2pg/kafka2pg/decode"
	"github.com/kafka2pg/kafka2pg/schema"
	"github.com/kafka2pg/kafka2pg/stream"
)

// customersAvro is the value schema Confluent's AvroConverter registers for
// a Debezium Postgres connector's events of a customers table: the
// envelope, the row struct (Value) with its semantic types as connect.name
// and connect.parameters, the source block, the transaction block. seen is
// an Avro logical type that no Connect schema made.
const customersAvro = `{"type":"record","name":"Envelope","namespace":"shop.public.customers","fields":[
 {"name":"before","type":["null",{"type":"record","name":"Value","fields":[
   {"name":"id","type":"int"},
   {"name":"first_name","type":"string"},
   {"name":"email","type":["null","string"],"default":null},
   {"name":"balance","type":["null",{"type":"bytes","scale":2,"precision":10,"connect.version":1,"connect.parameters":{"scale":"2","connect.decimal.precision":"10"},"connect.name":"org.apache.kafka.connect.data.Decimal","logicalType":"decimal"}],"default":null},
   {"name":"born","type":["null",{"type":"int","connect.version":1,"connect.name":"io.debezium.time.Date"}],"default":null},
   {"name":"updated_at","type":["null",{"type":"long","connect.version":1,"connect.name":"io.debezium.time.MicroTimestamp"}],"default":null},
   {"name":"created","type":["null",{"type":"string","connect.version":1,"connect.name":"io.debezium.time.ZonedTimestamp"}],"default":null},
   {"name":"small","type":["null",{"type":"int","connect.type":"int16"}],"default":null},
   {"name":"doc","type":["null",{"type":"string","connect.version":1,"connect.name":"io.debezium.data.Json"}],"default":null},
   {"name":"uid","type":["null",{"type":"string","connect.version":1,"connect.name":"io.debezium.data.Uuid"}],"default":null},
   {"name":"amount","type":["null",{"type":"record","name":"VariableScaleDecimal","namespace":"io.debezium.data","fields":[{"name":"scale","type":"int"},{"name":"value","type":"bytes"}],"connect.doc":"Variable scaled decimal","connect.version":1,"connect.name":"io.debezium.data.VariableScaleDecimal"}],"default":null},
   {"name":"tags","type":["null",{"type":"array","items":"string"}],"default":null},
   {"name":"ratio","type":["null","double"],"default":null},
   {"name":"seen","type":["null",{"type":"long","logicalType":"timestamp-micros"}],"default":null}
  ],"connect.name":"shop.public.customers.Value"}],"default":null},
 {"name":"after","type":["null","Value"],"default":null},
 {"name":"source","type":{"type":"record","name":"Source","namespace":"io.debezium.connector.postgresql","fields":[
   {"name":"version","type":"string"},{"name":"connector","type":"string"},{"name":"name","type":"string"},{"name":"ts_ms","type":"long"},
   {"name":"snapshot","type":[{"type":"string","connect.version":1,"connect.parameters":{"allowed":"true,last,false,incremental"},"connect.default":"false","connect.name":"io.debezium.data.Enum"},"null"],"default":"false"},
   {"name":"db","type":"string"},{"name":"schema","type":"string"},{"name":"table","type":"string"},
   {"name":"txId","type":["null","long"],"default":null},{"name":"lsn","type":["null","long"],"default":null}
  ],"connect.name":"io.debezium.connector.postgresql.Source"}},
 {"name":"op","type":"string"},
 {"name":"ts_ms","type":["null","long"],"default":null},
 {"name":"transaction","type":["null",{"type":"record","name":"block","namespace":"event","fields":[{"name":"id","type":"string"},{"name":"total_order","type":"long"},{"name":"data_collection_order","type":"long"}],"connect.version":1,"connect.name":"event.block"}],"default":null}
],"connect.version":2,"connect.name":"shop.public.customers.Envelope"}`

const customersKeyAvro = `{"type":"record","name":"Key","namespace":"shop.public.customers","fields":[{"name":"id","type":"int"}],"connect.name":"shop.public.customers.Key"}`

// registry is a SchemaLookup over schemas by id that counts its calls.
type registry struct {
	schemas map[int]decode.RegisteredSchema
	calls   int
}

func (r *registry) lookup(_ context.Context, id int) (decode.RegisteredSchema, error) {
	r.calls++
	if id == 99 {
		return decode.RegisteredSchema{}, errors.New("connection refused")
	}
	rs, ok := r.schemas[id]
	if !ok {
		return rs, fmt.Errorf("id %d: %w", id, decode.ErrSchemaNotFound)
	}
	return rs, nil
}

func avroRecord(tb testing.TB, id int, text string, v any) []byte {
	tb.Helper()
	b, err := avro.Marshal(avro.MustParse(text), v)
	if err != nil {
		tb.Fatal(err)
	}
	return append(decode.AppendWireHeader(nil, id, nil), b...)
}

func avroRow(id int32, name string) map[string]any {
	return map[string]any{
		"id": id, "first_name": name, "email": "s@example.com",
		"balance": big.NewRat(1999, 100), "born": int32(19782), "updated_at": int64(1709164800123456),
		"created": "2024-02-29T10:00:00.5+01:00", "small": int32(-7), "doc": `{"a": [1, 2]}`,
		"uid":    "6ba7b810-9dad-11d1-80b4-00c04fd430c8",
		"amount": map[string]any{"io.debezium.data.VariableScaleDecimal": map[string]any{"scale": int32(3), "value": []byte{0x30, 0x39}}},
		"tags":   []any{"a", "b"}, "ratio": 0.25, "seen": time.UnixMicro(1700000000000001).UTC(),
	}
}

func avroEvent(tb testing.TB, op string, before, after map[string]any) []byte {
	env := map[string]any{"op": op, "ts_ms": int64(1709164800999),
		"source": map[string]any{"version": "3.0.0.Final", "connector": "postgresql", "name": "shop", "ts_ms": int64(1709164800000),
			"snapshot": "false", "db": "shop", "schema": "public", "table": "customers", "txId": int64(771), "lsn": int64(24023200)},
		"transaction": map[string]any{"event.block": map[string]any{"id": "771:24023200", "total_order": int64(1), "data_collection_order": int64(1)}},
		"before":      nil, "after": nil,
	}
	// A record in a union is named by its type.
	if before != nil {
		env["before"] = map[string]any{"shop.public.customers.Value": before}
	}
	if after != nil {
		env["after"] = map[string]any{"shop.public.customers.Value": after}
	}
	return avroRecord(tb, 1, customersAvro, env)
}

func avroDecoder(tb testing.TB, reg *registry) *Decoder {
	tb.Helper()
	return mustDecoder(tb, Config{Format: FormatAvro, Lookup: reg.lookup, Source: SourceColumns{Table: "src_table", Position: "src_lsn"}})
}

func newAvroRegistry() *registry {
	return &registry{schemas: map[int]decode.RegisteredSchema{
		1: {ID: 1, Text: customersAvro}, 2: {ID: 2, Text: customersKeyAvro}}}
}

func TestAvroEventsBecomeTheirJSONTwinsChanges(t *testing.T) {
	reg := newAvroRegistry()
	d := avroDecoder(t, reg)
	key := func(id int32) []byte { return avroRecord(t, 2, customersKeyAvro, map[string]any{"id": id}) }

	create := stream.Record{Topic: "shop.public.customers", Key: key(1), Value: avroEvent(t, "c", nil, avroRow(1, "Sally"))}
	ch, err := decodeGrowing(t, d, create)
	if err != nil {
		t.Fatal(err)
	}
	tbl := d.Table()
	wantCols := []schema.Column{
		{Name: "id", Type: "integer", NotNull: true}, {Name: "first_name", Type: "text", NotNull: true},
		{Name: "email", Type: "text"}, {Name: "balance", Type: "numeric(10,2)"}, {Name: "born", Type: "date"},
		{Name: "updated_at", Type: "timestamp without time zone"}, {Name: "created", Type: "timestamp with time zone"},
		{Name: "small", Type: "smallint"}, {Name: "doc", Type: "jsonb"}, {Name: "uid", Type: "uuid"},
		{Name: "amount", Type: "numeric"}, {Name: "tags", Type: "text[]"}, {Name: "ratio", Type: "double precision"},
		{Name: "seen", Type: "timestamp without time zone"},
		{Name: "src_table", Type: "text"}, {Name: "src_lsn", Type: "text"},
	}
	if !reflect.DeepEqual(tbl.Columns, wantCols) || !slices.Equal(tbl.PrimaryKey, []string{"id"}) {
		t.Fatalf("table %+v\nwant columns %+v and key [id]", tbl, wantCols)
	}
	uid, _ := parseUUID([]byte("6ba7b810-9dad-11d1-80b4-00c04fd430c8"))
	wantRow := []any{int32(1), "Sally", "s@example.com", pgvalue.Numeric{Int: big.NewInt(1999), Exp: -2},
		time.Date(2024, 2, 29, 0, 0, 0, 0, time.UTC), time.UnixMicro(1709164800123456).UTC(),
		time.Date(2024, 2, 29, 9, 0, 0, 500000000, time.UTC), int16(-7), []byte(`{"a": [1, 2]}`), uid,
		pgvalue.Numeric{Int: big.NewInt(12345), Exp: -3}, []any{"a", "b"}, 0.25, time.UnixMicro(1700000000000001).UTC(),
		"public.customers", "0/16E90A0"}
	if ch.Op != stream.OpUpsert || ch.Event != 'c' || !reflect.DeepEqual(ch.Row, wantRow) || !reflect.DeepEqual(ch.Key, []any{int32(1)}) {
		t.Fatalf("create: op %v %q key %v\nrow  %#v\nwant %#v", ch.Op, ch.Event, ch.Key, ch.Row, wantRow)
	}
	if ch.Source.Snapshot != "false" || ch.Source.TxID != 771 || ch.Transaction.ID != "771:24023200" || ch.TsMs != 1709164800999 {
		t.Errorf("source %+v transaction %+v ts %d", ch.Source, ch.Transaction, ch.TsMs)
	}

	// An update that changes the key deletes the old key first.
	pk := stream.Record{Key: key(10), Value: avroEvent(t, "u", avroRow(1, "Sally"), avroRow(10, "Sally"))}
	if ch, err = decodeGrowing(t, d, pk); err != nil || ch.Op != stream.OpUpsert || !reflect.DeepEqual(ch.OldKey, []any{int32(1)}) || !reflect.DeepEqual(ch.Key, []any{int32(10)}) {
		t.Fatalf("primary key change: %v, %+v", err, ch)
	}
	del := stream.Record{Key: key(10), Value: avroEvent(t, "d", avroRow(10, "Sally"), nil)}
	if ch, err = decodeGrowing(t, d, del); err != nil || ch.Op != stream.OpDelete || !reflect.DeepEqual(ch.Key, []any{int32(10)}) {
		t.Fatalf("delete: %v, %+v", err, ch)
	}
	trunc := stream.Record{Value: avroEvent(t, "t", nil, nil)}
	if ch, err = decodeGrowing(t, d, trunc); err != nil || ch.Op != stream.OpTruncate {
		t.Fatalf("truncate: %v, %+v", err, ch)
	}
	tomb := stream.Record{Key: key(10)}
	if ch, err = decodeGrowing(t, d, tomb); err != nil || ch.Op != stream.OpNone {
		t.Fatalf("tombstone: %v, %+v", err, ch)
	}
	if reg.calls != 2 {
		t.Errorf("%d registry lookups, want one per schema id", reg.calls)
	}
}

func TestAvroRecordsThatCannotBeDecodedSayWhy(t *testing.T) {
	reg := newAvroRegistry()
	reg.schemas[3] = decode.RegisteredSchema{ID: 3, Text: `{"type":"record","name":"N","fields":[{"name":"n","type":"null"}]}`}
	d := avroDecoder(t, reg)
	good := avroEvent(t, "c", nil, avroRow(1, "Sally"))
	badUTF8 := avroRow(1, "Sa\xffly")
	cases := []struct {
		name  string
		value []byte
		kind  string
		want  string
	}{
		{"no magic byte", []byte(`{"op":"c"}`), decode.KindInvalidWireFormat, "does not start with the magic byte"},
		{"an unknown schema id", append(decode.AppendWireHeader(nil, 7, nil), good[5:]...), decode.KindUnknownSchema, "schema id 7 is unknown"},
		{"a truncated payload", good[:len(good)-20], decode.KindInvalidWireFormat, "does not decode with its schema"},
		{"invalid UTF-8 in a string", avroEvent(t, "c", nil, badUTF8), decode.KindInvalidUTF8, "UTF-8"},
		{"a schema no Connect schema can be", append(decode.AppendWireHeader(nil, 3, nil), 0), KindInvalidSchema, `Avro type null`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := decodeGrowing(t, d, stream.Record{Value: c.value})
			var de *decode.DecodeError
			if !errors.As(err, &de) || de.Kind != c.kind || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err %v, want a %s dead letter saying %q", err, c.kind, c.want)
			}
		})
	}
	// A registry that cannot be reached is no dead letter: the batch is retried.
	_, err := decodeGrowing(t, d, stream.Record{Value: append(decode.AppendWireHeader(nil, 99, nil), good[5:]...)})
	if err == nil || errors.Is(err, decode.ErrBadRecord) {
		t.Fatalf("err %v, want an error that is not a bad record", err)
	}
}
