package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/kafka2pg/kafka2pg/ingest"
)

// ApplierState is what the metrics read of a source's Applier at each
// scrape (ingest.Applier).
type ApplierState interface {
	Source() string
	Stats() ingest.ApplierStats
}

// RegisterAppliers adds the collector of the appliers of the sinks with
// transactions; none registers nothing.
func (m *Metrics) RegisterAppliers(appliers []ApplierState) error {
	if len(appliers) == 0 {
		return nil
	}
	return m.register(&applierCollector{appliers: appliers})
}

var (
	applierIncompleteDesc = prometheus.NewDesc("kafka2pg_cdc_incomplete_transaction_age_seconds",
		"Age of the oldest source transaction whose END is staged but not all of its events (0: none), as this member's applier of the source sees it; it and every later transaction wait (transactions: true).", []string{"source"}, nil)
	applierAppliedDesc = prometheus.NewDesc("kafka2pg_cdc_transactions_applied_total",
		"Source transactions applied whole by this member (transactions: true).", []string{"source"}, nil)
	applierEventsDesc = prometheus.NewDesc("kafka2pg_cdc_transaction_events_applied_total",
		"Change events of source transactions applied by this member (transactions: true).", []string{"source"}, nil)
	applierPartialDesc = prometheus.NewDesc("kafka2pg_cdc_transactions_applied_partially_total",
		"Source transactions applied without all their events, after on_incomplete apply's timeout.", []string{"source"}, nil)
	applierLeaderDesc = prometheus.NewDesc("kafka2pg_cdc_applier_leading",
		"1 while this member applies the source's transactions (it holds the source's lock), else 0.", []string{"source"}, nil)
)

type applierCollector struct{ appliers []ApplierState }

func (c *applierCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{applierIncompleteDesc, applierAppliedDesc, applierEventsDesc, applierPartialDesc, applierLeaderDesc} {
		ch <- d
	}
}

func (c *applierCollector) Collect(ch chan<- prometheus.Metric) {
	for _, a := range c.appliers {
		s, src := a.Stats(), a.Source()
		leading := 0.0
		if s.Leading {
			leading = 1
		}
		ch <- prometheus.MustNewConstMetric(applierIncompleteDesc, prometheus.GaugeValue, s.Incomplete.Age.Seconds(), src)
		ch <- prometheus.MustNewConstMetric(applierAppliedDesc, prometheus.CounterValue, float64(s.Applied), src)
		ch <- prometheus.MustNewConstMetric(applierEventsDesc, prometheus.CounterValue, float64(s.AppliedEvents), src)
		ch <- prometheus.MustNewConstMetric(applierPartialDesc, prometheus.CounterValue, float64(s.Partial), src)
		ch <- prometheus.MustNewConstMetric(applierLeaderDesc, prometheus.GaugeValue, leading, src)
	}
}

// sampleApplier stands in for an applier in Sample.
type sampleApplier struct{}

func (sampleApplier) Source() string             { return "shop.transaction" }
func (sampleApplier) Stats() ingest.ApplierStats { return ingest.ApplierStats{} }
