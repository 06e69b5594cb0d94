package main

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kafka2pg/kafka2pg/internal/metrics"
)

// metricFamily is one metric of the reference page.
type metricFamily struct {
	name, typ, help string
	labels          []string
}

// renamedMetrics are the metric names this version changed, old → new; the
// reference lists them, and a test checks that no old name is exported.
var renamedMetrics = []struct{ old, new, why string }{
	{"kafka2pg_kafka_buffered_fetch_records_total", "kafka2pg_kafka_buffered_fetch_records",
		"a gauge: `_total` is for counters"},
	{"kafka2pg_kafka_buffered_produce_records_total", "", "a producer's; kafka2pg only consumes, it was always 0"},
	{"kafka2pg_kafka_buffered_produce_bytes", "", "a producer's; kafka2pg only consumes, it was always 0"},
}

// bridgeMetricFamilies lists every metric a running bridge exports, from
// a registry as run has it (metrics.Sample and the process's): the
// descriptors of every registered collector, typed by what the registry
// gathers, or by the vector's type.
func bridgeMetricFamilies(ctx context.Context) ([]metricFamily, error) {
	reg := prometheus.NewRegistry()
	m, closeAll, err := metrics.Sample(ctx, reg)
	if err != nil {
		return nil, err
	}
	defer closeAll()
	registered := append(m.Registered(), registerProcessMetrics(reg)...)
	gathered, err := reg.Gather()
	if err != nil {
		return nil, fmt.Errorf("gather the metrics: %w", err)
	}
	types := map[string]string{}
	for _, mf := range gathered {
		types[mf.GetName()] = strings.ToLower(mf.GetType().String())
	}
	var out []metricFamily
	var errs []error
	seen := map[string]bool{}
	for _, c := range registered {
		for _, d := range metrics.Describe(c) {
			name, help := metrics.DescNameHelp(d)
			if name == "" || seen[name] || strings.HasPrefix(name, "go_") || strings.HasPrefix(name, "process_") {
				continue
			}
			seen[name] = true
			typ := cmpOr(types[name], vecType(c))
			if typ == "" {
				errs = append(errs, fmt.Errorf("metric %s: no type: it exports no series here and its collector (%T) is not a vector", name, c))
			}
			out = append(out, metricFamily{name: name, typ: typ, help: help, labels: descLabels(d)})
		}
	}
	slices.SortFunc(out, func(a, b metricFamily) int { return strings.Compare(a.name, b.name) })
	return out, errors.Join(errs...)
}

// vecType is the type of a vector's metrics.
func vecType(c prometheus.Collector) string {
	switch c.(type) {
	case *prometheus.CounterVec:
		return "counter"
	case *prometheus.GaugeVec:
		return "gauge"
	case *prometheus.HistogramVec:
		return "histogram"
	case *prometheus.SummaryVec:
		return "summary"
	}
	return ""
}

// descLabelLists reads the label lists of prometheus.Desc's String:
// constLabels: {a="x",b="y"}, variableLabels: {c,d}.
var descLabelLists = regexp.MustCompile(`constLabels: \{(.*)\}, variableLabels: \{(.*)\}\}$`)

// descLabels lists a descriptor's label names, constant ones first.
func descLabels(d *prometheus.Desc) []string {
	m := descLabelLists.FindStringSubmatch(d.String())
	if m == nil {
		return nil
	}
	var out []string
	for _, pair := range regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)="`).FindAllStringSubmatch(m[1], -1) {
		out = append(out, pair[1])
	}
	for _, l := range strings.Split(m[2], ",") {
		if l = strings.TrimSuffix(strings.TrimPrefix(l, "c("), ")"); l != "" {
			out = append(out, l)
		}
	}
	return out
}

// metricSubsystems are the sections of the reference, by name prefix.
var metricSubsystems = []struct{ prefix, title, about string }{
	{"kafka2pg_ingest_", "Ingest: the writes to Postgres",
		"Per table (`schema.table`, as `public.orders`); they exist at zero from the start for the sinks' tables, and from its first batch for a table of a `topic_regex` sink."},
	{"kafka2pg_end_to_end_", "Latency", ""},
	{"kafka2pg_reader_", "Reader: the Kafka side", "`topic` and `partition` series exist while this instance owns the partition."},
	{"kafka2pg_kafka_", "Kafka client", "franz-go's client metrics (kprom), by broker (`node_id`); a consumer's only."},
	{"kafka2pg_pg_", "Postgres pool", ""},
	{"kafka2pg_", "Process and build", ""},
}

// metricsReference renders docs/METRICS.md.
func metricsReference(ctx context.Context) (string, error) {
	families, err := bridgeMetricFamilies(ctx)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	b.WriteString("# Metrics reference\n\n")
	fmt.Fprintf(&b, generatedNote, "the bridge's metrics registry", "the metrics in internal/metrics and cmd/kafka2pg/metrics.go")
	b.WriteString(`
` + "`kafka2pg run`" + ` serves these at ` + "`/metrics`" + ` on ` + "`--metrics-addr`" + ` (127.0.0.1:9187 by default), with
the Go runtime's (` + "`go_*`" + `) and the process's (` + "`process_*`" + `) of client_golang's standard collectors.
Names follow ` + "`kafka2pg_<subsystem>_<name>_<unit>`" + `; histogram bounds are round numbers (seconds:
1, 2.5 and 5 times the powers of ten). deploy/grafana/kafka2pg.json charts them.

## Renamed in this version

A dashboard or an alert that uses an old name or label value needs the new one.

| old | new | why |
|---|---|---|
`)
	for _, r := range renamedMetrics {
		newName := "removed"
		if r.new != "" {
			newName = "`" + r.new + "`"
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s |\n", r.old, newName, r.why)
	}
	b.WriteString("| label `table=\"\\\"public\\\".\\\"orders\\\"\"` | `table=\"public.orders\"` | the table's name as a reader writes it, without SQL quotes |\n")
	b.WriteString("| label `cause=\"postgres_unavailable\"` of `kafka2pg_ingest_write_errors_total` | `connection`, `timeout`, `read_only`, `refused` or `data` | what went wrong, not only that Postgres could not take the write (`other` and `stopped` stay) |\n")
	placed := map[string]bool{}
	for _, s := range metricSubsystems {
		var rows []metricFamily
		for _, f := range families {
			if !placed[f.name] && strings.HasPrefix(f.name, s.prefix) {
				rows = append(rows, f)
				placed[f.name] = true
			}
		}
		if len(rows) == 0 {
			continue
		}
		fmt.Fprintf(&b, "\n## %s\n\n", s.title)
		if s.about != "" {
			b.WriteString(s.about + "\n\n")
		}
		b.WriteString("| metric | type | labels | meaning |\n|---|---|---|---|\n")
		for _, f := range rows {
			labels := ""
			if len(f.labels) > 0 {
				labels = "`" + strings.Join(f.labels, "`, `") + "`"
			}
			fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", f.name, f.typ, labels, mdCell(f.help))
		}
	}
	return b.String(), nil
}
