package bridge

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kafka2pg/kafka2pg/bridge/internal/metrics"
)

// MetricFamily is one metric a running bridge exports: its name, its
// Prometheus type (counter, gauge, histogram, summary), its help and its
// label names, constant ones first.
type MetricFamily struct {
	Name, Type, Help string
	Labels           []string
}

// MetricFamilies lists every metric a running bridge exports, sorted by
// name, for a reference page or a dashboard check. It registers a sample
// bridge's collectors in reg, which touch no broker and no database; also
// are collectors the caller registered in reg itself (a process's own
// metrics), listed beside the bridge's. The go_ and process_ families of
// client_golang's standard collectors are left out.
func MetricFamilies(ctx context.Context, reg *prometheus.Registry, also ...prometheus.Collector) ([]MetricFamily, error) {
	m, closeAll, err := metrics.Sample(ctx, reg)
	if err != nil {
		return nil, err
	}
	defer closeAll()
	registered := append(m.Registered(), also...)
	gathered, err := reg.Gather()
	if err != nil {
		return nil, fmt.Errorf("gather the metrics: %w", err)
	}
	types := map[string]string{}
	for _, mf := range gathered {
		types[mf.GetName()] = strings.ToLower(mf.GetType().String())
	}
	var out []MetricFamily
	var errs []error
	seen := map[string]bool{}
	for _, c := range registered {
		for _, d := range metrics.Describe(c) {
			name, help := metrics.DescNameHelp(d)
			if name == "" || seen[name] || strings.HasPrefix(name, "go_") || strings.HasPrefix(name, "process_") {
				continue
			}
			seen[name] = true
			typ := cmp.Or(types[name], vecType(c))
			if typ == "" {
				errs = append(errs, fmt.Errorf("metric %s: no type: it exports no series here and its collector (%T) is not a vector", name, c))
			}
			out = append(out, MetricFamily{Name: name, Type: typ, Help: help, Labels: descLabels(d)})
		}
	}
	slices.SortFunc(out, func(a, b MetricFamily) int { return strings.Compare(a.Name, b.Name) })
	return out, errors.Join(errs...)
}

// vecType is the type of a vector's metrics, which a registry gathers
// nothing of before its first series.
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
