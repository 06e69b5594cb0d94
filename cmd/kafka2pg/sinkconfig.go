package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/kafka2pg/kafka2pg/sinks"
)

// sinkConfig is the sinks.Config of o: the config file's sinks or,
// without any, the zero-config sink of each --topic, into --pg-table or
// the topic's table, its values as --value-format says.
func (o *runOptions) sinkConfig() sinks.Config {
	cfg := sinks.Config{Sinks: o.sinks, Schema: o.pgSchema}
	if len(o.sinks) == 0 {
		for _, topic := range o.cfg.Kafka.Topics {
			cfg.Sinks = append(cfg.Sinks, sinks.Sink{Topic: topic, Table: o.table, Format: o.valueFormat.String()})
		}
	}
	return cfg
}

// checkSinks checks the sinks before anything connects: all of them,
// those of the schema registry without it (the registry flags must be
// there for them).
func (o *runOptions) checkSinks() error {
	cfg := o.sinkConfig()
	var errs []error
	if cfg.NeedsRegistry() {
		if len(o.registry.urls) == 0 {
			for i, s := range cfg.Sinks {
				if !s.NeedsRegistry() {
					continue
				}
				what := "format " + s.Format
				if s.Format == "debezium" {
					what = "value_format " + s.ValueFormat
				}
				errs = append(errs, &sinks.FieldError{Field: fmt.Sprintf("sinks[%d]", i), Line: s.Line,
					Err: fmt.Errorf("%s needs a Schema Registry: set --schema-registry-url (or schema-registry-url in the config file)", what)})
			}
		} else if _, err := o.registry.config(); err != nil {
			errs = append(errs, err)
		}
	}
	if err := cfg.Validate(); err != nil {
		if j, ok := err.(interface{ Unwrap() []error }); ok {
			errs = append(errs, j.Unwrap()...)
		} else {
			errs = append(errs, err)
		}
	}
	// In the order of the file, each sink's errors together.
	slices.SortStableFunc(errs, func(a, b error) int { return cmp.Compare(errorLine(a), errorLine(b)) })
	return o.sinkError(errors.Join(errs...))
}

// errorLine is the line a *sinks.FieldError names, 0 for another error.
func errorLine(err error) int {
	var fe *sinks.FieldError
	if errors.As(err, &fe) {
		return fe.Line
	}
	return 0
}

// buildSinks builds the sinks, reading the schema registry with ctx for
// those that need it: once per command. The set holds the sinks that
// built when some did not (check reports the rest).
func (o *runOptions) buildSinks(ctx context.Context) (sinks.Set, error) {
	reg, err := o.connectRegistry()
	if err != nil {
		return sinks.Set{}, err
	}
	set, err := o.sinkConfig().Build(ctx, reg)
	return set, o.sinkError(err)
}

// sinkError is an error of package sinks as the command's user reads it:
// each *sinks.FieldError names the config file, and the sink by its topic
// and line.
func (o *runOptions) sinkError(err error) error {
	if err == nil {
		return nil
	}
	cfg := o.sinkConfig()
	return mapErrors(err, func(err error) error {
		var fe *sinks.FieldError
		var i int
		if !errors.As(err, &fe) {
			return err
		}
		if _, scan := fmt.Sscanf(fe.Field, "sinks[%d]", &i); scan != nil || i >= len(cfg.Sinks) {
			return err
		}
		sc := cfg.Sinks[i]
		switch {
		case o.configPath == "":
			return fmt.Errorf("--topic %s: %w", sc.Topic, fe.Err)
		case strings.HasSuffix(fe.Field, "].topic"):
			return fmt.Errorf("--config %s: line %d: %w", o.configPath, sc.Line, fe.Err)
		}
		sink := fmt.Sprintf("sink of topic %q", sc.Topic)
		if sc.TopicRegex != "" {
			sink = fmt.Sprintf("sink of topic_regex %q", sc.TopicRegex)
		}
		if _, key, ok := strings.Cut(fe.Field, "]."); ok && fe.Line != sc.Line && fe.Line > 0 {
			// The error has a line of its own (a where's): the key's.
			return fmt.Errorf("--config %s: %s at line %d: %s at line %d: %w", o.configPath, sink, sc.Line, key, fe.Line, fe.Err)
		}
		return fmt.Errorf("--config %s: %s at line %d: %w", o.configPath, sink, sc.Line, fe.Err)
	})
}

// offlineSinks are the sinks of a command that works on what run wrote
// (dead-letters replay, offsets reset), built as run builds them: the
// config's, or, without sinks in it, the zero-config sink of each of
// topics unless --topic named them.
func offlineSinks(ctx context.Context, o *runOptions, topics []string) (sinks.Set, error) {
	if len(o.sinks) == 0 && len(o.cfg.Kafka.Topics) == 0 {
		o.cfg.Kafka.Topics = topics // as run with --topic for each
	}
	return o.buildSinks(ctx)
}
