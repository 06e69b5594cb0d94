package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/kafka2pg/kafka2pg/admin"
	"github.com/kafka2pg/kafka2pg/bridge"
	"github.com/kafka2pg/kafka2pg/decode"
	"github.com/kafka2pg/kafka2pg/ingest"
	"github.com/kafka2pg/kafka2pg/internal/pgtest"
	"github.com/kafka2pg/kafka2pg/reader"
	"github.com/kafka2pg/kafka2pg/registry"
	"github.com/kafka2pg/kafka2pg/sinks"
	"github.com/kafka2pg/kafka2pg/stream"
)

// A library's configuration error names its field; the command's user
// reads it under the field's flag, with the flags of the fields it
// names, and no field name is left.
func TestLibraryErrorsReadAsTheirFlags(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing")
	empty := filepath.Join(dir, "empty")
	notPEM := filepath.Join(dir, "not.pem")
	for path, content := range map[string]string{empty: "", notPEM: "not PEM"} {
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	options := func(s reader.Security) error { _, err := s.Options(); return err }
	valid := reader.Config{Brokers: []string{"h:1"}, Group: "g", Topics: []string{"t"}}
	with := func(f func(*reader.Config)) error { c := valid; f(&c); return c.Validate() }
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"a cert without its key", reader.Security{TLSCertFile: "c"}.Validate(), "--kafka-tls-cert-file: goes with --kafka-tls-key-file: give both"},
		{"an unknown TLS version", reader.Security{TLS: true, TLSMinVersion: "1.1"}.Validate(), `--kafka-tls-min-version: "1.1" is not 1.2 or 1.3`},
		{"a TLS version without TLS", reader.Security{TLSMinVersion: "1.3"}.Validate(), "--kafka-tls-min-version: set but TLS is off: set --kafka-tls (or --kafka-tls-ca-file)"},
		{"an unknown mechanism", reader.Security{SASLMechanism: "GSSAPI"}.Validate(), `--kafka-sasl-mechanism: "GSSAPI" is not`},
		{"PLAIN without a user", reader.Security{SASLMechanism: "PLAIN", SASLPassword: "p"}.Validate(), "--kafka-sasl-user: empty: SASL PLAIN needs a user"},
		{"SCRAM without a password", reader.Security{SASLMechanism: "SCRAM-SHA-256", SASLUser: "u"}.Validate(),
			"--kafka-sasl-password: empty: SASL SCRAM-SHA-256 needs a password: set it or --kafka-sasl-password-file (or KAFKA2PG_KAFKA_SASL_PASSWORD)"},
		{"OAUTHBEARER without a token file", reader.Security{SASLMechanism: "OAUTHBEARER"}.Validate(), "--kafka-sasl-token-file: empty"},
		{"a user without a mechanism", reader.Security{SASLUser: "u"}.Validate(), "--kafka-sasl-mechanism: empty, but a SASL user"},
		{"a missing CA file", options(reader.Security{TLSCAFile: missing}), "--kafka-tls-ca-file: open " + missing},
		{"a key that is not PEM", options(reader.Security{TLSCertFile: notPEM, TLSKeyFile: notPEM}), "--kafka-tls-cert-file: with --kafka-tls-key-file: "},
		{"a missing password file", options(reader.Security{SASLMechanism: "PLAIN", SASLUser: "u", SASLPasswordFile: missing}), "--kafka-sasl-password-file: open " + missing},
		{"an empty token file", options(reader.Security{SASLMechanism: "OAUTHBEARER", SASLTokenFile: empty}), "--kafka-sasl-token-file: " + empty + " is empty"},
		{"no brokers", with(func(c *reader.Config) { c.Brokers = nil }), "--kafka-brokers: empty"},
		{"no topic", with(func(c *reader.Config) { c.Topics = nil }), "--topic: empty: name at least one topic to consume (or the sink's topic or topic_regex in --config)"},
		{"a topic name too long", with(func(c *reader.Config) { c.Topics = []string{strings.Repeat("t", 250)} }), `--topic: "ttt`},
		{"a bad pattern", with(func(c *reader.Config) { c.Topics, c.TopicsAreRegex = []string{"("}, true }), `--topic: pattern "(": `},
		{"an unknown protocol", with(func(c *reader.Config) { c.GroupProtocol = 7 }), "--kafka-group-protocol: "},
		{"consumer with round-robin", with(func(c *reader.Config) {
			c.GroupProtocol, c.Balancers = reader.GroupProtocolConsumer, []reader.Balancer{reader.RoundRobin}
		}), `--kafka-balancers: "round-robin" with --kafka-group-protocol consumer`},
		{"an instance id with a newline", with(func(c *reader.Config) { c.InstanceID = "a\nb" }), "--kafka-instance-id: "},
		{"a negative budget", with(func(c *reader.Config) { c.MaxBufferedBytes = -1 }), "--max-buffered-bytes: -1"},
		{"a heartbeat longer than the session", with(func(c *reader.Config) { c.HeartbeatInterval = time.Hour }), "--kafka-heartbeat-interval: 1h0m0s must be shorter than --kafka-session-timeout (45s)"},
		{"a negative shutdown timeout", with(func(c *reader.Config) { c.FlushTimeout = -time.Second }), "--shutdown-timeout: -1s"},
		{"a queue smaller than a batch", with(func(c *reader.Config) { c.QueueCapacity = 5 }), "--queue-capacity: 5: use at least --batch-max-rows (10000)"},
		{"no registry URL", registry.Config{}.Validate(), "--schema-registry-url: empty"},
		{"a registry URL without a scheme", registry.Config{URLs: []string{"registry:8081"}}.Validate(), `--schema-registry-url: "registry:8081": the URL must start with http://`},
		{"a registry cert without its key", registry.Config{URLs: []string{"http://x"}, TLSCert: "c"}.Validate(), "--schema-registry-tls-cert-file: goes with --schema-registry-tls-key-file"},
		{"a registry password without a user", registry.Config{URLs: []string{"http://x"}, Password: "p"}.Validate(), "--schema-registry-password: set without --schema-registry-user"},
		{"no Postgres URL", bridge.Config{Kafka: valid}.Validate(), "--pg-url: empty: give the PostgreSQL URL, e.g. postgres://user@host:5432/db (or set KAFKA2PG_PG_URL or DATABASE_URL)"},
		{"a field error wrapped and joined", errors.Join(errors.New("other"), fmt.Errorf("start: %w", bridge.Config{Kafka: valid}.Validate())), "other\nstart: --pg-url: empty"},
		{"a key of a sinks file", &sinks.FieldError{Field: "sinks[0].mode", Line: 3, Err: errors.New("bad")}, "sinks[0].mode (line 3): bad"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.err == nil {
				t.Fatalf("no error, want one that reads %q", tc.want)
			}
			if _, ok := errors.AsType[*stream.FieldError](tc.err); !ok {
				t.Errorf("%v: not a *stream.FieldError", tc.err)
			}
			got := cliMessage(tc.err)
			if !strings.Contains(got, tc.want) {
				t.Errorf("the user reads %q, want %q in it", got, tc.want)
			}
			if strings.Contains(got, "Config.") || strings.Contains(got, "Security.") || strings.Contains(got, "(flag") {
				t.Errorf("the user reads a field name or a hint: %q", got)
			}
		})
	}
}

// Errors and hints that mention a field in their advice read as the
// library wrote them, with the field's flag beside.
func TestAdviceNamingAFieldGetsItsFlagBeside(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"a bad record that stops its partition", &stream.StopError{Topic: "orders", Partition: 3, Offset: 7, Kind: "invalid_json", Err: errors.New("value is not JSON")},
			"run with ingest.Config.OnError=dead-letter, then restart (flag: --on-error)"},
		{"fatal trouble", &reader.FatalError{What: `topic "orders"`, Err: errors.New("denied"), For: time.Minute}, "see reader.Config.FatalRetryTimeout) (flag: --fatal-retry-timeout)"},
		{"two fields", errors.New("give the CA with reader.Security.TLSCAFile, or reader.Security.TLSServerName"), "(flags: --kafka-tls-ca-file; --kafka-tls-server-name)"},
		{"a table", errors.New("name the table with characters LATIN1 has (ingest.Sink.Table), or use a UTF8 database"), "(flag: --pg-table, or the sink's table in --config)"},
		{"the same field twice", errors.New("reader.Config.OnDataLoss=stop; restart with reader.Config.OnDataLoss=skip"), "skip (flag: --on-data-loss)"},
		{"no field", errors.New("connection refused"), "connection refused"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := cliMessage(tc.err)
			if !strings.HasPrefix(got, tc.err.Error()) || !strings.HasSuffix(got, tc.want) {
				t.Errorf("the user reads %q, want the library's text and then %q", got, tc.want)
			}
		})
	}
}

// The log handler writes an error attribute under its flags, and adds the
// flags of the fields a line mentions.
func TestLogLinesNameTheFlags(t *testing.T) {
	var buf strings.Builder
	log := newLogger(&buf, "text", "info")
	log.Warn("skipping them (reader.Config.OnDataLoss=skip)", "topic", "t")
	log.Error("stopped", "error", bridge.Config{Kafka: reader.Config{Brokers: []string{"h:1"}, Group: "g", Topics: []string{"t"}}}.Validate())
	log.Info("plain", "n", 1)
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 3 {
		t.Fatalf("%d lines, want 3:\n%s", len(lines), buf.String())
	}
	for i, want := range []string{`topic=t flag=--on-data-loss`, `error="--pg-url: empty: give`, `msg=plain n=1`} {
		if !strings.Contains(lines[i], want) {
			t.Errorf("line %d = %s, want %s in it", i, lines[i], want)
		}
	}
	if strings.Contains(lines[2], "flag=") {
		t.Errorf("a line without a field got a flag: %s", lines[2])
	}
}

// The writer's errors about a table get the flag that picks another table.
func TestWriterErrorsNameTheFlag(t *testing.T) {
	_, pool := pgtest.MigratedPool(t)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	sinks := map[string]ingest.Sink{"orders": {Table: decode.RawTable("public", "orders", decode.ValueJSON), Mapper: decode.RawMapper{Format: decode.ValueJSON}}}
	w, err := ingest.New(pool, ingest.Config{Group: "g", Sinks: sinks})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `CREATE TABLE orders (kafka_topic text, kafka_partition int, kafka_offset bigint)`); err != nil {
		t.Fatal(err)
	}
	if err := w.EnsureTables(ctx, true); err == nil || !strings.HasSuffix(cliMessage(err), "choose another table with ingest.Sink.Table (flag: --pg-table, or the sink's table in --config)") {
		t.Errorf("a table without the columns: %v", cliMessage(err))
	}
}

// Every field a run flag sets has its flag in cliFields, every path there
// is a field, and every flag there exists: the table cannot fall behind
// the flags or the libraries.
func TestEveryFieldOfARunFlagHasItsFlag(t *testing.T) {
	noFlag := map[string]bool{
		"reader.Config.TopicsAreRegex": true, "reader.Config.Permanent": true, "reader.Config.Logger": true,
		"reader.Config.ExtraOpts": true, "reader.Config.OnOwned": true, "reader.Config.Principal": true, // from reader.Security
		"ingest.Config.Sinks": true, "ingest.Config.Resolve": true, "ingest.Config.WriteTimeoutRows": true,
		"ingest.Config.CombineMaxRows": true, "ingest.Config.Logger": true, "ingest.Config.Tracer": true,
		"bridge.Config.Kafka": true, "bridge.Config.KafkaSecurity": true, "bridge.Config.Writer": true, "bridge.Config.Sinks": true,
	}
	types := map[string]any{"reader.Config.": reader.Config{}, "reader.Security.": reader.Security{},
		"ingest.Config.": ingest.Config{}, "bridge.Config.": bridge.Config{}}
	fields := map[string]bool{}
	for prefix, v := range types {
		typ := reflect.TypeOf(v)
		for i := range typ.NumField() {
			f := typ.Field(i)
			if name := prefix + f.Name; f.IsExported() && !noFlag[name] {
				fields[name] = true
				if _, ok := cliFields[name]; !ok {
					t.Errorf("%s is set by a flag but has no entry in cliFields", name)
				}
			}
		}
	}
	others := map[string]any{"ingest.Sink.": ingest.Sink{}, "registry.Config.": registry.Config{}, "admin.InferRequest.": admin.InferRequest{}}
	for prefix, v := range others {
		typ := reflect.TypeOf(v)
		for i := range typ.NumField() {
			fields[prefix+typ.Field(i).Name] = true
		}
	}
	run := commands()[0].flagSet()
	var infer *pflag.FlagSet // the flags of admin.InferRequest's fields
	for _, c := range commands() {
		if c.name == "infer" {
			infer = c.flagSet()
		}
	}
	for path, f := range cliFields {
		if !fields[path] {
			t.Errorf("cliFields[%q]: no such field", path)
		}
		if !fieldPath.MatchString(path) || fieldPath.FindString(path) != path {
			t.Errorf("cliFields[%q]: fieldPath does not find it in a message", path)
		}
		name, _, _ := strings.Cut(strings.TrimPrefix(f.flag, "--"), "=")
		fs, cmd := run, "run"
		if strings.HasPrefix(path, "admin.InferRequest.") {
			fs, cmd = infer, "infer"
		}
		if fs.Lookup(name) == nil {
			t.Errorf("cliFields[%q] names --%s, which %s does not have", path, name, cmd)
		}
	}
}
