package reader

import (
	"bytes"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafka2pg/kafka2pg/internal/kafkatest"
)

// zstdBatch compresses values records of valueBytes zeros into one batch's
// records: a frame that declares its size (as franz-go's producer writes
// it) when sized, else a stream that does not (as Java's does).
func zstdBatch(t *testing.T, values, valueBytes int, sized bool) []byte {
	t.Helper()
	zeros := make([]byte, 1<<20)
	var plain, out bytes.Buffer
	w := io.Writer(&plain)
	var stream *zstd.Encoder
	if !sized {
		var err error
		if stream, err = zstd.NewWriter(&out, zstd.WithEncoderLevel(zstd.SpeedFastest)); err != nil {
			t.Fatal(err)
		}
		w = stream
	}
	for i := range values {
		if err := kafkatest.WriteRecord(w, i, nil, zeros, valueBytes, nil); err != nil {
			t.Fatal(err)
		}
	}
	if stream != nil {
		if err := stream.Close(); err != nil {
			t.Fatal(err)
		}
		return out.Bytes()
	}
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest))
	if err != nil {
		t.Fatal(err)
	}
	defer enc.Close()
	return enc.EncodeAll(plain.Bytes(), nil)
}

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
		src := zstdBatch(t, values, valueBytes, b%2 == 0)
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

	// The bound of fetchbound.go: twice max(budget, one batch), plus one
	// batch being decoded (one broker).
	perBatch := int64(maxBatchBytes(&x.r.cfg))
	bound := 2*max(int64(x.r.cfg.MaxBufferedBytes), perBatch) + perBatch
	peak := x.r.dec.hold.peak.Load()
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

func TestADeferredBatchIsRefusedBeforeDecodingWhenItSaysItsSize(t *testing.T) {
	const limit = 16 << 20
	d, err := newBoundedDecompressor(limit)
	if err != nil {
		t.Fatal(err)
	}
	d.hold.budget = 1 << 20
	sized := zstdBatch(t, 4, 1<<20, true)
	stream := zstdBatch(t, 4, 1<<20, false)
	if _, err := d.Decompress(sized, kgo.CodecZstd); err != nil {
		t.Fatalf("the first batch, with nothing held: %v", err)
	}
	peak := d.hold.peak.Load()
	if _, err := d.Decompress(sized, kgo.CodecZstd); !errors.Is(err, errDeferred) {
		t.Errorf("a second batch over the budget: %v, want errDeferred", err)
	}
	if p := d.hold.peak.Load(); p != peak {
		t.Errorf("a batch that says its size was decoded (%d bytes live at most, %d before) before it was deferred", p, peak)
	}
	if _, err := d.Decompress(stream, kgo.CodecZstd); !errors.Is(err, errDeferred) {
		t.Errorf("a stream over the budget: %v, want errDeferred", err)
	}
	// A batch too large on its own is refused, not deferred.
	if _, err := d.Decompress(zstdBatch(t, 17, 1<<20, true), kgo.CodecZstd); !errors.Is(err, kgo.ErrMaxDecompress) {
		t.Errorf("a batch over the limit: %v, want ErrMaxDecompress", err)
	}
	if n := d.hold.deferred.Load(); n != 2 {
		t.Errorf("%d deferrals counted, want 2", n)
	}
	d.hold.release()
	if _, err := d.Decompress(stream, kgo.CodecZstd); err != nil {
		t.Errorf("after the release: %v", err)
	}
	if live := d.hold.live.Load(); live != d.hold.held.Load() {
		t.Errorf("live %d, held %d: what was dropped is still counted", live, d.hold.held.Load())
	}
}

func TestTheClientsBatchesHaveABudgetOfTheirOwn(t *testing.T) {
	d, err := newBoundedDecompressor(16 << 20)
	if err != nil {
		t.Fatal(err)
	}
	d.hold.budget = 8 << 20
	batch := zstdBatch(t, 4, 1<<20, false) // 4 MiB, a stream: counted, then deferred or decoded
	dec, _ := zstd.NewReader(nil)
	defer dec.Close()
	plain, err := dec.DecodeAll(batch, nil)
	if err != nil {
		t.Fatal(err)
	}
	size := int64(len(plain)) // the values and each record's framing
	if _, err := d.Decompress(batch, kgo.CodecZstd); err != nil {
		t.Fatalf("%d bytes with nothing held: %v", size, err)
	}
	// A second one passes the 8 MiB budget by each record's framing.
	if _, err := d.Decompress(batch, kgo.CodecZstd); !errors.Is(err, errDeferred) {
		t.Errorf("%d bytes more while the client holds %d of 8 MiB: %v, want errDeferred", size, d.hold.held.Load(), err)
	}
	if got := d.hold.pollLimit(true); got != 8<<20-size+1 {
		t.Errorf("after a poll of deferred batches only, the reader may hold %d before the next poll, want %d (room for the batch)", got, 8<<20-size+1)
	}
	if got := d.hold.pollLimit(false); got != 8<<20 {
		t.Errorf("after a poll with records, the poll limit is %d, want the budget", got)
	}
	// Released (the reader took what the client held), a batch over the
	// budget is admitted: the client holds nothing.
	d.hold.release()
	if _, err := d.Decompress(zstdBatch(t, 12, 1<<20, true), kgo.CodecZstd); err != nil {
		t.Errorf("12 MiB with nothing held, budget 8: %v", err)
	}
	if _, err := d.Decompress(batch, kgo.CodecZstd); !errors.Is(err, errDeferred) {
		t.Errorf("4 MiB more on 12 held: %v, want errDeferred", err)
	}
}

func TestZstdFramesThatDeclareTheirSizeAreSizedWithoutDecoding(t *testing.T) {
	enc, _ := zstd.NewWriter(nil)
	defer enc.Close()
	one := enc.EncodeAll(bytes.Repeat([]byte("x"), 300), nil)
	two := append(enc.EncodeAll(make([]byte, 70000), nil), one...)
	for _, tc := range []struct {
		name     string
		src      []byte
		declared int64
	}{
		{"one frame", one, 300},
		{"two frames", two, 70300},
		{"a stream", zstdStream(t, 1<<20, zeros), -1},
		{"a frame and a stream", append(append([]byte{}, one...), zstdStream(t, 1<<20, zeros)...), -1},
	} {
		if _, declared, ok := zstdSizes(tc.src); !ok || declared != tc.declared {
			t.Errorf("%s: declared %d (ok %v), want %d", tc.name, declared, ok, tc.declared)
		}
	}
}
