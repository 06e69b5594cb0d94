package bridge

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/kafka2pg/kafka2pg/internal/redact"
	"github.com/kafka2pg/kafka2pg/reader"
)

// notReady says why the bridge is not ready, or "" when it is: starting
// or stopping; Postgres unreachable; a partition stopped, in retry
// backoff, failing (lag, and failed writes or claims since its last
// commit), or stalled (lag, and no write committed for stall); not yet in
// the group.
// readyPingTimeout bounds Ready's ping of Postgres: under Kubernetes'
// default probe timeout of one second.
const readyPingTimeout = 500 * time.Millisecond

func notReady(ctx context.Context, st *bridgeStatus, stall time.Duration, now time.Time) string {
	ph, step, rd, pool := st.snapshot()
	switch ph {
	case phaseStarting:
		return "starting: " + step + troubleSuffix(st)
	case phaseStopping:
		return "stopping: flushing, committing and leaving the group"
	case phaseStopped:
		return "stopped"
	}
	stats := rd.Stats()
	if len(stats.Stopped) > 0 {
		return strings.Join(stats.Stopped, "; ")
	}
	if stats.Halted > 0 {
		return fmt.Sprintf("%d partition(s) in retry backoff after failed writes: %s", stats.Halted, strings.Join(rd.Trouble(), "; "))
	}
	select {
	case <-rd.Settled():
	default:
		return "not yet in the consumer group"
	}
	if stalled := stalledPartitions(rd.Partitions(), now, stall); len(stalled) > 0 {
		return strings.Join(stalled, "; ")
	}
	st.mu.Lock()
	appliers := st.appliers
	st.mu.Unlock()
	if waiting := incompleteTransactions(appliers, stall); waiting != "" {
		return waiting
	}
	// Last, and briefly: a probe gives up after a second or so, and an
	// answer that comes too late reads as no answer. A server that accepts
	// connections but answers nothing (frozen, or a hung pooler) fails here
	// as it fails the writes.
	ctx, cancel := context.WithTimeout(ctx, readyPingTimeout)
	defer cancel()
	if err := pool.Ping(ctx); err != nil {
		return "postgres unreachable: " + redact.Err(err).Error()
	}
	return ""
}

func troubleSuffix(st *bridgeStatus) string {
	if s := st.startTrouble.State(); s.Failing {
		return fmt.Sprintf(" (failing for %s: %v)", time.Since(s.FailingSince).Round(time.Second), redact.Err(s.LastErr))
	}
	return ""
}

// stalledPartitions describes each partition that has lag and failed
// writes or claims since its last commit, or (stall > 0) has lag but
// committed no write (nor was claimed) for stall or longer, or whose write
// has been in flight for stall or longer, in topic and partition order.
//
// A failing partition is not ready from its first failure to its next
// commit, backoff and re-claim included: a write that stops getting
// answers fails at its step's deadline, which follows what the writes took
// before (ingest's estimates: seconds on a database that answered fast),
// so /readyz says so then, not only after stall.
func stalledPartitions(parts []reader.PartitionStats, now time.Time, stall time.Duration) []string {
	sort.Slice(parts, func(i, j int) bool {
		if parts[i].Topic != parts[j].Topic {
			return parts[i].Topic < parts[j].Topic
		}
		return parts[i].Partition < parts[j].Partition
	})
	var out []string
	for _, p := range parts {
		idle := now.Sub(p.LastCommit)
		// A write in flight for stall is stuck whatever the lag says.
		stuck := stall > 0 && !p.WritingSince.IsZero() && now.Sub(p.WritingSince) >= stall
		failing := p.Failures > 0 && p.Lag() > 0
		if !stuck && !failing && (stall <= 0 || p.Lag() <= 0 || idle < stall) {
			continue
		}
		why := fmt.Sprintf("partition %s/%d has %d records of lag and committed no write for %s", p.Topic, p.Partition, p.Lag(), idle.Round(time.Second))
		var detail []string
		if !p.WritingSince.IsZero() {
			detail = append(detail, fmt.Sprintf("a write in flight for %s", now.Sub(p.WritingSince).Round(time.Second)))
		}
		if p.Failures > 0 {
			detail = append(detail, fmt.Sprintf("%d failed writes or claims in a row", p.Failures))
		}
		if len(detail) > 0 {
			why += " (" + strings.Join(detail, ", ") + ")"
		}
		out = append(out, why)
	}
	return out
}
