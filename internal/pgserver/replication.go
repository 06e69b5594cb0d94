package pgserver

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// WaitStreaming waits until the standby streams from the primary and
// returns the pid of its walreceiver.
func (standby *Server) WaitStreaming(ctx context.Context, primary *Server) (int, error) {
	var pid int
	err := pollUntil(ctx, time.Minute, "the standby "+standby.Name+" to stream from "+primary.Name, func() (bool, string) {
		var state string
		if err := primary.QueryRow(ctx, `SELECT coalesce((SELECT state FROM pg_stat_replication LIMIT 1), 'no walsender')`, nil, &state); err != nil {
			return false, err.Error()
		}
		if err := standby.QueryRow(ctx, `SELECT coalesce((SELECT pid FROM pg_stat_wal_receiver WHERE status = 'streaming'), 0)`, nil, &pid); err != nil {
			return false, err.Error()
		}
		return state == "streaming" && pid != 0, fmt.Sprintf("walsender %s, walreceiver pid %d", state, pid)
	})
	return pid, err
}

// Unsent is what the primary holds that its standby can never receive.
type Unsent struct {
	// SentLSN is the walsender's sent_lsn, standing still: every commit
	// after it is never sent.
	SentLSN string
	// Bytes is the WAL past SentLSN at the last look.
	Bytes int64
}

// WaitUnsent waits until the primary's walsender cannot send more (the
// standby's walreceiver is stopped, SIGSTOP, and the connection's buffers
// are full): its sent_lsn stood still for a second while WAL beyond it
// waits. Whatever the primary commits after that is never sent. progress,
// called at every look, fails the wait when it returns an error (a sink
// that died).
func (primary *Server) WaitUnsent(ctx context.Context, timeout time.Duration, progress func() error) (Unsent, error) {
	const q = `SELECT sent_lsn::text, (pg_current_wal_lsn() - sent_lsn)::bigint FROM pg_stat_replication`
	var (
		u         Unsent
		lastSent  string
		sentSince time.Time
		failed    error
	)
	err := pollUntil(ctx, timeout, "the primary "+primary.Name+" to hold WAL it cannot send", func() (bool, string) {
		if failed = progress(); failed != nil {
			return true, ""
		}
		if err := primary.QueryRow(ctx, q, nil, &u.SentLSN, &u.Bytes); err != nil {
			return false, err.Error()
		}
		if u.SentLSN != lastSent {
			lastSent, sentSince = u.SentLSN, time.Now()
		}
		return time.Since(sentSince) >= time.Second && u.Bytes > 0,
			fmt.Sprintf("sent_lsn %s for %v, %d bytes of WAL unsent", u.SentLSN, time.Since(sentSince).Round(100*time.Millisecond), u.Bytes)
	})
	return u, errors.Join(failed, err)
}

// WaitReplayed waits until the standby's walreceiver has lost its
// connection to the killed primary and the standby has replayed all the WAL
// it received: its state is then the promoted server's first state. The
// replay position stops short of the receive position when the last record
// received is incomplete, so "all" is: the replay position stood still for
// a second with no walreceiver streaming.
func (standby *Server) WaitReplayed(ctx context.Context) error {
	const q = `SELECT (SELECT count(*) FROM pg_stat_wal_receiver WHERE status = 'streaming'),
  coalesce(pg_last_wal_receive_lsn()::text, ''), coalesce(pg_last_wal_replay_lsn()::text, '')`
	var lastReplayed string
	var since time.Time
	return pollUntil(ctx, time.Minute, "the standby "+standby.Name+" to replay all it received", func() (bool, string) {
		var streaming int
		var received, replayed string
		if err := standby.QueryRow(ctx, q, nil, &streaming, &received, &replayed); err != nil {
			return false, err.Error()
		}
		if streaming > 0 || replayed != lastReplayed {
			lastReplayed, since = replayed, time.Now()
		}
		return time.Since(since) >= time.Second, fmt.Sprintf("%d walreceivers streaming, received %s, replayed %s", streaming, received, replayed)
	})
}

// pollUntil calls check every 50 ms until it reports done, for at most
// timeout; the error then says what it waited for and the last status.
func pollUntil(ctx context.Context, timeout time.Duration, what string, check func() (bool, string)) error {
	deadline := time.Now().Add(timeout)
	for {
		done, status := check()
		if done {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("waited %s for %s: %s", timeout, what, status)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for %s: %w (%s)", what, ctx.Err(), status)
		case <-time.After(50 * time.Millisecond):
		}
	}
}
