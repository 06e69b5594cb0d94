package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/pflag"

	"github.com/kafka2pg/kafka2pg/decode"
	"github.com/kafka2pg/kafka2pg/ingest"
	"github.com/kafka2pg/kafka2pg/registry"
)

// registryOptions are the Schema Registry flags of `run` (and `check`):
// where the schemas of format avro, protobuf and json_schema sinks come from. Like every
// run flag, each is also a config-file key and a KAFKA2PG_* variable.
type registryOptions struct {
	urls         []string
	user         string
	password     string
	passwordFile string
	tlsCA        string
	tlsCert      string
	tlsKey       string
	// schemas is the client, set by connectRegistry when a sink needs it.
	schemas *registrySchemas
}

func defineRegistryFlags(fs *pflag.FlagSet, r *registryOptions) {
	fs.StringSliceVar(&r.urls, "schema-registry-url", nil, "registry URL(s) for avro, protobuf and json_schema sinks")
	fs.StringVar(&r.user, "schema-registry-user", "", "basic-auth user")
	fs.StringVar(&r.password, "schema-registry-password", "", "basic-auth password; better in the environment or a file")
	fs.StringVar(&r.passwordFile, "schema-registry-password-file", "", "file holding the basic-auth password")
	fs.StringVar(&r.tlsCA, "schema-registry-tls-ca-file", "", "PEM file of the registry's CAs (default: the system's)")
	fs.StringVar(&r.tlsCert, "schema-registry-tls-cert-file", "", "PEM client certificate, for mutual TLS")
	fs.StringVar(&r.tlsKey, "schema-registry-tls-key-file", "", "PEM key of --schema-registry-tls-cert-file")
}

// config is the registry.Config of the flags; it reads the password file.
func (r registryOptions) config() (registry.Config, error) {
	cfg := registry.Config{URLs: r.urls, User: r.user, Password: r.password, TLSCA: r.tlsCA, TLSCert: r.tlsCert, TLSKey: r.tlsKey}
	if r.passwordFile != "" {
		if r.password != "" {
			return cfg, errors.New("--schema-registry-password and --schema-registry-password-file are both set: give one")
		}
		b, err := os.ReadFile(r.passwordFile)
		if err != nil {
			return cfg, fmt.Errorf("--schema-registry-password-file: %w", err)
		}
		cfg.Password = strings.TrimSuffix(strings.TrimSuffix(string(b), "\n"), "\r")
	}
	return cfg, cfg.Validate()
}

// registryFormat reports whether a sink format reads the Confluent wire
// format with schemas from the registry.
func registryFormat(format string) bool {
	_, err := decode.ParseFormat(format)
	return err == nil
}

// registrySchemas is the registry as the sinks use it: a client bound to
// the lifetime of the command that created it (run's or check's context),
// so lookups from Row, which has no context, end with the command.
type registrySchemas struct {
	ctx    context.Context
	client *registry.Client
}

// connectRegistry creates the registry client when a sink needs one. It
// does not contact the registry: building the sinks does.
func (o *runOptions) connectRegistry(ctx context.Context) error {
	needed := false
	for _, sc := range o.sinks {
		needed = needed || registryFormat(sc.Format) || (changeFormat(sc.Format) && registryFormat(sc.ValueFormat))
	}
	if !needed {
		return nil
	}
	cfg, err := o.registry.config()
	if err != nil {
		return err
	}
	c, err := registry.New(cfg)
	if err != nil {
		return err
	}
	o.registry.schemas = &registrySchemas{ctx: ctx, client: c}
	return nil
}

// versions fetches every version of a subject, naming the sink's key in
// its error.
func (s *registrySchemas) versions(subject, key string) ([]decode.RegisteredSchema, error) {
	vs, err := s.client.Versions(s.ctx, subject)
	switch {
	case errors.Is(err, registry.ErrSubjectNotFound):
		return nil, fmt.Errorf("%s %q is not in the schema registry: register the schema first, or set the sink's %s", key, subject, key)
	case err != nil:
		return nil, fmt.Errorf("%s %q: %w", key, subject, err)
	case len(vs) == 0:
		return nil, fmt.Errorf("%s %q has no versions: register a schema first", key, subject)
	}
	return vs, nil
}

// buildRegistrySink builds the sink of a format avro or protobuf sink:
// its table is the fold of the subject's versions (<topic>-value, or
// subject), its key columns come from <topic>-key (or key_subject) in
// upsert mode or when key_subject is set. Without a registry connection
// (validation before anything connects) it checks the config alone and
// returns ok false.
func buildRegistrySink(o *runOptions, sc sinkConfig, schemaName, table, mode string, noCreate bool) (sink ingest.Sink, ok bool, err error) {
	switch {
	case len(sc.Columns) > 0:
		return sink, false, fmt.Errorf("columns with format %s: the columns come from the registry's schema; drop columns (metadata columns stay allowed)", sc.Format)
	case len(o.registry.urls) == 0:
		return sink, false, fmt.Errorf("format %s needs a Schema Registry: set --schema-registry-url (or schema-registry-url in the config file)", sc.Format)
	case mode == "upsert" && len(sc.Key) == 0:
		return sink, false, errors.New("mode upsert needs key: the columns that identify a row (the key's fields are key_<field>, or key)")
	case mode != "upsert" && (len(sc.Key) > 0 || sc.DeleteOnTombstone):
		return sink, false, errors.New("key and delete_on_tombstone need mode: upsert")
	}
	format, _ := decode.ParseFormat(sc.Format) // a registry format: the caller asked registryFormat
	var nested decode.Nested
	if sc.Nested != "" {
		var err error
		if nested, err = decode.ParseNested(sc.Nested); err != nil {
			return sink, false, fmt.Errorf("nested %q is not flatten or jsonb", sc.Nested)
		}
	}
	if sc.Message != "" && format != decode.FormatProtobuf {
		return sink, false, fmt.Errorf("message %q is for format protobuf: remove it", sc.Message)
	}
	if _, err := o.registry.config(); err != nil {
		return sink, false, err
	}
	if o.registry.schemas == nil {
		return sink, false, nil
	}
	subject := sc.Subject
	if subject == "" {
		subject = sc.Topic + "-value"
	}
	value, err := o.registry.schemas.versions(subject, "subject")
	if err != nil {
		return sink, false, err
	}
	var key []decode.RegisteredSchema
	if mode == "upsert" || sc.KeySubject != "" {
		ks := sc.KeySubject
		if ks == "" {
			ks = sc.Topic + "-key"
		}
		if key, err = o.registry.schemas.versions(ks, "key_subject"); err != nil {
			return sink, false, err
		}
	}
	m, err := decode.NewRegistryMapper(decode.RegistryMappingSpec{Format: format, Schema: schemaName, Table: table,
		Value: value, Key: key, Message: sc.Message, Nested: nested, KeyColumns: sc.Key, DeleteOnTombstone: sc.DeleteOnTombstone,
		Lookup: o.registry.schemas.client.Lookup(), Metadata: metadataSpec(sc.Metadata)})
	if err != nil {
		return sink, false, fmt.Errorf("subject %q: %w", subject, err)
	}
	sink = ingest.Sink{Table: m.Table(), Mapper: m, NoCreate: noCreate, Evolve: true}
	if mode == "upsert" {
		sink.Upsert = &ingest.Upsert{Key: m.KeyColumns(), DeleteOnTombstone: sc.DeleteOnTombstone}
	}
	return sink, true, nil
}
