package cdc

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/kafka2pg/kafka2pg/schema"
	"github.com/kafka2pg/kafka2pg/stream"
)

// FuzzDecode: any key and value give a Change or an error, never a panic,
// and every error of a record's own making is a dead letter
// (schema.ErrBadRecord) or a table change.
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
			var ch Change
			for range 3 { // a table change, then the record again
				err := d.Decode(&rec, &ch)
				if err == nil || errors.Is(err, schema.ErrBadRecord) {
					break
				}
				if !errors.Is(err, schema.ErrTableChanged) {
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
			if _, err := m.Row(&rec, nil); err == nil || !errors.Is(err, schema.ErrTableChanged) {
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
