package ingest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/kafka2pg/kafka2pg/offsets"
	"github.com/kafka2pg/kafka2pg/stream"
)

// Write deadlines. A Postgres that stops answering without closing the
// connection (a hung pooler, a load balancer or NAT that lost its state, a
// frozen server) would hold a write, and its partition, for ever: TCP
// keepalives probe idle connections only, and a server that acknowledges
// and never answers fools them too. So every write transaction, and every
// claim, has a deadline; past it the transaction is cancelled, its
// connection closed, and the partition claims again, as after any failed
// write. A write's deadline is a ceiling (Config.WriteTimeout, here), and
// within it one per step that follows the step's measured latency
// (rto.go).

// Step is what a write transaction waits on.
type Step uint8

// The steps of a write transaction, in order, and the claim.
const (
	StepBegin       Step = iota // the pool's Acquire and BEGIN
	StepFence                   // the fenced advance of the offsets (and the describe of the table)
	StepCopy                    // the body: the COPY, an upsert's statements, the isolation's savepoints, a stop's rewind
	StepDeadLetters             // the COPY into kafka2pg.dead_letters
	StepNotify                  // the NOTIFYs (Config.Notify)
	StepCommit                  // COMMIT
	StepClaim                   // a claim (offsets.Store.Claim), with its lock waits
)

var stepNames = [...]string{"begin", "fence", "copy", "dead letters", "notify", "commit", "claim"}

func (s Step) String() string {
	if int(s) < len(stepNames) {
		return stepNames[s]
	}
	return fmt.Sprintf("Step(%d)", s)
}

// DeadlineError is a write or a claim that passed its deadline (a step's,
// from its measured latency, or the ceiling, Config.WriteTimeout): it was
// cancelled and its connection closed, never returned to the pool. It is
// errors.Is context.DeadlineExceeded. Nothing was committed unless Step is
// StepCommit, where the outcome is unknown: claim again, which re-reads
// the durable position; never retry blindly.
type DeadlineError struct {
	Topic string
	// Partition is -1 for a claim of several partitions, and for a replay
	// of dead letters (Topic is then empty).
	Partition int32
	Step      Step          // what the transaction waited on when the deadline passed
	Waited    time.Duration // from the start of the transaction (or claim) to its failure
	// Deadline is the deadline it had: its step's, from the step's start,
	// when that one passed; else the ceiling, from the transaction's
	// start.
	Deadline time.Duration
	Err      error // what the step returned
}

func (e *DeadlineError) Error() string {
	var what string
	switch {
	case e.Step == StepClaim && e.Partition < 0:
		what = "claim " + e.Topic
	case e.Step == StepClaim:
		what = fmt.Sprintf("claim %s/%d", e.Topic, e.Partition)
	case e.Topic == "":
		what = "transaction"
	default:
		what = fmt.Sprintf("write %s/%d", e.Topic, e.Partition)
	}
	return fmt.Sprintf("%s: no answer from Postgres within the deadline of %s (at %s, after %s); cancelled, its connection closed: %v",
		what, e.Deadline, e.Step, e.Waited.Round(time.Millisecond), e.Err)
}

func (e *DeadlineError) Unwrap() error { return e.Err }

// Is makes a DeadlineError a context.DeadlineExceeded, whatever the step
// returned (a closed connection, say).
func (e *DeadlineError) Is(target error) bool { return target == context.DeadlineExceeded }

// errWriteDeadline is the cause of a write transaction's context when its
// deadline passed (not the caller's).
var errWriteDeadline = errors.New("the write deadline passed")

// deadline is the ceiling of a transaction writing rows rows:
// Config.WriteTimeout for up to Config.WriteTimeoutRows rows, and
// proportionally more for more (a combined transaction); twice that when
// it isolates rows, which copies each row up to twice or applies them one
// by one.
func (w *Writer) deadline(rows int, isolating bool) time.Duration {
	return writeDeadline(w.cfg, rows, isolating)
}

func writeDeadline(cfg Config, rows int, isolating bool) time.Duration {
	d := cfg.WriteTimeout
	if rows > cfg.WriteTimeoutRows {
		d = time.Duration(float64(d) * float64(rows) / float64(cfg.WriteTimeoutRows))
	}
	if isolating {
		d *= 2
	}
	return d
}

// offsetsConfig is the configuration of the Writer's offsets.Store: a
// claim gets WriteTimeout beyond its lock waits.
func (cfg Config) offsetsConfig() offsets.Config {
	return offsets.Config{Group: cfg.Group, ClaimLockTimeout: cfg.ClaimLockTimeout, ClaimTimeout: cfg.WriteTimeout, Logger: cfg.Logger}
}

// StatementTimeout is the statement_timeout (and lock_timeout) the
// sessions of a Writer with cfg should have: the longest deadline any of
// its transactions or claims can get. Postgres then never cancels a
// statement that its deadline would let run, whatever the database's or
// the role's defaults for interactive sessions say; the deadline itself,
// which starts earlier, ends it first.
func (cfg Config) StatementTimeout() time.Duration {
	cfg = cfg.withDefaults()
	longest := max(writeDeadline(cfg, cfg.WriteTimeoutRows, true), cfg.offsetsConfig().ClaimDeadline())
	if cfg.TableWriters > 0 {
		// A combined transaction never isolates: its batches are
		// written one by one instead.
		longest = max(longest, writeDeadline(cfg, cfg.CombineMaxRows, false))
	}
	return longest
}

// WriteInFlight is a write transaction in progress on one partition.
type WriteInFlight struct {
	Topic     string
	Partition int32
	Began     time.Time // when it asked the pool for a connection
	Deadline  time.Time // when it is cancelled: its step's deadline, or its ceiling
	Step      Step      // what it waits on now
}

// Overdue reports whether the write is past its deadline at now. The
// deadline cancels a write and closes its connection at once, so a write
// still in flight after it is stuck where nothing should block: a
// readiness check should fail.
func (f WriteInFlight) Overdue(now time.Time) bool { return now.After(f.Deadline) }

// InFlight returns the writes in progress, one per partition (each
// partition of a combined transaction), in topic and partition order; a
// readiness check can tell from it which partitions wait on Postgres, for
// how long, at which step, and whether any is past its deadline. Safe to
// call from any goroutine at any time.
func (w *Writer) InFlight() []WriteInFlight {
	w.flightMu.Lock()
	out := make([]WriteInFlight, 0, len(w.flights))
	for k, st := range w.flights {
		out = append(out, WriteInFlight{Topic: k.topic, Partition: k.partition, Began: st.began, Deadline: time.Unix(0, st.deadline.Load()),
			Step: Step(st.step.Load())})
	}
	w.flightMu.Unlock()
	slices.SortFunc(out, func(x, y WriteInFlight) int {
		if c := strings.Compare(x.Topic, y.Topic); c != 0 {
			return c
		}
		return int(x.Partition - y.Partition)
	})
	return out
}

// flightKey names a partition in Writer.flights.
type flightKey struct {
	topic     string
	partition int32
}

// txState is a write transaction in flight: when it began, its current
// deadline (Unix nanoseconds: its step's, or its ceiling) and the step it
// waits on (a Step), which its own goroutine sets and InFlight reads.
type txState struct {
	began    time.Time
	deadline atomic.Int64
	step     atomic.Uint32
}

// track registers a transaction writing batches, with deadline d, for
// InFlight.
func (w *Writer) track(batches []*stream.Batch, d time.Duration) *txState {
	now := time.Now()
	st := &txState{began: now}
	st.deadline.Store(now.Add(d).UnixNano())
	if len(batches) == 0 {
		return st
	}
	w.flightMu.Lock()
	for _, b := range batches {
		w.flights[flightKey{b.Topic, b.Partition}] = st
	}
	w.flightMu.Unlock()
	return st
}

// untrack removes what track registered; a partition that another
// transaction registered since (a new owner in the same process) stays.
func (w *Writer) untrack(batches []*stream.Batch, st *txState) {
	if len(batches) == 0 {
		return
	}
	w.flightMu.Lock()
	for _, b := range batches {
		if k := (flightKey{b.Topic, b.Partition}); w.flights[k] == st {
			delete(w.flights, k)
		}
	}
	w.flightMu.Unlock()
}

// passedDeadline makes err, the failure of a transaction writing batches
// whose deadline passed (its step's, from clock, or its ceiling d), a
// *DeadlineError naming its first batch, and logs it. A step cut at its
// own deadline doubles that step's next deadlines. The pool's idle
// connections go too: they share the path that stopped answering, and
// each would hold the next claim or write until its own deadline.
func (w *Writer) passedDeadline(batches []*stream.Batch, st *txState, clock *stepClock, d time.Duration, err error) error {
	de := &DeadlineError{Partition: -1, Step: Step(st.step.Load()), Waited: time.Since(st.began), Deadline: d, Err: err}
	if clock != nil && clock.adaptive {
		de.Deadline = clock.stepDeadline
		w.lat.cut(clock.step, clock.table, clock.gen)
	}
	w.pool.Reset()
	var attrs []any
	if len(batches) > 0 {
		de.Topic, de.Partition = batches[0].Topic, batches[0].Partition
		attrs = append(attrs, "topic", de.Topic, "partition", de.Partition, "first_offset", batches[0].FirstOffset)
	}
	if len(batches) > 1 {
		attrs = append(attrs, "combined", len(batches))
	}
	attrs = append(attrs, "step", de.Step.String(), "waited", de.Waited.Round(time.Millisecond), "deadline", de.Deadline.Round(time.Millisecond), "error", err.Error())
	msg := "write passed its deadline: cancelled, its connection closed; the partition claims again and retries"
	if len(batches) == 0 {
		msg = "transaction passed its deadline: cancelled, its connection closed"
	}
	w.log.Warn(msg, attrs...)
	return de
}

// stepClock gives each step of a write transaction its deadline from the
// Writer's estimates (rto.go), within the transaction's ceiling, and feeds
// the estimates with what each step took. Used by the transaction's own
// goroutine only; its timer's function only cancels.
type stepClock struct {
	l       *latencies
	table   string // the sink's table: whose body estimate applies
	bytes   int64  // the keys and values of the transaction's records
	ceiling time.Time
	state   *txState
	cancel  context.CancelCauseFunc
	timer   *time.Timer

	step         Step // the step under way, once armed
	armed        bool
	start        time.Time     // when step began
	stepDeadline time.Duration // its deadline from start, when adaptive
	adaptive     bool          // its deadline comes from an estimate (not the ceiling)
	gen          uint64        // the generation of that estimate
}

// at ends the step under way, its time a sample, and starts s with its
// deadline. A step that is already under way goes on (the fast path marks
// the body as soon as the fence answers, within its pipeline).
func (c *stepClock) at(s Step) {
	now := time.Now()
	if c.armed {
		if s == c.step {
			return
		}
		c.l.observe(c.step, c.table, c.bytes, now.Sub(c.start))
	}
	c.step, c.start, c.armed = s, now, true
	dl := c.ceiling
	d, gen, ok := c.l.expect(s, c.table, c.bytes)
	c.adaptive, c.gen, c.stepDeadline = ok && now.Add(d).Before(c.ceiling), gen, d
	if c.adaptive {
		dl = now.Add(d)
	}
	c.state.deadline.Store(dl.UnixNano())
	if c.timer == nil {
		c.timer = time.AfterFunc(dl.Sub(now), func() { c.cancel(errWriteDeadline) })
	} else {
		c.timer.Reset(dl.Sub(now))
	}
}

// done ends the last step (COMMIT returned), its time a sample.
func (c *stepClock) done() {
	if c.armed {
		c.l.observe(c.step, c.table, c.bytes, time.Since(c.start))
		c.armed = false
	}
	c.stop()
}

func (c *stepClock) stop() {
	if c.timer != nil {
		c.timer.Stop()
	}
}

// batchBytes is the size of b's keys and values: what its COPY's time
// grows with.
func batchBytes(b *stream.Batch) int64 {
	var n int64
	for i := range b.Records {
		n += int64(len(b.Records[i].Key) + len(b.Records[i].Value))
	}
	return n
}
