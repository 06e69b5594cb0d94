package decode

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/bufbuild/protocompile"
	"github.com/jackc/pgx/v5"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"

	"github.com/kafka2pg/kafka2pg/internal/pgtest"

	"github.com/kafka2pg/kafka2pg/schema"
	"github.com/kafka2pg/kafka2pg/stream"
)

const commonProto = `syntax = "proto3";
package shop.common;
message Money { string currency = 1; int64 units = 2; }
`

const orderProto = `syntax = "proto3";
package shop;
import "google/protobuf/timestamp.proto";
import "google/protobuf/duration.proto";
import "google/protobuf/wrappers.proto";
import "shop/common/money.proto";

enum Status { STATUS_UNKNOWN = 0; PAID = 1; SHIPPED = 2; }

message Order {
  int64 id = 1;
  string name = 2;
  optional int32 qty = 3;
  Status status = 4;
  google.protobuf.Timestamp created = 5;
  google.protobuf.Duration took = 6;
  google.protobuf.Int64Value maybe = 7;
  google.protobuf.StringValue note = 8;
  shop.common.Money price = 9;
  repeated string tags = 10;
  map<string, int64> counts = 11;
  uint64 big = 12;
  double ratio = 13;
  bytes blob = 14;
  bool ok = 15;
  oneof pick { string a = 16; int64 b = 17; }
  message Line { string sku = 1; }
  repeated Line lines = 18;
}

message Other { string x = 1; }
`

var orderSchema = RegisteredSchema{ID: 21, Type: "PROTOBUF", Text: orderProto,
	References: []SchemaReference{{Name: "shop/common/money.proto", Text: commonProto}}}

// protoRecord encodes the protojson document doc as message indexes of rs.
func protoRecord(t testing.TB, rs RegisteredSchema, indexes []int, doc string) []byte {
	t.Helper()
	srcs := map[string]string{"main.proto": rs.Text}
	for _, r := range rs.References {
		srcs[r.Name] = r.Text
	}
	c := protocompile.Compiler{Resolver: protocompile.WithStandardImports(&protocompile.SourceResolver{Accessor: protocompile.SourceAccessorFromMap(srcs)})}
	files, err := c.Compile(context.Background(), "main.proto")
	if err != nil {
		t.Fatal(err)
	}
	var md protoreflect.MessageDescriptor
	msgs := files[0].Messages()
	for _, i := range indexes {
		md = msgs.Get(i)
		msgs = md.Messages()
	}
	msg := dynamicpb.NewMessage(md)
	if err := protojson.Unmarshal([]byte(doc), msg); err != nil {
		t.Fatalf("%s: %v", doc, err)
	}
	b, err := proto.Marshal(msg)
	if err != nil {
		t.Fatal(err)
	}
	return append(AppendWireHeader(nil, rs.ID, indexes), b...)
}

func TestProtobufMessagesMapToTypedColumns(t *testing.T) {
	t.Parallel()
	reg := newFakeRegistry(orderSchema)
	m, err := NewRegistryMapper(RegistryMappingSpec{Format: FormatProtobuf, Table: "orders", Value: []RegisteredSchema{orderSchema}, Lookup: reg.lookup})
	if err != nil {
		t.Fatal(err)
	}
	want := "id bigint NOT NULL, name text NOT NULL, qty integer, status text NOT NULL, created timestamp with time zone, took bigint, " +
		"maybe bigint, note text, price_currency text, price_units bigint, tags jsonb, counts jsonb, big numeric(20,0) NOT NULL, " +
		"ratio double precision NOT NULL, blob bytea NOT NULL, ok boolean NOT NULL, a text, b bigint, lines jsonb"
	if got := describeColumns(m.Table()); got != want {
		t.Fatalf("columns\n %s\nwant\n %s", got, want)
	}

	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, "SET TIME ZONE 'UTC'"); err != nil {
		t.Fatal(err)
	}
	tbl := m.Table()
	for _, stmt := range schema.PlanCreate(tbl) {
		if _, err := conn.Exec(ctx, stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	docs := []struct {
		doc  string
		want string // every column ::text, | separated
	}{
		{`{"id": "1", "name": "full", "qty": 0, "status": "SHIPPED", "created": "1969-12-31T23:59:59.999999Z", "took": "-1.5s",
		   "maybe": "0", "note": "", "price": {"currency": "EUR", "units": "-5"}, "tags": ["x", "y"], "counts": {"k": "9223372036854775807"},
		   "big": "18446744073709551615", "ratio": 0.1, "blob": "AP8=", "ok": true, "b": "7", "lines": [{"sku": "s1"}]}`,
			`1|full|0|SHIPPED|1969-12-31 23:59:59.999999+00|-1500000|0||EUR|-5|["x", "y"]|{"k": 9223372036854775807}|18446744073709551615|0.1|\x00ff|true|NULL|7|[{"sku": "s1"}]`},
		{`{"id": "2"}`,
			`2||NULL|STATUS_UNKNOWN|NULL|NULL|NULL|NULL|NULL|NULL|[]|{}|0|0|\x|false|NULL|NULL|[]`},
	}
	var rows [][]any
	for i, d := range docs {
		row, err := rowOf(m, &stream.Record{Offset: int64(i), Value: protoRecord(t, orderSchema, []int{0}, d.doc)}, nil)
		if err != nil {
			t.Fatalf("%s: %v", d.doc, err)
		}
		rows = append(rows, slices.Clone(row))
	}
	if _, err := conn.CopyFrom(ctx, tbl.Ident(), tbl.ColumnNames(), pgx.CopyFromRows(rows)); err != nil {
		t.Fatal(err)
	}
	var sel []string
	for _, c := range tbl.Columns {
		sel = append(sel, fmt.Sprintf("coalesce(%s::text, 'NULL')", pgx.Identifier{c.Name}.Sanitize()))
	}
	for _, d := range docs {
		var got string
		var id int64
		fmt.Sscanf(strings.Split(d.want, "|")[0], "%d", &id)
		q := "SELECT concat_ws('|', " + strings.Join(sel, ", ") + ") FROM orders WHERE id = $1"
		if err := conn.QueryRow(ctx, q, id).Scan(&got); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		if got != d.want {
			t.Errorf("row %d:\n got %s\nwant %s", id, got, d.want)
		}
	}
}

func TestProtobufMessageIndexesPickTheMessage(t *testing.T) {
	reg := newFakeRegistry(orderSchema)
	m, err := NewRegistryMapper(RegistryMappingSpec{Format: FormatProtobuf, Table: "orders", Value: []RegisteredSchema{orderSchema}, Lookup: reg.lookup})
	if err != nil {
		t.Fatal(err)
	}
	// Message index [1] is Other: its field x is a new column.
	_, err = rowOf(m, &stream.Record{Value: protoRecord(t, orderSchema, []int{1}, `{"x": "hello"}`)}, nil)
	if !errors.Is(err, ErrTableChanged) {
		t.Fatalf("a record of another message with a new field: got %v, want ErrTableChanged", err)
	}
	row, err := rowOf(m, &stream.Record{Value: protoRecord(t, orderSchema, []int{1}, `{"x": "hello"}`)}, nil)
	if err != nil || row[len(row)-1] != "hello" {
		t.Fatalf("row %v, %v", row, err)
	}
	// A nested message, [0, 1], is Order.Line ([0, 0] is the map entry
	// of counts, as in the descriptor Confluent's serializers index).
	if _, err := rowOf(m, &stream.Record{Value: protoRecord(t, orderSchema, []int{0, 1}, `{"sku": "s"}`)}, nil); !errors.Is(err, ErrTableChanged) {
		t.Fatalf("Order.Line: got %v", err)
	}
	// An index past the messages is a bad record.
	bad := append(AppendWireHeader(nil, orderSchema.ID, []int{5}), 0x08, 0x01)
	var de *DecodeError
	if _, err := rowOf(m, &stream.Record{Value: bad}, nil); !errors.As(err, &de) || de.Kind != KindSchemaIncompatible {
		t.Fatalf("message index 5: got %v", err)
	}
	if _, err := rowOf(m, &stream.Record{Value: []byte{0, 0, 0, 0, 21}}, nil); !errors.As(err, &de) || de.Kind != KindInvalidWireFormat {
		t.Fatalf("no message indexes: got %v", err)
	}
}

// google.golang.org/protobuf panics on a map entry that repeats its key
// with another wire type; the record is a bad record instead.
func TestAProtobufMapEntryThatPanicsTheLibraryIsABadRecord(t *testing.T) {
	reg := newFakeRegistry(orderSchema)
	m, err := NewRegistryMapper(RegistryMappingSpec{Format: FormatProtobuf, Table: "orders", Value: []RegisteredSchema{orderSchema}, Lookup: reg.lookup})
	if err != nil {
		t.Fatal(err)
	}
	// counts (field 11): an entry of key "x", then key 1 as a varint.
	value := append(AppendWireHeader(nil, orderSchema.ID, []int{0}), 0x5a, 0x05, 0x0a, 0x01, 'x', 0x08, 0x01)
	var de *DecodeError
	if _, err := rowOf(m, &stream.Record{Value: value}, nil); !errors.As(err, &de) || de.Kind != KindInvalidWireFormat {
		t.Fatalf("got %v, want an invalid_wire_format bad record", err)
	}
}

func TestProtobufFieldChangesFollowTheRules(t *testing.T) {
	v1 := RegisteredSchema{ID: 31, Type: "PROTOBUF", Text: `syntax = "proto3"; message M { int32 n = 1; string s = 2; }`}
	v2 := RegisteredSchema{ID: 32, Type: "PROTOBUF", Text: `syntax = "proto3"; message M { int64 n = 1; string s = 2; optional string added = 3; }`}
	v3 := RegisteredSchema{ID: 33, Type: "PROTOBUF", Text: `syntax = "proto3"; message M { int64 n = 1; bool s = 2; }`}
	reg := newFakeRegistry(v1, v2, v3)
	m, err := NewRegistryMapper(RegistryMappingSpec{Format: FormatProtobuf, Table: "m", Value: []RegisteredSchema{v1}, Lookup: reg.lookup})
	if err != nil {
		t.Fatal(err)
	}
	rec := &stream.Record{Value: protoRecord(t, v2, []int{0}, `{"n": "5000000000", "s": "x", "added": "y"}`)}
	if _, err := rowOf(m, rec, nil); !errors.Is(err, ErrTableChanged) {
		t.Fatalf("v2: %v", err)
	}
	if got, want := describeColumns(m.Table()), "n bigint NOT NULL, s text NOT NULL, added text"; got != want {
		t.Fatalf("columns %s, want %s", got, want)
	}
	if row, err := rowOf(m, rec, nil); err != nil || fmt.Sprint(row) != "[5000000000 x y]" {
		t.Fatalf("v2 row %v, %v", row, err)
	}
	var de *DecodeError
	_, err = rowOf(m, &stream.Record{Value: protoRecord(t, v3, []int{0}, `{"n": "1", "s": true}`)}, nil)
	if !errors.As(err, &de) || de.Kind != KindSchemaIncompatible || !strings.Contains(err.Error(), "field s changed type from string") {
		t.Fatalf("v3: got %v", err)
	}
}
