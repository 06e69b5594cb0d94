package reader

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
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
// reported again. The poll loop's own moves (past a refused batch, to a
// claim's durable position) go in one SetOffsets after the poll's errors
// are handled (move), with every partition still marked: that SetOffsets
// drops their refusals too, and waiting a grace for each would make bombs
// on N partitions cost N graces. A report that was only late costs a fetch again; the
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
	moves int // how many times the poll loop moved the partition to be fetched again
	// start is where the client started the partition, once looked up
	// (startOffset) for a partition that has read nothing: it does not
	// change while the claim lasts.
	start      int64
	startKnown bool
}

const (
	// startLookupTimeout bounds one lookup of where a partition starts:
	// the poll loop waits for it.
	startLookupTimeout = 2 * time.Second
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

// knownStart returns where the client started tp, once looked up.
func (rs *refusals) knownStart(tp TopicPartition) (int64, bool) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if rf := rs.parts[tp]; rf != nil && rf.startKnown {
		return rf.start, true
	}
	return 0, false
}

// started records where the client started tp.
func (rs *refusals) started(tp TopicPartition, at int64) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if rf := rs.parts[tp]; rf != nil {
		rf.start, rf.startKnown = at, true
	}
}

// deferred makes tp due at the next look, with the grace it had before
// due doubled it: the poll loop left it for a later call, to look up where
// another partition starts first.
func (rs *refusals) deferred(tp TopicPartition) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if rf := rs.parts[tp]; rf != nil {
		rf.at, rf.grace = time.Time{}, max(rf.grace/2, refusalGrace)
	}
}

// reported forgets the refusal of tp: a poll reported it, or the
// partition is gone or will be moved anyway.
func (rs *refusals) reported(tp TopicPartition) {
	rs.mu.Lock()
	delete(rs.parts, tp)
	rs.mu.Unlock()
}

// pending returns the partitions whose refusal no poll reported yet.
func (rs *refusals) pending() []TopicPartition {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return slices.Collect(maps.Keys(rs.parts))
}

// moving notes that tp is moved to be fetched again where it stands, and
// returns the leader epoch to move it with. SetOffsets ignores a
// partition whose position, epoch included, equals the one it was last
// set to or polled at, and a partition it ignores stays stopped: so the
// epoch alternates between -1 and -2, which the client both takes for "no
// epoch" (it validates only epochs of 0 and up), and which differ from the
// epoch of any polled record. fresh restarts the partition's grace, for a
// move that did not come from due.
func (rs *refusals) moving(tp TopicPartition, fresh bool) int32 {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	rf := rs.parts[tp]
	if rf == nil {
		return -1
	}
	if fresh {
		rf.at = time.Now()
	}
	rf.moves++
	return -1 - int32(rf.moves%2)
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

// offsetMoves are the client positions the poll loop sets after a poll,
// in one SetOffsets (move): each SetOffsets ends the client's fetch
// session, so one call drops what the client holds once.
type offsetMoves map[string]map[int32]kgo.EpochOffset

func (m offsetMoves) add(tp TopicPartition, at kgo.EpochOffset) {
	if m[tp.Topic] == nil {
		m[tp.Topic] = make(map[int32]kgo.EpochOffset)
	}
	m[tp.Topic][tp.Partition] = at
}

func (m offsetMoves) has(tp TopicPartition) bool {
	_, ok := m[tp.Topic][tp.Partition]
	return ok
}

// rearmRefused adds to moves the partitions whose refusal the client
// dropped, at where they stand, so that the client fetches them again. The
// poll loop calls it after a poll; it does nothing while the client holds
// fetched records, which may still hold the refusals.
func (r *Reader) rearmRefused(ctx context.Context, moves offsetMoves) {
	if r.cl.BufferedFetchRecords() > 0 {
		return
	}
	for _, tp := range r.moveWhereTheyStand(ctx, moves, r.refusals.due(time.Now()), false) {
		r.log.Info("the client dropped the report of a record batch too large to read, with the fetch that held it; fetching the partition again to report it",
			"topic", tp.Topic, "partition", tp.Partition, "next_offset", moves[tp.Topic][tp.Partition].Offset)
	}
}

// move applies moves with SetOffsets. That drops every fetch the client
// holds or has in flight, with the refusals in them that no poll has
// reported yet: the partitions of those are moved too, to where they
// stand, so that they are fetched, refused and reported again at once
// rather than after refusalGrace. Otherwise bombs on N partitions whose
// refusals come in separate polls cost a grace each, doubling.
func (r *Reader) move(ctx context.Context, moves offsetMoves) {
	if len(moves) == 0 {
		return
	}
	for _, tp := range r.moveWhereTheyStand(ctx, moves, r.refusals.pending(), true) {
		r.log.Debug("moving a partition whose refused batch no poll reported yet, since moving others drops it; fetching it again",
			"topic", tp.Topic, "partition", tp.Partition, "next_offset", moves[tp.Topic][tp.Partition].Offset)
	}
	r.cl.SetOffsets(moves)
}

// moveWhereTheyStand adds to moves each refused partition of tps that
// moves does not move already, at where it stands (standing), and returns
// those it added; fresh as for refusals.moving. It looks up where at
// most one partition starts (the poll loop waits for the brokers'
// answer); a partition it did not look up stays refused, and is moved by
// a later call.
func (r *Reader) moveWhereTheyStand(ctx context.Context, moves offsetMoves, tps []TopicPartition, fresh bool) []TopicPartition {
	var added []TopicPartition
	lookups := 1
	for _, tp := range tps {
		if moves.has(tp) {
			continue
		}
		if at, ok := r.standing(ctx, tp, &lookups); ok {
			at.Epoch = r.refusals.moving(tp, fresh)
			moves.add(tp, at)
			added = append(added, tp)
		}
	}
	return added
}

// standing is where the client should fetch tp again to meet its refused
// batch: where the reader stands in it. false when the partition is not
// to be moved (gone, halted or ending, whose seek or end starts the
// cursor again; paused, which is not fetched anyway: due again once its
// grace passed), or when its start could not be looked up. For a
// partition that has read and stored nothing it asks the brokers where
// the partition starts, once per refusal and while *lookups allows (it
// counts them down), which holds the poll loop startLookupTimeout at
// worst.
func (r *Reader) standing(ctx context.Context, tp TopicPartition, lookups *int) (kgo.EpochOffset, bool) {
	p := r.owner(tp)
	if p == nil {
		r.refusals.reported(tp)
		return kgo.EpochOffset{}, false
	}
	p.mu.Lock()
	at, claimedAt, paused := p.pos, p.lastCommit, p.paused
	moving := p.life.halted() || p.life.ending()
	p.mu.Unlock()
	if moving {
		r.refusals.reported(tp)
		return kgo.EpochOffset{}, false
	}
	if paused {
		return kgo.EpochOffset{}, false
	}
	if at < 0 {
		// Nothing read or stored yet: the client stands where the start
		// policy put it.
		start, ok := r.refusals.knownStart(tp)
		if !ok {
			if *lookups <= 0 {
				r.refusals.deferred(tp)
				return kgo.EpochOffset{}, false
			}
			*lookups--
			var err error
			if start, err = r.startOffset(ctx, tp, claimedAt); err != nil {
				r.log.Warn("look up where a partition starts, to fetch it again after the client dropped the report of a record batch too large; retrying",
					"topic", tp.Topic, "partition", tp.Partition, "error", err.Error())
				return kgo.EpochOffset{}, false
			}
			r.refusals.started(tp, start)
		}
		at = start
	}
	return kgo.EpochOffset{Epoch: -1, Offset: at}, true
}

// startOffset is where the client started a partition that has nothing
// stored and has read nothing: where reader.Config.Start puts it. For
// latest, which the client resolved at the claim, it is the first offset
// whose timestamp is not before the claim: exact when producers' clocks
// agree with the bridge's; a producer clock that lags by more than the
// time between the claim and the batch moves it past the batch.
func (r *Reader) startOffset(ctx context.Context, tp TopicPartition, claimedAt time.Time) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, startLookupTimeout)
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
