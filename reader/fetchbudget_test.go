package reader

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafka2pg/kafka2pg/internal/kafkatest"
)

func TestAFetchOfManyLargeBatchesDecodesWithinTheFetchBudget(t *testing.T) {
	// Each batch decodes to just under the 16 MiB a batch may (15 values
	// of 1 MiB), a few KB on the wire: one fetch response carries all of
	// them, 180 MiB decoded, against a budget of 1 MiB.
	const batches, values, valueBytes = 12, 15, 1 << 20
	c := newCluster(t, 1)
	adm := admin(t, c)
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for b := range batches {
		// Half declare their size (deferred before they are decoded), half
		// do not (decoded, then dropped).
		src := kafkatest.ZstdRecords(t, values, valueBytes, b%2 == 0)
		kafkatest.ProduceRawBatch(t, cl, topic, 0, kgo.CodecZstd, values, src)
	}
	ends := endOffsets(t, adm)
	if ends[0] != batches*values {
		t.Fatalf("end offset %d, want %d", ends[0], batches*values)
	}

	s := newStore()
	x := start(t, c, "g", s, func(c *Config) { c.MaxBufferedBytes = 1 << 20 })
	waitFor(t, 60*time.Second, "every record written", func() bool { return s.caughtUp(ends) })
	x.stop()
	s.checkExactlyOnce(t, map[int32]int64{}, ends)

	// The bound of the decompressor's fetch budget: twice max(budget, one batch), plus one
	// batch being decoded (one broker).
	perBatch := int64(maxBatchBytes(&x.r.cfg))
	bound := 2*max(int64(x.r.cfg.MaxBufferedBytes), perBatch) + perBatch
	peak := x.r.dec.Peak()
	t.Logf("decompressed bytes the client held at most: %d MiB (bound %d MiB); %d batches deferred", peak>>20, bound>>20, x.r.Stats().DeferredBatches)
	if peak > bound {
		t.Errorf("the client held %d MiB decompressed at once, over the bound of %d MiB (2 x max(budget, %d MiB) + one batch)", peak>>20, bound>>20, perBatch>>20)
	}
	if peak < values*valueBytes {
		t.Errorf("the client held at most %d bytes decompressed: the instrument missed the batches (%d bytes each)", peak, values*valueBytes)
	}
	st := x.r.Stats()
	if st.DeferredBatches == 0 {
		t.Error("no batch was deferred although one response carried 12 batches of 15 MiB against a budget of 1 MiB")
	}
	if st.FetchErrors != 0 {
		t.Errorf("%d fetch errors counted: a deferral is flow control, not a fetch error", st.FetchErrors)
	}
}
