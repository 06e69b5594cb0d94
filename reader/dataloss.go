package reader

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/kafka2pg/kafka2pg/stream"
)

// checkDataLoss runs in the partition goroutine after the broker said the
// fetch position is out of range and every queued record was written. It
// looks up the log's start and end: a position below the start means
// retention deleted records nobody read. With OnDataLoss "skip" the lost range
// is logged and fetching continues at the log start (the continuity guard
// accepts the gap: the stored position is still the one the owner left);
// otherwise, and always for a position past the end (a
// recreated or truncated topic), the partition stops with an error naming the
// range, and stays stopped until it is revoked or the bridge restarts.
// It returns false when run must return.
func (p *partition) checkDataLoss() bool {
	p.halt()
	p.mu.Lock()
	from, epoch := p.pos, p.epoch
	p.mu.Unlock()

	start, end, err := p.logBounds()
	for err != nil {
		p.r.log.Warn("list offsets to check for data loss; retrying", "topic", p.tp.Topic, "partition", p.tp.Partition, "error", err.Error())
		if !p.sleep(time.Second) {
			return false
		}
		start, end, err = p.logBounds()
	}
	log := p.r.log.With("topic", p.tp.Topic, "partition", p.tp.Partition, "next_offset", from, "log_start_offset", start, "log_end_offset", end)
	switch {
	case from < 0:
		// Nothing was stored or read yet: nothing was promised either.
		return p.seek(stream.Position{Epoch: epoch, NextOffset: -1}, start)
	case from >= start && from <= end:
		// In range by now (a leader change, a race with retention): go on.
		log.Info("fetch position is back in range; resuming")
		return p.seek(stream.Position{Epoch: epoch, NextOffset: -1}, from)
	case from < start && p.r.cfg.OnDataLoss == OnDataLossSkip:
		p.r.stats.skipped.Add(start - max(from, 0))
		log.Warn(fmt.Sprintf("data loss: offsets [%d, %d) were deleted by retention before kafka2pg read them; skipping them (reader.Config.OnDataLoss=skip)", from, start))
		return p.seek(stream.Position{Epoch: epoch, NextOffset: -1}, start)
	}
	var why string
	if from < start {
		why = fmt.Sprintf("data loss on %s/%d: offsets [%d, %d) were deleted by retention before kafka2pg read them; the partition is stopped. "+
			"Restart with reader.Config.OnDataLoss=skip to continue at offset %d, or raise the topic's retention.", p.tp.Topic, p.tp.Partition, from, start, start)
	} else {
		why = fmt.Sprintf("%s/%d: the stored next_offset %d is past the end of the log (%d): the topic was recreated or truncated; the partition is stopped. "+
			"Move the stored offset with SQL on kafka2pg.offsets (or offsets reset) after checking what the table holds.", p.tp.Topic, p.tp.Partition, from, end)
	}
	log.Error(why)
	p.parkStopped(why)
	return false
}

// seek hands a new fetch position to the poll loop and waits for it there;
// the stored position the owner expects stays as it is.
func (p *partition) seek(c stream.Position, at int64) bool {
	p.mu.Lock()
	durable := p.durable
	p.mu.Unlock()
	select {
	case p.r.seeks <- seekRequest{p: p, claim: c, from: at, durable: durable}:
		p.r.wake()
		return true
	case <-p.ctx.Done():
		return false
	}
}

func (p *partition) logBounds() (start, end int64, err error) {
	ctx, cancel := context.WithTimeout(p.ctx, 10*time.Second)
	defer cancel()
	adm := kadm.NewClient(p.r.cl)
	starts, err := adm.ListStartOffsets(ctx, p.tp.Topic)
	if err != nil {
		return 0, 0, err
	}
	ends, err := adm.ListEndOffsets(ctx, p.tp.Topic)
	if err != nil {
		return 0, 0, err
	}
	s, ok1 := starts.Lookup(p.tp.Topic, p.tp.Partition)
	e, ok2 := ends.Lookup(p.tp.Topic, p.tp.Partition)
	if !ok1 || !ok2 {
		return 0, 0, fmt.Errorf("no offsets listed for %s/%d", p.tp.Topic, p.tp.Partition)
	}
	if s.Err != nil {
		return 0, 0, s.Err
	}
	if e.Err != nil {
		return 0, 0, e.Err
	}
	return s.Offset, e.Offset, nil
}
