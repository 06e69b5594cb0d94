package decompress

import (
	"bytes"
	"errors"
	"testing"

	"github.com/klauspost/compress/zstd"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafka2pg/kafka2pg/internal/kafkatest"
)

func TestADeferredBatchIsRefusedBeforeDecodingWhenItSaysItsSize(t *testing.T) {
	const limit = 16 << 20
	d, err := New(limit, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	sized := kafkatest.ZstdRecords(t, 4, 1<<20, true)
	stream := kafkatest.ZstdRecords(t, 4, 1<<20, false)
	if _, err := d.Decompress(sized, kgo.CodecZstd); err != nil {
		t.Fatalf("the first batch, with nothing held: %v", err)
	}
	peak := d.hold.peak.Load()
	if _, err := d.Decompress(sized, kgo.CodecZstd); !errors.Is(err, ErrDeferred) {
		t.Errorf("a second batch over the budget: %v, want ErrDeferred", err)
	}
	if p := d.hold.peak.Load(); p != peak {
		t.Errorf("a batch that says its size was decoded (%d bytes live at most, %d before) before it was deferred", p, peak)
	}
	if _, err := d.Decompress(stream, kgo.CodecZstd); !errors.Is(err, ErrDeferred) {
		t.Errorf("a stream over the budget: %v, want ErrDeferred", err)
	}
	// A batch too large on its own is refused, not deferred.
	if _, err := d.Decompress(kafkatest.ZstdRecords(t, 17, 1<<20, true), kgo.CodecZstd); !errors.Is(err, kgo.ErrMaxDecompress) {
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
	d, err := New(16<<20, 8<<20)
	if err != nil {
		t.Fatal(err)
	}
	batch := kafkatest.ZstdRecords(t, 4, 1<<20, false) // 4 MiB, a stream: counted, then deferred or decoded
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
	if _, err := d.Decompress(batch, kgo.CodecZstd); !errors.Is(err, ErrDeferred) {
		t.Errorf("%d bytes more while the client holds %d of 8 MiB: %v, want ErrDeferred", size, d.hold.held.Load(), err)
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
	if _, err := d.Decompress(kafkatest.ZstdRecords(t, 12, 1<<20, true), kgo.CodecZstd); err != nil {
		t.Errorf("12 MiB with nothing held, budget 8: %v", err)
	}
	if _, err := d.Decompress(batch, kgo.CodecZstd); !errors.Is(err, ErrDeferred) {
		t.Errorf("4 MiB more on 12 held: %v, want ErrDeferred", err)
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
