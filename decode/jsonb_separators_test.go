package decode

import (
	"bytes"
	"encoding/json"
	"reflect"
	"slices"
	"testing"

	"github.com/kafka2pg/kafka2pg/schema"
	"github.com/kafka2pg/kafka2pg/stream"
)

// lineSeparators is a string whose JSON json.Marshal escapes in every way
// that matters here: U+2028 and U+2029 (for JavaScript), HTML characters,
// and a backslash before the text "u2028", which must stay text; and a
// character beyond ASCII that no escape may replace.
const lineSeparators = "a\u2028b\u2029c <&> \\u2028 \\ 中"

// checkJSONB holds b to the JSON of want (decoded alike) holding n raw
// U+2028 and n raw U+2029 characters: none escaped, as a SQL_ASCII
// database's jsonb cannot store their escapes.
func checkJSONB(t *testing.T, what string, b []byte, want any, n int) {
	t.Helper()
	var got, exp any
	wantJSON, err := json.Marshal(want)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatalf("%s: %s is not JSON: %v", what, b, err)
	}
	if err := json.Unmarshal(wantJSON, &exp); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, exp) {
		t.Errorf("%s: %s decodes to %#v, want %#v", what, b, got, exp)
	}
	if c, d := bytes.Count(b, []byte("\u2028")), bytes.Count(b, []byte("\u2029")); c != n || d != n {
		t.Errorf("%s: %s holds %d U+2028 and %d U+2029 as themselves, want %d each", what, b, c, d, n)
	}
	if bytes.Count(b, []byte("中")) != bytes.Count(wantJSON, []byte("中")) {
		t.Errorf("%s: %s holds 中 as itself %d times, want %d", what, b, bytes.Count(b, []byte("中")), bytes.Count(wantJSON, []byte("中")))
	}
}

func TestJSONBOfRegistryValuesWritesLineSeparatorsAsThemselves(t *testing.T) {
	for _, c := range []struct {
		v any
		n int
	}{
		{lineSeparators, 1},
		{map[string]any{lineSeparators: []any{lineSeparators, 1.5, nil}}, 2},
		{[]any{"plain", `\u2028`}, 0},
		{map[string]any{"raw": json.RawMessage(`{"k": "` + lineSeparators[:8] + `"}`)}, 1},
	} {
		b, err := marshalJSONB(c.v)
		if err != nil {
			t.Fatal(err)
		}
		checkJSONB(t, "marshalJSONB", b, c.v, c.n)
	}

	column := func(m *RegistryMapper, row []any, name string) []byte {
		t.Helper()
		i := slices.IndexFunc(m.Table().Columns, func(c schema.Column) bool { return c.Name == name })
		if i < 0 {
			t.Fatalf("no column %s", name)
		}
		b, ok := row[i].([]byte)
		if !ok {
			t.Fatalf("column %s holds %T, want the jsonb's bytes", name, row[i])
		}
		return b
	}

	const avroText = `{"type": "record", "name": "R", "fields": [
		{"name": "m", "type": {"type": "map", "values": "string"}},
		{"name": "l", "type": {"type": "array", "items": "string"}}]}`
	rs := RegisteredSchema{ID: 3, Text: avroText}
	am, err := NewRegistryMapper(RegistryMappingSpec{Format: FormatAvro, Table: "t", Value: []RegisteredSchema{rs}, Lookup: newFakeRegistry(rs).lookup})
	if err != nil {
		t.Fatal(err)
	}
	row, err := rowOf(am, &stream.Record{Value: avroRecord(t, 3, avroText, map[string]any{
		"m": map[string]any{lineSeparators: lineSeparators}, "l": []any{lineSeparators}})}, nil)
	if err != nil {
		t.Fatal(err)
	}
	checkJSONB(t, "Avro map", column(am, row, "m"), map[string]any{lineSeparators: lineSeparators}, 2)
	checkJSONB(t, "Avro array", column(am, row, "l"), []any{lineSeparators}, 1)

	pm, err := NewRegistryMapper(RegistryMappingSpec{Format: FormatProtobuf, Table: "orders", Value: []RegisteredSchema{orderSchema},
		Lookup: newFakeRegistry(orderSchema).lookup})
	if err != nil {
		t.Fatal(err)
	}
	doc, _ := json.Marshal(map[string]any{"id": "1", "tags": []string{lineSeparators}, "counts": map[string]string{lineSeparators: "7"},
		"lines": []map[string]string{{"sku": lineSeparators}}})
	row, err = rowOf(pm, &stream.Record{Value: protoRecord(t, orderSchema, []int{0}, string(doc))}, nil)
	if err != nil {
		t.Fatal(err)
	}
	checkJSONB(t, "protobuf repeated string", column(pm, row, "tags"), []any{lineSeparators}, 1)
	checkJSONB(t, "protobuf map", column(pm, row, "counts"), map[string]any{lineSeparators: 7}, 1)
	checkJSONB(t, "protobuf repeated message", column(pm, row, "lines"), []any{map[string]any{"sku": lineSeparators}}, 1)
}
