package sinks_test

import (
	"errors"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"

	"github.com/kafka2pg/kafka2pg/decode"
	"github.com/kafka2pg/kafka2pg/ingest"
	"github.com/kafka2pg/kafka2pg/sinks"
	"github.com/kafka2pg/kafka2pg/stream"
)

// routedSink builds a config of one sink and returns the sink of topic.
func routedSink(t *testing.T, text, topic string) ingest.Sink {
	t.Helper()
	set := build(t, text)
	sink, ok := set.Fixed[topic]
	if !ok {
		var err error
		if sink, ok, err = set.Resolve(t.Context(), topic); err != nil || !ok {
			t.Fatalf("no sink for topic %q: %v", topic, err)
		}
	}
	if sink.Router == nil {
		t.Fatalf("the sink of %q is not routed by content:\n%s", topic, text)
	}
	return sink
}

func TestARoutedSinkNamesEachRecordsTable(t *testing.T) {
	t.Parallel()
	rec := func(value string, headers ...string) *stream.Record {
		r := &stream.Record{Topic: "shop.events", Offset: 7}
		if value != "" {
			r.Value = []byte(value)
		}
		for i := 0; i+1 < len(headers); i += 2 {
			r.Headers = append(r.Headers, stream.Header{Key: headers[i], Value: []byte(headers[i+1])})
		}
		return r
	}
	cases := []struct {
		name, config string
		r            *stream.Record
		schema, want string
	}{
		{"a field", "table: events_${value.type}", rec(`{"type":"click"}`), "public", "events_click"},
		{"a nested field", "table: 'e_${value.customer.region}'", rec(`{"customer":{"region":"eu-west.1"}}`), "public", "e_eu-west.1"},
		{"a number is its JSON text", "table: t_${value.v}", rec(`{"v":12.50}`), "public", "t_12.50"},
		{"a header, its last value", "table: '${header.tenant}_orders'", rec(`{}`, "tenant", "a", "tenant", "Acme"), "public", "Acme_orders"},
		{"the schema too, with the topic", "table: '${topic.-1}'\n    schema: 'tenant_${header.tenant}'", rec(`{}`, "tenant", "b"), "tenant_b", "events"},
		{"letters of any script", "table: e_${value.type}", rec(`{"type":"café"}`), "public", "e_café"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			text := "sinks:\n  - topic: shop.events\n    " + c.config + "\n"
			sink := routedSink(t, text, "shop.events")
			got, err := sink.Router.Route(c.r)
			if err != nil || got.Schema != c.schema || got.Table != c.want {
				t.Errorf("%s: route = %+v, %v; want %s.%s", c.config, got, err, c.schema, c.want)
			}
		})
	}
}

func TestARecordThatNamesNoTableIsABadRecordOfKindRoute(t *testing.T) {
	t.Parallel()
	sink := routedSink(t, "sinks:\n  - topic: ev\n    table: 'events_${value.kind.name}_${header.t}'\n", "ev")
	long := strings.Repeat("x", 60)
	cases := []struct {
		name, value, header string
		noHeader            bool
		want                string
	}{
		{"a missing field", `{"other":1}`, "a", false, "the value has no field kind.name"},
		{"a null field", `{"kind":{"name":null}}`, "a", false, "${value.kind.name} is null"},
		{"a null on the way", `{"kind":null}`, "a", false, "is null"},
		{"a boolean", `{"kind":{"name":true}}`, "a", false, "is a boolean, not a string or a number"},
		{"an object", `{"kind":{"name":{}}}`, "a", false, "is an object"},
		{"a member of a string", `{"kind":"x"}`, "a", false, "not an object or an array"},
		{"an empty string", `{"kind":{"name":""}}`, "a", false, "is empty"},
		{"a space", `{"kind":{"name":"a b"}}`, "a", false, `whose ' ' a routed name refuses`},
		{"a quote", `{"kind":{"name":"a\"b"}}`, "a", false, `whose '"' a routed name refuses`},
		{"a slash", `{"kind":{"name":"../x"}}`, "a", false, `whose '/'`},
		{"a control character", `{"kind":{"name":"a\u0000"}}`, "a", false, `a routed name refuses`},
		{"a name over 63 bytes", `{"kind":{"name":"` + long + `"}}`, "a", false, "Postgres truncates names to 63 bytes"},
		{"no header", `{"kind":{"name":"x"}}`, "", true, `the record has no header "t"`},
		{"a tombstone", "", "a", false, "the record has no value (a tombstone)"},
		{"a value that is not JSON", `{"kind`, "a", false, "the value is not JSON"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			r := &stream.Record{Topic: "ev", Partition: 2, Offset: 9}
			if c.value != "" {
				r.Value = []byte(c.value)
			}
			if !c.noHeader {
				r.Headers = []stream.Header{{Key: "t", Value: []byte(c.header)}}
			}
			got, err := sink.Router.Route(r)
			var de *decode.DecodeError
			if !errors.As(err, &de) || de.Kind != ingest.KindRoute || !errors.Is(err, decode.ErrBadRecord) {
				t.Fatalf("route = %+v, %v; want a bad record of kind %s", got, err, ingest.KindRoute)
			}
			if !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "events_${value.kind.name}_${header.t}") {
				t.Errorf("error %q lacks %q or the template", err, c.want)
			}
		})
	}
}

func TestRoutingByContentIsCheckedAtConfigTime(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, sink string
		field      string
		want       string
	}{
		{"an unknown reference", "{topic: t, table: 'e_${val.type}'}", "sinks[0].table", "${val.type} is not ${topic}, ${topic.N}, ${value.FIELD} or ${header.KEY}"},
		{"the whole value", "{topic: t, table: 'e_${value}'}", "sinks[0].table", "${value} names no field"},
		{"a field of a text value", "{topic: t, format: text, table: 'e_${value.type}'}", "sinks[0].table", "format text is not"},
		{"a debezium sink", "{topic: t, format: debezium, table: 'e_${header.h}'}", "sinks[0].table", "format debezium takes its table from the records' schema"},
		{"a registry sink", "{topic: t, format: avro, schema: 's_${value.x}'}", "sinks[0].schema", "format avro"},
		{"a pattern's bad path", "{topic_regex: 'a.*', table: 'e_${value.a[}'}", "sinks[0].table", "${value.a[}"},
		{"children", "{topic: t, table: 'e_${value.type}', columns: [{name: id, type: bigint}], children: [{path: items, table: items, columns: [{name: sku, type: text}]}]}", "sinks[0].children", "the children of every routed table would share one"},
		{"partition_by", "{topic: t, table: 'e_${header.h}', columns: [{name: at, type: timestamptz}], partition_by: {column: at}}", "sinks[0].partition_by", "routed tables are created on first use, unpartitioned"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			err := load(t, "sinks:\n  - "+c.sink+"\n").Validate()
			var fe *sinks.FieldError
			if !errors.As(err, &fe) || fe.Field != c.field || fe.Line != 2 || !strings.Contains(fe.Error(), c.want) {
				t.Errorf("%s: %v (%+v); want a FieldError of %s saying %q", c.sink, err, fe, c.field, c.want)
			}
		})
	}
	// A header routes a text sink, and a pattern's topics share one router.
	set := build(t, "sinks:\n  - {topic_regex: 'a\\..+', format: text, table: '${topic.2}_${header.h}'}\n")
	a, _, errA := set.Resolve(t.Context(), "a.x")
	b, _, errB := set.Resolve(t.Context(), "a.y")
	if errA != nil || errB != nil || a.Router == nil || a.Router != b.Router {
		t.Fatalf("the topics of a pattern have routers %v and %v (%v, %v); want one", a.Router, b.Router, errA, errB)
	}
	got, err := a.Router.Route(&stream.Record{Topic: "a.y", Headers: []stream.Header{{Key: "h", Value: []byte("1")}}})
	if err != nil || got.Table != "y_1" {
		t.Errorf("route = %+v, %v; want y_1", got, err)
	}
}

// A routed sink's Router, on any value and header, names a table whose
// routed part has only the characters routing allows and that Postgres
// holds, or says why not as a bad record of kind route: never a panic.
func FuzzRouteNamesOnlyValidTables(f *testing.F) {
	f.Add([]byte(`{"type":"click","region":{"id":7}}`), []byte("acme"))
	f.Add([]byte(`{"type":"a\"b"}`), []byte(""))
	f.Add([]byte(`{"type":null}`), []byte("x y"))
	f.Add([]byte(`{"type":1e400}`), []byte("\x00"))
	f.Add([]byte(`[1,2]`), []byte("é"))
	f.Add([]byte(nil), []byte("t"))
	var c sinks.Config
	if err := yaml.Unmarshal([]byte("sinks:\n  - {topic: t, table: 'e_${value.type}_${header.h}', schema: 's_${value.region.id}'}\n"), &c); err != nil {
		f.Fatal(err)
	}
	set, err := c.Build(f.Context(), nil)
	if err != nil {
		f.Fatal(err)
	}
	router := set.Fixed["t"].Router
	f.Fuzz(func(t *testing.T, value, header []byte) {
		r := &stream.Record{Topic: "t", Value: value, Headers: []stream.Header{{Key: "h", Value: header}}}
		rt, err := router.Route(r)
		if err != nil {
			var de *decode.DecodeError
			if !errors.As(err, &de) || de.Kind != ingest.KindRoute {
				t.Fatalf("route error %v is not a bad record of kind route", err)
			}
			return
		}
		for _, name := range []string{rt.Schema, rt.Table} {
			if len(name) == 0 || len(name) > 63 || !utf8.ValidString(name) {
				t.Fatalf("route %+v: %q is no name Postgres holds", rt, name)
			}
			for _, ch := range name {
				if !unicode.IsLetter(ch) && !unicode.IsDigit(ch) && !strings.ContainsRune("_-.", ch) {
					t.Fatalf("route %+v: %q has %q", rt, name, ch)
				}
			}
		}
	})
}
