package decode

import (
	"errors"
	"testing"

	"github.com/kafka2pg/kafka2pg/stream"
)

// FuzzRegistryMapperRow feeds arbitrary keys and values to the Avro (or
// Protobuf) and JSON Schema mappers: an error, never a panic, and every error is a bad
// record or a table change (the lookup never fails here).
func FuzzRegistryMapperRow(f *testing.F) {
	avroSchema := RegisteredSchema{ID: 7, Type: "AVRO", Text: logicalSchema}
	reg := newFakeRegistry(avroSchema, orderSchema)
	am, err := NewRegistryMapper(RegistryMappingSpec{Format: FormatAvro, Table: "a", Value: []RegisteredSchema{avroSchema}, Key: []RegisteredSchema{avroSchema}, Lookup: reg.lookup})
	if err != nil {
		f.Fatal(err)
	}
	pm, err := NewRegistryMapper(RegistryMappingSpec{Format: FormatProtobuf, Table: "p", Value: []RegisteredSchema{orderSchema}, Lookup: reg.lookup})
	if err != nil {
		f.Fatal(err)
	}
	js := RegisteredSchema{ID: 41, Type: "JSON", Text: orderJSONSchema}
	jm, err := NewRegistryMapper(RegistryMappingSpec{Format: FormatJSONSchema, Table: "j", Value: []RegisteredSchema{js}, Lookup: newFakeRegistry(js).lookup})
	if err != nil {
		f.Fatal(err)
	}
	f.Add(append(AppendWireHeader(nil, 41, nil), `{"id": 1, "amount": 2.5, "at": "2026-11-30T12:00:00Z", "paid": false, "ship.to": {"city": "x"}}`...), false)
	for _, rec := range edgeRecords {
		f.Add(avroRecord(f, 7, logicalSchema, rec.value), false)
	}
	f.Add(protoRecord(f, orderSchema, []int{0}, `{"id": "1", "tags": ["a"], "price": {"units": "3"}}`), true)
	f.Add(protoRecord(f, orderSchema, []int{1}, `{"x": "y"}`), true)
	f.Add([]byte{0, 0, 0, 0, 7, 0xff, 0xff, 0xff, 0xff, 0x0f}, false)
	f.Add([]byte{0, 0, 0, 0, 21, 0x7f}, true)
	f.Fuzz(func(t *testing.T, b []byte, proto bool) {
		m := am
		if proto {
			m = pm
		}
		for _, m := range []*RegistryMapper{m, jm} {
			_, err := rowOf(m, &stream.Record{Key: b, Value: b}, nil)
			if err != nil && !errors.Is(err, ErrBadRecord) && !errors.Is(err, ErrTableChanged) {
				t.Fatalf("%x: %v is neither a bad record nor a table change", b, err)
			}
		}
	})
}
