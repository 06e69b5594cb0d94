package reader

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// leaveGrace is how long leaving the group may take when the caller's
// deadline has already passed, or when Close abandons: a member that
// leaves lets the group rebalance at once instead of after the session
// timeout, which is worth a second, not more.
const leaveGrace = time.Second

// Shutdown stops the reader gracefully, every step within ctx, as
// net/http's Server.Shutdown does: each partition writes what it has
// queued, the durable offsets are committed to the Kafka group, and the
// member leaves the group. A partition still writing when ctx ends is
// abandoned: its transaction is cancelled and rolls back, and whoever owns
// the partition next reads those records again. Call it after Run returned;
// it returns an error naming the step that ctx cut short (the reader is
// closed either way). Shutdown and Close act once: later calls return at
// once.
func (r *Reader) Shutdown(ctx context.Context) error {
	err := errors.New("reader: already shut down")
	r.closeOnce.Do(func() { err = r.shutdown(ctx, true) })
	return err
}

// Close stops the reader at once: the writes in flight are cancelled (they
// roll back), nothing queued is written, and leaving the group may take
// leaveGrace. Use it on error paths; Shutdown is the graceful stop.
func (r *Reader) Close() {
	r.closeOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), leaveGrace)
		defer cancel()
		_ = r.shutdown(ctx, false)
	})
}

func (r *Reader) shutdown(ctx context.Context, flush bool) error {
	var errs []error
	if err := r.stopPartitions(ctx, flush); err != nil {
		errs = append(errs, err)
	}
	// Whatever ctx left, the last steps get a moment: the offsets are
	// advisory (Postgres has them) but make lag tools right at once. A
	// member still joining for the first time gets that moment and no more:
	// franz-go's leave waits for the join, which waits for the rest of the
	// group, and this member owns nothing to hand over.
	last := ctx
	if dl, ok := ctx.Deadline(); !ok || time.Until(dl) < leaveGrace || !r.isSettled() {
		var cancel context.CancelFunc
		last, cancel = context.WithTimeout(context.WithoutCancel(ctx), leaveGrace)
		defer cancel()
	}
	if flush {
		if err := r.commitDurable(last); err != nil {
			errs = append(errs, err)
		}
	}
	r.detachAll()
	if err := r.leave(last); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// stopPartitions stops every partition goroutine; with flush each first
// writes what it has queued, until ctx ends.
func (r *Reader) stopPartitions(ctx context.Context, flush bool) error {
	parts := r.ownedPartitions()
	for _, p := range parts {
		p.stop(flush)
	}
	var err error
	for _, p := range parts {
		select {
		case <-p.done:
			continue
		case <-ctx.Done():
		}
		if err == nil {
			err = fmt.Errorf("flush the queued records: %w; abandoning the writes in flight (they roll back, and are read again)", ctx.Err())
			for _, q := range parts {
				q.stop(false)
			}
		}
		<-p.done // a cancelled write returns at once
	}
	return err
}

// commitDurable commits every owned partition's durable offset to the
// group, synchronously, within ctx.
func (r *Reader) commitDurable(ctx context.Context) error {
	r.mu.Lock()
	offs := make(map[string]map[int32]kgo.EpochOffset)
	for tp := range r.parts {
		if eo, ok := r.durable[tp]; ok {
			if offs[tp.Topic] == nil {
				offs[tp.Topic] = make(map[int32]kgo.EpochOffset)
			}
			offs[tp.Topic][tp.Partition] = eo
		}
	}
	r.mu.Unlock()
	if len(offs) == 0 {
		return nil
	}
	var err error
	r.cl.CommitOffsetsSync(ctx, offs, func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, cerr error) {
		if cerr == nil {
			cerr = commitResponseErr(resp)
		}
		err = cerr
	})
	if err != nil {
		// Harmless for exactly-once: the next owner resumes from Postgres.
		return fmt.Errorf("commit the durable offsets to the Kafka group: %w", err)
	}
	return nil
}

// detachAll unregisters every partition, so that the revoke of the leave
// finds nothing left to flush.
func (r *Reader) detachAll() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for tp := range r.parts {
		delete(r.parts, tp)
		r.served.Delete(tp)
	}
	r.ownedChanged()
}

// ErrLeaveAbandoned is what Shutdown and Close return (wrapped) when
// leaving the consumer group could not finish within their deadline. The
// data is durable all the same (the offsets are in Postgres), so a caller
// that exits should exit as after a clean stop; the group drops the member
// after reader.Config.SessionTimeout, and its partitions move then.
var ErrLeaveAbandoned = errors.New("leaving the consumer group abandoned")

// leave leaves the group and closes the client within ctx. franz-go's
// Close waits for the leave without a deadline (a member in the middle of
// a join waits for the join; a broker that does not answer is waited for),
// so it runs on its own goroutine, abandoned when ctx ends: the process is
// about to exit, and the group drops the member after its session timeout.
// An abandoned leave is logged once, at WARN, and returned as
// ErrLeaveAbandoned.
func (r *Reader) leave(ctx context.Context) error {
	r.cl.AllowRebalance() // a leave waits for the poll loop's permission
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = r.cl.LeaveGroupContext(ctx)
		r.cl.Close()
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
	}
	r.log.Warn("left the consumer group without waiting for the broker: the data is durable (offsets in Postgres), "+
		"and the group drops this member after its session timeout, when its partitions move to the other members",
		"group", r.cfg.Group, "session_timeout", r.cfg.SessionTimeout.String(), "error", ctx.Err().Error())
	return fmt.Errorf("leave the consumer group %q: %w: %w (the group drops this member after %s, reader.Config.SessionTimeout)",
		r.cfg.Group, ErrLeaveAbandoned, ctx.Err(), r.cfg.SessionTimeout)
}
