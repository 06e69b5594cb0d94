package decompress

import (
	"bytes"
	"errors"
	"math"
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/klauspost/compress/zstd"
	"github.com/twmb/franz-go/pkg/kgo"
)

// zstdStream compresses n bytes made by fill as a stream: the frame does
// not declare its size, as Java's producer writes it.
func zstdStream(t *testing.T, n int, fill func([]byte)) []byte {
	t.Helper()
	var out bytes.Buffer
	enc, err := zstd.NewWriter(&out, zstd.WithEncoderLevel(zstd.SpeedFastest))
	if err != nil {
		t.Fatal(err)
	}
	chunk := make([]byte, 1<<20)
	for n > 0 {
		k := min(n, len(chunk))
		fill(chunk[:k])
		enc.Write(chunk[:k])
		n -= k
	}
	if err := enc.Close(); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

func zeros(b []byte) { clear(b) }

func randomBytes(b []byte) {
	for i := range b {
		b[i] = byte(rand.N(4)) // compressible, not trivially
	}
}

func TestTheZstdBoundIsAtLeastWhatAFrameDecodesTo(t *testing.T) {
	enc, _ := zstd.NewWriter(nil)
	defer enc.Close()
	for _, tc := range []struct {
		name string
		src  []byte
		size int
	}{
		{"a stream of zeros", zstdStream(t, 3<<20, zeros), 3 << 20},
		{"a stream of small random bytes", zstdStream(t, 1<<20+17, randomBytes), 1<<20 + 17},
		{"a frame that declares its size", enc.EncodeAll(bytes.Repeat([]byte("kafka2pg "), 50000), nil), 450000},
		{"two frames", append(enc.EncodeAll([]byte("one"), nil), enc.EncodeAll([]byte("two"), nil)...), 6},
		{"an empty frame", enc.EncodeAll(nil, nil), 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bound, ok := zstdBound(tc.src)
			if !ok {
				t.Fatalf("zstdBound of %d bytes: not understood", len(tc.src))
			}
			if bound < int64(tc.size) {
				t.Errorf("bound %d under the %d bytes it decodes to", bound, tc.size)
			}
			// A stream's blocks hold 64 KiB, counted as 128: twice the size
			// is as loose as a bound gets.
			if bound > 2*int64(tc.size)+2*zstdMaxBlock {
				t.Errorf("bound %d for %d bytes: too loose to be of use", bound, tc.size)
			}
		})
	}
	for _, bad := range [][]byte{{1, 2, 3}, []byte("not zstd at all"), zstdStream(t, 1<<20, zeros)[:100]} {
		if _, ok := zstdBound(bad); ok {
			t.Errorf("zstdBound(%q...) understood something that is not zstd frames", bad[:min(len(bad), 8)])
		}
	}
}

func TestABombIsRefusedWithoutDecodingItIntoMemory(t *testing.T) {
	const limit = 8 << 20
	d, err := New(limit, math.MaxInt64)
	if err != nil {
		t.Fatal(err)
	}
	bomb := zstdStream(t, 200<<20, zeros)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err = d.Decompress(bomb, kgo.CodecZstd)
	runtime.ReadMemStats(&after)
	if !errors.Is(err, kgo.ErrMaxDecompress) {
		t.Fatalf("Decompress(a 200 MiB bomb) = %v, want ErrMaxDecompress (limit %d)", err, limit)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > limit {
		t.Errorf("refusing the bomb allocated %d MiB, want under the %d MiB limit: it was decoded into memory", alloc>>20, limit>>20)
	}

	// What fits decodes as before, whether its bound fits or not.
	for _, n := range []int{1000, limit - 1000} {
		src := zstdStream(t, n, zeros)
		out, err := d.Decompress(src, kgo.CodecZstd)
		if err != nil || len(out) != n {
			t.Errorf("Decompress(%d bytes of zeros) = %d bytes, %v", n, len(out), err)
		}
	}
	if _, err := d.Decompress(zstdStream(t, limit+1, zeros), kgo.CodecZstd); !errors.Is(err, kgo.ErrMaxDecompress) {
		t.Errorf("Decompress(limit+1 bytes) = %v, want ErrMaxDecompress", err)
	}
}
