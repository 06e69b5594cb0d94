package main

import (
	"slices"
	"strings"
	"testing"
)

// The renamed flags keep working under their old names, wherever a flag
// can be given: command line, environment, config file.
func TestOldFlagNamesStillWork(t *testing.T) {
	t.Setenv("KAFKA2PG_PG_URL", "")
	t.Setenv("DATABASE_URL", "")
	base := []string{"--kafka-brokers", "h:1", "--kafka-group", "g", "--pg-url", "postgres://x@127.0.0.1:1/db"}
	load := func(t *testing.T, args ...string) *runOptions {
		t.Helper()
		var stdout, stderr strings.Builder
		o, code, ok := loadRunOptions("run", runHelp, append(append([]string{}, base...), args...), &stdout, &stderr)
		if !ok {
			t.Fatalf("run %s: exit %d: %s", strings.Join(args, " "), code, stderr.String())
		}
		return o
	}
	t.Run("on the command line", func(t *testing.T) {
		o := load(t, "--topic", "t", "--no-migrate", "--start", "latest", "--table", "events",
			"--schema-registry-tls-ca", "ca.pem", "--schema-registry-tls-cert", "c.pem", "--schema-registry-tls-key", "k.pem")
		if !o.cfg.SkipMigrations || o.cfg.Kafka.Start.String() != "latest" || o.table != "events" ||
			o.registry.tlsCA != "ca.pem" || o.registry.tlsCert != "c.pem" || o.registry.tlsKey != "k.pem" {
			t.Errorf("migrate %v, start %q, table %q, registry TLS %q %q %q: the old names did not set the new flags",
				!o.cfg.SkipMigrations, o.cfg.Kafka.Start, o.table, o.registry.tlsCA, o.registry.tlsCert, o.registry.tlsKey)
		}
		if len(o.oldNames) != 6 || !strings.Contains(strings.Join(o.oldNames, "\n"), "--no-migrate is an old name: use --migrate=false") {
			t.Errorf("notices %q: want one per old name, naming the new spelling", o.oldNames)
		}
	})
	t.Run("an explicit --no-migrate=false migrates", func(t *testing.T) {
		if o := load(t, "--topic", "t", "--no-migrate=false"); o.cfg.SkipMigrations {
			t.Error("--no-migrate=false turned migrations off")
		}
	})
	t.Run("in the environment", func(t *testing.T) {
		t.Setenv("KAFKA2PG_NO_MIGRATE", "true")
		t.Setenv("KAFKA2PG_START", "latest")
		t.Setenv("KAFKA2PG_TABLE", "events")
		o := load(t, "--topic", "t")
		if !o.cfg.SkipMigrations || o.cfg.Kafka.Start.String() != "latest" || o.table != "events" {
			t.Errorf("migrate %v, start %q, table %q: the old variables did not set the new flags", !o.cfg.SkipMigrations, o.cfg.Kafka.Start, o.table)
		}
	})
	t.Run("the command line wins over an old or new variable", func(t *testing.T) {
		t.Setenv("KAFKA2PG_MIGRATE", "true")
		t.Setenv("KAFKA2PG_KAFKA_START", "earliest")
		t.Setenv("KAFKA2PG_START", "earliest")
		o := load(t, "--topic", "t", "--no-migrate", "--start", "latest")
		if !o.cfg.SkipMigrations || o.cfg.Kafka.Start.String() != "latest" {
			t.Errorf("migrate %v, start %q: the environment overrode the command line's old names", !o.cfg.SkipMigrations, o.cfg.Kafka.Start)
		}
	})
	t.Run("the new variable wins over the old one", func(t *testing.T) {
		t.Setenv("KAFKA2PG_KAFKA_START", "committed")
		t.Setenv("KAFKA2PG_START", "latest")
		if o := load(t, "--topic", "t"); o.cfg.Kafka.Start.String() != "committed" {
			t.Errorf("start %q, want KAFKA2PG_KAFKA_START's committed", o.cfg.Kafka.Start)
		}
	})
	t.Run("in a config file", func(t *testing.T) {
		path := writeConfig(t, "topic: [t]\nno-migrate: true\nstart: latest\ntable: events\nschema-registry-tls-ca: ca.pem\n")
		o := load(t, "--config", path)
		if !o.cfg.SkipMigrations || o.cfg.Kafka.Start.String() != "latest" || o.table != "events" || o.registry.tlsCA != "ca.pem" {
			t.Errorf("migrate %v, start %q, table %q, registry CA %q: the old keys did not set the new flags", !o.cfg.SkipMigrations, o.cfg.Kafka.Start, o.table, o.registry.tlsCA)
		}
	})
	t.Run("an old and a new key in one file are refused", func(t *testing.T) {
		code, stderr := runWithConfig(t, "kafka-brokers: [h:1]\nkafka-group: g\ntopic: [t]\nstart: latest\nkafka-start: earliest\n", "--pg-url", "postgres://x@127.0.0.1:1/db")
		if code != exitUsage || !strings.Contains(stderr, "start is the old name of kafka-start, which line 5 sets") {
			t.Errorf("exit %d, stderr:\n%s\nwant exit 2 naming both keys", code, stderr)
		}
	})
}

// Old names are hidden from help and from the list of flags a section must
// place, and every alias names a flag some command has.
func TestOldFlagNamesAreHiddenAndPointAtRealFlags(t *testing.T) {
	for _, a := range flagAliases {
		found := false
		for _, c := range commands() {
			fs := c.flagSet()
			if fs.Lookup(a.name) == nil {
				continue
			}
			found = true
			if old := fs.Lookup(a.old); old == nil || !old.Hidden {
				t.Errorf("kafka2pg %s: --%s (old --%s) is missing or shown", c.name, a.old, a.name)
			}
			if slices.Contains(visibleFlags(fs), a.old) {
				t.Errorf("kafka2pg %s: --%s is visible", c.name, a.old)
			}
		}
		if !found {
			t.Errorf("alias --%s names --%s, which no command has", a.old, a.name)
		}
	}
	if out := helpOf(t, "run"); strings.Contains(out, "no-migrate") || strings.Contains(out, "--start ") {
		t.Errorf("run --help shows an old name:\n%s", out)
	}
}
