package main

import (
	"errors"
	"fmt"
	"os"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/spf13/pflag"
	"go.yaml.in/yaml/v3"
)

// The YAML config file (--config): every run flag is also a top-level key
// of the same name (kafka-brokers: [...], pg-url: ..., batch-max-rows: ...),
// and `sinks` describes many topics → many tables. Precedence: command-line
// flags, then KAFKA2PG_* environment variables, then the file. Any string
// value may say ${NAME} to take the environment variable NAME (secrets stay
// out of the file); in a sink's table and schema, `${topic}`, `${topic.N}`
// and the topic_regex's named groups are parts of the topic instead
// (routing.go).
// Unknown keys are errors with their line number.

// fileConfig is the parsed file.
type fileConfig struct {
	path  string
	flags map[string]flagValue // flag name → value, with its line
	sinks []sinkConfig
}

type flagValue struct {
	line   int
	values []string // one for scalars, several for lists
}

// sinkConfig is one entry of `sinks`.
type sinkConfig struct {
	Line              int            `yaml:"-"`
	Topic             string         `yaml:"topic"`
	TopicRegex        string         `yaml:"topic_regex"`
	Table             string         `yaml:"table"`
	Schema            string         `yaml:"schema"`
	Format            string         `yaml:"format"`
	Mode              string         `yaml:"mode"`
	Key               []string       `yaml:"key"`
	DeleteOnTombstone bool           `yaml:"delete_on_tombstone"`
	Create            *bool          `yaml:"create"`
	Evolve            bool           `yaml:"evolve"`
	Columns           []columnConfig `yaml:"columns"`
	Metadata          metadataConfig `yaml:"metadata"`
	// Formats avro, protobuf and json_schema only (registry_flags.go).
	Subject    string `yaml:"subject"`     // the value's subject; default <topic>-value
	KeySubject string `yaml:"key_subject"` // the key's subject; default <topic>-key in upsert mode
	Nested     string `yaml:"nested"`      // flatten (default) or jsonb
	Message    string `yaml:"message"`     // the Protobuf message; default the first
	// Formats debezium and connect_json only (sinks_cdc.go).
	ValueFormat      string       `yaml:"value_format"`      // debezium: json (default), avro or protobuf
	Source           sourceConfig `yaml:"source"`            // debezium: columns of the envelope's source block
	UnavailableValue string       `yaml:"unavailable_value"` // the connector's unavailable.value.placeholder
}

// sourceConfig names the columns of a debezium sink that receive the
// envelope's source metadata; each key left out is no column.
type sourceConfig struct {
	Table     string `yaml:"table"`
	Position  string `yaml:"position"`
	TxID      string `yaml:"txid"`
	Timestamp string `yaml:"timestamp"`
	Op        string `yaml:"op"`
}

type columnConfig struct {
	Name      string  `yaml:"name"`
	Path      string  `yaml:"path"`
	Type      string  `yaml:"type"`
	From      string  `yaml:"from"`
	TimeUnit  string  `yaml:"time_unit"`
	NotNull   bool    `yaml:"not_null"`
	Default   *string `yaml:"default"`
	OnMissing string  `yaml:"on_missing"`
	// Connect is the Connect type of a debezium or connect_json column's
	// values in records without a schema (io.debezium.time.MicroTimestamp).
	Connect string `yaml:"connect"`
}

type metadataConfig struct {
	Topic         string            `yaml:"topic"`
	Partition     string            `yaml:"partition"`
	Offset        string            `yaml:"offset"`
	Timestamp     string            `yaml:"timestamp"`
	TimestampType string            `yaml:"timestamp_type"`
	Key           string            `yaml:"key"`
	KeyFormat     string            `yaml:"key_format"`
	Headers       string            `yaml:"headers"`
	Header        map[string]string `yaml:"header"`
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
			sinks, err := decodeSinks(v, path)
			if err != nil {
				errs = append(errs, err)
			}
			cfg.sinks = sinks
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

func decodeSinks(v *yaml.Node, path string) ([]sinkConfig, error) {
	if v.Kind != yaml.SequenceNode {
		return nil, fmt.Errorf("%s:%d: sinks must be a list", path, v.Line)
	}
	var out []sinkConfig
	var errs []error
	for _, item := range v.Content {
		if err := checkKeys(item, reflect.TypeOf(sinkConfig{}), path); err != nil {
			errs = append(errs, err)
			continue
		}
		var s sinkConfig
		if err := item.Decode(&s); err != nil {
			errs = append(errs, fmt.Errorf("%s: sink at line %d: %w", path, item.Line, err))
			continue
		}
		s.Line = item.Line
		for _, f := range []*string{&s.Topic, &s.TopicRegex, &s.Format, &s.Mode, &s.Subject, &s.KeySubject, &s.ValueFormat} {
			x, err := expandEnv(*f, fmt.Sprintf("%s:%d", path, item.Line))
			if err != nil {
				errs = append(errs, err)
			}
			*f = x
		}
		// In the name templates, the topic_regex's named groups are
		// the topic's parts, not environment variables.
		groups := groupNames(s.TopicRegex)
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

// checkKeys refuses keys of a mapping node that the struct type does not
// know, naming the line, and recurses into nested structs and lists of
// structs.
func checkKeys(n *yaml.Node, t reflect.Type, path string) error {
	if n.Kind != yaml.MappingNode {
		return fmt.Errorf("%s:%d: a mapping (key: value) is expected", path, n.Line)
	}
	fields := map[string]reflect.Type{}
	var known []string
	for i := range t.NumField() {
		tag := strings.Split(t.Field(i).Tag.Get("yaml"), ",")[0]
		if tag == "" || tag == "-" {
			continue
		}
		fields[tag] = t.Field(i).Type
		known = append(known, tag)
	}
	var errs []error
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		ft, ok := fields[k.Value]
		if !ok {
			errs = append(errs, fmt.Errorf("%s:%d: unknown key %q: use one of %s", path, k.Line, k.Value, strings.Join(known, ", ")))
			continue
		}
		switch {
		case ft.Kind() == reflect.Struct:
			errs = append(errs, checkKeys(v, ft, path))
		case ft.Kind() == reflect.Slice && ft.Elem().Kind() == reflect.Struct && v.Kind == yaml.SequenceNode:
			for _, item := range v.Content {
				errs = append(errs, checkKeys(item, ft.Elem(), path))
			}
		}
	}
	return errors.Join(errs...)
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
