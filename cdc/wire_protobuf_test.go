package cdc

import (
	"errors"
	"math/big"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kafka2pg/kafka2pg/pgvalue"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/dynamicpb"

	"github.com/kafka2pg/kafka2pg/decode"
	"github.com/kafka2pg/kafka2pg/schema"
	"github.com/kafka2pg/kafka2pg/stream"
)

// customersProto is the kind of schema Confluent's ProtobufConverter
// registers for a Debezium envelope (with optional.for.nullables): Connect
// structs as messages, Decimal, Date and Timestamp as Confluent's and
// Google's types, int16 as an int32 with its connect.type option.
const customersProto = `syntax = "proto3";
package shop.public.customers;

import "confluent/meta.proto";
import "confluent/type/decimal.proto";
import "google/protobuf/timestamp.proto";
import "google/type/date.proto";

message Envelope {
  Value before = 1;
  Value after = 2;
  Source source = 3;
  string op = 4;
  optional int64 ts_ms = 5;
  block transaction = 6;

  message Value {
    int32 id = 1;
    string first_name = 2;
    optional string email = 3;
    confluent.type.Decimal balance = 4 [(confluent.field_meta) = { params: [{key: "precision", value: "10"}, {key: "scale", value: "2"}] }];
    google.type.Date born = 5;
    google.protobuf.Timestamp updated_at = 6;
    optional int32 small = 7 [(confluent.field_meta) = { params: [{key: "connect.type", value: "int16"}] }];
    repeated string tags = 8;
    VariableScaleDecimal amount = 9;
    map<string, int64> counts = 10;
  }
  message VariableScaleDecimal {
    int32 scale = 1;
    bytes value = 2;
  }
  message Source {
    string version = 1;
    string connector = 2;
    string name = 3;
    int64 ts_ms = 4;
    optional string snapshot = 5;
    string db = 6;
    string schema = 7;
    string table = 8;
    optional int64 txId = 9;
    optional int64 lsn = 10;
  }
  message block {
    string id = 1;
    int64 total_order = 2;
    int64 data_collection_order = 3;
  }
}
`

const customersKeyProto = `syntax = "proto3";
package shop.public.customers;
message Key { int32 id = 1; }
`

// protoRecord encodes the protojson text of a message of schema id in the
// wire format.
func protoRecord(tb testing.TB, rs decode.RegisteredSchema, text string) []byte {
	tb.Helper()
	md, err := decode.ProtobufMessage(rs, []int{0}, "")
	if err != nil {
		tb.Fatal(err)
	}
	m := dynamicpb.NewMessage(md)
	if err := protojson.Unmarshal([]byte(text), m); err != nil {
		tb.Fatalf("%s: %v", text, err)
	}
	b, err := proto.Marshal(m)
	if err != nil {
		tb.Fatal(err)
	}
	return append(decode.AppendWireHeader(nil, rs.ID, []int{0}), b...)
}

const protoRow = `{"id": %d, "first_name": "Sally", "email": "s@example.com",
  "balance": {"value": "B88=", "precision": 10, "scale": 2}, "born": {"year": 2024, "month": 2, "day": 29},
  "updated_at": "2024-02-29T00:00:00.123456Z", "small": -7, "tags": ["a", "b"],
  "amount": {"scale": 3, "value": "MDk="}, "counts": {"x": "3"}}`

func protoEvent(op, before, after string) string {
	s := `{"op": "` + op + `", "ts_ms": "1709164800999", "source": {"version": "3.0.0.Final", "connector": "postgresql", "name": "shop",
  "ts_ms": "1709164800000", "snapshot": "false", "db": "shop", "schema": "public", "table": "customers", "txId": "771", "lsn": "24023200"}`
	if before != "" {
		s += `, "before": ` + before
	}
	if after != "" {
		s += `, "after": ` + after
	}
	return s + "}"
}

func TestProtobufEventsBecomeChanges(t *testing.T) {
	value := decode.RegisteredSchema{ID: 11, Type: "PROTOBUF", Text: customersProto}
	key := decode.RegisteredSchema{ID: 12, Type: "PROTOBUF", Text: customersKeyProto}
	reg := &registry{schemas: map[int]decode.RegisteredSchema{11: value, 12: key}}
	d := mustDecoder(t, Config{Format: FormatProtobuf, Lookup: reg.lookup})
	keyOf := func(id string) []byte { return protoRecord(t, key, `{"id": `+id+`}`) }
	row := func(id string) string { return fmtRow(protoRow, id) }

	ch, err := decodeGrowing(t, d, stream.Record{Key: keyOf("1"), Value: protoRecord(t, value, protoEvent("c", "", row("1")))})
	if err != nil {
		t.Fatal(err)
	}
	tbl := d.Table()
	wantCols := []schema.Column{
		{Name: "id", Type: "integer", NotNull: true}, {Name: "first_name", Type: "text"}, {Name: "email", Type: "text"},
		{Name: "balance", Type: "numeric"}, {Name: "born", Type: "date"}, {Name: "updated_at", Type: "timestamp without time zone"},
		{Name: "small", Type: "smallint"}, {Name: "tags", Type: "text[]"}, {Name: "amount", Type: "numeric"}, {Name: "counts", Type: "jsonb"},
	}
	if !reflect.DeepEqual(tbl.Columns, wantCols) || !slices.Equal(tbl.PrimaryKey, []string{"id"}) {
		t.Fatalf("table %+v\nwant columns %+v and key [id]", tbl, wantCols)
	}
	wantRow := []any{int32(1), "Sally", "s@example.com", pgvalue.Numeric{Int: big.NewInt(1999), Exp: -2},
		time.Date(2024, 2, 29, 0, 0, 0, 0, time.UTC), time.UnixMicro(1709164800123456).UTC(), int16(-7), []any{"a", "b"},
		pgvalue.Numeric{Int: big.NewInt(12345), Exp: -3}, []byte(`{"x":3}`)}
	if ch.Op != stream.OpUpsert || ch.Event != 'c' || !reflect.DeepEqual(ch.Row, wantRow) || !reflect.DeepEqual(ch.Key, []any{int32(1)}) {
		t.Fatalf("create: op %v %q key %v\nrow  %#v\nwant %#v", ch.Op, ch.Event, ch.Key, ch.Row, wantRow)
	}
	if ch.Source.Table != "customers" || ch.Source.TxID != 771 || ch.Source.Snapshot != "false" || ch.TsMs != 1709164800999 {
		t.Errorf("source %+v, ts %d", ch.Source, ch.TsMs)
	}
	ch, err = decodeGrowing(t, d, stream.Record{Key: keyOf("10"), Value: protoRecord(t, value, protoEvent("u", row("1"), row("10")))})
	if err != nil || !reflect.DeepEqual(ch.OldKey, []any{int32(1)}) || !reflect.DeepEqual(ch.Key, []any{int32(10)}) {
		t.Fatalf("primary key change: %v, %+v", err, ch)
	}
	ch, err = decodeGrowing(t, d, stream.Record{Key: keyOf("10"), Value: protoRecord(t, value, protoEvent("d", row("10"), ""))})
	if err != nil || ch.Op != stream.OpDelete || !reflect.DeepEqual(ch.Key, []any{int32(10)}) {
		t.Fatalf("delete: %v, %+v", err, ch)
	}
	if ch, err = decodeGrowing(t, d, stream.Record{Value: protoRecord(t, value, protoEvent("t", "", ""))}); err != nil || ch.Op != stream.OpTruncate {
		t.Fatalf("truncate: %v, %+v", err, ch)
	}
	// A date Protobuf can say and a calendar cannot is a bad record.
	bad := protoEvent("c", "", fmtRow(protoRow, "2"))
	bad = strings.Replace(bad, `"day": 29`, `"day": 30`, 1)
	_, err = decodeGrowing(t, d, stream.Record{Key: keyOf("2"), Value: protoRecord(t, value, bad)})
	var de *decode.DecodeError
	if !errors.As(err, &de) || de.Column != "born" || de.Kind != decode.KindTypeMismatch {
		t.Fatalf("February 30: %v, want a type mismatch of born", err)
	}
}

func fmtRow(format, id string) string { return strings.Replace(format, "%d", id, 1) }
