package reader

import "github.com/twmb/franz-go/pkg/kgo"

// A partition's lifecycle is one value, lifecycle, under partition.mu: the
// phase it stands in, the end stop asked for, and the "look again" events
// its goroutine has not handled yet. Every decision of partition.go,
// truncation.go, dataloss.go, streak.go and refused.go asks it, and every
// change goes through the transitions below.
//
// Phases (the end asked for does not change them):
//
//	phase      event                                              → phase
//	unclaimed  claim (setClaim)                                   → reading
//	reading    a write failed, fenced, refused as moved (halt)    → halted
//	reading    a truncation or a loss check drained (halt)        → halted
//	reading    a stopping write (stopAt)                          → stopped
//	halted     the poll loop applied its seek (resumeAt)          → reading
//	halted     data loss, or a truncation with OnDataLoss=stop    → stopped
//	stopped    anything                                           → stopped
//
// Ends (stop): none → flush (stop(true)) or drop (stop(false)); flush →
// drop; drop stays drop. The goroutine returns when the end is drop, or
// flush with the phase not reading or nothing queued; its waits (sleep:
// backoff, a stopped partition's wait for its end) return once an end is
// asked.
//
// Events, a set:
//
//	event      noted when                             drained by next when
//	fenced     reading, no end asked, neither         reading (whatever the end), with
//	moved        fenced nor moved pending (staleBy)     truncated: all three at once
//	truncated  always (the poll loop saw a
//	             *kgo.ErrDataLoss)
//	lossCheck  not halted or stopped, not pending     reading, nothing queued, none of
//	             (the position is out of range)         the three above pending
//
// Events wait through halted (a re-claim's seek, or the loss check's,
// settles first) and are never drained in stopped. They wait through
// unclaimed too: the claim comes before any fetch (adjust), so none is
// noted there in practice. A drained truncation is handled before a fence
// or a move of the same drain: its seek re-reads from where the log
// diverged, and the fence check looks again after it.

// phase is where a partition stands.
type phase uint8

const (
	// phaseUnclaimed: assigned, waiting for the claim that adjust makes
	// before any record is fetched. Takes no records.
	phaseUnclaimed phase = iota
	// phaseReading: claimed; takes records and writes batches.
	phaseReading
	// phaseHalted: a write failed, or the position must be looked at again
	// (a fence, a move, a truncation, a loss check). What the partition
	// held is dropped and fetching is paused until the poll loop applies
	// the seek its goroutine hands it (resumeAt). Takes no records.
	phaseHalted
	// phaseStopped: data loss, a truncation with OnDataLoss=stop, or a
	// stopping write; lifecycle.why says which. Paused, registered, for
	// good, until revoked, lost or closed. Takes no records.
	phaseStopped
)

// end is what stop asked of the partition's goroutine.
type end uint8

const (
	endNone  end = iota
	endFlush     // write what is queued, then return
	endDrop      // return at once: the queue is dropped, the write in flight cancelled
)

// event is a set of things the partition's goroutine must look at again
// between batches.
type event uint8

const (
	// evFenced: the fence check saw a newer epoch in Postgres.
	evFenced event = 1 << iota
	// evMoved: the fence check saw the stored position move under this
	// owner.
	evMoved
	// evTruncated: the client found the log truncated below what was read
	// (lifecycle.truncation).
	evTruncated
	// evLossCheck: the fetch position fell out of range; check for data
	// loss once the queue is written.
	evLossCheck
)

type lifecycle struct {
	phase phase
	end   end
	why   string // phaseStopped: why, for Stats.Stopped and the log

	events     event
	truncation *kgo.ErrDataLoss // with evTruncated
}

// lookAgain is what next drained for run to handle: events, with the
// truncation of evTruncated and the position when drained.
type lookAgain struct {
	events     event
	truncation *kgo.ErrDataLoss
	pos        int64
}

// claim: unclaimed → reading.
func (l *lifecycle) claim() {
	if l.phase == phaseUnclaimed {
		l.phase = phaseReading
	}
}

// halt: reading or halted → halted.
func (l *lifecycle) halt() {
	if l.phase != phaseStopped {
		l.phase = phaseHalted
	}
}

// resume: halted → reading.
func (l *lifecycle) resume() {
	if l.phase == phaseHalted {
		l.phase = phaseReading
	}
}

// stopFor: → stopped, for why.
func (l *lifecycle) stopFor(why string) {
	l.phase, l.why = phaseStopped, why
}

// ask records the end stop asks for: drop wins over flush.
func (l *lifecycle) ask(flush bool) {
	if !flush {
		l.end = endDrop
	} else if l.end == endNone {
		l.end = endFlush
	}
}

// ending reports whether stop was called.
func (l *lifecycle) ending() bool { return l.end != endNone }

// halted reports whether the partition is halted or stopped: what it held
// is dropped and its fetching paused by the lifecycle.
func (l *lifecycle) halted() bool { return l.phase == phaseHalted || l.phase == phaseStopped }

// takesRecords reports whether fetched records, and unreadable spans, are
// queued: reading, and no end asked.
func (l *lifecycle) takesRecords() bool { return l.phase == phaseReading && l.end == endNone }

// returns reports whether the goroutine returns now, with empty saying
// nothing is queued (records or an unreadable span).
func (l *lifecycle) returns(empty bool) bool {
	return l.end == endDrop || (l.end == endFlush && (l.phase != phaseReading || empty))
}

// checksFence reports whether the fence check may note a fence or a move.
func (l *lifecycle) checksFence() bool {
	return l.takesRecords() && l.events&(evFenced|evMoved) == 0
}

// note adds ev to the pending events; the caller has checked it may
// (checksFence, outOfRange).
func (l *lifecycle) note(ev event) { l.events |= ev }

// truncated notes a truncation, replacing one not handled yet.
func (l *lifecycle) truncated(lost *kgo.ErrDataLoss) {
	l.events |= evTruncated
	l.truncation = lost
}

// drain takes the events due now, with empty saying the queue is written;
// zero when none is.
func (l *lifecycle) drain(empty bool, pos int64) lookAgain {
	if l.phase != phaseReading {
		return lookAgain{}
	}
	if ev := l.events & (evFenced | evMoved | evTruncated); ev != 0 {
		look := lookAgain{events: ev, truncation: l.truncation, pos: pos}
		l.events &^= ev
		l.truncation = nil
		return look
	}
	if l.events&evLossCheck != 0 && empty {
		l.events &^= evLossCheck
		return lookAgain{events: evLossCheck, pos: pos}
	}
	return lookAgain{}
}
