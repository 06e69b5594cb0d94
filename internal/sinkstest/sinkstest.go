// Package sinkstest builds sinks from the YAML of a test, failing the test
// on an error, for the tests of every package that writes through sinks.
package sinkstest

import (
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/kafka2pg/kafka2pg/sinks"
)

// Config decodes a sinks configuration.
func Config(t testing.TB, yml string) sinks.Config {
	t.Helper()
	var cfg sinks.Config
	if err := yaml.Unmarshal([]byte(yml), &cfg); err != nil {
		t.Fatalf("%v\n%s", err, yml)
	}
	return cfg
}

// Build decodes and builds a sinks configuration without a registry, and
// returns the set and the configuration it was built from.
func Build(t testing.TB, yml string) (sinks.Set, sinks.Config) {
	t.Helper()
	cfg := Config(t, yml)
	set, err := cfg.Build(t.Context(), nil)
	if err != nil {
		t.Fatalf("%v\n%s", err, yml)
	}
	return set, cfg
}
