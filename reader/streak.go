package reader

import (
	"math/rand/v2"
	"time"

	"github.com/kafka2pg/kafka2pg/stream"
)

// A partition's failure streak: the failed writes and claims since its last
// committed write. The backoff grows with the streak, not with one
// re-claim: a connection cut in the middle of every COPY fails the write
// but not the claim that follows, and a backoff that started again at each
// successful claim retried four partitions some 300 times in 10 s, each
// retry bumping the epoch and fetching the batch again.

// firstBackoff is the wait after the first failure of a streak.
const firstBackoff = 100 * time.Millisecond

// failureBackoff is the wait before retrying after the n-th consecutive
// failure (n >= 1): firstBackoff doubled n-1 times, capped at most, with
// equal jitter (half of it fixed, half random) so that partitions that
// failed together do not retry together.
func failureBackoff(n int, most time.Duration) time.Duration {
	d := firstBackoff
	for i := 1; i < n && d < most; i++ {
		d *= 2
	}
	d = max(min(d, most), time.Millisecond)
	return d/2 + rand.N(d/2+1)
}

// noteFailure lengthens the streak and returns its length.
func (p *partition) noteFailure() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.failures++
	return p.failures
}

// streak is the length of the failure streak.
func (p *partition) streak() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return max(p.failures, 1)
}

// failed logs a failed write or claim (the first of a streak at once, then
// rate-limited) and, when Postgres refuses it for good (Config.Permanent),
// counts it towards a fatal stop: after FatalRetryTimeout Run returns it.
func (p *partition) failed(err error, attrs ...any) {
	if p.r.cfg.Permanent(err) {
		if p.r.fatal.failed(writesSubject(p.tp), err, "") {
			p.r.wake() // Run returns the fatal error
		}
	}
	p.trouble.Fail(err, attrs...)
}

// beginWrite and endWrite bracket a write, for readiness (WritingSince).
func (p *partition) beginWrite() {
	p.mu.Lock()
	p.writingSince = time.Now()
	p.mu.Unlock()
}

func (p *partition) endWrite() {
	p.mu.Lock()
	p.writingSince = time.Time{}
	p.mu.Unlock()
}

// noteUnreadable records a span of offsets whose batch the client could not
// read; it reports whether the client should be moved past it (false while
// the partition is not taking records: it seeks again anyway).
func (p *partition) noteUnreadable(s unreadSpan) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.life.takesRecords() || p.unread != nil {
		return false
	}
	if p.pos >= 0 {
		s.first = max(s.first, p.pos) // a batch may begin before the position
	}
	if s.first >= s.next {
		return true
	}
	p.unread = &s
	p.pos = s.next
	p.signal()
	return true
}

// takeUnreadLocked cuts the unreadable span into a batch of its own: a
// record for each offset, empty but for the reason it could not be read.
func (p *partition) takeUnreadLocked() *stream.Batch {
	s := p.unread
	p.unread = nil
	b := &stream.Batch{Topic: p.tp.Topic, Partition: p.tp.Partition, Epoch: p.epoch, PrevOffset: p.durable, FirstOffset: s.first, NextOffset: s.next,
		LeaderEpoch: s.leaderEpoch, LogEndOffset: p.logEnd, Records: make([]stream.Record, 0, s.next-s.first)}
	for off := s.first; off < s.next; off++ {
		b.Records = append(b.Records, stream.Record{Topic: p.tp.Topic, Partition: p.tp.Partition, Offset: off, Unreadable: s.err})
	}
	return b
}
