package decompress

import (
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

func TestARefusedBatchIsMatchedOnceByItsSizeAndCodec(t *testing.T) {
	var rb refusedBatches
	zstd := uint8(kgo.CodecZstd)
	if rb.match(kgo.FetchBatchMetrics{CompressedBytes: 4096, CompressionType: zstd}) {
		t.Fatal("a batch matched with nothing refused")
	}
	rb.add(4096, kgo.CodecZstd)
	rb.add(4096, kgo.CodecZstd)
	for _, tc := range []struct {
		name string
		m    kgo.FetchBatchMetrics
	}{
		{"another size", kgo.FetchBatchMetrics{CompressedBytes: 4097, CompressionType: zstd}},
		{"another codec", kgo.FetchBatchMetrics{CompressedBytes: 4096, CompressionType: uint8(kgo.CodecGzip)}},
		{"a batch that read records", kgo.FetchBatchMetrics{NumRecords: 5, CompressedBytes: 4096, CompressionType: zstd}},
		{"an uncompressed batch", kgo.FetchBatchMetrics{CompressedBytes: 4096}},
	} {
		if rb.match(tc.m) {
			t.Errorf("%s matched a refusal", tc.name)
		}
	}
	refused := kgo.FetchBatchMetrics{CompressedBytes: 4096, CompressionType: zstd}
	for i := range 2 {
		if !rb.match(refused) {
			t.Fatalf("refusal %d of 2 not matched", i+1)
		}
	}
	if rb.match(refused) {
		t.Error("a refusal matched twice")
	}
}

func TestDecompressCountsTheBatchesItRefuses(t *testing.T) {
	const limit = 8 << 20 // at least the encoder's window: a smaller one fails the decoder otherwise
	d, err := New(limit, 1<<30)
	if err != nil {
		t.Fatal(err)
	}
	bomb := zstdStream(t, 2*limit, zeros)
	if _, err := d.Decompress(bomb, kgo.CodecZstd); !errors.Is(err, kgo.ErrMaxDecompress) {
		t.Fatalf("Decompress(a bomb over the limit) = %v, want ErrMaxDecompress", err)
	}
	if !d.Refused(kgo.FetchBatchMetrics{CompressedBytes: len(bomb), CompressionType: uint8(kgo.CodecZstd)}) {
		t.Error("the hook's view of the refused batch matched no refusal")
	}
}
