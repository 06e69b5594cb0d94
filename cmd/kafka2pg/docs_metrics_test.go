package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kafka2pg/kafka2pg/bridge"
)

// renamedMetrics are the metric names this version changed, old → new; the
// reference lists them, and a test checks that no old name is exported.
var renamedMetrics = []struct{ old, new, why string }{
	{"kafka2pg_kafka_buffered_fetch_records_total", "kafka2pg_kafka_buffered_fetch_records",
		"a gauge: `_total` is for counters"},
	{"kafka2pg_kafka_buffered_produce_records_total", "", "a producer's; kafka2pg only consumes, it was always 0"},
	{"kafka2pg_kafka_buffered_produce_bytes", "", "a producer's; kafka2pg only consumes, it was always 0"},
}

// bridgeMetricFamilies lists every metric kafka2pg run exports: the
// bridge's and the process's (registerProcessMetrics).
func bridgeMetricFamilies(ctx context.Context) ([]bridge.MetricFamily, error) {
	reg := prometheus.NewRegistry()
	return bridge.MetricFamilies(ctx, reg, registerProcessMetrics(reg)...)
}

// metricSubsystems are the sections of the reference, by name prefix.
var metricSubsystems = []struct{ prefix, title, about string }{
	{"kafka2pg_ingest_", "Ingest: the writes to Postgres",
		"Per table (`schema.table`, as `public.orders`); they exist at zero from the start for the sinks' tables, and from its first batch for a table of a `topic_regex` sink."},
	{"kafka2pg_end_to_end_", "Latency", ""},
	{"kafka2pg_reader_", "Reader: the Kafka side", "`topic` and `partition` series exist while this instance owns the partition."},
	{"kafka2pg_kafka_", "Kafka client", "franz-go's client metrics (kprom), by broker (`node_id`); a consumer's only."},
	{"kafka2pg_pg_", "Postgres pool", ""},
	{"kafka2pg_config_", "Configuration", "The running configuration's generation and its reloads (SIGHUP, `--config-watch`); see docs/CONFIGURATION.md, Reloading the configuration."},
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
	fmt.Fprintf(&b, generatedNote, "the bridge's metrics registry", "the metrics in bridge/internal/metrics and cmd/kafka2pg/metrics.go")
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
		var rows []bridge.MetricFamily
		for _, f := range families {
			if !placed[f.Name] && strings.HasPrefix(f.Name, s.prefix) {
				rows = append(rows, f)
				placed[f.Name] = true
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
			if len(f.Labels) > 0 {
				labels = "`" + strings.Join(f.Labels, "`, `") + "`"
			}
			fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", f.Name, f.Type, labels, mdCell(f.Help))
		}
	}
	return b.String(), nil
}
