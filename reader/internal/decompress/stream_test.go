package decompress

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"runtime"
	"testing"

	"github.com/klauspost/compress/gzip"
	"github.com/pierrec/lz4/v4"
	"github.com/twmb/franz-go/pkg/kgo"
)

// compressStream compresses n bytes made by fill with codec (gzip or lz4)
// as a producer does: a stream that does not declare its size.
func compressStream(t testing.TB, codec kgo.CompressionCodecType, n int, fill func([]byte)) []byte {
	t.Helper()
	var out bytes.Buffer
	var enc io.WriteCloser
	switch codec {
	case kgo.CodecGzip:
		enc = gzip.NewWriter(&out)
	case kgo.CodecLz4:
		enc = lz4.NewWriter(&out)
	default:
		t.Fatalf("compressStream: codec %d", codec)
	}
	chunk := make([]byte, 1<<20)
	for n > 0 {
		k := min(n, len(chunk))
		fill(chunk[:k])
		if _, err := enc.Write(chunk[:k]); err != nil {
			t.Fatal(err)
		}
		n -= k
	}
	if err := enc.Close(); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

var streamCodecs = []struct {
	name  string
	codec kgo.CompressionCodecType
}{{"gzip", kgo.CodecGzip}, {"lz4", kgo.CodecLz4}}

func TestGzipAndLz4BatchesDecodeAsFranzGoDecodesThem(t *testing.T) {
	const limit = 32 << 20
	d, err := New(limit, math.MaxInt64)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range streamCodecs {
		for _, tc := range []struct {
			name string
			n    int
		}{
			{"an empty batch", 0},
			{"a small batch", 1000},
			{"a batch of exactly what is kept at first", keepFirst},
			{"a batch one byte longer than what is kept at first", keepFirst + 1},
			{"a batch counted first, then decoded again", 3*keepFirst + 17},
			{"a batch of exactly the limit", limit},
		} {
			t.Run(c.name+": "+tc.name, func(t *testing.T) {
				src := compressStream(t, c.codec, tc.n, randomBytes)
				want, err := d.inner.Decompress(src, c.codec)
				if err != nil {
					t.Fatalf("franz-go's decompressor: %v", err)
				}
				got, err := d.Decompress(src, c.codec)
				if err != nil {
					t.Fatalf("Decompress(%d bytes) = %v", tc.n, err)
				}
				if len(got) != tc.n || !bytes.Equal(got, want) {
					t.Errorf("Decompress(%d bytes) = %d bytes, not what franz-go decodes", tc.n, len(got))
				}
			})
		}
		t.Run(c.name+": a batch one byte over the limit is refused", func(t *testing.T) {
			if _, err := d.Decompress(compressStream(t, c.codec, limit+1, zeros), c.codec); !errors.Is(err, kgo.ErrMaxDecompress) {
				t.Errorf("Decompress(limit+1 bytes) = %v, want ErrMaxDecompress", err)
			}
		})
		t.Run(c.name+": a truncated batch is an error", func(t *testing.T) {
			for _, n := range []int{1000, 2 * keepFirst} {
				src := compressStream(t, c.codec, n, randomBytes)
				if out, err := d.Decompress(src[:len(src)-len(src)/3], c.codec); err == nil {
					t.Errorf("Decompress(a truncated stream of %d bytes) = %d bytes and no error", n, len(out))
				}
			}
		})
	}
	if _, err := d.Decompress(compressStream(t, kgo.CodecGzip, 1000, randomBytes), kgo.CodecLz4); err == nil {
		t.Errorf("Decompress(gzip as lz4): no error")
	}
}

func TestAGzipOrLz4BombIsRefusedHoldingAFewMiB(t *testing.T) {
	const limit = 64 << 20 // the default --max-buffered-bytes
	d, err := New(limit, math.MaxInt64)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range streamCodecs {
		t.Run(c.name, func(t *testing.T) {
			bomb := compressStream(t, c.codec, 400<<20, zeros)
			d.Decompress(compressStream(t, c.codec, 1000, zeros), c.codec) // the decoder's own buffers, pooled
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			_, err := d.Decompress(bomb, c.codec)
			runtime.ReadMemStats(&after)
			if !errors.Is(err, kgo.ErrMaxDecompress) {
				t.Fatalf("Decompress(a 400 MiB bomb of %d bytes) = %v, want ErrMaxDecompress (limit %d)", len(bomb), err, limit)
			}
			alloc := after.TotalAlloc - before.TotalAlloc
			t.Logf("refusing a 400 MiB %s bomb allocated %d KiB (limit %d MiB)", c.name, alloc>>10, limit>>20)
			// What is kept at first, as its buffer doubles (twice
			// keepFirst in all at most), and the decoder's buffers (an lz4
			// block holds up to 4 MiB; its reader may take a new one each
			// time the runtime's GC drops pooled ones, which happens more
			// under -race: 25 MiB seen there). franz-go's own decoder
			// allocated 2-3 times the limit.
			const most = 2*keepFirst + 16<<20
			if alloc > most {
				t.Errorf("refusing the bomb allocated %d MiB, want at most %d MiB: it was decoded into memory", alloc>>20, most>>20)
			}
		})
	}
}

// BenchmarkDecodeABatch compares franz-go's decoder with streamDecoder on
// batches of ordinary sizes.
func BenchmarkDecodeABatch(b *testing.B) {
	d, err := New(64<<20, math.MaxInt64)
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range streamCodecs {
		for _, n := range []int{64 << 10, 1 << 20, 4 << 20} {
			src := compressStream(b, c.codec, n, randomBytes)
			for _, dec := range []struct {
				name string
				d    kgo.Decompressor
			}{{"franz-go", d.inner}, {"bounded", d}} {
				b.Run(fmt.Sprintf("%s/%dKiB/%s", c.name, n>>10, dec.name), func(b *testing.B) {
					b.SetBytes(int64(n))
					b.ReportAllocs()
					for b.Loop() {
						if _, err := dec.d.Decompress(src, c.codec); err != nil {
							b.Fatal(err)
						}
					}
				})
			}
		}
	}
}

// FuzzStreamDecoder: any input is an error or at most the limit, never a
// panic.
func FuzzStreamDecoder(f *testing.F) {
	for _, c := range streamCodecs {
		f.Add(compressStream(f, c.codec, 1000, randomBytes), byte(c.codec))
		f.Add(compressStream(f, c.codec, 100<<10, zeros), byte(c.codec))
	}
	var d streamDecoder
	const limit = 64 << 10
	f.Fuzz(func(t *testing.T, src []byte, codec byte) {
		c := kgo.CompressionCodecType(codec%2*2 + 1) // gzip (1) or lz4 (3)
		out, err := d.decode(src, c, limit, func(int64) error { return nil })
		if err == nil && len(out) > limit {
			t.Errorf("decode(%d bytes, codec %d) = %d bytes, over the %d limit", len(src), c, len(out), limit)
		}
	})
}
