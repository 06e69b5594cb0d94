package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kafka2pg/kafka2pg/ingest"
)

func writeConfig(t *testing.T, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kafka2pg.yaml")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func runWithConfig(t *testing.T, text string, args ...string) (int, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := dispatch(context.Background(), append([]string{"run", "--config", writeConfig(t, text)}, args...), &stdout, &stderr)
	return code, stderr.String()
}

func TestConfigRefusesUnknownKeysWithTheirLine(t *testing.T) {
	cases := []struct {
		name, text, want string
	}{
		{"an unknown top-level key", "kafka-brokers: [h:1]\nkafka-grup: g\n", ":2: kafka-grup: unknown key"},
		{"an unknown sink key", "kafka-brokers: [h:1]\nkafka-group: g\npg-url: postgres://x@h/db\nsinks:\n  - topic: t\n    tabel: x\n", `:6: unknown key "tabel"`},
		{"an unknown column key", "kafka-brokers: [h:1]\nkafka-group: g\npg-url: postgres://x@h/db\nsinks:\n  - topic: t\n    columns:\n      - {name: a, path: a, type: text, nullable: true}\n", `:7: unknown key "nullable"`},
		{"a missing environment variable", "kafka-brokers: [h:1]\nkafka-group: g\npg-url: ${K2P_TEST_SURELY_UNSET}\n", "${K2P_TEST_SURELY_UNSET}, which is not set"},
		{"a bad flag value", "kafka-brokers: [h:1]\nkafka-group: g\nbatch-max-rows: many\n", ":3: batch-max-rows"},
		{"upsert without a key", "kafka-brokers: [h:1]\nkafka-group: g\npg-url: postgres://x@127.0.0.1:1/db\nsinks:\n  - topic: t\n    mode: upsert\n    columns:\n      - {name: id, path: id, type: bigint}\n", "mode upsert needs key"},
		{"topic with sinks", "kafka-brokers: [h:1]\nkafka-group: g\ntopic: [x]\npg-url: postgres://x@h/db\nsinks:\n  - topic: t\n", "cannot be combined with sinks"},
		{"a bad topic_regex", "kafka-brokers: [h:1]\nkafka-group: g\npg-url: postgres://x@127.0.0.1:1/db\nsinks:\n  - topic_regex: \"orders(\"\n", "topic_regex"},
		{"topic and topic_regex together", "kafka-brokers: [h:1]\nkafka-group: g\npg-url: postgres://x@127.0.0.1:1/db\nsinks:\n  - {topic: a, topic_regex: b}\n", "not both"},
		{"a bad column type", "kafka-brokers: [h:1]\nkafka-group: g\npg-url: postgres://x@127.0.0.1:1/db\nsinks:\n  - topic: t\n    columns:\n      - {name: a, path: a, type: varchar(0)}\n", `"a"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv("KAFKA2PG_PG_URL", "")
			t.Setenv("DATABASE_URL", "")
			code, stderr := runWithConfig(t, c.text, "--metrics-addr=")
			if code == exitOK || !strings.Contains(stderr, c.want) {
				t.Errorf("exit %d, stderr:\n%s\nwant it to contain %q", code, stderr, c.want)
			}
		})
	}
}

func TestConfigValuesYieldToFlagsAndEnvironment(t *testing.T) {
	t.Setenv("K2P_TEST_PG", "postgres://u@from-env-ref/db")
	t.Setenv("KAFKA2PG_BATCH_MAX_ROWS", "321")
	t.Setenv("KAFKA2PG_PG_URL", "")
	t.Setenv("DATABASE_URL", "")
	path := writeConfig(t, "kafka-brokers: [a:1, b:2]\nkafka-group: from-file\nbatch-max-rows: 999\npg-url: ${K2P_TEST_PG}\ntopic: [t]\n")
	fs := newFlagSet("run")
	var o runOptions
	defineRunFlags(fs, &o)
	if err := fs.Parse([]string{"--config", path, "--kafka-group", "from-flag"}); err != nil {
		t.Fatal(err)
	}
	if err := applyEnv(fs, nil); err != nil {
		t.Fatal(err)
	}
	cfg, err := loadConfig(path, fs)
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.apply(fs); err != nil {
		t.Fatal(err)
	}
	if o.cfg.Kafka.Group != "from-flag" || o.cfg.Kafka.BatchMaxRows != 321 || o.cfg.PostgresURL != "postgres://u@from-env-ref/db" ||
		strings.Join(o.cfg.Kafka.Brokers, ",") != "a:1,b:2" {
		t.Errorf("group %q, batch rows %d, pg url %q, brokers %v: want flag > environment > file, and ${VAR} expanded",
			o.cfg.Kafka.Group, o.cfg.Kafka.BatchMaxRows, o.cfg.PostgresURL, o.cfg.Kafka.Brokers)
	}
}

// TestTheMappingConfigExampleIsValid keeps the documented example of
// docs/MAPPING.md honest: it must load, validate and build its sinks.
func TestTheMappingConfigExampleIsValid(t *testing.T) {
	t.Setenv("DATABASE_URL", "postgres://app@db/shop")
	sinks := exampleSinks(t, mappingExample(t, "## Typed tables"))
	if len(sinks) != 3 || sinks["accounts"].Upsert == nil || sinks["orders"].Table.Name != "orders_orders" {
		t.Errorf("MAPPING.md example built %d sinks: %+v", len(sinks), sinks)
	}
}

// exampleSinks loads the config example as run does (flags, validation,
// building), failing the test on an error, and returns the sinks of the
// topics it names.
func exampleSinks(t *testing.T, example string) map[string]ingest.Sink {
	t.Helper()
	t.Setenv("KAFKA2PG_PG_URL", "")
	path := writeConfig(t, example)
	fs := newFlagSet("run")
	var o runOptions
	defineRunFlags(fs, &o)
	if err := fs.Parse([]string{"--config", path}); err != nil {
		t.Fatal(err)
	}
	cfg, err := loadConfig(path, fs)
	if err != nil {
		t.Fatalf("MAPPING.md example: %v", err)
	}
	if err := cfg.apply(fs); err != nil {
		t.Fatal(err)
	}
	o.sinks = cfg.sinks
	if err := o.validate(); err != nil {
		t.Fatalf("MAPPING.md example: %v", err)
	}
	sinks, err := fixedSinks(t, &o)
	if err != nil {
		t.Fatalf("MAPPING.md example: %v", err)
	}
	return sinks
}

// fixedSinks builds o's sinks as run does, and returns those of the
// topics it names.
func fixedSinks(t testing.TB, o *runOptions) (map[string]ingest.Sink, error) {
	set, err := o.buildSinks(t.Context())
	return set.Fixed, err
}
