package reader

import (
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafka2pg/kafka2pg/stream"
)

// Kafka's history can move back too: an unclean leader election, or a
// broker restored from an old disk, truncates a partition's log below
// what was read, and new records then reuse the lost offsets. The stored
// position carries the leader epoch of its last record, and every seek
// passes it on (KIP-320), so the client asks the leader where that epoch
// ends and reports a *kgo.ErrDataLoss when it ends below the position.
// The truncated span is never skipped silently: Config.OnDataLoss says
// whether the bridge stops or reads the new log.

// truncated hands a truncation the poll loop saw to its partition, whose
// goroutine handles it (handleTruncation).
func (r *Reader) truncated(lost *kgo.ErrDataLoss) {
	p := r.owner(TopicPartition{lost.Topic, lost.Partition})
	if p == nil {
		r.log.Warn("kafka truncated the log of a partition this member no longer owns; its next owner checks it again",
			"topic", lost.Topic, "partition", lost.Partition, "error", lost.Error())
		return
	}
	p.mu.Lock()
	p.life.truncated(lost)
	p.mu.Unlock()
	p.signal()
}

// handleTruncation runs in the partition goroutine: it drops what the
// partition holds and, with OnDataLoss skip, reads the new log from where
// it diverged; with stop, it stops the reader (Run returns a
// *FatalError). It returns false when run must return.
func (p *partition) handleTruncation(lost *kgo.ErrDataLoss) bool {
	p.halt()
	p.mu.Lock()
	durable, epoch := p.durable, p.epoch
	p.mu.Unlock()
	p.r.stats.truncations.Add(1)
	tp := fmt.Sprintf("%s/%d", p.tp.Topic, p.tp.Partition)
	gone, resume := lost.ResetTo, lost.ResetTo
	var what string
	if lost.ResetTo < lost.ConsumedTo {
		what = fmt.Sprintf("kafka truncated the log of %s: offsets [%d, %d) that kafka2pg read are gone from Kafka "+
			"(an unclean leader election, or a broker restored from an old disk), and new records may reuse them", tp, lost.ResetTo, lost.ConsumedTo)
	} else {
		// The leader has no record of the epoch: where the log diverged
		// is unknown, so nothing below the position is known to be the
		// same, and nothing above it may be skipped.
		gone, resume = lost.ConsumedTo, lost.ConsumedTo
		what = fmt.Sprintf("kafka truncated the log of %s: its leader has no record of leader epoch %d, which offset %d was read at, "+
			"so records below it may have been replaced (an unclean leader election?)", tp, lost.ConsumedToEpoch, lost.ConsumedTo)
	}
	// Of the span gone from Kafka, [gone, durable) is in Postgres; the rest
	// was read and never written.
	unwritten := max(lost.ConsumedTo-max(durable, gone), 0)
	log := p.r.log.With("topic", p.tp.Topic, "partition", p.tp.Partition, "next_offset", durable,
		"consumed_to", lost.ConsumedTo, "consumed_to_leader_epoch", lost.ConsumedToEpoch, "reset_to", lost.ResetTo, "reset_to_leader_epoch", lost.ResetToEpoch)
	if p.r.cfg.OnDataLoss == OnDataLossSkip {
		p.r.stats.skipped.Add(unwritten)
		log.Warn(fmt.Sprintf("%s; reading the new log from offset %d (reader.Config.OnDataLoss=skip): records at reused offsets are written, "+
			"and become dead letters where the table's key holds the offset; %d records read were never written", what, resume, unwritten),
			"never_written", unwritten)
		return p.seek(stream.Position{Epoch: epoch, NextOffset: -1}, resume)
	}
	fix := fmt.Sprintf("check what the tables hold from offset %d on, then restart with reader.Config.OnDataLoss=skip to read the new log from offset %d, "+
		"or move the stored position (offsets reset)", gone, resume)
	err := &FatalError{What: "kafka's log of " + tp, Err: errors.New(what + "; the bridge stops (reader.Config.OnDataLoss=stop)"), Fix: fix}
	p.stopFor(err.Error())
	p.r.fatal.stop(err)
	p.r.wake()
	p.park() // until the reader stops
	return false
}
