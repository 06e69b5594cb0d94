package main

import (
	"cmp"
	"io"
	"slices"
	"strings"
)

// The libraries' errors and logs name their configuration as a program
// that embeds them writes it (reader.Config.BatchMaxRows); a user of the
// command knows it as a flag (--batch-max-rows), an environment variable
// or a config-file key. cliNames is that translation, in one table, and
// the command applies it once, where text leaves for the user: every
// line written to stderr (errors and logs), check's report, /readyz.

// cliNames maps what the libraries write to what the command's user
// types. Most entries are a field and its flag; a few are a phrase around
// a field whose command-line advice says more (where the value may also
// come from, or the old wording of a message that tests and operators'
// alerts know). Longer entries win over the shorter ones they contain.
var cliNames = []struct{ api, cli string }{
	// Phrases.
	{"bridge.Config.PostgresURL is empty: give the PostgreSQL URL, e.g. postgres://user@host:5432/db",
		"--pg-url is empty: give the PostgreSQL URL, e.g. postgres://user@host:5432/db (or set KAFKA2PG_PG_URL or DATABASE_URL)"},
	{"remove client_encoding from the URL", "remove client_encoding from --pg-url"},
	{"reader.Config.Topics is empty", "--topic is missing"},
	{"reader.Config.Topics pattern", "topic_regex"},
	{"reader.Config.Topics: ", "--topic "},
	{"correct reader.Config.Topics", "correct --topic (or the sink's topic in --config)"},
	{"reader.Security.SASLPassword or reader.Security.SASLPasswordFile", "KAFKA2PG_KAFKA_SASL_PASSWORD or --kafka-sasl-password-file"},
	{"reader.Security.SASLPassword(File)", "--kafka-sasl-password(-file)"},
	{"TLS is off: set reader.Security.TLS", "TLS is off: add --kafka-tls"},
	{"registry.Config.URLs: ", "--schema-registry-url "},
	{"registry.Config.Timeout", "the registry timeout"},
	{"or let EnsureTables create it", "or run with --create-tables"},
	{"(ingest.Sink.Table)", "(--pg-table, or the sink's table in the config)"},
	{"(ingest.Sink.Table's schema)", "(--pg-schema, or the sink's table)"},
	{"choose another table with ingest.Sink.Table", "choose another table with --pg-table"},

	// reader.Config
	{"reader.Config.Brokers", "--kafka-brokers"},
	{"reader.Config.Group", "--kafka-group"},
	{"reader.Config.Topics", "--topic"},
	{"reader.Config.ClientID", "--kafka-client-id"},
	{"reader.Config.Balancers", "--kafka-balancers"},
	{"reader.Config.IsolationLevel", "--kafka-isolation-level"},
	{"reader.Config.InstanceID", "--kafka-instance-id"},
	{"reader.Config.GroupProtocol", "--kafka-group-protocol"},
	{"reader.Config.FetchMinBytes", "--kafka-fetch-min-bytes"},
	{"reader.Config.FetchMaxBytes", "--kafka-fetch-max-bytes"},
	{"reader.Config.FetchMaxPartitionBytes", "--kafka-fetch-max-partition-bytes"},
	{"reader.Config.FetchMaxWait", "--kafka-fetch-max-wait"},
	{"reader.Config.MetadataMaxAge", "--kafka-metadata-max-age"},
	{"reader.Config.SessionTimeout", "--kafka-session-timeout"},
	{"reader.Config.RebalanceTimeout", "--kafka-rebalance-timeout"},
	{"reader.Config.HeartbeatInterval", "--kafka-heartbeat-interval"},
	{"reader.Config.CommitInterval", "--kafka-commit-interval"},
	{"reader.Config.Start", "--kafka-start"},
	{"reader.Config.OnDataLoss", "--on-data-loss"},
	{"reader.Config.BatchMaxRows", "--batch-max-rows"},
	{"reader.Config.BatchMaxBytes", "--batch-max-bytes"},
	{"reader.Config.BatchMaxWait", "--batch-max-wait"},
	{"reader.Config.BatchLinger", "--batch-linger"},
	{"reader.Config.WaitAtEnd", "--batch-wait-at-end"},
	{"reader.Config.MaxBufferedBytes", "--max-buffered-bytes"},
	{"reader.Config.QueueCapacity", "--queue-capacity"},
	{"reader.Config.FlushTimeout", "--shutdown-timeout"},
	{"reader.Config.FenceCheckInterval", "--fence-check-interval"},
	{"reader.Config.RetryBackoffMax", "--retry-backoff-max"},
	{"reader.Config.FatalRetryTimeout", "--fatal-retry-timeout"},

	// reader.Security
	{"reader.Security.TLSCAFile", "--kafka-tls-ca-file"},
	{"reader.Security.TLSCertFile", "--kafka-tls-cert-file"},
	{"reader.Security.TLSKeyFile", "--kafka-tls-key-file"},
	{"reader.Security.TLSServerName", "--kafka-tls-server-name"},
	{"reader.Security.TLSMinVersion", "--kafka-tls-min-version"},
	{"reader.Security.TLS", "--kafka-tls"},
	{"reader.Security.SASLMechanism", "--kafka-sasl-mechanism"},
	{"reader.Security.SASLUser", "--kafka-sasl-user"},
	{"reader.Security.SASLPasswordFile", "--kafka-sasl-password-file"},
	{"reader.Security.SASLPassword", "--kafka-sasl-password"},
	{"reader.Security.SASLTokenFile", "--kafka-sasl-token-file"},

	// ingest.Config
	{"ingest.Config.Group", "--kafka-group"},
	{"ingest.Config.OnError", "--on-error"},
	{"ingest.Config.MaxRecordBytes", "--max-record-bytes"},
	{"ingest.Config.TableWriters", "--table-writers"},
	{"ingest.Config.ClaimLockTimeout", "--claim-lock-timeout"},
	{"ingest.Config.WriteTimeout", "--pg-write-timeout"},
	{"ingest.Config.Notify", "--notify"},
	{"ingest.Config.BadRecordLogInterval", "--log-dead-letters"},

	// registry.Config
	{"registry.Config.URLs", "--schema-registry-url"},
	{"registry.Config.User", "--schema-registry-user"},
	{"registry.Config.Password", "--schema-registry-password"},
	{"registry.Config.TLSCA", "--schema-registry-tls-ca-file"},
	{"registry.Config.TLSCert", "--schema-registry-tls-cert-file"},
	{"registry.Config.TLSKey", "--schema-registry-tls-key-file"},

	// bridge.Config
	{"bridge.Config.PostgresURL", "--pg-url"},
	{"bridge.Config.PostgresMaxConns", "--pg-max-conns"},
	{"bridge.Config.SkipMigrations", "--migrate=false"},
	{"bridge.Config.SkipCreateTables", "--create-tables=false"},
	{"bridge.Config.UntilCaughtUp", "--until-caught-up"},
	{"bridge.Config.CaughtUpTimeout", "--caught-up-timeout"},
	{"bridge.Config.ReadyStallTimeout", "--ready-stall-timeout"},
	{"bridge.Config.ProgressInterval", "--progress-interval"},
}

// cliReplacer applies cliNames, the longest entries first, so that a
// phrase wins over the field in it and reader.Config.BatchMaxRows over a
// shorter field name it starts with.
var cliReplacer = func() *strings.Replacer {
	entries := slices.Clone(cliNames)
	slices.SortStableFunc(entries, func(a, b struct{ api, cli string }) int { return cmp.Compare(len(b.api), len(a.api)) })
	var pairs []string
	for _, e := range entries {
		pairs = append(pairs, e.api, e.cli)
	}
	return strings.NewReplacer(pairs...)
}()

// cliText is s as the command's user reads it.
func cliText(s string) string { return cliReplacer.Replace(s) }

// cliError is an error whose message is the one the command's user reads
// (cliText); errors.Is and As see the error it wraps.
type cliError struct{ err error }

func (e cliError) Error() string { return cliText(e.err.Error()) }
func (e cliError) Unwrap() error { return e.err }

// cliWriter writes what it is given as cliText: the command's stderr,
// where every error and log line goes. A log handler and fmt.Fprintf write
// a line in one call, so no name is cut in two.
type cliWriter struct{ w io.Writer }

// cliStderr is w as a cliWriter, once: a writer that is one already is
// returned as it is.
func cliStderr(w io.Writer) io.Writer {
	if c, ok := w.(cliWriter); ok {
		return c
	}
	return cliWriter{w}
}

func (c cliWriter) Write(p []byte) (int, error) {
	if _, err := io.WriteString(c.w, cliText(string(p))); err != nil {
		return 0, err
	}
	return len(p), nil
}
