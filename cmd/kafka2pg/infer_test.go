package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kafka2pg/kafka2pg/schema"
)

// inferColumns runs the inference over JSON documents and renders each
// column as "name path type [not null]".
func inferColumns(t testing.TB, nested string, docs ...string) []string {
	t.Helper()
	inf := newInference()
	for _, d := range docs {
		inf.observe([]byte(d))
	}
	var out []string
	for _, c := range inf.columns(nested) {
		s := fmt.Sprintf("%s %s %s", c.name, jsonPathOf(c.steps), c.typ)
		if c.notNull {
			s += " not null"
		}
		out = append(out, s)
	}
	return out
}

func TestInferChoosesTheColumnTypesFromTheSamples(t *testing.T) {
	cases := []struct {
		name   string
		nested string
		docs   []string
		want   []string
	}{
		{"small integers are integer and ids bigint", "flatten",
			[]string{`{"id":1,"qty":3,"order_id":7,"customerId":9}`, `{"id":2,"qty":-2147483648,"order_id":8,"customerId":10}`},
			[]string{"id id bigint not null", "qty qty integer not null", "order_id order_id bigint not null", "customerid customerId bigint not null"}},
		{"integers beyond int32 are bigint", "flatten",
			[]string{`{"n":1}`, `{"n":2147483648}`},
			[]string{"n n bigint not null"}},
		{"integers beyond int64 are numeric", "flatten",
			[]string{`{"h":1}`, `{"h":18446744073709551615}`},
			[]string{"h h numeric(40,0) not null"}},
		{"decimals are numeric with the scale seen", "flatten",
			[]string{`{"amount":12.5}`, `{"amount":3.25}`, `{"amount":100}`},
			[]string{"amount amount numeric(20,2) not null"}},
		{"exponents count as decimal digits", "flatten",
			[]string{`{"x":5e-3}`, `{"x":1.5E3}`},
			[]string{"x x numeric(21,3) not null"}},
		{"timestamps, uuids, booleans and text", "flatten",
			[]string{`{"at":"2026-01-02T03:04:05Z","u":"123e4567-e89b-12d3-a456-426614174000","ok":true,"s":"2026-01-02T03:04:05Z"}`,
				`{"at":"2026-01-02 03:04:05.123+02:00","u":"123E4567-E89B-12D3-A456-426614174001","ok":false,"s":"tomorrow"}`},
			[]string{"at at timestamptz not null", "u u uuid not null", "ok ok boolean not null", "s s text not null"}},
		{"a timestamp without offset is text", "flatten",
			[]string{`{"at":"2026-01-02T03:04:05"}`},
			[]string{"at at text not null"}},
		{"a field missing or null in some samples is nullable", "flatten",
			[]string{`{"a":1,"b":"x"}`, `{"a":null}`, `{"a":2,"c":true}`},
			[]string{"a a integer", "b b text", "c c boolean"}},
		{"a field null in every sample is jsonb", "flatten",
			[]string{`{"a":null}`, `{"a":null}`},
			[]string{"a a jsonb"}},
		{"nested objects are flattened up to depth 3", "flatten",
			[]string{`{"customer":{"name":"n","address":{"zip":"1","geo":{"lat":1.5}}}}`, `{"customer":{"name":"m","address":{"zip":"2","geo":{"lat":2.5}}}}`},
			[]string{"customer_name customer.name text not null", "customer_address_zip customer.address.zip text not null",
				"customer_address_geo customer.address.geo jsonb not null"}},
		{"a nested member missing from one sample is nullable", "flatten",
			[]string{`{"a":{"b":1,"c":2}}`, `{"a":{"b":3}}`},
			[]string{"a_b a.b integer not null", "a_c a.c integer"}},
		{"nested objects are jsonb when asked", "jsonb",
			[]string{`{"customer":{"name":"n"}}`, `{"customer":null}`},
			[]string{"customer customer jsonb"}},
		{"an object that is sometimes a string is jsonb", "flatten",
			[]string{`{"a":{"b":1}}`, `{"a":"x"}`},
			[]string{"a a jsonb not null"}},
		{"arrays of one scalar kind are typed arrays", "flatten",
			[]string{`{"tags":["a","b"],"ns":[1,2,null],"ids":[],"flags":[true]}`, `{"tags":[],"ns":[3],"ids":[2147483648],"flags":[false]}`},
			[]string{"tags tags text[] not null", "ns ns integer[] not null", "ids ids bigint[] not null", "flags flags boolean[] not null"}},
		{"arrays of objects, arrays, mixed kinds or nothing are jsonb", "flatten",
			[]string{`{"o":[{"a":1}],"n":[[1]],"m":[1,"a"],"e":[]}`},
			[]string{"o o jsonb not null", "n n jsonb not null", "m m jsonb not null", "e e jsonb not null"}},
		{"mixed kinds are jsonb", "flatten",
			[]string{`{"v":1}`, `{"v":"1"}`, `{"w":true}`, `{"w":1}`},
			[]string{"v v jsonb", "w w jsonb"}},
		{"names are sanitized and made unique; odd members are quoted in paths", "flatten",
			[]string{`{"Full Name":"a","full_name":"b","9lives":1,"a.b":2,"$x":3}`},
			[]string{`full_name ["Full Name"] text not null`, "full_name_2 full_name text not null", `c_9lives ["9lives"] integer not null`,
				`a_b ["a.b"] integer not null`, `_x ["$x"] integer not null`}},
		{"values that are not JSON objects are left out", "flatten",
			[]string{`[1,2]`, `not json`, `"s"`, `{"a":1}`},
			[]string{"a a integer not null"}},
		{"the column order is the order members first appear", "flatten",
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

// renderInfer renders the config for docs as `infer` prints it.
func renderInfer(t testing.TB, o inferOptions, docs ...string) string {
	t.Helper()
	if err := o.validate(); err != nil {
		t.Fatalf("options: %v", err)
	}
	inf := newInference()
	smp := &samples{partitions: 1}
	for _, d := range docs {
		inf.observe([]byte(d))
		smp.values = append(smp.values, []byte(d))
	}
	out, _, err := o.render(t.Context(), inf, smp)
	if err != nil {
		t.Fatalf("render: %v", err)
	}
	return out
}

func TestInferPrintsAConfigThatRunLoads(t *testing.T) {
	docs := []string{
		`{"id":1,"amount":12.50,"at":"2026-01-02T03:04:05Z","user":{"id":"123e4567-e89b-12d3-a456-426614174000","vip":true},"tags":["a"],"note":"x","Weird Key":{"a":[1,"b"]}}`,
		`{"id":2,"amount":3,"at":"2026-01-02T03:04:06Z","user":{"id":"123e4567-e89b-12d3-a456-426614174001","vip":false},"tags":[],"Weird Key":{"a":null}}`,
	}
	for _, mode := range []string{"append", "upsert"} {
		t.Run("in "+mode+" mode", func(t *testing.T) {
			o := inferOptions{brokers: []string{"127.0.0.1:9092"}, topic: "shop.orders-v1", sample: 10, mode: mode, nested: "flatten", timeout: 1}
			if mode == "upsert" {
				o.keyPath = "id"
			}
			out := renderInfer(t, o, docs...)
			path := filepath.Join(t.TempDir(), "kafka2pg.yaml")
			if err := os.WriteFile(path, []byte(out), 0o600); err != nil {
				t.Fatal(err)
			}
			fs := newFlagSet("run")
			var ro runOptions
			defineRunFlags(fs, &ro)
			if err := fs.Parse([]string{"--config", path, "--pg-url", "postgres://x@127.0.0.1:1/db"}); err != nil {
				t.Fatal(err)
			}
			cfg, err := loadConfig(path, fs)
			if err == nil {
				err = cfg.apply(fs)
			}
			if err != nil {
				t.Fatalf("run --config does not load the printed config: %v\n%s", err, out)
			}
			ro.sinks = cfg.sinks
			if err := ro.validate(); err != nil {
				t.Fatalf("the printed config does not validate: %v\n%s", err, out)
			}
			sinks, err := fixedSinks(t, &ro)
			if err != nil {
				t.Fatalf("the printed config does not build: %v\n%s", err, out)
			}
			sink, ok := sinks["shop.orders-v1"]
			if !ok {
				t.Fatalf("no sink for the topic in %v\n%s", sinks, out)
			}
			if ro.cfg.Kafka.Group != "kafka2pg-shop_orders_v1" {
				t.Errorf("kafka-group = %q, want kafka2pg-shop_orders_v1", ro.cfg.Kafka.Group)
			}
			want := []schema.Column{
				{Name: "id", Type: "bigint", NotNull: true},
				{Name: "amount", Type: "numeric(20,2)", NotNull: true},
				{Name: "at", Type: "timestamp with time zone", NotNull: true},
				{Name: "user_id", Type: "uuid", NotNull: true},
				{Name: "user_vip", Type: "boolean", NotNull: true},
				{Name: "tags", Type: "text[]", NotNull: true},
				{Name: "note", Type: "text"},
				{Name: "weird_key_a", Type: "jsonb"},
			}
			if got := sink.Table.Columns; fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("columns:\n got %v\nwant %v\n%s", got, want, out)
			}
			if mode == "upsert" && (sink.Upsert == nil || fmt.Sprint(sink.Upsert.Key) != "[id]") {
				t.Errorf("upsert = %+v, want key [id]\n%s", sink.Upsert, out)
			}
			create := schema.PlanSQL(schema.PlanCreate(sink.Table))
			for _, line := range strings.Split(strings.TrimSpace(create), "\n") {
				if !strings.Contains(out, "#   "+line) {
					t.Errorf("the output lacks the CREATE TABLE line %q:\n%s", line, out)
				}
			}
		})
	}
}

func TestInferRefusesBadKeysAndBadFlags(t *testing.T) {
	docs := []string{`{"id":1,"o":{"a":1},"m":[{"a":1}]}`, `{"o":{"a":2},"m":[]}`}
	cases := []struct {
		name    string
		keyPath string
		want    string
	}{
		{"a key path missing from some samples", "id", "null or missing in some"},
		{"a key path of jsonb values", "m", "jsonb"},
		{"a key path that is not a column", "nope", "not a column"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			o := inferOptions{brokers: []string{"h:1"}, topic: "t", sample: 10, mode: "upsert", keyPath: c.keyPath, nested: "flatten", timeout: 1}
			if err := o.validate(); err != nil {
				t.Fatal(err)
			}
			inf := newInference()
			for _, d := range docs {
				inf.observe([]byte(d))
			}
			_, _, err := o.render(t.Context(), inf, &samples{partitions: 1})
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("err = %v, want one saying %q", err, c.want)
			}
		})
	}
	flagCases := []struct {
		name string
		args []string
		flag string
	}{
		{"no brokers", []string{"infer", "--topic", "t"}, "--kafka-brokers"},
		{"no topic", []string{"infer", "--kafka-brokers", "h:1"}, "--topic"},
		{"upsert without a key path", []string{"infer", "--kafka-brokers", "h:1", "--topic", "t", "--mode", "upsert"}, "--key-path"},
		{"a bad nested policy", []string{"infer", "--kafka-brokers", "h:1", "--topic", "t", "--nested", "deep"}, "--nested"},
		{"a sample of zero", []string{"infer", "--kafka-brokers", "h:1", "--topic", "t", "--sample", "0"}, "--sample"},
	}
	for _, c := range flagCases {
		t.Run(c.name, func(t *testing.T) {
			for _, v := range []string{"KAFKA2PG_KAFKA_BROKERS", "KAFKA2PG_TOPIC", "KAFKA2PG_MODE", "KAFKA2PG_KEY_PATH", "KAFKA2PG_SAMPLE"} {
				t.Setenv(v, "")
			}
			var stdout, stderr bytes.Buffer
			if code := inferCommand(context.Background(), c.args[1:], &stdout, &stderr); code != exitUsage {
				t.Errorf("exit code = %d, want %d; stderr:\n%s", code, exitUsage, stderr.String())
			}
			if !strings.Contains(stderr.String(), c.flag) {
				t.Errorf("stderr does not name %s:\n%s", c.flag, stderr.String())
			}
		})
	}
}
