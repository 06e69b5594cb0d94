package kafkatest

import (
	"bytes"
	"io"
	"testing"

	"github.com/klauspost/compress/zstd"
)

// ZstdRecords compresses values records of valueBytes zeros into one batch's
// records: a frame that declares its size (as franz-go's producer writes
// it) when sized, else a stream that does not (as Java's does).
func ZstdRecords(t testing.TB, values, valueBytes int, sized bool) []byte {
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
		if err := WriteRecord(w, i, nil, zeros, valueBytes, nil); err != nil {
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
