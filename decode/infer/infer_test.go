package infer_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/kafka2pg/kafka2pg/decode"
	"github.com/kafka2pg/kafka2pg/decode/infer"
	"github.com/kafka2pg/kafka2pg/stream"
)

// inferColumns runs the inference over JSON documents and renders each
// column as "name path type [not null]".
func inferColumns(t testing.TB, nested decode.Nested, docs ...string) []string {
	t.Helper()
	var inf infer.Inference
	for _, d := range docs {
		inf.Observe([]byte(d))
	}
	var out []string
	for _, c := range inf.Columns(nested) {
		s := fmt.Sprintf("%s %s %s", c.Name, c.Path, c.Type)
		if c.NotNull {
			s += " not null"
		}
		out = append(out, s)
	}
	return out
}

func TestColumnsChoosesTheTypesFromTheSamples(t *testing.T) {
	cases := []struct {
		name   string
		nested decode.Nested
		docs   []string
		want   []string
	}{
		{"small integers are integer and ids bigint", decode.NestedFlatten,
			[]string{`{"id":1,"qty":3,"order_id":7,"customerId":9}`, `{"id":2,"qty":-2147483648,"order_id":8,"customerId":10}`},
			[]string{"id id bigint not null", "qty qty integer not null", "order_id order_id bigint not null", "customerid customerId bigint not null"}},
		{"integers beyond int32 are bigint", decode.NestedFlatten,
			[]string{`{"n":1}`, `{"n":2147483648}`},
			[]string{"n n bigint not null"}},
		{"integers beyond int64 are numeric", decode.NestedFlatten,
			[]string{`{"h":1}`, `{"h":18446744073709551615}`},
			[]string{"h h numeric(40,0) not null"}},
		{"decimals are numeric with the scale seen", decode.NestedFlatten,
			[]string{`{"amount":12.5}`, `{"amount":3.25}`, `{"amount":100}`},
			[]string{"amount amount numeric(20,2) not null"}},
		{"exponents count as decimal digits", decode.NestedFlatten,
			[]string{`{"x":5e-3}`, `{"x":1.5E3}`},
			[]string{"x x numeric(21,3) not null"}},
		{"timestamps, uuids, booleans and text", decode.NestedFlatten,
			[]string{`{"at":"2026-01-02T03:04:05Z","u":"123e4567-e89b-12d3-a456-426614174000","ok":true,"s":"2026-01-02T03:04:05Z"}`,
				`{"at":"2026-01-02 03:04:05.123+02:00","u":"123E4567-E89B-12D3-A456-426614174001","ok":false,"s":"tomorrow"}`},
			[]string{"at at timestamptz not null", "u u uuid not null", "ok ok boolean not null", "s s text not null"}},
		{"uuids in every form the mapping takes", decode.NestedFlatten,
			[]string{`{"u":"{123e4567-e89b-12d3-a456-426614174000}"}`, `{"u":"123e4567e89b12d3a456426614174000"}`},
			[]string{"u u uuid not null"}},
		{"a uuid with misplaced hyphens is text", decode.NestedFlatten,
			[]string{`{"u":"123e4567e-89b-12d3-a456-426614174000"}`},
			[]string{"u u text not null"}},
		{"a timestamp without offset is text", decode.NestedFlatten,
			[]string{`{"at":"2026-01-02T03:04:05"}`},
			[]string{"at at text not null"}},
		{"a field missing or null in some samples is nullable", decode.NestedFlatten,
			[]string{`{"a":1,"b":"x"}`, `{"a":null}`, `{"a":2,"c":true}`},
			[]string{"a a integer", "b b text", "c c boolean"}},
		{"a field null in every sample is jsonb", decode.NestedFlatten,
			[]string{`{"a":null}`, `{"a":null}`},
			[]string{"a a jsonb"}},
		{"nested objects are flattened up to depth 3", decode.NestedFlatten,
			[]string{`{"customer":{"name":"n","address":{"zip":"1","geo":{"lat":1.5}}}}`, `{"customer":{"name":"m","address":{"zip":"2","geo":{"lat":2.5}}}}`},
			[]string{"customer_name customer.name text not null", "customer_address_zip customer.address.zip text not null",
				"customer_address_geo customer.address.geo jsonb not null"}},
		{"a nested member missing from one sample is nullable", decode.NestedFlatten,
			[]string{`{"a":{"b":1,"c":2}}`, `{"a":{"b":3}}`},
			[]string{"a_b a.b integer not null", "a_c a.c integer"}},
		{"nested objects are jsonb when asked", decode.NestedJSONB,
			[]string{`{"customer":{"name":"n"}}`, `{"customer":null}`},
			[]string{"customer customer jsonb"}},
		{"an object that is sometimes a string is jsonb", decode.NestedFlatten,
			[]string{`{"a":{"b":1}}`, `{"a":"x"}`},
			[]string{"a a jsonb not null"}},
		{"arrays of one scalar kind are typed arrays", decode.NestedFlatten,
			[]string{`{"tags":["a","b"],"ns":[1,2,null],"ids":[],"flags":[true]}`, `{"tags":[],"ns":[3],"ids":[2147483648],"flags":[false]}`},
			[]string{"tags tags text[] not null", "ns ns integer[] not null", "ids ids bigint[] not null", "flags flags boolean[] not null"}},
		{"arrays of objects, arrays, mixed kinds or nothing are jsonb", decode.NestedFlatten,
			[]string{`{"o":[{"a":1}],"n":[[1]],"m":[1,"a"],"e":[]}`},
			[]string{"o o jsonb not null", "n n jsonb not null", "m m jsonb not null", "e e jsonb not null"}},
		{"mixed kinds are jsonb", decode.NestedFlatten,
			[]string{`{"v":1}`, `{"v":"1"}`, `{"w":true}`, `{"w":1}`},
			[]string{"v v jsonb", "w w jsonb"}},
		{"names are sanitized and made unique; odd members are quoted in paths", decode.NestedFlatten,
			[]string{`{"Full Name":"a","full_name":"b","9lives":1,"a.b":2,"$x":3}`},
			[]string{`full_name ["Full Name"] text not null`, "full_name_2 full_name text not null", `c_9lives ["9lives"] integer not null`,
				`a_b ["a.b"] integer not null`, `_x ["$x"] integer not null`}},
		{"values that are not JSON objects are left out", decode.NestedFlatten,
			[]string{`[1,2]`, `not json`, `"s"`, `{"a":1}`},
			[]string{"a a integer not null"}},
		{"the column order is the order members first appear", decode.NestedFlatten,
			[]string{`{"z":1,"a":2}`, `{"m":3,"z":4}`},
			[]string{"z z integer not null", "a a integer", "m m integer"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := inferColumns(t, c.nested, c.docs...)
			if strings.Join(got, "\n") != strings.Join(c.want, "\n") {
				t.Errorf("from %s:\n got %q\nwant %q", strings.Join(c.docs, " "), got, c.want)
			}
		})
	}
}

// The mapping built from the inferred columns takes every sample it was
// inferred from: the inference and the mapping read strings alike.
func TestTheInferredMappingTakesItsSamples(t *testing.T) {
	docs := []string{
		`{"id":1,"at":"2026-01-02 03:04:05.123+02:00","u":"{123e4567-e89b-12d3-a456-426614174000}","amount":12.50,"tags":["a"],"c":{"n":1}}`,
		`{"id":2,"at":"2026-01-02T03:04:05Z","u":"123E4567E89B12D3A456426614174001","amount":3,"tags":[],"c":{"n":2}}`,
	}
	var inf infer.Inference
	for _, d := range docs {
		inf.Observe([]byte(d))
	}
	spec := decode.MappingSpec{Schema: "public", Table: "t"}
	for _, c := range inf.Columns(decode.NestedFlatten) {
		spec.Columns = append(spec.Columns, decode.ColumnSpec{Name: c.Name, Path: c.Path, Type: c.Type, NotNull: c.NotNull})
	}
	m, err := decode.NewJSONMapper(spec)
	if err != nil {
		t.Fatalf("the inferred columns %+v do not make a mapping: %v", spec.Columns, err)
	}
	for i, d := range docs {
		if _, err := m.Row(&stream.Record{Topic: "t", Offset: int64(i), Value: []byte(d)}, nil); err != nil {
			t.Errorf("the mapping of %+v refuses %s: %v", spec.Columns, d, err)
		}
	}
	if got := fmt.Sprint(m.Table().ColumnNames()); got != "[id at u amount tags c_n]" {
		t.Errorf("columns %s, want [id at u amount tags c_n]", got)
	}
}
