package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kafka2pg/kafka2pg/admin"
	"github.com/kafka2pg/kafka2pg/schema"
)

// renderInfer renders the config for docs as `infer` prints it.
func renderInfer(t testing.TB, o inferOptions, docs ...string) string {
	t.Helper()
	if err := o.validate(); err != nil {
		t.Fatalf("options: %v", err)
	}
	smp := admin.Samples{Partitions: 1}
	for _, d := range docs {
		smp.Values = append(smp.Values, []byte(d))
	}
	res, err := admin.Infer(t.Context(), nil, smp, o.req)
	if err != nil {
		t.Fatalf("infer: %v", err)
	}
	o.group = "kafka2pg-" + res.Sink.Table
	out, err := o.configText(smp, res)
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
			o := inferOptions{brokers: []string{"127.0.0.1:9092"}, req: admin.InferRequest{Topic: "shop.orders-v1", Sample: 10, Mode: mode, Nested: "flatten", Timeout: 1}}
			if mode == "upsert" {
				o.req.KeyPath = "id"
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

func TestInferRefusesBadFlags(t *testing.T) {
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
