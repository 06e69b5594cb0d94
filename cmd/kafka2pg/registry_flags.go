package main

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/pflag"

	"github.com/kafka2pg/kafka2pg/registry"
)

// registryOptions are the Schema Registry flags of `run` (and `check`):
// where the schemas of format avro, protobuf and json_schema sinks come
// from. Like every run flag, each is also a config-file key and a
// KAFKA2PG_* variable.
type registryOptions struct {
	urls         []string
	user         string
	password     string
	passwordFile string
	tlsCA        string
	tlsCert      string
	tlsKey       string
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

// connectRegistry is the registry client of the sinks, nil when none
// needs one. It does not contact the registry: building the sinks does.
func (o *runOptions) connectRegistry() (*registry.Client, error) {
	if !o.sinkConfig().NeedsRegistry() {
		return nil, nil
	}
	cfg, err := o.registry.config()
	if err != nil {
		return nil, err
	}
	return registry.New(cfg)
}
