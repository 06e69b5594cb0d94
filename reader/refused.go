package reader

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// A batch the decompressor refuses as too large (kgo.ErrMaxDecompress)
// stops the client's fetching of its partition: franz-go marks the
// partition's cursor stopped, reports the refusal once, as a
// *kgo.ErrDecompressTooLarge in the poll that takes the fetch, and fetches
// the partition again only after SetOffsets moves it. But every SetOffsets,
// and every rebalance, ends the client's fetch session, which drops the
// fetches the client holds that no poll has taken yet, with their errors,
// and a dropped refusal leaves its cursor stopped: the partition is never
// fetched again, and nothing says so. Bombs on several partitions meet that
// whenever their refusals come in more than one poll: in responses of
// different brokers, in two responses of one broker (a partition whose
// bomb follows records is refused a fetch later than one whose bomb comes
// first), or in one response that polls take in parts (BatchMaxRows). The
// SetOffsets that moves the first partition past its batch then drops the
// refusals of the others.
//
// refusals follows each refusal from the decompressor to the poll loop.
// The decompressor counts the batches it refuses by size and codec; the
// client's hook, which it calls right after each batch with the batch's
// partition, matches them (decompress.Decompressor.Refused) and marks the
// partition; the poll loop clears the mark when it handles the
// partition's *kgo.ErrDecompressTooLarge (unreadableBatch). A mark that no
// poll clears within refusalGrace, once the client holds no fetched
// records and has refused nothing for refusalQuiet (a response still being
// decoded is not buffered yet), belongs to a dropped fetch: the poll loop
// moves the partition with SetOffsets to where it stands (rearmRefused),
// which starts its cursor again, and the batch is fetched, refused and
// reported again. A report that was only late costs a fetch again; the
// grace doubles with each attempt on a partition, so that responses that
// take longer than it to decode do not keep being dropped.
type refusals struct {
	mu    sync.Mutex
	parts map[TopicPartition]*refusal
	last  time.Time // the latest refusal matched
}

type refusal struct {
	at    time.Time // when the partition was refused, or last moved to be fetched again
	grace time.Duration
}

const (
	// refusalGrace is how long at first a refusal may take to reach a poll
	// before the poll loop takes it for dropped.
	refusalGrace = 2 * time.Second
	// refusalGraceMax bounds the grace as it doubles.
	refusalGraceMax = time.Minute
	// refusalQuiet is how long the client must have refused nothing: a
	// response of many bombs is buffered only once all are decoded.
	refusalQuiet = time.Second
)

// matched marks tp refused: the hook matched a batch of tp to a refusal.
func (rs *refusals) matched(tp TopicPartition) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	now := time.Now()
	rs.last = now
	if rs.parts == nil {
		rs.parts = make(map[TopicPartition]*refusal)
	}
	if rf := rs.parts[tp]; rf != nil {
		rf.at = now // fetched again and refused again: the grace so far stands
		return
	}
	rs.parts[tp] = &refusal{at: now, grace: refusalGrace}
}

// reported forgets the refusal of tp: a poll reported it, or the
// partition is gone or will be moved anyway.
func (rs *refusals) reported(tp TopicPartition) {
	rs.mu.Lock()
	delete(rs.parts, tp)
	rs.mu.Unlock()
}

// due returns the partitions whose refusal no poll reported in time, and
// doubles their grace.
func (rs *refusals) due(now time.Time) []TopicPartition {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if len(rs.parts) == 0 || now.Sub(rs.last) < refusalQuiet {
		return nil
	}
	var out []TopicPartition
	for tp, rf := range rs.parts {
		if now.Sub(rf.at) >= rf.grace {
			out = append(out, tp)
			rf.at, rf.grace = now, min(2*rf.grace, refusalGraceMax)
		}
	}
	return out
}

// refusedBatches is the client hook that tells refusals which partition a
// refused batch belongs to.
type refusedBatches struct{ r *Reader }

func (h refusedBatches) OnFetchBatchRead(_ kgo.BrokerMetadata, topic string, partition int32, m kgo.FetchBatchMetrics) {
	if h.r.dec.Refused(m) {
		h.r.refusals.matched(TopicPartition{topic, partition})
	}
}

// rearmRefused moves the partitions whose refusal the client dropped to
// where they stand, so that the client fetches them again. The poll loop
// calls it after a poll (SetOffsets is safe there); it does nothing while
// the client holds fetched records, which may still hold the refusals. For
// a partition that has read and stored nothing it asks the brokers where
// the partition starts, which holds the poll loop up to 10 s at worst.
func (r *Reader) rearmRefused(ctx context.Context) {
	if r.cl.BufferedFetchRecords() > 0 {
		return
	}
	due := r.refusals.due(time.Now())
	if len(due) == 0 {
		return
	}
	set := make(map[string]map[int32]kgo.EpochOffset)
	for _, tp := range due {
		p := r.owner(tp)
		if p == nil {
			r.refusals.reported(tp)
			continue
		}
		p.mu.Lock()
		at, claimedAt, paused := p.pos, p.lastCommit, p.paused
		moving := p.life.halted() || p.life.ending() // its seek or its end starts the cursor again
		p.mu.Unlock()
		if moving {
			r.refusals.reported(tp)
			continue
		}
		if paused {
			continue // not fetched anyway: due again once the grace has passed
		}
		if at < 0 {
			// Nothing read or stored yet: the client stands where the start
			// policy put it.
			var err error
			if at, err = r.startOffset(ctx, tp, claimedAt); err != nil {
				r.log.Warn("look up where a partition starts, to fetch it again after the client dropped the report of a record batch too large; retrying",
					"topic", tp.Topic, "partition", tp.Partition, "error", err.Error())
				continue
			}
		}
		if set[tp.Topic] == nil {
			set[tp.Topic] = make(map[int32]kgo.EpochOffset)
		}
		set[tp.Topic][tp.Partition] = kgo.EpochOffset{Epoch: -1, Offset: at}
		r.log.Info("the client dropped the report of a record batch too large to read, with the fetch that held it; fetching the partition again to report it",
			"topic", tp.Topic, "partition", tp.Partition, "next_offset", at)
	}
	if len(set) > 0 {
		r.cl.SetOffsets(set)
	}
}

// startOffset is where the client started a partition that has nothing
// stored and has read nothing: where reader.Config.Start puts it. For
// latest, which the client resolved at the claim, it is the first offset
// whose timestamp is not before the claim: exact when producers' clocks
// agree with the bridge's; a producer clock that lags by more than the
// time between the claim and the batch moves it past the batch.
func (r *Reader) startOffset(ctx context.Context, tp TopicPartition, claimedAt time.Time) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	adm := kadm.NewClient(r.cl)
	var listed kadm.ListedOffsets
	var err error
	switch r.cfg.Start.Kind {
	case StartLatest:
		listed, err = adm.ListOffsetsAfterMilli(ctx, claimedAt.UnixMilli(), tp.Topic)
	case StartAtTime:
		listed, err = adm.ListOffsetsAfterMilli(ctx, r.cfg.Start.At.UnixMilli(), tp.Topic)
	case StartCommitted:
		committed, ferr := adm.FetchOffsets(ctx, r.cfg.Group)
		if ferr != nil && !errors.Is(ferr, kerr.GroupIDNotFound) { // no group: nothing committed
			return 0, ferr
		}
		if o, ok := committed.Lookup(tp.Topic, tp.Partition); ok && o.Err == nil && o.At >= 0 {
			return o.At, nil
		}
		listed, err = adm.ListStartOffsets(ctx, tp.Topic) // nothing committed: the client starts at the log start
	default:
		listed, err = adm.ListStartOffsets(ctx, tp.Topic)
	}
	if err != nil {
		return 0, err
	}
	o, ok := listed.Lookup(tp.Topic, tp.Partition)
	switch {
	case !ok:
		return 0, fmt.Errorf("no offset listed for %s/%d", tp.Topic, tp.Partition)
	case o.Err != nil:
		return 0, o.Err
	case o.Offset < 0:
		return 0, errors.New("the broker listed no offset")
	}
	return o.Offset, nil
}
