package reader

import (
	"fmt"
	"math"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Memory is counted after decompression. A compressed record batch can
// hold a thousand times its size (16 values of 50 MB of zeros take a few
// KB with zstd), and franz-go decompresses a fetch's batches in its own
// goroutines before any record reaches the reader's budget. So the
// client's decompressor (package reader/internal/decompress) bounds one
// batch at maxBatchBytes: MaxBufferedBytes, but never less than
// minBatchLimit. The client refuses a larger one with
// *kgo.ErrDecompressTooLarge, naming its offsets, and the reader hands
// those offsets on as unreadable (Batch.Unreadable), so that the writer
// accounts for each of them in the fenced transaction, and moves the
// client past the batch (SetOffsets). The client reports a refusal only
// once, and drops it with a fetch no poll has taken when its fetch session
// ends (a SetOffsets, a rebalance); the reader follows each refusal until
// a poll reports it, and fetches the partition again if none does
// (refused.go), so that bombs on any number of partitions all become
// unreadable spans.
//
// The batches of one fetch response are all decompressed before the poll
// loop sees any of them; the decompressor bounds what they decompress to
// together by a budget of MaxBufferedBytes: a batch that does not fit next
// to what the client holds is deferred and fetched again later.

// minBatchLimit is the least a record batch may decompress to whatever
// MaxBufferedBytes says: a small budget (tests use 64 KiB) must not make
// ordinary batches unreadable; it is exceeded by a batch, as by a fetch.
const minBatchLimit = 16 << 20

// maxBatchBytes is how large a record batch may decompress to.
func maxBatchBytes(cfg *Config) int {
	return min(max(cfg.MaxBufferedBytes, minBatchLimit), math.MaxInt32)
}

// unreadSpan is a span of offsets whose record batch could not be read.
type unreadSpan struct {
	first, next int64
	leaderEpoch int32
	err         error
}

// unreadableBatch turns the client's refusal of a batch into a span of
// offsets for the partition to write as unreadable, and moves the client
// past the batch (added to moves, which the poll loop applies after the
// poll's errors). A refusal it does not act on (the partition still holds
// an unreadable span to write) stays marked, and the client is moved to
// fetch it again later (refused.go).
func (r *Reader) unreadableBatch(e *kgo.ErrDecompressTooLarge, moves offsetMoves) {
	tp := TopicPartition{e.Topic, e.Partition}
	p := r.owner(tp)
	if p == nil {
		r.refusals.reported(tp)
		return
	}
	err := fmt.Errorf("the record batch of offsets %d to %d decompresses to more than %d bytes (reader.Config.MaxBufferedBytes, at least 16 MiB), more than kafka2pg may hold; "+
		"raise reader.Config.MaxBufferedBytes above its size and reset the offsets to read it", e.Offset, e.NextOffset-1, maxBatchBytes(&r.cfg))
	if !p.noteUnreadable(unreadSpan{first: e.Offset, next: e.NextOffset, leaderEpoch: e.Epoch, err: err}) {
		return
	}
	r.refusals.reported(tp)
	r.log.Warn("record batch too large to read; its offsets go to the dead letters (or stop the partition with ingest.Config.OnError=stop)",
		"topic", e.Topic, "partition", e.Partition, "first_offset", e.Offset, "next_offset", e.NextOffset,
		"max_batch_bytes", maxBatchBytes(&r.cfg))
	moves.add(tp, kgo.EpochOffset{Epoch: e.Epoch, Offset: e.NextOffset})
}

// deferredLogEvery is how often at most a deferral is logged.
const deferredLogEvery = 10 * time.Second

// noteDeferred logs, at DEBUG and at most every deferredLogEvery, that a
// partition's batch was deferred: it is flow control, not trouble (the
// count is Stats.DeferredBatches).
func (r *Reader) noteDeferred(topic string, partition int32, err error) {
	now := time.Now().UnixNano()
	last := r.deferredLogged.Load()
	if now-last < int64(deferredLogEvery) || !r.deferredLogged.CompareAndSwap(last, now) {
		return
	}
	r.log.Debug("record batch decompression deferred until the reader takes what the client holds; fetched again",
		"topic", topic, "partition", partition, "deferred_batches", r.dec.Deferred(), "error", err.Error())
}
