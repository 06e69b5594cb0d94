package metrics

import (
	"errors"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/plugin/kprom"
)

// KafkaHooks are franz-go's client metrics (kprom) with their per-batch
// fetch counters replaced by fetchCounters. kprom's OnFetchBatchRead builds
// a label map and looks up three counters by it for every record batch
// fetched: with producers' small batches, a share of the bridge's CPU
// that shows while it drains a backlog. The method
// declared here shadows the embedded one, so franz-go calls this one;
// kprom's own fetch counters are not registered (kpromFilter).
type KafkaHooks struct {
	*kprom.Metrics
	fetch *fetchCounters
	reg   prometheus.Registerer
}

// OnNewClient implements kgo.HookNewClient: kprom's metrics, and in place
// of kprom's buffered_fetch_records_total, a gauge named like one.
func (h KafkaHooks) OnNewClient(cl *kgo.Client) {
	h.Metrics.OnNewClient(cl)
	err := h.reg.Register(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "kafka2pg_kafka_buffered_fetch_records",
		Help: "Records fetched and buffered in the Kafka client, not yet polled."},
		func() float64 { return float64(cl.BufferedFetchRecords()) }))
	if err != nil && !errors.As(err, &prometheus.AlreadyRegisteredError{}) {
		panic(err)
	}
}

// kpromFilter registers kprom's collectors in the bridge's registry but for
// those of a producer (kafka2pg only consumes; they would read zero
// forever), its fetch counters (fetchCounters replaces them) and
// buffered_fetch_records_total (a gauge with a counter's name; OnNewClient
// registers kafka2pg_kafka_buffered_fetch_records instead).
type kpromFilter struct{ m *Metrics }

// kpromLeftOut says whether kprom's metric of that name is left out.
func kpromLeftOut(name string) bool {
	for _, p := range []string{"kafka2pg_kafka_produce_", "kafka2pg_kafka_buffered_produce_", "kafka2pg_kafka_fetch_"} {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return name == "kafka2pg_kafka_buffered_fetch_records_total"
}

func (f kpromFilter) Register(c prometheus.Collector) error {
	for _, d := range Describe(c) {
		if kpromLeftOut(descName(d)) {
			return nil
		}
	}
	if err := f.m.reg.Register(c); err != nil {
		return err
	}
	f.m.registered = append(f.m.registered, c)
	return nil
}

func (f kpromFilter) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		if err := f.Register(c); err != nil {
			panic(err)
		}
	}
}

func (f kpromFilter) Unregister(c prometheus.Collector) bool { return f.m.reg.Unregister(c) }

// Describe returns the descriptors a collector sends.
func Describe(c prometheus.Collector) []*prometheus.Desc {
	ch := make(chan *prometheus.Desc)
	go func() { c.Describe(ch); close(ch) }()
	var out []*prometheus.Desc
	for d := range ch {
		out = append(out, d)
	}
	return out
}

// descField reads a field of prometheus.Desc's String, the only way to a
// descriptor's name and help: fqName: "...", help: "...".
var descField = regexp.MustCompile(`(fqName|help): ("(?:[^"\\]|\\.)*")`)

// descName is the metric name of a descriptor.
func descName(d *prometheus.Desc) string {
	name, _ := DescNameHelp(d)
	return name
}

// DescNameHelp reads the name and help of a descriptor.
func DescNameHelp(d *prometheus.Desc) (name, help string) {
	for _, m := range descField.FindAllStringSubmatch(d.String(), -1) {
		v, err := strconv.Unquote(m[2])
		if err != nil {
			continue
		}
		switch m[1] {
		case "fqName":
			name = v
		case "help":
			help = v
		}
	}
	return name, help
}

// OnFetchBatchRead implements kgo.HookFetchBatchRead.
func (h KafkaHooks) OnFetchBatchRead(meta kgo.BrokerMetadata, topic string, _ int32, m kgo.FetchBatchMetrics) {
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
		batches: prometheus.NewDesc(namespace+"_fetch_batches_total", "Record batches fetched, by broker and topic.", labels, nil),
		records: prometheus.NewDesc(namespace+"_fetch_records_total", "Records fetched, by broker and topic.", labels, nil),
		bytes:   prometheus.NewDesc(namespace+"_fetch_bytes_total", "Bytes fetched, uncompressed, by broker and topic.", labels, nil),
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

func (f *fetchCounters) Describe(ch chan<- *prometheus.Desc) {
	ch <- f.batches
	ch <- f.records
	ch <- f.bytes
}

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
