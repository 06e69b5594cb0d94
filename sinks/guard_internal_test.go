package sinks

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/kafka2pg/kafka2pg/decode"
	"github.com/kafka2pg/kafka2pg/ingest"
)

// A registry sink's version is checked against the subject's columns,
// once the registry gave them, and its table gains the deleted column.
func TestARegistrySinksVersionIsOneOfItsSubjectsColumns(t *testing.T) {
	t.Parallel()
	value := decode.RegisteredSchema{ID: 1, Type: "JSON", Text: `{"type":"object","properties":{"id":{"type":"integer"},"rev":{"type":"integer"},"name":{"type":"string"}}}`}
	m, err := decode.NewRegistryMapper(decode.RegistryMappingSpec{Format: decode.FormatJSONSchema, Table: "t", Value: []decode.RegisteredSchema{value},
		KeyColumns: []string{"id"}, Lookup: func(context.Context, int) (decode.RegisteredSchema, error) { return value, nil }})
	if err != nil {
		t.Fatal(err)
	}
	sink := ingest.Sink{Table: m.Table(), Mapper: m, Upsert: &ingest.Upsert{Key: []string{"id"}}}
	for _, c := range []struct{ version, want string }{
		{"revision", `version "revision" is not a column of the subject's schema`},
		{"name", `version "name" is of type text`},
	} {
		_, err := guardedRegistry(Sink{Version: c.version}, sink, m, nil)
		var ke *keyError
		if !errors.As(err, &ke) || ke.key != "version" || !strings.Contains(err.Error(), c.want) {
			t.Errorf("version %s: %v, want an error of key version saying %q", c.version, err, c.want)
		}
	}
	got, err := guardedRegistry(Sink{Version: "rev"}, sink, m, &ingest.Deleted{Column: "deleted_at"})
	if err != nil {
		t.Fatal(err)
	}
	cols := got.Table.ColumnNames()
	if _, live := got.Mapper.(*ingest.LiveMapper); !live || cols[len(cols)-1] != "deleted_at" || got.Version != "rev" {
		t.Errorf("columns %v, mapper %T, version %q: want deleted_at last, a LiveMapper and rev", cols, got.Mapper, got.Version)
	}
}
