package decode_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/kafka2pg/kafka2pg/decode"
	"github.com/kafka2pg/kafka2pg/schema"
	"github.com/kafka2pg/kafka2pg/stream"
)

func childMapper(t testing.TB, spec decode.ChildSpec) *decode.ChildMapper {
	t.Helper()
	if spec.Table == "" {
		spec.Table = "items"
	}
	if spec.Parent == nil {
		spec.Parent = []schema.Column{{Name: "order_id", Type: "bigint", NotNull: true}}
	}
	m, err := decode.NewChildMapper(spec)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// rowsText renders child rows as "a|b|c;..." for comparison.
func rowsText(rows [][]any) string {
	var out []string
	for _, r := range rows {
		var vs []string
		for _, v := range r {
			if b, ok := v.([]byte); ok {
				v = string(b)
			}
			vs = append(vs, fmt.Sprint(v))
		}
		out = append(out, strings.Join(vs, "|"))
	}
	return strings.Join(out, ";")
}

func TestChildRowsReadTheArrayAtThePath(t *testing.T) {
	t.Parallel()
	items := []decode.ColumnSpec{{Name: "sku", Type: "text"}, {Name: "qty", Type: "integer", Path: "n.qty"}}
	for _, tc := range []struct {
		name  string
		spec  decode.ChildSpec
		value string
		want  string
	}{
		{"an array of objects", decode.ChildSpec{Path: "items", Columns: items},
			`{"items":[{"sku":"a","n":{"qty":2}},{"sku":"b"}]}`, "7|0|a|2;7|1|b|<nil>"},
		{"a nested path", decode.ChildSpec{Path: "order.lines", Columns: items},
			`{"order":{"lines":[{"sku":"a"}]}}`, "7|0|a|<nil>"},
		{"an array of arrays, by index", decode.ChildSpec{Path: "groups[-1]", Columns: items},
			`{"groups":[[{"sku":"x"}],[{"sku":"y"},{"sku":"z"}]]}`, "7|0|y|<nil>;7|1|z|<nil>"},
		{"an array of scalars read with $", decode.ChildSpec{Path: "tags", Columns: []decode.ColumnSpec{{Name: "tag", Type: "text", Path: "$"}}},
			`{"tags":["gift","red"]}`, "7|0|gift;7|1|red"},
		{"a string holding the array", decode.ChildSpec{Path: "items", Columns: items},
			`{"items":"[{\"sku\":\"a\"}]"}`, "7|0|a|<nil>"},
		{"an empty array", decode.ChildSpec{Path: "items", Columns: items}, `{"items":[]}`, ""},
		{"a missing array", decode.ChildSpec{Path: "items", Columns: items}, `{"other":1}`, ""},
		{"a null array", decode.ChildSpec{Path: "items", Columns: items}, `{"items":null}`, ""},
		{"a null on the way", decode.ChildSpec{Path: "order.lines", Columns: items}, `{"order":null}`, ""},
		{"a Debezium after image with a schema", decode.ChildSpec{Path: "items", Columns: items, Envelope: true},
			`{"schema":{},"payload":{"before":null,"after":{"id":7,"items":"[{\"sku\":\"a\"}]"},"op":"c"}}`, "7|0|a|<nil>"},
		{"a Debezium after image without a schema", decode.ChildSpec{Path: "items", Columns: items, Envelope: true},
			`{"before":null,"after":{"id":7,"items":[{"sku":"a"},{"sku":"b"}]},"op":"u"}`, "7|0|a|<nil>;7|1|b|<nil>"},
		{"a Debezium delete", decode.ChildSpec{Path: "items", Columns: items, Envelope: true},
			`{"before":{"id":7},"after":null,"op":"d"}`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := childMapper(t, tc.spec)
			rows, err := m.Rows(&stream.Record{Topic: "orders", Value: []byte(tc.value)}, []any{int64(7)})
			if err != nil {
				t.Fatal(err)
			}
			if got := rowsText(rows); got != tc.want {
				t.Errorf("rows of %s:\n got %s\nwant %s", tc.value, got, tc.want)
			}
		})
	}
}

func TestABadElementIsABadRecordNamingTheChildAndTheElement(t *testing.T) {
	t.Parallel()
	items := []decode.ColumnSpec{{Name: "sku", Type: "text", NotNull: true}, {Name: "qty", Type: "integer"}}
	for _, tc := range []struct{ name, value, kind, says string }{
		{"a wrong type", `{"items":[{"sku":"a"},{"sku":"b","qty":"many"}]}`, decode.KindTypeMismatch, "element 1 of items"},
		{"an element that is no object", `{"items":[{"sku":"a"},3]}`, decode.KindTypeMismatch, "element 1 of items is a number, not an object"},
		{"a null in a NOT NULL column", `{"items":[{"qty":1}]}`, decode.KindNullValue, "element 0 of items"},
		{"a path that is not an array", `{"items":{"sku":"a"}}`, decode.KindTypeMismatch, "path items is an object, not an array"},
		{"a step into a scalar", `{"items":5}`, decode.KindTypeMismatch, "not an array"},
		{"a value that is not JSON", `{"items":[`, decode.KindInvalidJSON, "not JSON"},
		{"a string that holds no JSON", `{"items":"[{"}`, decode.KindInvalidJSON, "path items"},
		{"a value that is not UTF-8", "{\"items\":[{\"sku\":\"\xc8\"}]}", decode.KindInvalidUTF8, "not valid UTF-8"},
		{"an array cut short", `{"items":[{"sku":"a"},]}`, decode.KindInvalidJSON, "not JSON"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := childMapper(t, decode.ChildSpec{Path: "items", Columns: items})
			_, err := m.Rows(&stream.Record{Topic: "orders", Offset: 4, Value: []byte(tc.value)}, []any{int64(7)})
			var de *decode.DecodeError
			if !errors.As(err, &de) || !errors.Is(err, decode.ErrBadRecord) {
				t.Fatalf("error %v, want a *decode.DecodeError", err)
			}
			if de.Kind != tc.kind || de.Offset != 4 || !strings.Contains(err.Error(), tc.says) || !strings.Contains(err.Error(), `"items"`) {
				t.Errorf("error %v (kind %s), want kind %s at offset 4 naming the child table and saying %q", err, de.Kind, tc.kind, tc.says)
			}
		})
	}
}

func TestTheChildTableIsTheParentsColumnsTheIndexAndTheElements(t *testing.T) {
	t.Parallel()
	m := childMapper(t, decode.ChildSpec{Schema: "shop", Path: "items", Key: true, IndexColumn: "pos",
		Columns: []decode.ColumnSpec{{Name: "sku", Type: "text"}}})
	got := m.Table()
	if got.QualifiedName() != `"shop"."items"` || strings.Join(got.ColumnNames(), ",") != "order_id,pos,sku" ||
		strings.Join(got.PrimaryKey, ",") != "order_id,pos" || got.Columns[1].Type != "integer" || !got.Columns[1].NotNull {
		t.Errorf("child table %+v", got)
	}
	for _, tc := range []struct {
		name string
		spec decode.ChildSpec
		says string
	}{
		{"the whole document", decode.ChildSpec{Path: "$", Columns: []decode.ColumnSpec{{Name: "a", Type: "text"}}}, "whole document"},
		{"no columns", decode.ChildSpec{Path: "items"}, "no columns"},
		{"a column from the key", decode.ChildSpec{Path: "items", Columns: []decode.ColumnSpec{{Name: "a", Type: "text", From: "key"}}}, "from"},
		{"a column named like a parent's", decode.ChildSpec{Path: "items", Columns: []decode.ColumnSpec{{Name: "order_id", Type: "text"}}}, "both"},
		{"a bad type", decode.ChildSpec{Path: "items", Columns: []decode.ColumnSpec{{Name: "a", Type: "texty"}}}, "texty"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.spec.Table = "items"
			tc.spec.Parent = []schema.Column{{Name: "order_id", Type: "bigint", NotNull: true}}
			if _, err := decode.NewChildMapper(tc.spec); err == nil || !strings.Contains(err.Error(), tc.says) {
				t.Errorf("NewChildMapper: %v, want an error saying %q", err, tc.says)
			}
		})
	}
}

// FuzzChildRows: any value gives rows or a bad record, never a panic or
// another error.
func FuzzChildRows(f *testing.F) {
	for _, seed := range []string{`{"items":[{"sku":"a","qty":1}]}`, `{"items":"[1]"}`, `{"after":{"items":[]}}`, `[`, `{"items":[null]}`} {
		f.Add([]byte(seed))
	}
	m := childMapper(f, decode.ChildSpec{Path: "items", Columns: []decode.ColumnSpec{{Name: "sku", Type: "text"}, {Name: "qty", Type: "integer"}}})
	env := childMapper(f, decode.ChildSpec{Path: "items", Envelope: true, Columns: []decode.ColumnSpec{{Name: "sku", Type: "text"}}})
	f.Fuzz(func(t *testing.T, value []byte) {
		for _, m := range []*decode.ChildMapper{m, env} {
			_, err := m.Rows(&stream.Record{Value: value}, []any{int64(1)})
			if err != nil && !errors.Is(err, decode.ErrBadRecord) {
				t.Fatalf("%q: %v is not a bad record", value, err)
			}
		}
	})
}
