package decode

import (
	"errors"
	"fmt"
	"testing"

	"github.com/kafka2pg/kafka2pg/stream"
)

const orderJSONSchema = `{"type": "object", "properties": {
  "id": {"type": "integer"},
  "amount": {"type": "number"},
  "at": {"type": "string", "format": "date-time"},
  "ref": {"type": "string", "format": "uuid"},
  "note": {"type": ["null", "string"]},
  "ship.to": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
  "tags": {"type": "array", "items": {"type": "string"}},
  "paid": {"type": "boolean"}
}, "required": ["id", "amount", "at", "paid"]}`

func TestJSONSchemaPropertiesMapToTypedColumns(t *testing.T) {
	rs := RegisteredSchema{ID: 41, Type: "JSON", Text: orderJSONSchema}
	reg := newFakeRegistry(rs)
	m, err := NewRegistryMapper(RegistryMappingSpec{Format: FormatJSONSchema, Table: "orders", Value: []RegisteredSchema{rs}, Lookup: reg.lookup})
	if err != nil {
		t.Fatal(err)
	}
	want := "id bigint NOT NULL, amount numeric NOT NULL, at timestamp with time zone NOT NULL, ref uuid, note text, ship.to_city text, tags jsonb, paid boolean NOT NULL"
	if got := describeColumns(m.Table()); got != want {
		t.Fatalf("columns\n %s\nwant\n %s", got, want)
	}
	doc := `{"id": 7, "amount": 12.50, "at": "2026-11-30T12:00:00Z", "ship.to": {"city": "Gent"}, "tags": ["a"], "paid": true}`
	row, err := rowOf(m, &stream.Record{Value: append(AppendWireHeader(nil, 41, nil), doc...)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprintf("%v %v %v %s %v", row[0], row[4], row[5], row[6], row[7]); got != `7 <nil> Gent ["a"] true` {
		t.Errorf("row %s", got)
	}
	var de *DecodeError
	_, err = rowOf(m, &stream.Record{Value: append(AppendWireHeader(nil, 41, nil), `{"id": "x", "amount": 1, "at": "2026-11-30T12:00:00Z", "paid": true}`...)}, nil)
	if !errors.As(err, &de) || de.Kind != KindTypeMismatch || de.Column != "id" {
		t.Errorf("a string id: %v, want a type_mismatch bad record in column id", err)
	}
	// A new version adds a property: a new column.
	v2 := RegisteredSchema{ID: 42, Type: "JSON", Text: `{"type": "object", "properties": {"id": {"type": "integer"}, "extra": {"type": "string"}}}`}
	reg.schemas[42] = v2
	if _, err := rowOf(m, &stream.Record{Value: append(AppendWireHeader(nil, 42, nil), `{"id": 1, "extra": "e"}`...)}, nil); !errors.Is(err, ErrTableChanged) {
		t.Fatalf("v2: %v", err)
	}
	// id is not required in v2 any more: its column loses NOT NULL too.
	if got := describeColumns(m.Table()); got != "id bigint, amount numeric, at timestamp with time zone, ref uuid, note text, ship.to_city text, tags jsonb, paid boolean, extra text" {
		t.Errorf("after v2: %s", got)
	}
}
