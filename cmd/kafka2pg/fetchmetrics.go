package main

import (
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/plugin/kprom"
)

// kafkaHooks are franz-go's client metrics (kprom) with their per-batch
// fetch counters replaced by fetchCounters. kprom's OnFetchBatchRead builds
// a label map and looks up three counters by it for every record batch
// fetched, about 3 µs a batch: with producers' batches of some fifty
// records, 3-5% of the bridge's CPU while it drains a backlog. The method
// declared here shadows the embedded one, so franz-go calls this one, and
// kprom's own fetch counters stay empty (a vector without children exports
// nothing).
type kafkaHooks struct {
	*kprom.Metrics
	fetch *fetchCounters
}

// OnFetchBatchRead implements kgo.HookFetchBatchRead.
func (h kafkaHooks) OnFetchBatchRead(meta kgo.BrokerMetadata, topic string, _ int32, m kgo.FetchBatchMetrics) {
	c := h.fetch.of(meta.NodeID, topic)
	c.batches.Add(1)
	c.records.Add(uint64(m.NumRecords))
	c.bytes.Add(uint64(m.UncompressedBytes))
}

// fetchCounters export kafka2pg_kafka_fetch_batches_total, _records_total
// and _bytes_total (uncompressed) by node_id and topic, as kprom's
// FetchAndProduceDetail(ByNode, ByTopic, Batches, Records,
// UncompressedBytes) did, from counters found once per broker and topic.
type fetchCounters struct {
	mu sync.RWMutex
	by map[fetchKey]*fetchCount

	batches, records, bytes *prometheus.Desc
}

type fetchKey struct {
	node  int32
	topic string
}

type fetchCount struct{ batches, records, bytes atomic.Uint64 }

func newFetchCounters(namespace string) *fetchCounters {
	labels := []string{"node_id", "topic"}
	return &fetchCounters{
		by:      map[fetchKey]*fetchCount{},
		batches: prometheus.NewDesc(namespace+"_fetch_batches_total", "Total number of batches fetched", labels, nil),
		records: prometheus.NewDesc(namespace+"_fetch_records_total", "Total number of records fetched", labels, nil),
		bytes:   prometheus.NewDesc(namespace+"_fetch_bytes_total", "Total number of uncompressed bytes fetched", labels, nil),
	}
}

func (f *fetchCounters) of(node int32, topic string) *fetchCount {
	k := fetchKey{node, topic}
	f.mu.RLock()
	c := f.by[k]
	f.mu.RUnlock()
	if c != nil {
		return c
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if c = f.by[k]; c == nil {
		c = &fetchCount{}
		f.by[k] = c
	}
	return c
}

// Describe sends nothing: the collector is unchecked, because kprom
// registers (and leaves empty) vectors of the same names.
func (f *fetchCounters) Describe(chan<- *prometheus.Desc) {}

func (f *fetchCounters) Collect(ch chan<- prometheus.Metric) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	for k, c := range f.by {
		node := kgo.NodeName(k.node)
		ch <- prometheus.MustNewConstMetric(f.batches, prometheus.CounterValue, float64(c.batches.Load()), node, k.topic)
		ch <- prometheus.MustNewConstMetric(f.records, prometheus.CounterValue, float64(c.records.Load()), node, k.topic)
		ch <- prometheus.MustNewConstMetric(f.bytes, prometheus.CounterValue, float64(c.bytes.Load()), node, k.topic)
	}
}
