package ingest

import (
	"math"
	"sort"
	"sync"
	"time"
)

// Step deadlines that follow what the database does. A fixed deadline long
// enough for the slowest healthy write (a batch of 1 GB, a path of 64 KB/s)
// leaves a write on a path that stopped answering hanging for minutes; one
// short enough to notice such a path in seconds cuts the slow writes. So each
// step of a write transaction gets a deadline from that step's own latency,
// measured on every write that succeeds, the way TCP derives its
// retransmission timeout (RFC 6298):
//
//	SRTT   ← (1-α)·SRTT + α·R          α = 1/8
//	RTTVAR ← (1-β)·RTTVAR + β·|SRTT-R|  β = 1/4   (first sample: SRTT = R, RTTVAR = R/2)
//	RTO    = SRTT + 4·RTTVAR
//
// BEGIN, the fence and COMMIT are round trips and take their RTO. The body of
// a batch (its COPY, an upsert's statements) takes time in proportion to its
// bytes, so its samples are in seconds per byte, by table, past the fence's
// round trip: its deadline is the fence's RTO plus the batch's bytes times the
// RTO of the rate, and at least bodyMargin times the smoothed rate (a big
// batch may meet a checkpoint, or a full WAL buffer, that a small one did
// not). Every deadline is at least
// DeadlineFloor and never past the transaction's ceiling (Config.WriteTimeout,
// scaled by rows). A step without a sample yet has the ceiling.
//
// A step that passes its deadline doubles that step's next deadlines (RFC
// 6298's backoff, and Karn's rule: a cut step gives no sample), until one
// succeeds: a database that turned slow for good is cut once, then given
// the time it takes, never cut in a loop. Partitions cut together by the same
// stall double it once.

// DeadlineFloor is the shortest deadline a step gets, whatever it measured:
// a healthy database may pause for a checkpoint's fsync, a lock held for a
// moment, an autovacuum; a path that stopped answering is still cut within
// seconds.
const DeadlineFloor = 5 * time.Second

// bodyMargin is how many times slower than its smoothed rate a body may run
// before it is cut, whatever the variance of the rate says.
const bodyMargin = 3

// maxBackoff bounds the doublings of a step cut again and again (the ceiling
// bounds the deadline anyway).
const maxBackoff = 8

// rttEstimator is RFC 6298's estimator of one quantity (seconds, or seconds
// per byte). Its zero value has no sample.
type rttEstimator struct {
	srtt, rttvar float64
	samples      int
}

func (e *rttEstimator) observe(r float64) {
	if e.samples == 0 {
		e.srtt, e.rttvar = r, r/2
	} else {
		e.rttvar = 0.75*e.rttvar + 0.25*math.Abs(e.srtt-r)
		e.srtt = 0.875*e.srtt + 0.125*r
	}
	e.samples++
}

// rto is SRTT + 4·RTTVAR; ok is false without a sample.
func (e *rttEstimator) rto() (v float64, ok bool) {
	return e.srtt + 4*e.rttvar, e.samples > 0
}

// stepEstimate is what the deadlines of one step rest on: its latency (or
// rate), and how many times its deadline was doubled since it last
// succeeded.
type stepEstimate struct {
	rttEstimator
	backoff uint
	// gen counts the doublings: a transaction cut with the deadline of an
	// older generation does not double it again.
	gen uint64
}

// latencies holds a Writer's step estimates. Safe for concurrent use.
type latencies struct {
	floor time.Duration

	mu                   sync.Mutex
	begin, fence, commit stepEstimate
	body                 map[string]*stepEstimate // by qualified table name: seconds per byte
}

func newLatencies(floor time.Duration) *latencies {
	return &latencies{floor: floor, body: map[string]*stepEstimate{}}
}

// round is the estimate of a step that is one round trip, nil for the
// steps measured otherwise (the body) or not at all.
func (l *latencies) round(s Step) *stepEstimate {
	switch s {
	case StepBegin:
		return &l.begin
	case StepFence, StepNotify:
		return &l.fence
	case StepCommit:
		return &l.commit
	}
	return nil
}

// bodyOf is the body estimate of table, made on first use.
func (l *latencies) bodyOf(table string) *stepEstimate {
	e := l.body[table]
	if e == nil {
		e = &stepEstimate{}
		l.body[table] = e
	}
	return e
}

// expect is the deadline of step s of a transaction writing bytes into
// table (for the body and the dead letters), before the ceiling, and the
// generation of the estimate it rests on; ok is false while the step has no
// sample (the transaction's ceiling applies).
func (l *latencies) expect(s Step, table string, bytes int64) (d time.Duration, gen uint64, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var e *stepEstimate
	var secs float64
	switch s {
	case StepCopy, StepDeadLetters:
		e = l.bodyOf(table)
		rate, okRate := e.rto()
		fixed, okFixed := l.fence.rto()
		if !okRate || !okFixed {
			return 0, 0, false
		}
		secs = fixed + float64(bytes)*max(rate, bodyMargin*e.srtt)
	default:
		if e = l.round(s); e == nil {
			return 0, 0, false
		}
		var okRound bool
		if secs, okRound = e.rto(); !okRound {
			return 0, 0, false
		}
	}
	d = max(l.floor, seconds(secs))
	for range e.backoff {
		if d >= math.MaxInt64/4 {
			break
		}
		d *= 2
	}
	return d, e.gen, true
}

// observe records that step s took took, writing bytes into table; a body's
// sample is its rate past the fence's round trip.
func (l *latencies) observe(s Step, table string, bytes int64, took time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if s == StepCopy {
		if bytes <= 0 {
			return
		}
		e := l.bodyOf(table)
		e.observe(max(0, took.Seconds()-l.fence.srtt) / float64(bytes))
		e.backoff = 0
		return
	}
	if s == StepNotify {
		return // a NOTIFY per batch: not one round trip
	}
	if e := l.round(s); e != nil {
		e.observe(took.Seconds())
		e.backoff = 0
	}
}

// cut records that step s passed a deadline of generation gen: it doubles
// the step's next deadlines, once per generation.
func (l *latencies) cut(s Step, table string, gen uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var e *stepEstimate
	switch s {
	case StepCopy, StepDeadLetters:
		e = l.bodyOf(table)
	default:
		e = l.round(s)
	}
	if e == nil || e.gen != gen {
		return
	}
	e.gen++
	if e.backoff < maxBackoff {
		e.backoff++
	}
}

// seconds is s seconds as a Duration, saturating.
func seconds(s float64) time.Duration {
	if s >= float64(math.MaxInt64)/float64(time.Second) {
		return math.MaxInt64
	}
	return time.Duration(s * float64(time.Second))
}

// StepEstimate is what a Writer holds about one step's latency, for
// metrics.
type StepEstimate struct {
	Step Step
	// Table is set for a table's body (StepCopy), whose figures are
	// seconds per byte.
	Table    string
	Smoothed float64 // SRTT, in seconds (per byte for a body)
	Var      float64 // RTTVAR, likewise
	Samples  int
	Backoff  uint // doublings of its deadline since the step last succeeded
}

// Estimates returns the step estimates with at least one sample: the round
// trips first, then each table's body in name order. Safe to call from any
// goroutine at any time.
func (w *Writer) Estimates() []StepEstimate {
	l := w.lat
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []StepEstimate
	for _, s := range []Step{StepBegin, StepFence, StepCommit} {
		if e := l.round(s); e.samples > 0 {
			out = append(out, StepEstimate{Step: s, Smoothed: e.srtt, Var: e.rttvar, Samples: e.samples, Backoff: e.backoff})
		}
	}
	tables := make([]string, 0, len(l.body))
	for t, e := range l.body {
		if e.samples > 0 {
			tables = append(tables, t)
		}
	}
	sort.Strings(tables)
	for _, t := range tables {
		e := l.body[t]
		out = append(out, StepEstimate{Step: StepCopy, Table: t, Smoothed: e.srtt, Var: e.rttvar, Samples: e.samples, Backoff: e.backoff})
	}
	return out
}
