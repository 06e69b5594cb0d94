// Package trouble logs a failure that repeats while it is retried: the
// first failure of a streak at WARN, then at most one line per interval
// (with how many failures it stands for), each with how long the streak
// has lasted and the time since the last success; the end of a streak at
// INFO. A broker or a database that is down for an hour then costs a few
// hundred lines instead of one per retry, and each line still says how bad
// it is.
//
// A Log is safe for concurrent use. It never blocks on anything but its own
// mutex, so hooks of the Kafka client may call it.
package trouble

import (
	"log/slog"
	"sync"
	"time"
)

// DefaultEvery is how often a failing streak is logged again unless New is
// told otherwise.
const DefaultEvery = 30 * time.Second

// Log follows the failures of one thing (a broker connection, a
// partition's writes, a start-up step).
type Log struct {
	log   *slog.Logger
	msg   string // the message of every failure line, e.g. "kafka unreachable; retrying"
	every time.Duration
	now   func() time.Time

	mu           sync.Mutex
	lastOK       time.Time // the last success, or when the Log was made
	failingSince time.Time // zero while not failing
	lastLine     time.Time // when the streak was last logged
	unlogged     int       // failures since that line
	failures     int       // failures in the streak
	lastErr      error
}

// New returns a Log whose failure lines say msg. every <= 0 means
// DefaultEvery. A nil log discards.
func New(log *slog.Logger, msg string, every time.Duration) *Log {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if every <= 0 {
		every = DefaultEvery
	}
	return &Log{log: log, msg: msg, every: every, now: time.Now, lastOK: time.Now()}
}

// Fail records a failure and logs it if it starts a streak or the last
// line is older than the interval. attrs are slog key-value pairs that
// describe this failure (the partition, the backoff).
func (l *Log) Fail(err error, attrs ...any) {
	l.mu.Lock()
	now := l.now()
	first := l.failingSince.IsZero()
	if first {
		l.failingSince = now
	}
	l.failures++
	l.unlogged++
	l.lastErr = err
	due := first || now.Sub(l.lastLine) >= l.every
	var line []any
	if due {
		line = append(line, "error", err.Error())
		if !first {
			line = append(line, "failures", l.unlogged, "failing_for", now.Sub(l.failingSince).Round(time.Second).String())
		}
		line = append(line, "since_last_success", now.Sub(l.lastOK).Round(time.Second).String())
		l.lastLine, l.unlogged = now, 0
	}
	l.mu.Unlock()
	if due {
		l.log.Warn(l.msg, append(line, attrs...)...)
	}
}

// OK records a success; after a failing streak it logs at INFO that the
// trouble is over and how long it lasted.
func (l *Log) OK() {
	l.mu.Lock()
	now := l.now()
	l.lastOK = now
	since, n := l.failingSince, l.failures
	l.failingSince, l.failures, l.unlogged, l.lastErr = time.Time{}, 0, 0, nil
	l.mu.Unlock()
	if !since.IsZero() {
		l.log.Info(l.msg+": recovered", "failures", n, "failed_for", now.Sub(since).Round(100*time.Millisecond).String())
	}
}

// State is a snapshot of a Log.
type State struct {
	Failing      bool
	FailingSince time.Time // zero when not failing
	Failures     int       // in the streak
	LastErr      error     // the streak's last error
	LastOK       time.Time // the last success, or when the Log was made
}

// State returns the Log's state now.
func (l *Log) State() State {
	l.mu.Lock()
	defer l.mu.Unlock()
	return State{Failing: !l.failingSince.IsZero(), FailingSince: l.failingSince, Failures: l.failures, LastErr: l.lastErr, LastOK: l.lastOK}
}
