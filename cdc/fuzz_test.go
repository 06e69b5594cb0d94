package cdc

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/kafka2pg/kafka2pg/decode"
	"github.com/kafka2pg/kafka2pg/stream"
)

// FuzzDecode: any key and value give a Change or an error, never a panic,
// and every error of a record's own making is a dead letter
// (decode.ErrBadRecord) or a table change.
func FuzzDecode(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("testdata", "*.json"))
	for _, name := range files {
		rec := fixture(f, filepath.Base(name))
		f.Add(rec.Key, rec.Value)
	}
	f.Add([]byte(nil), []byte(`{"op":"c","after":{"id":1}}`))
	f.Fuzz(func(t *testing.T, key, value []byte) {
		for _, d := range []*Decoder{
			mustDecoder(t, Config{}),
			mustDecoder(t, Config{Columns: []Column{{Name: "id", Type: "integer"}, {Name: "first_name", Type: "text"}}, Key: []string{"id"}}),
		} {
			rec := stream.Record{Key: key, Value: value}
			var ch stream.Change
			for range 3 { // a table change, then the record again
				err := d.Decode(&rec, &ch)
				if err == nil || errors.Is(err, decode.ErrBadRecord) {
					break
				}
				if !errors.Is(err, decode.ErrTableChanged) {
					t.Fatalf("err %v is neither a bad record nor a table change", err)
				}
			}
		}
		m, err := NewConnectMapper(Config{Table: "t"})
		if err != nil {
			t.Fatal(err)
		}
		rec := stream.Record{Key: key, Value: value}
		for range 3 {
			if _, err := m.Row(&rec, nil); err == nil || !errors.Is(err, decode.ErrTableChanged) {
				break
			}
		}
	})
}

// The fixtures the fuzzer starts from must exist, or it fuzzes nothing.
func TestTheFuzzSeedsAreThere(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "*.json"))
	if err != nil || len(files) < 10 {
		t.Fatalf("%d fixtures, %v", len(files), err)
	}
	if _, err := os.Stat(filepath.Join("testdata", "README.md")); err != nil {
		t.Fatal(err)
	}
}

// FuzzDecodeWire: any Avro or Protobuf payload under a Debezium envelope
// schema, and any key, gives a Change or an error, never a panic; what
// the record makes wrong is a dead letter.
func FuzzDecodeWire(f *testing.F) {
	avroValue := avroEvent(f, "c", nil, avroRow(1, "Sally"))
	avroKey := avroRecord(f, 2, customersKeyAvro, map[string]any{"id": int32(1)})
	value := decode.RegisteredSchema{ID: 11, Type: "PROTOBUF", Text: customersProto}
	key := decode.RegisteredSchema{ID: 12, Type: "PROTOBUF", Text: customersKeyProto}
	protoValue := protoRecord(f, value, protoEvent("u", fmtRow(protoRow, "1"), fmtRow(protoRow, "2")))
	protoKey := protoRecord(f, key, `{"id": 2}`)
	f.Add(false, avroKey[5:], avroValue[5:])
	f.Add(true, protoKey[7:], protoValue[7:])
	f.Fuzz(func(t *testing.T, protobuf bool, keyPayload, valuePayload []byte) {
		reg := newAvroRegistry()
		reg.schemas[11], reg.schemas[12] = value, key
		cfg, rec := Config{Format: FormatAvro, Lookup: reg.lookup}, stream.Record{
			Key:   append(decode.AppendWireHeader(nil, 2, nil), keyPayload...),
			Value: append(decode.AppendWireHeader(nil, 1, nil), valuePayload...),
		}
		if protobuf {
			cfg.Format = FormatProtobuf
			rec.Key = append(decode.AppendWireHeader(nil, 12, []int{0}), keyPayload...)
			rec.Value = append(decode.AppendWireHeader(nil, 11, []int{0}), valuePayload...)
		}
		d := mustDecoder(t, cfg)
		if err := d.ResolveSchemas(context.Background(), []stream.Record{rec}); err != nil {
			t.Fatalf("ResolveSchemas: %v", err)
		}
		var ch stream.Change
		for range 3 {
			err := d.Decode(&rec, &ch)
			if err == nil || errors.Is(err, decode.ErrBadRecord) {
				break
			}
			if !errors.Is(err, decode.ErrTableChanged) {
				t.Fatalf("err %v is neither a bad record nor a table change", err)
			}
		}
	})
}
