package metrics

import (
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// Bucket bounds are round numbers a reader can put in a query: 1, 2.5 and
// 5 times the powers of ten (le="0.25", le="1e+06"), never
// le="372.5290298461914".
var (
	// durationBuckets are those of a COPY, a COMMIT and a Kafka request:
	// 0.5 ms to 2 min.
	durationBuckets = []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 25, 60, 120}
	// latencyBuckets are those of the end-to-end latency: 1 ms to 15 min.
	latencyBuckets = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 25, 60, 120, 300, 600, 900}
	// rowBuckets count a batch's rows: 1 to 100,000.
	rowBuckets = []float64{1, 10, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 25000, 50000, 100000}
	// byteBuckets are a batch's bytes: 1 kB to 250 MB.
	byteBuckets = []float64{1e3, 1e4, 1e5, 2.5e5, 5e5, 1e6, 2.5e6, 5e6, 1e7, 2.5e7, 5e7, 1e8, 2.5e8}
)

// RoundBound reports whether a bucket bound has at most two significant
// digits, as the lists above.
func RoundBound(b float64) bool {
	mantissa, _, _ := strings.Cut(strconv.FormatFloat(b, 'e', -1, 64), "e")
	return len(strings.ReplaceAll(strings.TrimPrefix(mantissa, "-"), ".", "")) <= 2
}

// batchHistogram is a Prometheus histogram observed a batch at a time. The
// end-to-end latency has one observation per record, and
// prometheus.Histogram's Observe makes three atomic updates for each, on
// the path of every record; a batch's observations are counted locally
// and added under one lock instead. The exposition is a
// histogram like any other (same buckets, cumulative counts, sum, count).
type batchHistogram struct {
	desc   *prometheus.Desc
	bounds []float64 // upper bounds, ascending; +Inf is implicit

	mu     sync.Mutex
	counts []uint64 // per bucket, not cumulative; the last is +Inf
	count  uint64
	sum    float64
}

func newBatchHistogram(name, help string, bounds []float64) *batchHistogram {
	return &batchHistogram{desc: prometheus.NewDesc(name, help, nil, nil), bounds: bounds,
		counts: make([]uint64, len(bounds)+1)}
}

// batchObservations are one batch's observations, before they are added.
type batchObservations struct {
	h      *batchHistogram
	counts []uint64
	count  uint64
	sum    float64
}

// batch starts a batch's observations; counts is scratch of any length.
func (h *batchHistogram) batch(counts []uint64) batchObservations {
	if cap(counts) < len(h.counts) {
		counts = make([]uint64, len(h.counts))
	}
	counts = counts[:len(h.counts)]
	clear(counts)
	return batchObservations{h: h, counts: counts}
}

// observe counts v in the bucket Prometheus would: the first whose upper
// bound is at least v.
func (o *batchObservations) observe(v float64) {
	o.counts[sort.SearchFloat64s(o.h.bounds, v)]++
	o.count++
	o.sum += v
}

// add adds the batch's observations to the histogram.
func (o *batchObservations) add() {
	if o.count == 0 {
		return
	}
	h := o.h
	h.mu.Lock()
	for i, n := range o.counts {
		h.counts[i] += n
	}
	h.count += o.count
	h.sum += o.sum
	h.mu.Unlock()
}

func (h *batchHistogram) Describe(ch chan<- *prometheus.Desc) { ch <- h.desc }

func (h *batchHistogram) Collect(ch chan<- prometheus.Metric) {
	buckets := make(map[float64]uint64, len(h.bounds))
	h.mu.Lock()
	var cum uint64
	for i, b := range h.bounds {
		cum += h.counts[i]
		buckets[b] = cum
	}
	count, sum := h.count, h.sum
	h.mu.Unlock()
	ch <- prometheus.MustNewConstHistogram(h.desc, count, sum, buckets)
}
