package ingest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// Every member of a group may run an Applier of each source, and one at a
// time does: the one whose session holds the source's advisory lock.
// The lock only keeps the members from taking the source from each other
// in turn; safety is the epoch's (Claim): a member that lost its session,
// and with it the lock, while an apply transaction of its was on the way
// is fenced by the next holder's claim.

// leaseRetry is how often a member that does not hold a source's lock
// tries again, and how often the holder checks that its session is alive.
const leaseRetry = 2 * time.Second

// RunLeased runs the Applier while this member holds the source's
// advisory lock, on a connection of its own (not the pool's), and tries
// to take the lock every 2 seconds while another member holds it. It
// returns nil when ctx ends; an apply that fails, or a lost lock, makes it
// try again.
func (a *Applier) RunLeased(ctx context.Context) error {
	for {
		led, err := a.leadOnce(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			a.log.Warn("applier of source transactions stopped; trying again", "error", err, "led", led)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(leaseRetry):
		}
	}
}

// leadOnce takes the source's lock if it is free and runs the Applier
// until ctx ends, the lock's session fails, or Run fails. led says
// whether it held the lock.
func (a *Applier) leadOnce(ctx context.Context) (led bool, err error) {
	conn, err := pgx.ConnectConfig(ctx, a.w.pool.Config().ConnConfig.Copy())
	if err != nil {
		return false, fmt.Errorf("connect for the lock of source %q: %w", a.cfg.Source, err)
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), DeadlineFloor)
		defer cancel()
		conn.Close(cctx) // ends the session, and with it the lock
	}()
	if err := conn.QueryRow(ctx, "SELECT pg_try_advisory_lock(hashtext('kafka2pg.cdc_applier'), hashtext($1 || '/' || $2))",
		a.w.cfg.Group, a.cfg.Source).Scan(&led); err != nil {
		return false, fmt.Errorf("take the lock of source %q: %w", a.cfg.Source, err)
	}
	if !led {
		return false, nil
	}
	a.log.Info("applying the source's transactions: this member holds its lock")
	a.setLeading(true)
	defer a.setLeading(false)
	rctx, cancel := context.WithCancelCause(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(leaseRetry)
		defer t.Stop()
		for {
			select {
			case <-rctx.Done():
				return
			case <-t.C:
			}
			pctx, stop := context.WithTimeout(rctx, DeadlineFloor)
			err := conn.Ping(pctx)
			stop()
			if err != nil && rctx.Err() == nil {
				cancel(fmt.Errorf("the session holding the lock of source %q failed: %w", a.cfg.Source, err))
				return
			}
		}
	})
	err = a.Run(rctx)
	cancel(nil)
	wg.Wait()
	if cause := context.Cause(rctx); err == nil && ctx.Err() == nil && cause != nil && !errors.Is(cause, context.Canceled) {
		err = cause
	}
	return true, err
}

func (a *Applier) setLeading(on bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.stats.Leading = on
	if !on {
		a.stats.Incomplete = IncompleteTx{}
	}
}
