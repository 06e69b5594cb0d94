package main

import (
	"strings"
	"testing"

	"github.com/kafka2pg/kafka2pg/bridge"
)

// The Kafka client's metrics are a consumer's: none of a producer, the
// buffered records gauge named as a gauge, no name twice.
func TestKafkaClientMetricsAreAConsumers(t *testing.T) {
	families, err := bridgeMetricFamilies(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]bridge.MetricFamily{}
	for _, f := range families {
		if strings.Contains(f.Name, "produce") {
			t.Errorf("%s: a producer's metric in a consumer", f.Name)
		}
		if strings.HasSuffix(f.Name, "_total") && f.Type != "counter" {
			t.Errorf("%s is a %s: only counters end in _total", f.Name, f.Type)
		}
		byName[f.Name] = f
	}
	for _, r := range renamedMetrics {
		if _, ok := byName[r.old]; ok {
			t.Errorf("the old name %s is still exported", r.old)
		}
		if _, ok := byName[r.new]; r.new != "" && !ok {
			t.Errorf("the new name %s is not exported", r.new)
		}
	}
	if f := byName["kafka2pg_kafka_connects_total"]; f.Type != "counter" || len(f.Labels) != 1 || f.Labels[0] != "node_id" {
		t.Errorf("kafka2pg_kafka_connects_total: %+v, want a counter by node_id (kprom's, registered)", f)
	}
}
