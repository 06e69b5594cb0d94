package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/kafka2pg/kafka2pg/bridge"
	"github.com/kafka2pg/kafka2pg/decode"
	"github.com/kafka2pg/kafka2pg/ingest"
	"github.com/kafka2pg/kafka2pg/internal/pgtest"
	"github.com/kafka2pg/kafka2pg/reader"
	"github.com/kafka2pg/kafka2pg/registry"
	"github.com/kafka2pg/kafka2pg/stream"
)

// The libraries name their fields; through cliNames a user of the command
// reads exactly what these messages said when the libraries named the
// flags themselves (the texts below are those the libraries' tests used
// to expect), and no field name is left.
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
		{"a cert without its key", reader.Security{TLSCertFile: "c"}.Validate(), "--kafka-tls-cert-file and --kafka-tls-key-file go together"},
		{"an unknown TLS version", reader.Security{TLS: true, TLSMinVersion: "1.1"}.Validate(), `--kafka-tls-min-version "1.1" is not 1.2 or 1.3`},
		{"a TLS version without TLS", reader.Security{TLSMinVersion: "1.3"}.Validate(), "--kafka-tls-min-version is set but TLS is off: add --kafka-tls (or --kafka-tls-ca-file)"},
		{"an unknown mechanism", reader.Security{SASLMechanism: "GSSAPI"}.Validate(), `--kafka-sasl-mechanism "GSSAPI" is not`},
		{"PLAIN without a user", reader.Security{SASLMechanism: "PLAIN", SASLPassword: "p"}.Validate(), "needs --kafka-sasl-user"},
		{"SCRAM without a password", reader.Security{SASLMechanism: "SCRAM-SHA-256", SASLUser: "u"}.Validate(), "KAFKA2PG_KAFKA_SASL_PASSWORD or --kafka-sasl-password-file"},
		{"OAUTHBEARER without a token file", reader.Security{SASLMechanism: "OAUTHBEARER"}.Validate(), "needs --kafka-sasl-token-file"},
		{"a user without a mechanism", reader.Security{SASLUser: "u"}.Validate(), "--kafka-sasl-user, --kafka-sasl-password(-file) and --kafka-sasl-token-file need --kafka-sasl-mechanism"},
		{"a missing CA file", options(reader.Security{TLSCAFile: missing}), "--kafka-tls-ca-file: open " + missing},
		{"a key that is not PEM", options(reader.Security{TLSCertFile: notPEM, TLSKeyFile: notPEM}), "--kafka-tls-cert-file and --kafka-tls-key-file"},
		{"a missing password file", options(reader.Security{SASLMechanism: "PLAIN", SASLUser: "u", SASLPasswordFile: missing}), "--kafka-sasl-password-file: open " + missing},
		{"an empty token file", options(reader.Security{SASLMechanism: "OAUTHBEARER", SASLTokenFile: empty}), "--kafka-sasl-token-file: " + empty + " is empty"},
		{"no brokers", with(func(c *reader.Config) { c.Brokers = nil }), "--kafka-brokers is empty"},
		{"no topic", with(func(c *reader.Config) { c.Topics = nil }), "--topic is missing"},
		{"a topic name too long", with(func(c *reader.Config) { c.Topics = []string{strings.Repeat("t", 250)} }), `--topic "ttt`},
		{"a bad pattern", with(func(c *reader.Config) { c.Topics, c.TopicsAreRegex = []string{"("}, true }), `topic_regex "(": `},
		{"an unknown protocol", with(func(c *reader.Config) { c.GroupProtocol = 7 }), "--kafka-group-protocol"},
		{"consumer with round-robin", with(func(c *reader.Config) {
			c.GroupProtocol, c.Balancers = reader.GroupProtocolConsumer, []reader.Balancer{reader.RoundRobin}
		}), "--kafka-balancers sticky or range"},
		{"an instance id with a newline", with(func(c *reader.Config) { c.InstanceID = "a\nb" }), "--kafka-instance-id"},
		{"a negative budget", with(func(c *reader.Config) { c.MaxBufferedBytes = -1 }), "--max-buffered-bytes is -1"},
		{"a heartbeat longer than the session", with(func(c *reader.Config) { c.HeartbeatInterval = time.Hour }), "--kafka-heartbeat-interval (1h0m0s) must be shorter than --kafka-session-timeout (45s)"},
		{"a negative shutdown timeout", with(func(c *reader.Config) { c.FlushTimeout = -time.Second }), "--shutdown-timeout is -1s"},
		{"a queue smaller than a batch", with(func(c *reader.Config) { c.QueueCapacity = 5 }), "--queue-capacity is 5: use at least --batch-max-rows (10000)"},
		{"no registry URL", registry.Config{}.Validate(), "--schema-registry-url is empty"},
		{"a registry URL without a scheme", registry.Config{URLs: []string{"registry:8081"}}.Validate(), `--schema-registry-url "registry:8081": the URL must start with http://`},
		{"a registry cert without its key", registry.Config{URLs: []string{"http://x"}, TLSCert: "c"}.Validate(), "--schema-registry-tls-cert-file and --schema-registry-tls-key-file go together"},
		{"a registry password without a user", registry.Config{URLs: []string{"http://x"}, Password: "p"}.Validate(), "without --schema-registry-user"},
		{"a bad record that stops its partition", &stream.StopError{Topic: "orders", Partition: 3, Offset: 7, Kind: "invalid_json", Err: errors.New("value is not JSON")},
			"stopped the partition (--on-error=stop): invalid_json: value is not JSON; fix the table or the data, or run with --on-error=dead-letter, then restart"},
		{"fatal trouble", &reader.FatalError{What: `topic "orders"`, Err: errors.New("denied"), For: time.Minute}, "(failing for 1m0s, see --fatal-retry-timeout)"},
		{"no Postgres URL", bridge.Config{Kafka: valid}.Validate(), "--pg-url is empty: give the PostgreSQL URL, e.g. postgres://user@host:5432/db (or set KAFKA2PG_PG_URL or DATABASE_URL)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.err == nil {
				t.Fatalf("no error, want one that reads %q", tc.want)
			}
			got := cliError{tc.err}.Error()
			if !strings.Contains(got, tc.want) {
				t.Errorf("the user reads %q, want %q in it", got, tc.want)
			}
			if strings.Contains(got, "Config.") || strings.Contains(got, "Security.") {
				t.Errorf("the user reads a field name: %q", got)
			}
			if !errors.Is(cliError{tc.err}, tc.err) {
				t.Error("the translated error does not wrap the library's")
			}
		})
	}
}

// The hints the libraries give in messages that need a broker, a
// partition or a database to happen read as the flags did; the libraries'
// own tests check that they write these field names.
func TestLibraryHintsReadAsTheirFlags(t *testing.T) {
	for api, want := range map[string]string{
		"give the CA that signed it with reader.Security.TLSCAFile":                                "give the CA that signed it with --kafka-tls-ca-file",
		"use the advertised host name, or reader.Security.TLSServerName":                           "use the advertised host name, or --kafka-tls-server-name",
		"a client certificate (reader.Security.TLSCertFile, reader.Security.TLSKeyFile)":           "a client certificate (--kafka-tls-cert-file, --kafka-tls-key-file)",
		"Restart with reader.Config.OnDataLoss=skip to continue at offset 50":                      "Restart with --on-data-loss=skip to continue at offset 50",
		"create it, or correct reader.Config.Topics":                                               "create it, or correct --topic (or the sink's topic in --config)",
		"graceful stop cut short by reader.Config.FlushTimeout":                                    "graceful stop cut short by --shutdown-timeout",
		"bridge.Config.UntilCaughtUp: no write committed for 1m0s (bridge.Config.CaughtUpTimeout)": "--until-caught-up: no write committed for 1m0s (--caught-up-timeout)",
		`reader.Config.Group "g": the database's encoding, LATIN1, lacks a character of it`:        `--kafka-group "g": the database's encoding, LATIN1, lacks a character of it`,
		"name the table with characters LATIN1 has (ingest.Sink.Table), or use a UTF8 database":    "name the table with characters LATIN1 has (--pg-table, or the sink's table in the config), or use a UTF8 database",
	} {
		if got := cliText(api); got != want {
			t.Errorf("cliText(%q) = %q, want %q", api, got, want)
		}
	}
}

// The writer's errors about a table read as they did: the flag that picks
// another table, and the one that lets run create it.
func TestWriterErrorsReadAsTheirFlags(t *testing.T) {
	_, pool := pgtest.MigratedPool(t)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	sinks := map[string]ingest.Sink{"orders": {Table: decode.RawTable("public", "orders", decode.ValueJSON), Mapper: decode.RawMapper{Format: decode.ValueJSON}}}
	w, err := ingest.New(pool, ingest.Config{Group: "g", Sinks: sinks})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.EnsureTables(ctx, false); err == nil || !strings.Contains(cliError{err}.Error(), "create it, or run with --create-tables") {
		t.Errorf("a missing table the writer may not create: %v", cliError{err})
	}
	if _, err := pool.Exec(ctx, `CREATE TABLE orders (kafka_topic text, kafka_partition int, kafka_offset bigint)`); err != nil {
		t.Fatal(err)
	}
	if err := w.EnsureTables(ctx, true); err == nil || !strings.Contains(cliError{err}.Error(), "add them, or choose another table with --pg-table") {
		t.Errorf("a table without the columns: %v", cliError{err})
	}
}

// Every field a run flag sets has its flag in cliNames, and every flag
// cliNames names exists: the table cannot fall behind the flags.
func TestEveryFieldOfARunFlagHasItsCLIName(t *testing.T) {
	named := map[string]bool{}
	for _, e := range cliNames {
		named[e.api] = true
	}
	noFlag := map[string]bool{
		"reader.Config.TopicsAreRegex": true, "reader.Config.Permanent": true, "reader.Config.Logger": true,
		"reader.Config.ExtraOpts": true, "reader.Config.OnOwned": true, "reader.Config.Principal": true, // from reader.Security
		"ingest.Config.Sinks": true, "ingest.Config.Resolve": true, "ingest.Config.WriteTimeoutRows": true,
		"ingest.Config.CombineMaxRows": true, "ingest.Config.Logger": true, "ingest.Config.Tracer": true,
		"bridge.Config.Kafka": true, "bridge.Config.KafkaSecurity": true, "bridge.Config.Writer": true, "bridge.Config.Sinks": true,
	}
	for prefix, v := range map[string]any{"reader.Config.": reader.Config{}, "reader.Security.": reader.Security{},
		"ingest.Config.": ingest.Config{}, "bridge.Config.": bridge.Config{}} {
		typ := reflect.TypeOf(v)
		for i := range typ.NumField() {
			f := typ.Field(i)
			if name := prefix + f.Name; f.IsExported() && !noFlag[name] && !named[name] {
				t.Errorf("%s is set by a flag but has no entry in cliNames", name)
			}
		}
	}
	run := commands()[0].flagSet()
	for _, e := range cliNames {
		for _, word := range strings.Fields(e.cli) {
			word = strings.TrimSuffix(strings.Trim(word, "(),"), "(-file")
			if !strings.HasPrefix(word, "--") {
				continue
			}
			name, _, _ := strings.Cut(strings.TrimPrefix(word, "--"), "=")
			if run.Lookup(name) == nil && name != "config" {
				t.Errorf("cliNames[%q] names --%s, which run does not have", e.api, name)
			}
		}
	}
}
