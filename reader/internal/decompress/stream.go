package decompress

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"slices"
	"sync"

	"github.com/klauspost/compress/gzip"
	"github.com/pierrec/lz4/v4"
	"github.com/twmb/franz-go/pkg/kgo"
)

// gzip and lz4 streams say nothing of what they decode to (gzip's trailer
// holds the size of its last member only, modulo 4 GiB; the lz4 frames
// Kafka's producers write leave the content size out). franz-go decodes
// them into a pooled bytes.Buffer that doubles until it holds the limit,
// so refusing a bomb costs three times the limit at once (the old buffer,
// the new one, and the pool keeps the largest). streamDecoder decodes them
// in steps instead:
//
//   - up to keepFirst bytes are kept, in one buffer sized by a guess
//     (sizeHint: exact for gzip as producers write it) that doubles when
//     the guess was short; a batch that ends there (nearly all of them) is
//     decoded once, into that buffer;
//   - past keepFirst, the buffer is dropped and the rest of the stream is
//     only counted, through one small buffer, up to the bound: a bomb is
//     refused having held keepFirst bytes, whatever it decodes to;
//   - a batch that fits is then decoded again, into one slice of the size
//     counted, so a large batch costs what it decodes to, not twice that.
//
// Nothing is pooled but the decoders.
type streamDecoder struct {
	gzips sync.Pool // *gzip.Reader
	lz4s  sync.Pool // *lz4.Reader
}

// keepFirst is how many decoded bytes of a batch are kept before it is
// counted first and decoded a second time. Kafka batches are 1 MB on the
// wire by default (the broker's message.max.bytes), which rarely decode to
// more.
const keepFirst = 8 << 20

// countChunk is the buffer through which the rest of a large batch is
// counted.
const countChunk = 64 << 10

// decode decodes src, gzip or lz4, refusing with kgo.ErrMaxDecompress what
// decodes to more than max bytes, and with what room returns what it
// counted before decoding it a second time (nil: decode it). It is safe
// for concurrent use.
func (d *streamDecoder) decode(src []byte, codec kgo.CompressionCodecType, max int, room func(n int64) error) ([]byte, error) {
	r, done, err := d.open(src, codec)
	if err != nil {
		return nil, err
	}
	kept, n, complete, err := readKept(r, min(keepFirst, max), sizeHint(src, codec))
	if err != nil || complete {
		done()
		return kept, err
	}
	rest, err := io.CopyBuffer(io.Discard, io.LimitReader(r, int64(max-n)+1), make([]byte, countChunk))
	done()
	switch {
	case err != nil:
		return nil, err
	case int64(n)+rest > int64(max):
		return nil, kgo.ErrMaxDecompress
	}
	if err := room(int64(n) + rest); err != nil {
		return nil, err
	}
	out := make([]byte, int64(n)+rest)
	r, done, err = d.open(src, codec)
	if err != nil {
		return nil, err
	}
	defer done()
	if _, err := io.ReadFull(r, out); err != nil {
		return nil, err
	}
	return out, nil
}

// sizeHint guesses what src decodes to, to size the first buffer. A gzip
// stream ends with the size of its last member (modulo 4 GiB): the size of
// the batch as producers write it, in one member. lz4 streams do not say;
// 4 to 1 is a usual ratio.
func sizeHint(src []byte, codec kgo.CompressionCodecType) int {
	if codec == kgo.CodecGzip && len(src) >= 18 {
		return int(binary.LittleEndian.Uint32(src[len(src)-4:])) + 1 // + 1: reading on finds the end
	}
	return 4 * len(src)
}

// open returns a decoder of src and the function that puts it back.
func (d *streamDecoder) open(src []byte, codec kgo.CompressionCodecType) (io.Reader, func(), error) {
	switch codec {
	case kgo.CodecGzip:
		zr, _ := d.gzips.Get().(*gzip.Reader)
		if zr == nil {
			zr = new(gzip.Reader)
		}
		if err := zr.Reset(bytes.NewReader(src)); err != nil {
			d.gzips.Put(zr)
			return nil, nil, err
		}
		return zr, func() { d.gzips.Put(zr) }, nil
	case kgo.CodecLz4:
		lr, _ := d.lz4s.Get().(*lz4.Reader)
		if lr == nil {
			lr = lz4.NewReader(nil)
		}
		lr.Reset(bytes.NewReader(src))
		return lr, func() { d.lz4s.Put(lr) }, nil
	}
	return nil, nil, errors.New("streamDecoder: not a gzip or lz4 batch")
}

// readKept reads r into one slice, first bytes at first and growing, until
// r ends or more than limit bytes are read. complete says it ended; then
// kept is all of it.
func readKept(r io.Reader, limit, first int) (kept []byte, n int, complete bool, err error) {
	buf := make([]byte, 0, min(max(first, 512), limit+1))
	for {
		if len(buf) == cap(buf) {
			buf = slices.Grow(buf, min(cap(buf), limit+1-len(buf)))
		}
		k, err := fill(r, buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+k]
		switch {
		case errors.Is(err, io.EOF):
			return buf, len(buf), true, nil
		case err != nil:
			return nil, len(buf), false, err
		case len(buf) > limit:
			return nil, len(buf), false, nil
		}
	}
}

// fill reads r into b until b is full or r fails; io.EOF means r ended
// (io.ReadFull cannot tell that from a decoder's own io.ErrUnexpectedEOF,
// a truncated stream).
func fill(r io.Reader, b []byte) (int, error) {
	n := 0
	for n < len(b) {
		k, err := r.Read(b[n:])
		n += k
		if err != nil {
			return n, err
		}
	}
	return n, nil
}
