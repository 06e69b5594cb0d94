package decompress

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Decompressor is franz-go's own decompressor, bounded at a batch limit,
// with the fetch budget of hold.go on top, and two codecs decoded its own
// way:
//
//   - zstd: a frame that does not declare its size (Java's producer streams
//     zstd that way) grows the output slice step by step towards the limit
//     in franz-go's decoder, twice the limit live before the decoder gives
//     up. So a batch whose frames do not declare their size, and which its
//     block headers say could be larger than keepFirst (or than the fetch
//     budget has room for), is first decoded without keeping anything,
//     counting, in the decoder's window; only if it fits is it decoded for
//     real, into one slice of its size (zstd.go). The block-header bound
//     is at most about twice what a batch decodes to (a stream's blocks
//     hold 64 KiB, counted as the 128 KiB a block may hold), so only
//     batches over about 4 MiB are counted first, which costs their
//     decoding twice.
//   - gzip and lz4 are decoded by streamDecoder (stream.go), which holds at
//     most a few MiB of a batch that turns out to be over the limit.
//
// snappy is franz-go's: it checks the size each block declares before
// decoding.
//
// The client calls Decompress from its fetch goroutines, concurrently.
type Decompressor struct {
	inner         kgo.Decompressor // franz-go's, bounded at maxBatchBytes
	stream        streamDecoder    // gzip and lz4
	maxBatchBytes int
	hold          fetchHold
	refused       refusedBatches
}

// New returns a Decompressor that refuses a batch decompressing to more
// than maxBatchBytes (kgo.ErrMaxDecompress), and defers one that does not
// fit next to what the client holds within budget (a *DeferredError).
//
// It takes franz-go's decompressor from a client that is never used
// (kgo.Client.OptValue): franz-go bounds its own at
// kgo.MaxDecompressBatchBytes, but does not bound one it is given.
func New(maxBatchBytes int, budget int64) (*Decompressor, error) {
	probe, err := kgo.NewClient(kgo.MaxDecompressBatchBytes(maxBatchBytes))
	if err != nil {
		return nil, fmt.Errorf("create Kafka decompressor: %w", err)
	}
	defer probe.Close()
	inner, ok := probe.OptValue(kgo.WithDecompressor).(kgo.Decompressor)
	if !ok || inner == nil {
		return nil, errors.New("create Kafka decompressor: the client has none")
	}
	return &Decompressor{inner: inner, maxBatchBytes: maxBatchBytes, hold: fetchHold{budget: budget}}, nil
}

// Decompress decodes src. It returns kgo.ErrMaxDecompress for a batch
// over the batch limit, and a *DeferredError for one that does not fit in
// the fetch budget now (hold.go): refused before it is decoded when its
// size is known first (zstd frames or a gzip trailer that say it, a batch
// counted before it is decoded), else decoded and dropped. A batch over
// the limit is refused whatever the budget.
func (d *Decompressor) Decompress(src []byte, codec kgo.CompressionCodecType) ([]byte, error) {
	out, err := d.decode(src, codec)
	if err != nil {
		if errors.Is(err, kgo.ErrMaxDecompress) {
			d.refused.add(len(src), codec)
		}
		return nil, err
	}
	d.hold.decoded(int64(len(out)))
	if err := d.hold.admit(int64(len(out))); err != nil {
		return nil, err
	}
	return out, nil
}

// decode decodes src, refusing with kgo.ErrMaxDecompress what decodes to
// more than maxBatchBytes, and deferring what it counts before decoding
// and does not fit in the fetch budget.
func (d *Decompressor) decode(src []byte, codec kgo.CompressionCodecType) ([]byte, error) {
	switch codec {
	case kgo.CodecGzip, kgo.CodecLz4:
		if n, ok := gzipFloor(src); ok && codec == kgo.CodecGzip && n <= int64(d.maxBatchBytes) {
			if err := d.hold.room(n); err != nil {
				return nil, err
			}
		}
		return d.stream.decode(src, codec, d.maxBatchBytes, d.hold.room)
	case kgo.CodecZstd:
		return d.decodeZstd(src)
	}
	return d.inner.Decompress(src, codec)
}

// Release forgets what the client holds decompressed: the caller calls it
// when a poll drained a fetch and the client holds no record any more
// (kgo.Client.BufferedFetchRecords is 0).
func (d *Decompressor) Release() { d.hold.release() }

// PollLimit is how much the caller may hold when it polls: the budget, or,
// after a poll that brought only deferred batches (onlyDeferred), what
// leaves room for the smallest of them (at least 1: the caller empty).
// Polling sooner would fetch them again only to defer them again.
func (d *Decompressor) PollLimit(onlyDeferred bool) int64 { return d.hold.pollLimit(onlyDeferred) }

// Deferred is how many batches were deferred since New.
func (d *Decompressor) Deferred() int64 { return d.hold.deferred.Load() }

// Peak is the most decompressed bytes held at once since New: admitted
// and not released, or decoded and not admitted yet.
func (d *Decompressor) Peak() int64 { return d.hold.peak.Load() }

// Refused reports whether a batch the client read, as its
// kgo.HookFetchBatchRead hook sees it, is one Decompress refused as too
// large, and then forgets that refusal. The client calls the hook right
// after each batch, with the batch's partition, and a refused batch reads
// as no records; Decompress does not know the partition, so the caller
// matches the two by this.
func (d *Decompressor) Refused(m kgo.FetchBatchMetrics) bool { return d.refused.match(m) }

// refusedBatches counts the batches Decompress refused as too large by
// size and codec, until the hook matches them.
type refusedBatches struct {
	unmatched atomic.Int64 // refused batches not matched yet: the hook's fast path

	mu      sync.Mutex
	batches map[refusedBatch]int
}

type refusedBatch struct {
	size  int // compressed
	codec kgo.CompressionCodecType
}

// maxUnmatched bounds the refusals kept for the hook: a batch the hook
// never matches (a message set of the old formats, counted otherwise) must
// not stay forever.
const maxUnmatched = 1024

// add counts a refused batch of size compressed bytes.
func (rb *refusedBatches) add(size int, codec kgo.CompressionCodecType) {
	rb.mu.Lock()
	defer rb.mu.Unlock()
	if rb.batches == nil || len(rb.batches) >= maxUnmatched {
		rb.batches = make(map[refusedBatch]int)
		rb.unmatched.Store(0)
	}
	rb.batches[refusedBatch{size, codec}]++
	rb.unmatched.Add(1)
}

// match reports whether m, a batch that read as no records, matches a
// refusal, and forgets it. A batch that read as no records without a
// refusal of its size is one the client skipped.
func (rb *refusedBatches) match(m kgo.FetchBatchMetrics) bool {
	if rb.unmatched.Load() == 0 || m.NumRecords != 0 || m.CompressionType == 0 {
		return false
	}
	b := refusedBatch{m.CompressedBytes, kgo.CompressionCodecType(m.CompressionType)}
	rb.mu.Lock()
	defer rb.mu.Unlock()
	n := rb.batches[b]
	switch n {
	case 0:
		return false
	case 1:
		delete(rb.batches, b)
	default:
		rb.batches[b] = n - 1
	}
	rb.unmatched.Add(-1)
	return true
}
