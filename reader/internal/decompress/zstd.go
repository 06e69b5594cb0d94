package decompress

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"

	"github.com/klauspost/compress/zstd"
	"github.com/twmb/franz-go/pkg/kgo"
)

// decodeZstd decodes src, zstd frames. Its size is known before it is
// decoded when its frames declare it; else a batch that may be over the
// limit, over what the budget has room for, or over keepFirst, is counted
// first, in constant memory. A batch of known size over keepFirst is
// decoded by a decoder of its own into one slice of that size (zstdDecode).
func (d *Decompressor) decodeZstd(src []byte) ([]byte, error) {
	bound, declared, ok := zstdSizes(src)
	n := int64(-1)
	switch {
	case ok && declared >= 0 && declared <= int64(d.maxBatchBytes):
		n = declared // the decoder fails a frame as soon as it decodes to more
	case ok && bound <= keepFirst && d.hold.fits(bound):
	default:
		count, err := zstdCount(src, d.maxBatchBytes)
		if err != nil {
			break // the decoder below says what is wrong
		}
		if count > int64(d.maxBatchBytes) {
			return nil, kgo.ErrMaxDecompress
		}
		n = count
	}
	if n >= 0 {
		if err := d.hold.room(n); err != nil {
			return nil, err
		}
	}
	if n > keepFirst {
		return zstdDecode(src, n, d.maxBatchBytes)
	}
	return d.inner.Decompress(src, kgo.CodecZstd)
}

// zstdDecode decodes src, known to decode to n bytes, into one slice of n
// bytes, with a decoder of its own: franz-go's pooled decoders keep their
// last outputs reachable, so a large batch would stay live after the
// caller is done with it, and decoding a stream without a slice of the
// right size grows one step by step, garbage of about its size again.
func zstdDecode(src []byte, n int64, max int) ([]byte, error) {
	dec, err := zstd.NewReader(nil, zstd.WithDecoderLowmem(true), zstd.WithDecoderConcurrency(1),
		zstd.WithDecoderMaxMemory(uint64(max)))
	if err != nil {
		return nil, err
	}
	defer dec.Close()
	out, err := dec.DecodeAll(src, make([]byte, 0, n))
	if err != nil {
		return nil, err
	}
	if int64(len(out)) != n {
		return nil, fmt.Errorf("zstd batch decodes to %d bytes, not the %d counted or declared", len(out), n)
	}
	return out, nil
}

// zstdCount decodes src without keeping the output and returns how many
// bytes it decodes to, counting no further than max+1. The decoder holds
// its window, at most max as franz-go's own allows.
func zstdCount(src []byte, max int) (int64, error) {
	dec, err := zstd.NewReader(bytes.NewReader(src), zstd.WithDecoderLowmem(true), zstd.WithDecoderConcurrency(1),
		zstd.WithDecoderMaxMemory(uint64(max)), zstd.WithDecoderMaxWindow(uint64(max)))
	if err != nil {
		return 0, err
	}
	defer dec.Close()
	n, err := io.CopyN(io.Discard, dec, int64(max)+1)
	if errors.Is(err, io.EOF) {
		err = nil
	}
	return n, err
}

// zstdMaxBlock is the most a zstd block decodes to (Block_Maximum_Size).
const zstdMaxBlock = 128 << 10

// zstdBound returns an upper bound of what src, zstd frames, decodes to,
// from the frame and block headers alone (RFC 8878, section 3.1): a raw
// or RLE block says its size, a compressed one decodes to zstdMaxBlock at
// most. ok is false when src is not frames as the RFC writes them; the
// decoder then says what is wrong.
func zstdBound(src []byte) (bound int64, ok bool) {
	bound, _, ok = zstdSizes(src)
	return bound, ok
}

// zstdSizes is zstdBound, and what the frames declare they decode to
// (Frame_Content_Size, which the decoder checks), -1 when one does not.
func zstdSizes(src []byte) (bound, declared int64, ok bool) {
	for len(src) > 0 {
		if len(src) < 4 {
			return 0, 0, false
		}
		magic := binary.LittleEndian.Uint32(src)
		if magic&0xFFFFFFF0 == 0x184D2A50 { // a skippable frame
			if len(src) < 8 {
				return 0, 0, false
			}
			n := int(binary.LittleEndian.Uint32(src[4:]))
			if n < 0 || len(src) < 8+n {
				return 0, 0, false
			}
			src = src[8+n:]
			continue
		}
		if magic != 0xFD2FB528 || len(src) < 5 {
			return 0, 0, false
		}
		fhd := src[4]
		singleSegment := fhd&0x20 != 0
		checksum := fhd&0x04 != 0
		header := 5
		if !singleSegment {
			header++ // Window_Descriptor
		}
		header += [4]int{0, 1, 2, 4}[fhd&0x03] // Dictionary_ID
		fcs := [4]int{0, 2, 4, 8}[fhd>>6]
		if fcs == 0 && singleSegment {
			fcs = 1
		}
		header += fcs
		if len(src) < header {
			return 0, 0, false
		}
		if declared >= 0 {
			declared = frameContentSize(src[header-fcs:header], declared)
		}
		src = src[header:]
		for last := false; !last; {
			if len(src) < 3 {
				return 0, 0, false
			}
			h := uint32(src[0]) | uint32(src[1])<<8 | uint32(src[2])<<16
			src = src[3:]
			last = h&1 != 0
			size := int(h >> 3)
			switch (h >> 1) & 3 {
			case 0: // raw
				bound += int64(size)
			case 1: // RLE: one byte, repeated size times
				bound += int64(size)
				size = 1
			case 2: // compressed
				bound += zstdMaxBlock
			default:
				return 0, 0, false
			}
			if len(src) < size {
				return 0, 0, false
			}
			src = src[size:]
		}
		if checksum {
			if len(src) < 4 {
				return 0, 0, false
			}
			src = src[4:]
		}
	}
	return bound, declared, true
}

// frameContentSize adds the Frame_Content_Size field b to sum: -1 when b
// is empty (the frame does not say), or when the sum passes what any batch
// may decode to.
func frameContentSize(b []byte, sum int64) int64 {
	var n uint64
	switch len(b) {
	case 1:
		n = uint64(b[0])
	case 2:
		n = uint64(binary.LittleEndian.Uint16(b)) + 256
	case 4:
		n = uint64(binary.LittleEndian.Uint32(b))
	case 8:
		n = binary.LittleEndian.Uint64(b)
	default:
		return -1
	}
	if n > math.MaxInt32 || sum+int64(n) > math.MaxInt32 {
		return -1
	}
	return sum + int64(n)
}
