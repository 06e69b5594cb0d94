package main

import (
	"errors"
	"fmt"
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/spf13/pflag"
	"go.yaml.in/yaml/v3"

	"github.com/kafka2pg/kafka2pg/sinks"
)

// The YAML config file (--config): every run flag is also a top-level key
// of the same name (kafka-brokers: [...], pg-url: ..., batch-max-rows: ...),
// and `sinks` describes many topics → many tables. Precedence: command-line
// flags, then KAFKA2PG_* environment variables, then the file. Any string
// value may say ${NAME} to take the environment variable NAME (secrets stay
// out of the file); in a sink's table and schema, `${topic}`, `${topic.N}`
// and the topic_regex's named groups are parts of the topic instead
// (package sinks).
// Unknown keys are errors with their line number.

// fileConfig is the parsed file.
type fileConfig struct {
	path  string
	flags map[string]flagValue // flag name → value, with its line
	sinks []sinks.Sink
}

type flagValue struct {
	line   int
	values []string // one for scalars, several for lists
}

var envRef = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)\}`)

// expandEnv replaces ${NAME} with the environment variable NAME; ${topic}
// and the names in keep (a sink's named groups) are kept for table
// templates. A variable that is not set is an error.
func expandEnv(s, where string, keep ...string) (string, error) {
	var missing []string
	out := envRef.ReplaceAllStringFunc(s, func(m string) string {
		name := envRef.FindStringSubmatch(m)[1]
		if name == "topic" || slices.Contains(keep, name) {
			return m
		}
		v, ok := os.LookupEnv(name)
		if !ok {
			missing = append(missing, name)
		}
		return v
	})
	if len(missing) > 0 {
		return "", fmt.Errorf("%s refers to ${%s}, which is not set in the environment: set it, or write the value", where, strings.Join(missing, "}, ${"))
	}
	return out, nil
}

// loadConfig reads and checks the file against the flags it may set.
func loadConfig(path string, fs *pflag.FlagSet) (*fileConfig, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--config: %w", err)
	}
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return nil, fmt.Errorf("--config %s: %w", path, err)
	}
	cfg := &fileConfig{path: path, flags: map[string]flagValue{}}
	if len(root.Content) == 0 {
		return cfg, nil
	}
	doc := root.Content[0]
	if doc.Kind != yaml.MappingNode {
		return nil, fmt.Errorf("--config %s: line %d: the file must be a mapping of keys to values", path, doc.Line)
	}
	var errs []error
	for i := 0; i+1 < len(doc.Content); i += 2 {
		k, v := doc.Content[i], doc.Content[i+1]
		at := fmt.Sprintf("%s:%d: %s", path, k.Line, k.Value)
		switch {
		case k.Value == "sinks":
			list, err := decodeSinks(v, path)
			if err != nil {
				errs = append(errs, err)
			}
			cfg.sinks = list
		case k.Value == "config" || fs.Lookup(k.Value) == nil:
			errs = append(errs, fmt.Errorf("%s: unknown key: use a run flag's name (see kafka2pg run --help) or sinks", at))
		default:
			fv := flagValue{line: k.Line}
			switch v.Kind {
			case yaml.ScalarNode:
				fv.values = []string{v.Value}
			case yaml.SequenceNode:
				for _, item := range v.Content {
					if item.Kind != yaml.ScalarNode {
						errs = append(errs, fmt.Errorf("%s: line %d: a list of plain values is expected", at, item.Line))
						continue
					}
					fv.values = append(fv.values, item.Value)
				}
			default:
				errs = append(errs, fmt.Errorf("%s: a value or a list of values is expected", at))
				continue
			}
			for j, s := range fv.values {
				x, err := expandEnv(s, at)
				if err != nil {
					errs = append(errs, err)
				}
				fv.values[j] = x
			}
			cfg.flags[k.Value] = fv
		}
	}
	return cfg, errors.Join(errs...)
}

func decodeSinks(v *yaml.Node, path string) ([]sinks.Sink, error) {
	if v.Kind != yaml.SequenceNode {
		return nil, fmt.Errorf("%s:%d: sinks must be a list", path, v.Line)
	}
	var out []sinks.Sink
	var errs []error
	for _, item := range v.Content {
		var s sinks.Sink
		if err := item.Decode(&s); err != nil {
			errs = append(errs, fileErrors(path, err))
			continue
		}
		for _, f := range []*string{&s.Topic, &s.TopicRegex, &s.Format, &s.Mode, &s.Subject, &s.KeySubject, &s.ValueFormat} {
			x, err := expandEnv(*f, fmt.Sprintf("%s:%d", path, item.Line))
			if err != nil {
				errs = append(errs, err)
			}
			*f = x
		}
		// In the name templates, the topic_regex's named groups are
		// the topic's parts, not environment variables.
		groups := s.Groups()
		for _, f := range []*string{&s.Table, &s.Schema} {
			x, err := expandEnv(*f, fmt.Sprintf("%s:%d", path, item.Line), groups...)
			if err != nil && s.TopicRegex != "" {
				err = fmt.Errorf("%w, or name a group (?P<NAME>...) of topic_regex (it has %q)", err, groups)
			}
			if err != nil {
				errs = append(errs, err)
			}
			*f = x
		}
		out = append(out, s)
	}
	return out, errors.Join(errs...)
}

// fileErrors are the errors of decoding a sink of the file at path, each
// naming the file and its line.
func fileErrors(path string, err error) error {
	return mapErrors(err, func(err error) error {
		var fe *sinks.FieldError
		if errors.As(err, &fe) && fe.Line > 0 {
			return fmt.Errorf("%s:%d: %w", path, fe.Line, fe.Err)
		}
		return fmt.Errorf("%s: %w", path, err)
	})
}

// mapErrors applies f to each error that err joins (to err itself when it
// joins none).
func mapErrors(err error, f func(error) error) error {
	j, ok := err.(interface{ Unwrap() []error })
	if !ok {
		return f(err)
	}
	var out []error
	for _, e := range j.Unwrap() {
		out = append(out, mapErrors(e, f))
	}
	return errors.Join(out...)
}

// apply sets every flag that neither the command line nor the environment
// set from the file.
func (c *fileConfig) apply(fs *pflag.FlagSet) error {
	names := make([]string, 0, len(c.flags))
	for n := range c.flags {
		names = append(names, n)
	}
	sort.Strings(names)
	var errs []error
	for _, name := range names {
		current := name
		if to := aliasTarget(fs.Lookup(name)); to != "" {
			current = to
			if fv, both := c.flags[to]; both {
				errs = append(errs, fmt.Errorf("%s:%d: %s is the old name of %s, which line %d sets: keep %s", c.path, c.flags[name].line, name, to, fv.line, to))
				continue
			}
		}
		if given(fs, current) {
			continue
		}
		fv := c.flags[name]
		if err := fs.Set(name, strings.Join(fv.values, ",")); err != nil {
			errs = append(errs, fmt.Errorf("%s:%d: %s: %v", c.path, fv.line, name, err))
		}
	}
	return errors.Join(errs...)
}
