package metrics

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// TestBatchHistogramExposesWhatAPrometheusHistogramDoes feeds the same
// values, in batches, to a batchHistogram and to prometheus.Histogram with
// the same buckets, and compares what a scrape reads of each.
func TestBatchHistogramExposesWhatAPrometheusHistogramDoes(t *testing.T) {
	bounds := prometheus.ExponentialBuckets(0.001, 2.5, 16)
	ours := newBatchHistogram("lat", "help", bounds)
	theirs := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "lat", Help: "help", Buckets: bounds})
	rng := rand.New(rand.NewPCG(1, 2))
	var scratch [3]uint64 // shorter than the buckets: batch must grow it
	for batch := range 50 {
		obs := ours.batch(scratch[:])
		for i := range 200 {
			var v float64
			switch i % 4 {
			case 0:
				v = bounds[rng.IntN(len(bounds))] // exactly on a bound
			case 1:
				v = rng.Float64() * 1000 // up to past the last bound
			case 2:
				v = 0
			default:
				v = rng.ExpFloat64() / float64(batch+1)
			}
			obs.observe(v)
			theirs.Observe(v)
		}
		obs.add()
	}
	got, want := scrape(t, ours), scrape(t, theirs)
	// The sums are added in another order: equal but for rounding.
	if got.GetSampleCount() != want.GetSampleCount() || math.Abs(got.GetSampleSum()-want.GetSampleSum()) > 1e-9*want.GetSampleSum() {
		t.Fatalf("count %d sum %v, want %d %v", got.GetSampleCount(), got.GetSampleSum(), want.GetSampleCount(), want.GetSampleSum())
	}
	if len(got.Bucket) != len(want.Bucket) {
		t.Fatalf("%d buckets, want %d", len(got.Bucket), len(want.Bucket))
	}
	for i := range want.Bucket {
		g, w := got.Bucket[i], want.Bucket[i]
		if g.GetUpperBound() != w.GetUpperBound() || g.GetCumulativeCount() != w.GetCumulativeCount() {
			t.Errorf("bucket %d: le %v count %d, want le %v count %d", i, g.GetUpperBound(), g.GetCumulativeCount(), w.GetUpperBound(), w.GetCumulativeCount())
		}
	}
	if want.Bucket[0].GetCumulativeCount() == 0 || want.Bucket[len(want.Bucket)-1].GetCumulativeCount() == want.GetSampleCount() {
		t.Fatal("the values do not reach the first bucket or past the last: the test checks too little")
	}
}

func scrape(t *testing.T, c prometheus.Collector) *dto.Histogram {
	t.Helper()
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)
	mfs, err := reg.Gather()
	if err != nil || len(mfs) != 1 || len(mfs[0].Metric) != 1 {
		t.Fatalf("gather: %v, %d families", err, len(mfs))
	}
	return mfs[0].Metric[0].GetHistogram()
}
