package main

import (
	"context"
	"errors"
	"log/slog"
	"regexp"
	"slices"
	"strings"

	"github.com/kafka2pg/kafka2pg/stream"
)

// The libraries name their configuration as a program that embeds them
// writes it (reader.Config.BatchMaxRows); a user of the command knows it
// as a flag (--batch-max-rows), an environment variable or a config-file
// key. A configuration error carries its field (*stream.FieldError), and
// the command prints it under the field's flag (cliMessage). Other errors
// and log lines may mention a field in their advice ("restart with
// reader.Config.OnDataLoss=skip"); they are printed as the library wrote
// them, with the flag beside: "(flag: --on-data-loss)" after an error, a
// flag attribute on a log line. Both look the field up in cliFields, by
// its path, so a library may reword its messages freely.

// cliFields maps the path of each field the command sets to its flag;
// also says where else the value may come from, for the messages about
// that field.
var cliFields = map[string]struct{ flag, also string }{
	// reader.Config
	"reader.Config.Brokers":                {"--kafka-brokers", ""},
	"reader.Config.Group":                  {"--kafka-group", ""},
	"reader.Config.Topics":                 {"--topic", "or the sink's topic or topic_regex in --config"},
	"reader.Config.ClientID":               {"--kafka-client-id", ""},
	"reader.Config.Balancers":              {"--kafka-balancers", ""},
	"reader.Config.IsolationLevel":         {"--kafka-isolation-level", ""},
	"reader.Config.InstanceID":             {"--kafka-instance-id", ""},
	"reader.Config.GroupProtocol":          {"--kafka-group-protocol", ""},
	"reader.Config.FetchMinBytes":          {"--kafka-fetch-min-bytes", ""},
	"reader.Config.FetchMaxBytes":          {"--kafka-fetch-max-bytes", ""},
	"reader.Config.FetchMaxPartitionBytes": {"--kafka-fetch-max-partition-bytes", ""},
	"reader.Config.FetchMaxWait":           {"--kafka-fetch-max-wait", ""},
	"reader.Config.MetadataMaxAge":         {"--kafka-metadata-max-age", ""},
	"reader.Config.SessionTimeout":         {"--kafka-session-timeout", ""},
	"reader.Config.RebalanceTimeout":       {"--kafka-rebalance-timeout", ""},
	"reader.Config.HeartbeatInterval":      {"--kafka-heartbeat-interval", ""},
	"reader.Config.CommitInterval":         {"--kafka-commit-interval", ""},
	"reader.Config.Start":                  {"--kafka-start", ""},
	"reader.Config.OnDataLoss":             {"--on-data-loss", ""},
	"reader.Config.BatchMaxRows":           {"--batch-max-rows", ""},
	"reader.Config.BatchMaxBytes":          {"--batch-max-bytes", ""},
	"reader.Config.BatchMaxWait":           {"--batch-max-wait", ""},
	"reader.Config.BatchLinger":            {"--batch-linger", ""},
	"reader.Config.WaitAtEnd":              {"--batch-wait-at-end", ""},
	"reader.Config.MaxBufferedBytes":       {"--max-buffered-bytes", ""},
	"reader.Config.QueueCapacity":          {"--queue-capacity", ""},
	"reader.Config.FlushTimeout":           {"--shutdown-timeout", ""},
	"reader.Config.FenceCheckInterval":     {"--fence-check-interval", ""},
	"reader.Config.RetryBackoffMax":        {"--retry-backoff-max", ""},
	"reader.Config.FatalRetryTimeout":      {"--fatal-retry-timeout", ""},

	// reader.Security
	"reader.Security.TLS":              {"--kafka-tls", ""},
	"reader.Security.TLSCAFile":        {"--kafka-tls-ca-file", ""},
	"reader.Security.TLSCertFile":      {"--kafka-tls-cert-file", ""},
	"reader.Security.TLSKeyFile":       {"--kafka-tls-key-file", ""},
	"reader.Security.TLSServerName":    {"--kafka-tls-server-name", ""},
	"reader.Security.TLSMinVersion":    {"--kafka-tls-min-version", ""},
	"reader.Security.SASLMechanism":    {"--kafka-sasl-mechanism", ""},
	"reader.Security.SASLUser":         {"--kafka-sasl-user", ""},
	"reader.Security.SASLPassword":     {"--kafka-sasl-password", "or KAFKA2PG_KAFKA_SASL_PASSWORD"},
	"reader.Security.SASLPasswordFile": {"--kafka-sasl-password-file", ""},
	"reader.Security.SASLTokenFile":    {"--kafka-sasl-token-file", ""},

	// ingest.Config and ingest.Sink
	"ingest.Config.Group":                {"--kafka-group", ""},
	"ingest.Config.OnError":              {"--on-error", ""},
	"ingest.Config.MaxRecordBytes":       {"--max-record-bytes", ""},
	"ingest.Config.TableWriters":         {"--table-writers", ""},
	"ingest.Config.MaxTablesPerSink":     {"--max-tables-per-sink", ""},
	"ingest.Config.ClaimLockTimeout":     {"--claim-lock-timeout", ""},
	"ingest.Config.WriteTimeout":         {"--pg-write-timeout", ""},
	"ingest.Config.Notify":               {"--notify", ""},
	"ingest.Config.BadRecordLogInterval": {"--log-dead-letters", ""},
	"ingest.Sink.Table":                  {"--pg-table", "or the sink's table in --config"},

	// registry.Config
	"registry.Config.URLs":     {"--schema-registry-url", ""},
	"registry.Config.User":     {"--schema-registry-user", ""},
	"registry.Config.Password": {"--schema-registry-password", ""},
	"registry.Config.TLSCA":    {"--schema-registry-tls-ca-file", ""},
	"registry.Config.TLSCert":  {"--schema-registry-tls-cert-file", ""},
	"registry.Config.TLSKey":   {"--schema-registry-tls-key-file", ""},

	// bridge.Config
	"bridge.Config.PostgresURL":       {"--pg-url", "or set KAFKA2PG_PG_URL or DATABASE_URL"},
	"bridge.Config.PostgresMaxConns":  {"--pg-max-conns", ""},
	"bridge.Config.SkipMigrations":    {"--migrate=false", ""},
	"bridge.Config.SkipCreateTables":  {"--create-tables=false", ""},
	"bridge.Config.UntilCaughtUp":     {"--until-caught-up", ""},
	"bridge.Config.CaughtUpTimeout":   {"--caught-up-timeout", ""},
	"bridge.Config.ReadyStallTimeout": {"--ready-stall-timeout", ""},
	"bridge.Config.ProgressInterval":  {"--progress-interval", ""},

	"admin.InferRequest.Topic":   {"--topic", ""},
	"admin.InferRequest.Sample":  {"--sample", ""},
	"admin.InferRequest.Timeout": {"--timeout", ""},
	"admin.InferRequest.Table":   {"--pg-table", ""},
	"admin.InferRequest.Mode":    {"--mode", ""},
	"admin.InferRequest.KeyPath": {"--key-path", ""},
	"admin.InferRequest.Nested":  {"--nested", ""},
}

// fieldPath finds the path of a library's configuration field in text.
var fieldPath = regexp.MustCompile(`\b(?:reader|ingest|bridge|registry|admin)\.(?:Config|Security|Sink|InferRequest)\.[A-Z][A-Za-z0-9]*`)

// cliMessage is err as the command's user reads it: each
// *stream.FieldError in it under its field's flag, and the flags of the
// fields the rest of the text mentions beside it.
func cliMessage(err error) string {
	if err == nil {
		return ""
	}
	s := renderFields(err)
	return s + flagHint(s)
}

// renderFields is err's text with each *stream.FieldError in its tree
// written under its field's flag (cliField). A wrapper's text holds the
// text of what it wraps, which is replaced by that error's rendering; a
// wrapper that rewrote its text (a redaction) keeps it.
func renderFields(err error) string {
	if fe, ok := err.(*stream.FieldError); ok {
		return cliField(fe)
	}
	text := err.Error()
	var children []error
	switch u := err.(type) {
	case interface{ Unwrap() error }:
		children = []error{u.Unwrap()}
	case interface{ Unwrap() []error }:
		children = u.Unwrap()
	}
	for _, c := range children {
		if c == nil {
			continue
		}
		if r, own := renderFields(c), c.Error(); r != own {
			text = strings.Replace(text, own, r, 1)
		}
	}
	return text
}

// cliField is a *stream.FieldError as the command's user reads it: its
// flag for its field (the field's path when the command has no flag for
// it, as a sinks file's key), and the flags for the fields its message
// names.
func cliField(fe *stream.FieldError) string {
	f, ok := cliFields[fe.Field]
	name := fe.Field
	if ok {
		name = f.flag
	}
	msg := fieldPath.ReplaceAllStringFunc(renderFields(fe.Err), func(path string) string {
		if f, ok := cliFields[path]; ok {
			return f.flag
		}
		return path
	})
	if f.also != "" {
		msg += " (" + f.also + ")"
	}
	return (&stream.FieldError{Field: name, Line: fe.Line, Err: errors.New(msg)}).Error()
}

// flagsIn are the flags of the fields text mentions, once each, in order.
func flagsIn(text string) []string {
	var flags []string
	for _, path := range fieldPath.FindAllString(text, -1) {
		f, ok := cliFields[path]
		if !ok {
			continue
		}
		flag := f.flag
		if f.also != "" {
			flag += ", " + f.also
		}
		if !slices.Contains(flags, flag) {
			flags = append(flags, flag)
		}
	}
	return flags
}

// flagHint is what follows a text that mentions fields: " (flag: --x)",
// or nothing.
func flagHint(text string) string {
	switch flags := flagsIn(text); len(flags) {
	case 0:
		return ""
	case 1:
		return " (flag: " + flags[0] + ")"
	default:
		return " (flags: " + strings.Join(flags, "; ") + ")"
	}
}

// cliLogHandler is the command's log handler: it writes an error
// attribute as cliMessage does, and adds a flag attribute to a line whose
// message or attributes mention fields.
type cliLogHandler struct{ slog.Handler }

func (h cliLogHandler) Handle(ctx context.Context, r slog.Record) error {
	out := slog.NewRecord(r.Time, r.Level, r.Message, r.PC)
	text := []string{r.Message}
	r.Attrs(func(a slog.Attr) bool {
		if err, ok := a.Value.Any().(error); ok && a.Value.Kind() == slog.KindAny {
			a = slog.String(a.Key, renderFields(err))
		}
		if a.Value.Kind() == slog.KindString {
			text = append(text, a.Value.String())
		}
		out.AddAttrs(a)
		return true
	})
	if flags := flagsIn(strings.Join(text, "\n")); len(flags) > 0 {
		out.AddAttrs(slog.String("flag", strings.Join(flags, "; ")))
	}
	return h.Handler.Handle(ctx, out)
}

func (h cliLogHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return cliLogHandler{h.Handler.WithAttrs(attrs)}
}

func (h cliLogHandler) WithGroup(name string) slog.Handler {
	return cliLogHandler{h.Handler.WithGroup(name)}
}
