package decode

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/kafka2pg/kafka2pg/schema"
	"github.com/kafka2pg/kafka2pg/stream"
)

// The versions of an evolving subject: each adds or changes one thing.
var evolving = []RegisteredSchema{
	{ID: 11, Text: `{"type": "record", "name": "Order", "fields": [
		{"name": "id", "type": "long"}, {"name": "name", "type": "string"}, {"name": "qty", "type": "int"}]}`},
	// An optional field.
	{ID: 12, Text: `{"type": "record", "name": "Order", "fields": [
		{"name": "id", "type": "long"}, {"name": "name", "type": "string"}, {"name": "qty", "type": "int"},
		{"name": "email", "type": ["null", "string"], "default": null}]}`},
	// A field with a default.
	{ID: 13, Text: `{"type": "record", "name": "Order", "fields": [
		{"name": "id", "type": "long"}, {"name": "name", "type": "string"}, {"name": "qty", "type": "int"},
		{"name": "email", "type": ["null", "string"], "default": null}, {"name": "country", "type": "string", "default": "NL"}]}`},
	// int → long.
	{ID: 14, Text: `{"type": "record", "name": "Order", "fields": [
		{"name": "id", "type": "long"}, {"name": "name", "type": "string"}, {"name": "qty", "type": "long"},
		{"name": "email", "type": ["null", "string"], "default": null}, {"name": "country", "type": "string", "default": "NL"}]}`},
	// string → long: incompatible.
	{ID: 15, Text: `{"type": "record", "name": "Order", "fields": [
		{"name": "id", "type": "long"}, {"name": "name", "type": "long"}, {"name": "qty", "type": "long"},
		{"name": "email", "type": ["null", "string"], "default": null}, {"name": "country", "type": "string", "default": "NL"}]}`},
}

// evolvingValues are one record of each version.
var evolvingValues = []map[string]any{
	{"id": int64(1), "name": "a", "qty": int32(1)},
	{"id": int64(2), "name": "b", "qty": int32(2), "email": map[string]any{"string": "b@x"}},
	{"id": int64(3), "name": "c", "qty": int32(3), "email": nil, "country": "BE"},
	{"id": int64(4), "name": "d", "qty": int64(1) << 40, "email": nil, "country": "DE"},
	{"id": int64(5), "name": int64(5), "qty": int64(5), "email": nil, "country": "FR"},
}

func TestAvroTableFollowsTheSchemaVersionByVersion(t *testing.T) {
	reg := newFakeRegistry(evolving...)
	m, err := NewRegistryMapper(RegistryMappingSpec{Format: FormatAvro, Table: "orders", Value: evolving[:1], Lookup: reg.lookup})
	if err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		changes bool
		columns string // name type [NOT NULL], after the record
		row     string
		kind    string // of the bad record, "" when none
	}{
		{false, "id bigint NOT NULL, name text NOT NULL, qty integer NOT NULL", "[1 a 1]", ""},
		{true, "id bigint NOT NULL, name text NOT NULL, qty integer NOT NULL, email text", "[2 b 2 b@x]", ""},
		{true, "id bigint NOT NULL, name text NOT NULL, qty integer NOT NULL, email text, country text", "[3 c 3 <nil> BE]", ""},
		{true, "id bigint NOT NULL, name text NOT NULL, qty bigint NOT NULL, email text, country text", "[4 d 1099511627776 <nil> DE]", ""},
		{false, "id bigint NOT NULL, name text NOT NULL, qty bigint NOT NULL, email text, country text", "", KindSchemaIncompatible},
	}
	for i, st := range steps {
		r := &stream.Record{Topic: "orders", Offset: int64(i), Value: avroRecord(t, evolving[i].ID, evolving[i].Text, evolvingValues[i])}
		row, err := rowOf(m, r, nil)
		if st.changes {
			if !errors.Is(err, ErrTableChanged) {
				t.Fatalf("version %d: got %v, want ErrTableChanged", i+1, err)
			}
			row, err = rowOf(m, r, nil) // as the writer does after evolving the table
		}
		if got := describeColumns(m.Table()); got != st.columns {
			t.Errorf("version %d: columns\n %s\nwant\n %s", i+1, got, st.columns)
		}
		var de *DecodeError
		switch {
		case st.kind != "" && (!errors.As(err, &de) || de.Kind != st.kind):
			t.Fatalf("version %d: got %v, want a %s bad record", i+1, err, st.kind)
		case st.kind == "" && err != nil:
			t.Fatalf("version %d: %v", i+1, err)
		case st.kind == "" && fmt.Sprint(row) != st.row:
			t.Errorf("version %d: row %v, want %s", i+1, row, st.row)
		}
		if st.kind == KindSchemaIncompatible {
			for _, says := range []string{"field name", "from string", "to long", "schema id 15", "register a schema"} {
				if !strings.Contains(err.Error(), says) {
					t.Errorf("the incompatible change's message does not say %q: %v", says, err)
				}
			}
		}
	}
	// A record of the first version still maps: the added columns are
	// NULL, or their default.
	row, err := rowOf(m, &stream.Record{Value: avroRecord(t, 11, evolving[0].Text, evolvingValues[0])}, nil)
	if err != nil || fmt.Sprint(row) != "[1 a 1 <nil> NL]" {
		t.Errorf("a first-version record after the changes: %v, %v; want [1 a 1 <nil> NL]", row, err)
	}
}

func TestAvroMapperStartsFromTheFoldOfEveryVersion(t *testing.T) {
	reg := newFakeRegistry()
	m, err := NewRegistryMapper(RegistryMappingSpec{Format: FormatAvro, Table: "orders", Value: evolving[:4], Lookup: reg.lookup})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := describeColumns(m.Table()), "id bigint NOT NULL, name text NOT NULL, qty bigint NOT NULL, email text, country text"; got != want {
		t.Errorf("columns %s, want %s", got, want)
	}
	if _, err := NewRegistryMapper(RegistryMappingSpec{Format: FormatAvro, Table: "orders", Value: evolving, Lookup: reg.lookup}); err == nil ||
		!strings.Contains(err.Error(), "latest value schema (id 15)") {
		t.Errorf("a latest version that does not fit: got %v", err)
	}
	// A removed field keeps its column, which loses NOT NULL.
	dropped := RegisteredSchema{ID: 16, Text: `{"type": "record", "name": "Order", "fields": [{"name": "id", "type": "long"}]}`}
	m, err = NewRegistryMapper(RegistryMappingSpec{Format: FormatAvro, Table: "orders", Value: []RegisteredSchema{evolving[0], dropped}, Lookup: reg.lookup})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := describeColumns(m.Table()), "id bigint NOT NULL, name text, qty integer"; got != want {
		t.Errorf("columns after a removal %s, want %s", got, want)
	}
	if reg.calls != 0 {
		t.Errorf("the registry was asked %d times", reg.calls)
	}
}

func describeColumns(t schema.Table) string {
	var parts []string
	for _, c := range t.Columns {
		s := c.Name + " " + c.Type
		if c.NotNull {
			s += " NOT NULL"
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, ", ")
}

// TestRegistryMapperIsSafeForConcurrentUse maps records of every version
// from many goroutines at once, as partitions do (run it with -race): each
// ends with the same table, and every record maps once the table changed.
func TestRegistryMapperIsSafeForConcurrentUse(t *testing.T) {
	reg := newFakeRegistry(evolving[:4]...)
	m, err := NewRegistryMapper(RegistryMappingSpec{Format: FormatAvro, Table: "orders", Value: evolving[:1], Lookup: reg.lookup})
	if err != nil {
		t.Fatal(err)
	}
	values := make([][]byte, 4)
	for i := range values {
		values[i] = avroRecord(t, evolving[i].ID, evolving[i].Text, evolvingValues[i])
	}
	errs := make(chan error, 8)
	for g := range 8 {
		go func() {
			for n := range 200 {
				r := &stream.Record{Offset: int64(n), Value: values[(g+n)%4]}
				row, err := rowOf(m, r, nil)
				if errors.Is(err, ErrTableChanged) {
					row, err = rowOf(m, r, nil)
				}
				if err == nil && len(row) > len(m.Table().Columns) {
					err = fmt.Errorf("a row of %d values for a table of %d columns", len(row), len(m.Table().Columns))
				}
				if err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	for range 8 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if got, want := describeColumns(m.Table()), "id bigint NOT NULL, name text NOT NULL, qty bigint NOT NULL, email text, country text"; got != want {
		t.Errorf("columns %s, want %s", got, want)
	}
}
