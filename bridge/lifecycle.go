package bridge

// The bridge's life as the outside sees it: which phase it is in (starting,
// running, stopping) for Ready, the start-up steps retried while the
// servers they need are unreachable, and UntilCaughtUp's deadline.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/kafka2pg/kafka2pg/ingest"
	"github.com/kafka2pg/kafka2pg/internal/redact"
	"github.com/kafka2pg/kafka2pg/internal/trouble"
	"github.com/kafka2pg/kafka2pg/reader"
)

// phase is where the bridge is in its life.
type phase int

const (
	phaseStarting phase = iota // connecting, migrating, preparing the tables, joining
	phaseRunning               // the reader runs
	phaseStopping              // flushing, committing, leaving
	phaseStopped               // Run returned
)

// bridgeStatus is what Ready and UntilCaughtUp's deadline ask about the
// bridge. Safe for concurrent use.
type bridgeStatus struct {
	mu    sync.Mutex
	phase phase
	step  string // while starting: the step under way
	rd    *reader.Reader
	pool  *pgxpool.Pool
	// startTrouble follows the start-up step's failures.
	startTrouble *trouble.Log
	// appliers apply the sources of the sinks with transactions.
	appliers []*ingest.Applier
}

// withAppliers records the appliers, for readiness.
func (s *bridgeStatus) withAppliers(appliers []*ingest.Applier) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.appliers = appliers
}

func newBridgeStatus(log *slog.Logger) *bridgeStatus {
	return &bridgeStatus{step: "starting", startTrouble: trouble.New(log, "start-up step failed; retrying", 0)}
}

// starting names the start-up step under way.
func (s *bridgeStatus) starting(step string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.step = step
}

// running records that the reader runs, over pool.
func (s *bridgeStatus) running(rd *reader.Reader, pool *pgxpool.Pool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.phase, s.rd, s.pool = phaseRunning, rd, pool
}

func (s *bridgeStatus) stopping() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.phase = phaseStopping
}

// stopped records that Run returned: the reader and the pool are gone.
func (s *bridgeStatus) stopped() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.phase, s.rd, s.pool = phaseStopped, nil, nil
}

func (s *bridgeStatus) snapshot() (phase, string, *reader.Reader, *pgxpool.Pool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.phase, s.step, s.rd, s.pool
}

// trouble describes what fails now, for a message: the start-up step's
// last error, or the reader's trouble.
func (s *bridgeStatus) trouble() string {
	ph, step, rd, _ := s.snapshot()
	var out []string
	if st := s.startTrouble.State(); ph == phaseStarting && st.Failing {
		out = append(out, fmt.Sprintf("%s: %v (%d failures in %s)", step, redact.Err(st.LastErr), st.Failures, time.Since(st.FailingSince).Round(time.Second)))
	}
	if rd != nil {
		out = append(out, rd.Trouble()...)
	}
	return strings.Join(out, "; ")
}

// retry runs a start-up step until it succeeds or ctx ends, with capped
// backoff, as long as the error is connection or server trouble (logged
// rate-limited). Other errors return at once.
func (s *bridgeStatus) retry(ctx context.Context, what string, fn func() error) error {
	s.starting(what)
	backoff := 200 * time.Millisecond
	for {
		err := fn()
		if err == nil {
			s.startTrouble.OK()
			return nil
		}
		if !ingest.Retryable(err) || ctx.Err() != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		s.startTrouble.Fail(redact.Err(err), "what", what, "backoff", backoff)
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: %w", what, err)
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}

// caughtUpTimeoutError is how UntilCaughtUp gives up.
type caughtUpTimeoutError struct {
	timeout time.Duration
	trouble string // what failed, as bridgeStatus.trouble says; "" when nothing did
	cut     error  // the error of the step the deadline cut short, if any
}

func (e *caughtUpTimeoutError) Error() string {
	why := e.trouble
	switch {
	case why == "" && e.cut != nil:
		why = redact.Err(e.cut).Error()
	case why == "":
		why = "nothing failed, but no partition made progress"
	}
	return fmt.Sprintf("bridge.Config.UntilCaughtUp: no write committed for %s (bridge.Config.CaughtUpTimeout); giving up: %s", e.timeout, why)
}

// caughtUpDeadline returns ctx ended, with a *caughtUpTimeoutError as its
// cause, once no write has committed for timeout (counted from the start,
// then from each commit), whichever side is down. stop ends the watch.
func caughtUpDeadline(ctx context.Context, st *bridgeStatus, timeout time.Duration) (_ context.Context, stop func()) {
	ctx, cancel := context.WithCancelCause(ctx)
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(min(time.Second, timeout/4))
		defer tick.Stop()
		last, batches := time.Now(), int64(0)
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			if _, _, rd, _ := st.snapshot(); rd != nil {
				if n := rd.Stats().Batches; n != batches {
					last, batches = time.Now(), n
				}
			}
			if time.Since(last) >= timeout {
				cancel(&caughtUpTimeoutError{timeout: timeout, trouble: st.trouble()})
				return
			}
		}
	})
	return ctx, func() {
		close(done)
		wg.Wait()
		cancel(nil)
	}
}

// givenUp returns the reason ctx was ended when it was Config.UntilCaughtUp
// giving up, else err.
func givenUp(ctx context.Context, err error) error {
	var timeout *caughtUpTimeoutError
	if errors.As(context.Cause(ctx), &timeout) {
		given := *timeout
		given.cut = err
		return &given
	}
	return err
}
