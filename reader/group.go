package reader

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafka2pg/kafka2pg/stream"
)

// assigned starts a goroutine for every newly assigned partition. They wait
// for their claim, which adjust makes before any record is fetched.
// Runs in franz-go's group goroutine; callbacks never run concurrently.
func (r *Reader) assigned(ctx context.Context, _ *kgo.Client, assigned map[string][]int32) {
	r.stats.rebalances.Add(1)
	r.fatal.ok(r.groupSubject()) // joined: the group lets this member in
	r.mu.Lock()
	defer r.mu.Unlock()
	for t, ps := range assigned {
		for _, p := range ps {
			tp := TopicPartition{t, p}
			if r.parts[tp] != nil {
				continue
			}
			part := newPartition(r, tp)
			r.parts[tp] = part
			r.served.Store(tp, part)
			go part.run()
		}
	}
	r.ownedChanged()
	r.log.Info("partitions assigned", "partitions", fmtPartitions(assigned))
	if len(assigned) == 0 {
		r.markSettled() // nothing to claim: this member's assignment is settled
	}
}

// adjust replaces the Kafka-committed start offsets of newly assigned
// partitions with the positions claimed in Postgres. It runs after
// OnPartitionsAssigned and before any fetch of these partitions; ctx ends
// if a revoke begins. A returned error ends the group session and the member
// rejoins, so transient Postgres trouble is retried here with backoff.
func (r *Reader) adjust(ctx context.Context, offsets map[string]map[int32]kgo.Offset) (map[string]map[int32]kgo.Offset, error) {
	for topic, ps := range offsets {
		partitions := make([]int32, 0, len(ps))
		for p := range ps {
			partitions = append(partitions, p)
		}
		claims, err := r.claimWithRetry(ctx, topic, partitions)
		if err != nil {
			if ctx.Err() != nil {
				r.log.Info("claim interrupted by a revoke or shutdown", "topic", topic)
			} else {
				r.log.Warn("claim failed; leaving this group session to rejoin", "topic", topic, "error", err.Error())
			}
			return nil, err
		}
		for _, p := range partitions {
			tp := TopicPartition{topic, p}
			c, ok := claims[p]
			if !ok {
				c = stream.Position{NextOffset: -1, LeaderEpoch: -1}
			}
			if c.NextOffset >= 0 {
				// With the stored leader epoch, the client checks that the
				// log was not truncated below the stored position (KIP-320):
				// a truncation comes back as a *kgo.ErrDataLoss.
				offsets[topic][p] = kgo.NewOffset().At(c.NextOffset).WithEpoch(c.LeaderEpoch)
				r.markDurableClaimed(tp, kgo.EpochOffset{Epoch: c.LeaderEpoch, Offset: c.NextOffset})
			} else {
				offsets[topic][p] = r.cfg.Start.offset(ps[p])
			}
			r.mu.Lock()
			part := r.parts[tp]
			r.mu.Unlock()
			if part != nil {
				part.setClaim(c)
			}
			r.log.Info("partition claimed", "topic", topic, "partition", p, "next_offset", c.NextOffset,
				"epoch", c.Epoch, "start", r.startDescription(c))
		}
	}
	r.markSettled()
	return offsets, nil
}

func (r *Reader) startDescription(c stream.Position) string {
	if c.NextOffset >= 0 {
		return "stored"
	}
	return r.cfg.Start.String()
}

// markDurableClaimed records a claimed position so that the Kafka mirror is
// corrected even before anything new is written.
func (r *Reader) markDurableClaimed(tp TopicPartition, eo kgo.EpochOffset) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.durable[tp] = eo
	r.dirty[tp] = true
}

func (r *Reader) claimWithRetry(ctx context.Context, topic string, partitions []int32) (map[int32]stream.Position, error) {
	backoff := 100 * time.Millisecond
	for {
		claims, err := r.store.Claim(ctx, topic, partitions)
		if err == nil {
			return claims, nil
		}
		if ctx.Err() != nil {
			return nil, err
		}
		if r.cfg.Permanent(err) && r.fatal.failed(fmt.Sprintf("claims in Postgres of topic %q", topic), err, "") {
			r.wake()
			return nil, err // Run returns the fatal error
		}
		r.log.Warn("claim failed; retrying", "topic", topic, "error", err.Error(), "backoff", backoff)
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, r.cfg.RetryBackoffMax)
	}
}

// revoked flushes the revoked partitions (within FlushTimeout), then
// commits their durable offsets to the group synchronously so the next owner
// and lag tools see exact progress. BlockRebalanceOnPoll guarantees the poll
// loop is not dispatching meanwhile.
func (r *Reader) revoked(ctx context.Context, cl *kgo.Client, revoked map[string][]int32) {
	if r.release(ctx, cl, revoked) {
		r.log.Info("partitions revoked", "partitions", fmtPartitions(revoked))
	}
}

// release flushes the owned partitions of m (within FlushTimeout),
// detaches them, and commits their durable offsets to the group
// synchronously. It reports whether it owned any.
func (r *Reader) release(ctx context.Context, cl *kgo.Client, m map[string][]int32) bool {
	// The partitions stay registered while they flush, so that the offsets
	// of the final batches are recorded and committed below; they are
	// detached once their goroutines have returned.
	revoked := m
	parts := r.owned(revoked)
	if len(parts) == 0 {
		return false
	}
	for _, p := range parts {
		p.stop(true)
	}
	deadline := time.NewTimer(r.cfg.FlushTimeout)
	defer deadline.Stop()
	for _, p := range parts {
		select {
		case <-p.done:
		case <-deadline.C:
			r.log.Warn("flush on revoke timed out; abandoning queued records (the next owner re-reads them)",
				"topic", p.tp.Topic, "partition", p.tp.Partition, "timeout", r.cfg.FlushTimeout)
			for _, q := range parts {
				q.stop(false)
			}
			<-p.done
		}
	}
	r.detach(revoked)
	cl.ResumeFetchPartitions(revoked) // pauses survive revocation; clear them
	offs := r.takeDurable(revoked)
	if len(offs) > 0 {
		cl.CommitOffsetsSync(ctx, offs, func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
			if err == nil {
				err = commitResponseErr(resp)
			}
			if err != nil {
				r.log.Warn("kafka group commit on revoke failed (harmless: Postgres is authoritative)", "error", err.Error())
			}
		})
	}
	return true
}

// lost abandons the partitions at once: the group has given them away, so a
// commit would fail and queued records belong to the next owner. An in-flight
// transaction is cancelled; if it still commits, the fence keeps it exact.
func (r *Reader) lost(_ context.Context, cl *kgo.Client, lost map[string][]int32) {
	parts := r.detach(lost)
	for _, p := range parts {
		p.stop(false)
	}
	for _, p := range parts {
		<-p.done
	}
	cl.ResumeFetchPartitions(lost)
	r.takeDurable(lost)
	r.log.Warn("partitions lost", "partitions", fmtPartitions(lost))
}

// owned returns the registered partitions of m.
func (r *Reader) owned(m map[string][]int32) []*partition {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []*partition
	for t, ps := range m {
		for _, p := range ps {
			if part := r.parts[TopicPartition{t, p}]; part != nil {
				out = append(out, part)
			}
		}
	}
	return out
}

// detach unregisters the partitions of m and returns them.
func (r *Reader) detach(m map[string][]int32) []*partition {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []*partition
	for t, ps := range m {
		for _, p := range ps {
			tp := TopicPartition{t, p}
			if part := r.parts[tp]; part != nil {
				out = append(out, part)
				delete(r.parts, tp)
				r.served.CompareAndDelete(tp, part)
			}
		}
	}
	r.ownedChanged()
	return out
}

// takeDurable removes and returns the durable offsets of the partitions in m.
func (r *Reader) takeDurable(m map[string][]int32) map[string]map[int32]kgo.EpochOffset {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string]map[int32]kgo.EpochOffset)
	for t, ps := range m {
		for _, p := range ps {
			tp := TopicPartition{t, p}
			if eo, ok := r.durable[tp]; ok {
				if out[t] == nil {
					out[t] = make(map[int32]kgo.EpochOffset)
				}
				out[t][p] = eo
			}
			delete(r.durable, tp)
			delete(r.dirty, tp)
			delete(r.mirror, tp)
		}
	}
	return out
}

// fmtPartitions writes a topic-to-partitions map the way a person reads it in
// a log line: "orders:0,1,2 payments:3", topics and partitions sorted.
func fmtPartitions(m map[string][]int32) string {
	var b strings.Builder
	for _, topic := range slices.Sorted(maps.Keys(m)) {
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(topic)
		b.WriteByte(':')
		for i, p := range slices.Sorted(slices.Values(m[topic])) {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(strconv.Itoa(int(p)))
		}
	}
	return b.String()
}

// ownedChanged follows a change of r.parts; call it with r.mu held.
func (r *Reader) ownedChanged() {
	r.ownedCount.Store(int32(len(r.parts)))
	r.shareFetchBytes()
	if r.cfg.OnOwned != nil {
		r.cfg.OnOwned(len(r.parts))
	}
}
