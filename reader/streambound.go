package reader

import (
	"bytes"
	"errors"
	"io"
	"sync"

	"github.com/klauspost/compress/gzip"
	"github.com/pierrec/lz4/v4"
	"github.com/twmb/franz-go/pkg/kgo"
)

// gzip and lz4 streams say nothing of what they decode to (gzip's trailer
// holds the size of its last member only, modulo 4 GiB; the lz4 frames
// Kafka's producers write leave the content size out). franz-go decodes
// them into a pooled bytes.Buffer that doubles until it holds the bound,
// so refusing a bomb cost three times the bound at once (the old buffer,
// the new one, and the pool kept the largest), 270 MiB of peak RSS with
// default flags. streamDecoder decodes them in steps instead:
//
//   - up to keepFirst bytes are kept, in chunks that grow; a batch that
//     ends there (nearly all of them) is decoded once, and costs at most
//     twice what it decodes to, like the buffer did;
//   - past keepFirst, the chunks are dropped and the rest of the stream is
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
// decodes to more than max bytes. It is safe for concurrent use.
func (d *streamDecoder) decode(src []byte, codec kgo.CompressionCodecType, max int) ([]byte, error) {
	r, done, err := d.open(src, codec)
	if err != nil {
		return nil, err
	}
	kept, n, complete, err := readKept(r, min(keepFirst, max))
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
		return lr, func() { lr.Reset(nil); d.lz4s.Put(lr) }, nil
	}
	return nil, nil, errors.New("streamDecoder: not a gzip or lz4 batch")
}

// readKept reads r into chunks until it ends or limit bytes are read.
// complete says it ended; then kept is all of it, in one slice.
func readKept(r io.Reader, limit int) (kept []byte, n int, complete bool, err error) {
	var chunks [][]byte
	for size := countChunk; n < limit; size = min(2*size, 1<<20) {
		c := make([]byte, min(size, limit-n))
		k, err := fill(r, c)
		n += k
		chunks = append(chunks, c[:k])
		if errors.Is(err, io.EOF) {
			return join(chunks, n), n, true, nil
		}
		if err != nil {
			return nil, n, false, err
		}
	}
	// limit bytes read: the stream may end right there.
	var probe [1]byte
	k, err := fill(r, probe[:])
	if errors.Is(err, io.EOF) { // with the last byte (k == 1) or not
		chunks = append(chunks, probe[:k])
		return join(chunks, n+k), n + k, true, nil
	}
	return nil, n + k, false, err
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

// join returns the chunks as one slice of n bytes.
func join(chunks [][]byte, n int) []byte {
	if len(chunks) == 1 {
		return chunks[0]
	}
	out := make([]byte, 0, n)
	for _, c := range chunks {
		out = append(out, c...)
	}
	return out
}
