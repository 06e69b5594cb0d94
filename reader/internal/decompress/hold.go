package decompress

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync/atomic"
)

// One record batch decompresses to at most the batch limit, but franz-go
// decompresses every batch of a fetch response before the caller's poll
// sees any of them: a response of many batches, each just under the limit,
// would decode whole, a thousand times its size on the wire for zeros.
//
// fetchHold bounds that with a budget of the client's own. It counts the
// decompressed bytes the client holds that the caller has not taken yet
// (held), and the decompressor admits a batch when it fits in the budget
// on top of held, or when held is empty. A batch that does not fit is
// deferred: the decompressor returns ErrDeferred, having decoded nothing
// when the size is known first (zstd frames that declare it, a gzip
// trailer, a batch counted in constant memory), else dropping what it
// decoded. franz-go then returns the partition's records before the batch
// and fetches again from the batch on later (it treats a decompression
// error after some records of a partition as a response cut off at its
// end), or, for the partition's first batch in the response, hands the
// poll ErrDeferred for the partition, with no records, and fetches the
// same offset again once the fetch is drained (it also asks for metadata
// then, as for any error of a partition). Nothing is skipped and nothing
// is delivered twice; a deferral costs fetching the batch again, and
// decoding it again when its size was not known first.
//
// The caller empties held (Release) when a poll has drained a fetch and
// the client holds no record any more: what the caller took is then its
// own, or was dropped (a pause, a seek, a revoke). A deferral always
// reaches a poll (as an error, or as the records before it), so held
// cannot stay up for good. After a poll that brought only deferred
// batches, the caller waits until it has room for the smallest of them, or
// holds nothing (PollLimit): polling sooner would fetch them only to defer
// them again. When the client holds nothing the next batch is admitted
// whatever its size (up to the batch limit), so reading always goes on.
//
// The bound: the batches the client holds decompressed come to at most
// the budget, or one batch (up to the batch limit) when that alone is
// more. A release while a response is being decoded forgets what that
// response admitted so far; it may then admit as much again. With one
// broker, which fetches its next response only once the last is drained,
// that happens at most once a response, so the client holds at most about
// twice the budget (or one batch), plus one batch being decoded per broker
// (the batch limit) when its size is not known first: about 2 x budget +
// the batch limit in the worst case. With several brokers each release
// needs a drained fetch; a broker whose response decodes slowly while
// others are drained can see more than one, each bounded the same way.
//
// The budget is the client's own rather than shared with the records the
// caller holds: shared, a backlog keeps the caller near its budget, so the
// client would defer ordinary batches of nearly every response and fetch
// them again, which costs the broker and the client CPU for every record.
// Its own, the client defers only when one response decodes to more than
// the budget: bombs, not ordinary batches.
type fetchHold struct {
	budget int64

	held atomic.Int64 // decompressed bytes admitted since the last release

	// live is held plus what Decompress calls hold decoded, not admitted
	// yet; peak is the most it was (tests assert the bound on it).
	live, peak atomic.Int64

	deferred atomic.Int64 // batches deferred, since start
	// needRoom is the smallest batch deferred since the last release: the
	// caller waits for that much room before it polls again (PollLimit).
	needRoom atomic.Int64
}

// ErrDeferred is what the decompressor returns for a batch that does not
// fit in the fetch budget now: franz-go fetches it again later, so the
// caller's poll takes it for flow control, not trouble.
var ErrDeferred = errors.New("decompression deferred: the decompressed batches the client holds fill reader.Config.MaxBufferedBytes")

// DeferredError says how much was held when a batch was deferred; it
// unwraps to ErrDeferred.
type DeferredError struct{ Held, Size, Budget int64 }

func (e *DeferredError) Error() string {
	return fmt.Sprintf("decompression deferred: kafka2pg already holds %d decompressed bytes, and a batch of %d more would pass the budget of %d", e.Held, e.Size, e.Budget)
}

func (e *DeferredError) Unwrap() error { return ErrDeferred }

// room returns a *DeferredError if a batch of at least n decompressed
// bytes does not fit now, else nil. It admits nothing: admit does, once
// the batch is decoded.
func (h *fetchHold) room(n int64) error {
	if held := h.held.Load(); !h.fitsIn(held, n) {
		return h.deferral(held, n)
	}
	return nil
}

// fits reports whether a batch of at most n decompressed bytes fits now.
func (h *fetchHold) fits(n int64) bool {
	return h.fitsIn(h.held.Load(), n)
}

// fitsIn is the rule: a batch fits when the client holds nothing (so that
// reading always goes on), or when it fits in the budget on top of what it
// holds.
func (h *fetchHold) fitsIn(held, n int64) bool {
	return held == 0 || held+n <= h.budget
}

// decoded counts n bytes decoded and not admitted yet.
func (h *fetchHold) decoded(n int64) {
	live := h.live.Add(n)
	for peak := h.peak.Load(); live > peak && !h.peak.CompareAndSwap(peak, live); peak = h.peak.Load() {
	}
}

// admit takes n decoded bytes into held if they fit, and returns nil, or
// returns a *DeferredError and forgets them.
func (h *fetchHold) admit(n int64) error {
	for {
		held := h.held.Load()
		if !h.fitsIn(held, n) {
			h.live.Add(-n)
			return h.deferral(held, n)
		}
		if h.held.CompareAndSwap(held, held+n) {
			return nil
		}
	}
}

func (h *fetchHold) deferral(held, n int64) error {
	h.deferred.Add(1)
	for need := h.needRoom.Load(); (need == 0 || n < need) && !h.needRoom.CompareAndSwap(need, n); need = h.needRoom.Load() {
	}
	return &DeferredError{Held: held, Size: n, Budget: h.budget}
}

// release forgets what the client held (Decompressor.Release).
func (h *fetchHold) release() {
	h.live.Add(-h.held.Swap(0))
}

// pollLimit is Decompressor.PollLimit.
func (h *fetchHold) pollLimit(onlyDeferred bool) int64 {
	need := h.needRoom.Swap(0)
	if !onlyDeferred || need == 0 {
		return h.budget
	}
	return max(h.budget-need+1, 1)
}

// gzipFloor returns at least how many bytes src, a gzip stream, decodes
// to, from its trailer: the size of its last member, modulo 4 GiB (a
// trailer that lies fails the decoder's own check). ok is false when src
// is too short to have one.
func gzipFloor(src []byte) (n int64, ok bool) {
	if len(src) < 18 {
		return 0, false
	}
	return int64(binary.LittleEndian.Uint32(src[len(src)-4:])), true
}
