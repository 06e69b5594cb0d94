package reader

import (
	"cmp"
	"slices"

	"github.com/twmb/franz-go/pkg/kgo"
)

// leastRecentlyServedFirst orders a fetch request: the partitions whose
// records arrived longest ago first, those never served before all others.
// Brokers fill a fetch in request order up to FetchMaxBytes, and by default
// the client only rotates its partition list by one per fetch; while the
// memory budget pauses and resumes every partition together, that served the
// partitions at the head of the list again and again and left the tail
// waiting, for most of a drain when the backlog is deeper than the
// budget. Served oldest first, every
// partition with records gets its share before any gets a second. Fetch
// sessions are off (reader.go): in a session the request leaves out the
// partitions whose position did not change, and their order is the broker's.
// Requests are ordered by topic, then partition: topics go by their least
// recently served partition. The client calls it from its fetch goroutines;
// it takes no lock of the reader.
func (r *Reader) leastRecentlyServedFirst(_ map[string]map[int32]int64, torder []string, porder map[string][]int32) ([]string, map[string][]int32) {
	type served struct {
		n  int32 // the partition; for a topic, unused
		at int64 // UnixNano of its last records; for a topic, its oldest partition's
	}
	topics := make([]served, len(torder))
	parts := make(map[string][]int32, len(porder))
	for i, topic := range torder {
		ps := make([]served, len(porder[topic]))
		topics[i] = served{n: int32(i), at: -1}
		for k, n := range porder[topic] {
			ps[k].n = n
			if v, ok := r.served.Load(TopicPartition{topic, n}); ok {
				ps[k].at = v.(*partition).lastFetch.Load()
			}
			if topics[i].at < 0 || ps[k].at < topics[i].at {
				topics[i].at = ps[k].at
			}
		}
		slices.SortStableFunc(ps, func(a, b served) int { return cmp.Compare(a.at, b.at) })
		order := make([]int32, len(ps))
		for k, p := range ps {
			order[k] = p.n
		}
		parts[topic] = order
	}
	slices.SortStableFunc(topics, func(a, b served) int { return cmp.Compare(a.at, b.at) })
	out := make([]string, len(topics))
	for i, t := range topics {
		out[i] = torder[t.n]
	}
	return out, parts
}

// batchOverhead is a record batch's header, which a broker counts against a
// partition's share and FetchBatchMetrics does not.
const batchOverhead = 64

// partitionShare is a partition's share of a fetch when the user did not set
// FetchMaxPartitionBytes: FetchMaxBytes over the partitions owned, so that
// one fetch serves all of them a little instead of a few of them their whole
// backlogs, but never under twice the largest record batch seen. A broker
// returns a batch larger than a partition's share only in the first
// partition of a fetch, so a share under the producers' batch size would
// serve one partition per fetch. Until a batch was seen, and never above
// it, the share is FetchMaxPartitionBytes' default (1 MiB).
func partitionShare(cfg *Config, owned int32, largestBatch int64) int32 {
	limit := cfg.FetchMaxPartitionBytes
	if owned <= 0 || largestBatch <= 0 {
		return limit
	}
	floor := int32(min(2*(largestBatch+batchOverhead), int64(limit)))
	return min(max(cfg.FetchMaxBytes/owned, floor), limit)
}

// shareFetchBytes brings the client's per-partition fetch bound up to date
// with the partitions owned and the largest batch seen.
func (r *Reader) shareFetchBytes() {
	if !r.cfg.sharePartitionBytes {
		return
	}
	r.share.mu.Lock()
	defer r.share.mu.Unlock()
	if r.share.cl == nil {
		return // New applies it once the client exists
	}
	share := partitionShare(&r.cfg, r.ownedCount.Load(), r.largestBatch.Load())
	if share != r.share.bytes {
		r.share.bytes = share
		r.share.cl.UpdateFetchMaxBytes(r.cfg.FetchMaxBytes, share)
		r.log.Debug("per-partition fetch share", "bytes", share, "partitions", r.ownedCount.Load(), "largest_batch", r.largestBatch.Load())
	}
}

// batchSizes is the client hook that records the largest record batch
// fetched, compressed, for partitionShare.
type batchSizes struct{ r *Reader }

func (h batchSizes) OnFetchBatchRead(_ kgo.BrokerMetadata, _ string, _ int32, m kgo.FetchBatchMetrics) {
	b := int64(m.CompressedBytes)
	for {
		cur := h.r.largestBatch.Load()
		if b <= cur {
			return
		}
		if h.r.largestBatch.CompareAndSwap(cur, b) {
			break
		}
	}
	h.r.shareFetchBytes()
}
