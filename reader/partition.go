package reader

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafka2pg/kafka2pg/internal/trouble"
	"github.com/kafka2pg/kafka2pg/stream"
)

// partition batches the records of one assigned partition and writes them.
// Its goroutine (run) is started in assigned and joined in revoked/lost.
type partition struct {
	r      *Reader
	tp     TopicPartition
	ctx    context.Context // ends when the partition is abandoned
	cancel context.CancelFunc
	notify chan struct{} // cap 1: something changed, look again
	done   chan struct{} // closed when run returns

	lastFetch atomic.Int64 // UnixNano of the last poll that brought records; 0 before the first
	trouble   *trouble.Log // failed writes and claims, logged rate-limited

	mu         sync.Mutex
	queue      []*kgo.Record
	queueBytes int
	queueRows  int // data records in queue (not control)
	inflight   int // memory of the batch being written, as accountLocked counts it
	held       int // what accountLocked last added to r.buffered
	firstAt    time.Time
	lastTake   time.Time // when the last batch was taken (BatchLinger)
	life       lifecycle // the phase, the end asked for, the events to look at (lifecycle.go)
	epoch      int64
	pos        int64       // next offset to accept; -1 accepts any
	durable    int64       // the stored next_offset this owner left (claimed or committed); -1: none stored
	paused     bool        // fetching is paused: for backpressure while reading, always while halted or stopped
	logEnd     int64       // the highest end offset seen in a fetch; -1 until one arrives
	unread     *unreadSpan // offsets whose batch could not be read, to write after the queue

	// For backoff and readiness: the failed writes and claims since the
	// last committed write (the failure streak), when a write last
	// committed (or the partition was claimed), when the write in flight
	// began (zero: none).
	failures     int
	lastCommit   time.Time
	writingSince time.Time

	// recs is the pooled slice behind the Records of the batch being
	// written; only run's goroutine touches it (fill, release).
	recs *[]stream.Record
}

func newPartition(r *Reader, tp TopicPartition) *partition {
	// The partition's lifetime is its own: it ends by stop, not by the
	// callback ctx that created it.
	ctx, cancel := context.WithCancel(context.Background())
	return &partition{r: r, tp: tp, ctx: ctx, cancel: cancel,
		notify: make(chan struct{}, 1), done: make(chan struct{}), pos: -1, durable: -1, logEnd: -1, lastCommit: time.Now(),
		trouble: trouble.New(r.cfg.Logger.With("topic", tp.Topic, "partition", tp.Partition), "write to Postgres failed; re-reading the durable position and retrying", 0)}
}

func (p *partition) signal() {
	select {
	case p.notify <- struct{}{}:
	default:
	}
}

// recordOverhead is what a fetched record holds in memory besides its key
// and value: the client's Record (160 bytes), its pointer in the queue and
// the framing around key and value in the decompressed batch. The budget
// counts it: for small records it is a large share of their memory, which a
// budget of key and value bytes alone would let grow far past itself. The
// stream.Record copies of a batch being written (fill) are not counted: a
// batch's worth at most for each partition writing, in slices the reader
// reuses and clears on release, so that they keep alive nothing the budget
// has stopped counting.
const recordOverhead = 190

// accountLocked brings the reader's buffered total up to date with what
// this partition holds now; call it with p.mu held after any change of
// queueBytes or inflight.
func (p *partition) accountLocked() {
	h := p.queueBytes + len(p.queue)*recordOverhead + p.inflight
	if h != p.held {
		p.r.buffered.Add(int64(h - p.held))
		less := h < p.held
		p.held = h
		if less {
			p.r.underBudget()
		}
	}
}

func (p *partition) setClaim(c stream.Position) {
	p.mu.Lock()
	p.life.claim()
	p.epoch, p.pos, p.durable = c.Epoch, c.NextOffset, c.NextOffset
	p.lastCommit = time.Now() // the stall clock starts at the claim
	p.mu.Unlock()
	p.signal()
}

// staleBy compares stored, what Postgres holds for the partition (ok:
// a row exists), with what this owner left there, and when they disagree
// asks its goroutine to re-claim. It reports what it found: a newer epoch
// (fenced: an offsets reset or a new owner), or a position this owner
// never left (moved: an older epoch, a missing row, or this epoch behind
// the position it made durable; Postgres lost commits), with the
// position this owner expected.
//
// A stored position ahead of the owner's is no news: a commit lands in
// Postgres before the owner learns of it. A position behind it is: every
// legitimate move back (an offsets reset, a new owner) bumps the epoch.
func (p *partition) staleBy(stored stream.Position, ok bool) (fenced, moved bool, expected int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.life.checksFence() {
		return false, false, p.durable
	}
	switch {
	case ok && stored.Epoch > p.epoch:
		p.life.note(evFenced)
		fenced = true
	case !ok || stored.Epoch < p.epoch || (p.durable >= 0 && stored.NextOffset < p.durable):
		p.life.note(evMoved)
		moved = true
	default:
		return false, false, p.durable
	}
	p.signal()
	return fenced, moved, p.durable
}

// noteLogEnd records the end offset a fetch reported.
func (p *partition) noteLogEnd(end int64) {
	p.mu.Lock()
	p.logEnd = max(p.logEnd, end)
	p.mu.Unlock()
}

// enqueue appends polled records and pauses the partition when its queue is
// full (the reader's budget holds back the poll instead: waitForBudget).
// Records before the expected position (re-delivered after a seek) and
// records that arrive while halted or closing are dropped: they are
// refetched from the durable position. The poll loop calls it and
// reconciles the client's pauses afterwards.
func (p *partition) enqueue(rs []*kgo.Record) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.life.takesRecords() {
		return
	}
	added := false
	rows, bytes := p.queueRows, p.queueBytes
	for _, rec := range rs {
		if p.pos >= 0 && rec.Offset < p.pos {
			continue
		}
		if len(p.queue) == 0 {
			p.firstAt = time.Now()
		}
		p.queue = append(p.queue, rec)
		p.pos = rec.Offset + 1
		if !rec.Attrs.IsControl() {
			p.queueRows++
			p.queueBytes += len(rec.Key) + len(rec.Value)
		}
		added = true
	}
	if added {
		p.lastFetch.Store(time.Now().UnixNano())
		// The reader-wide counters once per fetch, not per record.
		p.r.stats.records.Add(int64(p.queueRows - rows))
		p.r.stats.bytes.Add(int64(p.queueBytes - bytes))
		p.accountLocked()
		p.signal()
	}
	if p.paused {
		return
	}
	if len(p.queue) >= p.r.cfg.QueueCapacity || p.queueBytes >= 2*p.r.cfg.BatchMaxBytes {
		p.setPausedLocked(true)
	}
}

// setPausedLocked changes the partition's paused flag and marks the pauses
// for the poll loop's reconciliation. A caller outside the poll loop must
// also wake it (pausesChanged) once it has released p.mu.
func (p *partition) setPausedLocked(v bool) {
	if p.paused != v {
		p.paused = v
		p.r.pausesDirty.Store(true)
	}
}

// stop asks run to return; with flush, after writing what is queued.
// Without, the in-flight write is cancelled.
func (p *partition) stop(flush bool) {
	p.mu.Lock()
	p.life.ask(flush)
	if !flush {
		p.queue, p.queueRows, p.queueBytes, p.unread = nil, 0, 0, nil
		p.accountLocked()
		p.cancel()
	}
	p.mu.Unlock()
	p.signal()
}

// resumeAt is called by the poll loop after it seeked to at, with durable
// the stored position the owner expects from now on. The partition was
// halted (paused), so resuming marks the pauses dirty and the poll loop's
// reconciliation resumes its fetching.
func (p *partition) resumeAt(epoch, at, durable int64) {
	p.mu.Lock()
	p.epoch, p.pos, p.durable = epoch, at, durable
	p.life.resume()
	p.setPausedLocked(p.life.phase == phaseStopped)
	p.queue, p.queueRows, p.queueBytes, p.unread = nil, 0, 0, nil
	p.accountLocked()
	p.mu.Unlock()
	p.signal()
}

// outOfRange records that the fetch position is out of range; it reports
// whether this is news (the poll loop sees the error on every poll).
func (p *partition) outOfRange() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.life.events&evLossCheck != 0 || p.life.halted() {
		return false
	}
	p.life.note(evLossCheck)
	p.signal()
	return true
}

func (p *partition) run() {
	defer close(p.done)
	defer p.cancel()
	defer func() {
		// Whatever is left is dropped with the partition.
		p.mu.Lock()
		p.queue, p.queueRows, p.queueBytes, p.inflight = nil, 0, 0, 0
		p.accountLocked()
		p.mu.Unlock()
	}()
	for {
		b, look, ok := p.next()
		if !ok {
			return
		}
		if b == nil {
			if !p.lookAgain(look) {
				return
			}
			continue
		}
		p.beginWrite()
		err := p.r.store.Write(p.ctx, b)
		p.endWrite()
		p.release()
		if err == nil {
			p.written(b)
			continue
		}
		var stop *stream.StopError
		if errors.As(err, &stop) {
			p.stopAt(stop)
			return
		}
		p.mu.Lock()
		closing := p.life.ending()
		p.mu.Unlock()
		// A position that moved under this owner is no other owner's:
		// re-claim at once, with no zombie's wait (reclaim says how it
		// moved).
		moved := errors.Is(err, stream.ErrPositionMoved)
		fenced := errors.Is(err, stream.ErrFenced) && !moved
		n := 0
		if !moved {
			n = p.noteFailure()
		}
		if fenced {
			p.r.stats.fenced.Add(1)
			p.r.log.Warn("write fenced: another owner holds the partition; dropping local state and re-claiming",
				"topic", p.tp.Topic, "partition", p.tp.Partition, "first_offset", b.FirstOffset, "error", err.Error())
		} else if moved {
			p.r.log.Debug("write refused: the stored position moved under this owner", "topic", p.tp.Topic, "partition", p.tp.Partition,
				"first_offset", b.FirstOffset, "error", err.Error())
		} else if p.ctx.Err() == nil {
			p.r.stats.writeErrors.Add(1)
			p.failed(err, "first_offset", b.FirstOffset, "failures", n)
		}
		if closing || p.ctx.Err() != nil {
			return // abandon: the next owner re-reads these records
		}
		p.halt()
		if !p.reclaim(fenced, b.FirstOffset) {
			return
		}
	}
}

// lookAgain handles the events next drained (lifecycle.go): a truncation
// first, then a fence or a move, else the loss check. It returns false
// when run must return.
func (p *partition) lookAgain(look lookAgain) bool {
	fenced, moved := look.events&evFenced != 0, look.events&evMoved != 0
	switch {
	case look.events&evTruncated != 0:
		return p.handleTruncation(look.truncation)
	case fenced || moved:
		if fenced {
			p.r.stats.fenced.Add(1)
			p.noteFailure()
		}
		p.halt()
		return p.reclaim(fenced, look.pos)
	default:
		// The queue is written and the position is out of range.
		return p.checkDataLoss()
	}
}

// next waits until a batch is due and takes it from the queue, or until
// events are due (lifecycle.drain), which it takes for run to handle; false
// means run must return.
func (p *partition) next() (*stream.Batch, lookAgain, bool) {
	cfg := &p.r.cfg
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		p.mu.Lock()
		if p.life.returns(len(p.queue) == 0 && p.unread == nil) {
			p.mu.Unlock()
			return nil, lookAgain{}, false
		}
		if look := p.life.drain(len(p.queue) == 0, p.pos); look.events != 0 {
			p.mu.Unlock()
			return nil, look, true
		}
		reading := p.life.phase == phaseReading
		if reading && p.unread != nil && (len(p.queue) == 0 || p.queue[0].Offset >= p.unread.first) {
			b := p.takeUnreadLocked()
			p.mu.Unlock()
			return b, lookAgain{}, true
		}
		var wait time.Duration = -1
		if reading && len(p.queue) > 0 {
			now := time.Now()
			age := now.Sub(p.firstAt)
			atEnd := !cfg.WaitAtEnd && p.logEnd >= 0 && p.pos >= p.logEnd
			lingerLeft := cfg.BatchLinger - now.Sub(p.lastTake)
			if p.life.ending() || (atEnd && lingerLeft <= 0) || p.queueRows >= cfg.BatchMaxRows || p.queueBytes >= cfg.BatchMaxBytes || age >= cfg.BatchMaxWait {
				b, taken, rows := p.takeLocked()
				p.lastTake = now
				p.mu.Unlock()
				p.fill(b, taken, rows)
				return b, lookAgain{}, true
			}
			wait = cfg.BatchMaxWait - age
			if atEnd {
				wait = min(wait, lingerLeft)
			}
		}
		p.mu.Unlock()
		var tc <-chan time.Time
		if wait >= 0 {
			if timer == nil {
				timer = time.NewTimer(wait)
			} else {
				timer.Reset(wait)
			}
			tc = timer.C
		}
		select {
		case <-p.notify:
		case <-tc:
		case <-p.ctx.Done():
			return nil, lookAgain{}, false
		}
	}
}

// takeLocked cuts the next batch off the queue: at most BatchMaxRows data
// records and about BatchMaxBytes, plus the control records among them. It
// returns the batch without its records, the records it spans (data and
// control) and how many are data: fill copies them once p.mu is released,
// so that the poll loop's enqueue never waits for a copy.
func (p *partition) takeLocked() (b *stream.Batch, taken []*kgo.Record, rows int) {
	cfg := &p.r.cfg
	b = &stream.Batch{Topic: p.tp.Topic, Partition: p.tp.Partition, Epoch: p.epoch, PrevOffset: p.durable, FirstOffset: p.queue[0].Offset,
		LeaderEpoch: -1, LogEndOffset: p.logEnd}
	bytes, n := 0, 0
	for n < len(p.queue) && rows < cfg.BatchMaxRows && (bytes < cfg.BatchMaxBytes || rows == 0) {
		rec := p.queue[n]
		if p.unread != nil && rec.Offset >= p.unread.first {
			break // the unreadable span comes first (next)
		}
		n++
		b.NextOffset, b.LeaderEpoch = rec.Offset+1, rec.LeaderEpoch
		if rec.Attrs.IsControl() {
			continue
		}
		rows++
		bytes += len(rec.Key) + len(rec.Value)
	}
	taken = p.queue[:n:n]
	p.queue = p.queue[n:]
	p.queueRows -= rows
	p.queueBytes -= bytes
	p.inflight = bytes + n*recordOverhead
	if len(p.queue) == 0 {
		p.queue = nil // let the backing array go
	} else {
		p.firstAt = time.Now() // what is left was due anyway; write it soon
	}
	return b, taken, rows
}

// fill copies the data records of taken, rows of them, into b.Records: a
// slice from the reader's pool, which release gives back after the write.
// The copies point to the keys, values and header values the client
// fetched; the client's Records are dropped from the queue's array, which
// may hold records still queued. Only run's goroutine calls it.
func (p *partition) fill(b *stream.Batch, taken []*kgo.Record, rows int) {
	rp, _ := p.r.recs.Get().(*[]stream.Record)
	if rp == nil {
		rp = new([]stream.Record)
	}
	if cap(*rp) < rows {
		*rp = make([]stream.Record, rows)
	}
	recs := (*rp)[:rows]
	i := 0
	for _, rec := range taken {
		if !rec.Attrs.IsControl() {
			copyRecord(&recs[i], rec)
			i++
		}
	}
	clear(taken)
	*rp = recs
	p.recs = rp
	b.Records = recs
}

// release gives the written batch's records back to the pool; the Store
// keeps none of them (Store.Write).
func (p *partition) release() {
	if p.recs == nil {
		return
	}
	clear(*p.recs) // drop the references to the records' memory
	p.r.recs.Put(p.recs)
	p.recs = nil
}

// copyRecord makes dst the stream.Record of rec: the same key, value and
// header values (not copied), the timestamp type named.
func copyRecord(dst *stream.Record, rec *kgo.Record) {
	*dst = stream.Record{Topic: rec.Topic, Partition: rec.Partition, Offset: rec.Offset, Timestamp: rec.Timestamp,
		Key: rec.Key, Value: rec.Value}
	switch rec.Attrs.TimestampType() {
	case 0:
		dst.TimestampType = stream.TimestampCreateTime
	case 1:
		dst.TimestampType = stream.TimestampLogAppendTime
	}
	if len(rec.Headers) > 0 {
		hs := make([]stream.Header, len(rec.Headers))
		for j, h := range rec.Headers {
			hs[j] = stream.Header{Key: h.Key, Value: h.Value}
		}
		dst.Headers = hs
	}
}

func (p *partition) written(b *stream.Batch) {
	p.r.stats.batches.Add(1)
	p.r.markDurable(p.tp, kgo.EpochOffset{Epoch: b.LeaderEpoch, Offset: b.NextOffset})
	p.trouble.OK()
	p.r.fatal.ok(writesSubject(p.tp))
	p.mu.Lock()
	p.failures, p.lastCommit = 0, time.Now()
	p.inflight = 0
	p.durable = b.NextOffset
	p.accountLocked()
	resume := p.paused && !p.life.halted() && p.queueSmallLocked()
	if resume {
		p.setPausedLocked(false)
	}
	p.mu.Unlock()
	if resume {
		p.r.pausesChanged()
	}
}

// queueSmallLocked reports whether the queue has room again after a pause.
func (p *partition) queueSmallLocked() bool {
	return len(p.queue) <= p.r.cfg.QueueCapacity/2 && p.queueBytes <= p.r.cfg.BatchMaxBytes
}

// stopAt records what a stopping write made durable, stops the partition
// and waits, registered and paused, until it is revoked, lost or closed.
func (p *partition) stopAt(stop *stream.StopError) {
	p.r.stats.batches.Add(1)
	p.r.markDurable(p.tp, kgo.EpochOffset{Epoch: -1, Offset: stop.Offset})
	p.halt()
	why := stop.Error()
	p.mu.Lock()
	p.durable = stop.Offset
	p.mu.Unlock()
	p.r.log.Error("partition stopped", "topic", p.tp.Topic, "partition", p.tp.Partition, "next_offset", stop.Offset, "reason", why)
	p.parkStopped(why)
}

// parkStopped stops the partition for why (Stats.Stopped, readiness) and
// waits, registered and paused, until it is revoked, lost or closed, or
// the reader stops: a stopped partition writes nothing, and its offsets
// stay where they are for the next owner.
func (p *partition) parkStopped(why string) {
	p.stopFor(why)
	p.park()
}

// stopFor stops the partition for why; park then waits as parkStopped does.
func (p *partition) stopFor(why string) {
	p.mu.Lock()
	p.life.stopFor(why)
	p.mu.Unlock()
}

func (p *partition) park() {
	for p.sleep(time.Hour) {
	}
}

// halt drops the local state after a failed write and pauses fetching until
// the partition is re-claimed and seeked. Records fetched before the poll
// loop pauses it in the client are dropped by enqueue (halted).
func (p *partition) halt() {
	p.mu.Lock()
	p.life.halt()
	p.queue, p.queueRows, p.queueBytes, p.inflight, p.unread = nil, 0, 0, 0, nil
	p.accountLocked()
	p.setPausedLocked(true)
	p.mu.Unlock()
	p.r.pausesChanged()
}

// reclaim re-reads the durable position with a new epoch, after the
// backoff of the partition's failure streak, and hands the seek to the
// poll loop. After a fence it waits at least a few heartbeats, so that a
// zombie learns from the group that it lost the partition instead of
// fencing the rightful owner back. It returns false when the partition is
// being stopped.
func (p *partition) reclaim(fenced bool, failedFrom int64) bool {
	cfg := &p.r.cfg
	for {
		backoff := failureBackoff(p.streak(), cfg.RetryBackoffMax)
		if fenced {
			backoff = max(backoff, 3*cfg.HeartbeatInterval, time.Second)
		}
		if !p.sleep(backoff) {
			return false
		}
		claims, err := p.r.store.Claim(p.ctx, p.tp.Topic, []int32{p.tp.Partition})
		if err == nil {
			c, ok := claims[p.tp.Partition]
			if !ok {
				c = stream.Position{NextOffset: -1, LeaderEpoch: -1}
			}
			if p.checkMovedBack(c) && c.NextOffset < 0 {
				// Postgres lost the row with its every commit: what was
				// written is gone with it, so read from the log start.
				if start, _, err := p.logBounds(); err == nil {
					failedFrom = start
				} else {
					failedFrom = 0 // below the start: the data-loss check finds it
				}
			}
			select {
			case p.r.seeks <- seekRequest{p: p, claim: c, from: failedFrom, durable: c.NextOffset}:
				p.r.wake()
				return true
			case <-p.ctx.Done():
				return false
			}
		}
		if p.ctx.Err() != nil {
			return false
		}
		n := p.noteFailure()
		p.failed(err, "while", "re-claim", "failures", n)
	}
}

// checkMovedBack compares a re-claimed position with the one this owner
// left, and reports whether it is behind it. That means Postgres lost commits that this owner
// saw succeed (a lossy failover, a restored backup): the records in
// between are read again from Kafka and written again, and the operator
// learns of it here, once per move.
func (p *partition) checkMovedBack(c stream.Position) bool {
	p.mu.Lock()
	left := p.durable
	p.mu.Unlock()
	if left < 0 || c.NextOffset >= left {
		return false
	}
	p.r.stats.movedBack.Add(1)
	from := "nothing stored"
	if c.NextOffset >= 0 {
		from = fmt.Sprint(c.NextOffset)
	}
	p.r.log.Warn(fmt.Sprintf("durable position moved back from %d to %s: Postgres lost commits (a failover or a restore?); reading again from there",
		left, from), "topic", p.tp.Topic, "partition", p.tp.Partition, "expected_next_offset", left, "stored_next_offset", c.NextOffset,
		"lost_offsets", left-max(c.NextOffset, 0))
	return true
}

// sleep waits d unless the partition is stopped first.
func (p *partition) sleep(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			return true
		case <-p.ctx.Done():
			return false
		case <-p.notify:
			p.mu.Lock()
			closing := p.life.ending()
			p.mu.Unlock()
			if closing {
				return false
			}
		}
	}
}
