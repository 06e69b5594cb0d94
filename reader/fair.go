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
// waiting (a 64-partition backlog deeper than the budget: one partition went
// 1.9 s of a 2.4 s drain without a write). Served oldest first, every
// partition with records gets its share before any gets a second. Fetch
// sessions are off (reader.go): in a session the request leaves out the
// partitions whose position did not change, and their order is the broker's.
// Requests are ordered by topic, then partition: topics go by their least
// recently served partition. The client calls it from its fetch goroutines;
// it takes no lock of the reader.
func (r *Reader) leastRecentlyServedFirst(lag map[string]map[int32]int64, torder []string, porder map[string][]int32) ([]string, map[string][]int32) {
	type ranked struct {
		topic  string
		oldest int64
		prior  int
	}
	topics := make([]ranked, 0, len(torder))
	parts := make(map[string][]int32, len(porder))
	for i, topic := range torder {
		ps := slices.Clone(porder[topic])
		at := make(map[int32]int64, len(ps))
		oldest := int64(-1)
		for _, n := range ps {
			var t int64
			if v, ok := r.served.Load(TopicPartition{topic, n}); ok {
				t = v.(*partition).lastFetch.Load()
			}
			at[n] = t
			if oldest < 0 || t < oldest {
				oldest = t
			}
		}
		slices.SortStableFunc(ps, func(a, b int32) int { return cmp.Compare(at[a], at[b]) })
		parts[topic] = ps
		topics = append(topics, ranked{topic, oldest, i})
	}
	slices.SortStableFunc(topics, func(a, b ranked) int { return cmp.Compare(a.oldest, b.oldest) })
	out := make([]string, len(topics))
	for i, t := range topics {
		out[i] = t.topic
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
	// The client starts joining the group inside kgo.NewClient, so the
	// assignment callback and the batch hook can run before New has
	// stored r.cl: they find the client here, or New applies the share
	// once it has stored it.
	cl := r.shareCl.Load()
	if !r.cfg.sharePartitionBytes || cl == nil {
		return
	}
	r.shareMu.Lock()
	defer r.shareMu.Unlock()
	share := partitionShare(&r.cfg, r.ownedCount.Load(), r.largestBatch.Load())
	if r.share.Swap(share) != share {
		cl.UpdateFetchMaxBytes(r.cfg.FetchMaxBytes, share)
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
