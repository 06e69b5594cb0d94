package main

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"golang.org/x/sync/errgroup"

	"github.com/kafka2pg/kafka2pg/tools/internal/figures"
)

// commitPollInterval is how often the latency scenario reads the bridge's
// durable positions: the resolution of its commit times.
const commitPollInterval = 5 * time.Millisecond

// latencyResult is the latency scenario: the bridge with default flush
// settings consuming a producer paced at a fixed rate.
type latencyResult struct {
	result             // Records produced; P50, P99 exact (upper bounds); Active = the producer's pacing time
	Rep        int     // the repetition it followed, from 1
	TargetRate float64 // records/s asked of the producer
	FixedRate  bool    // TargetRate came from -latency-rate, not the measured rate
	P90, Max   float64 // seconds, exact (upper bounds)
	P99Lower   float64 // seconds: p99 of the lower bounds
	// Resolution is how wide the window holding a commit is: the time
	// from sending the last poll that did not see it to receiving the
	// first that did (median and max over the commits seen).
	ResolutionMed, ResolutionMax float64
	Commits                      int // data transactions seen (position changes)
	// Checkpoints Postgres started while the producer ran and the bridge
	// caught up, and how long the sync phases of those that completed
	// meanwhile took: a checkpoint's fsyncs of the data files hold up the
	// WAL fsyncs of commits on the same disk.
	Checkpoints    int64
	CheckpointSync time.Duration
	MaxWALSize     string
}

// checkpointStats is Postgres' cumulative checkpoint count and sync time,
// and its max_wal_size.
type checkpointStats struct {
	count      int64
	sync       time.Duration
	maxWALSize string
}

func readCheckpointStats(ctx context.Context, conn *pgx.Conn) (checkpointStats, error) {
	var st checkpointStats
	var ms float64
	err := conn.QueryRow(ctx, `SELECT checkpoints_timed + checkpoints_req, checkpoint_sync_time, current_setting('max_wal_size')
		FROM pg_stat_bgwriter`).Scan(&st.count, &ms, &st.maxWALSize)
	if err != nil {
		return st, fmt.Errorf("read pg_stat_bgwriter: %w", err)
	}
	st.sync = time.Duration(ms * float64(time.Millisecond))
	return st, nil
}

// commitSeen is a durable position change seen by the poller: records
// below nextOffset were committed after notBefore and before seenAt.
type commitSeen struct {
	nextOffset        int64
	notBefore, seenAt time.Time
}

// runLatency runs the bridge (default flush settings) on an empty topic,
// waits until it claimed every partition, then produces to the topic at
// rate records/s for dur, with the produce time as each record's
// timestamp, while polling kafka2pg.offsets every 5 ms for the commit
// times. Every record's latency is the first poll that saw its offset
// committed minus its timestamp, read back from the row the bridge wrote.
// Only the zero-config table has the timestamp column it needs.
func runLatency(ctx context.Context, e *env, kind, topic string, rate float64, dur time.Duration) (latencyResult, error) {
	if kind != rawTable {
		return latencyResult{}, fmt.Errorf("latency scenario: table %s has no kafka_timestamp column; use %s", kind, rawTable)
	}
	if !(rate > 0) || math.IsInf(rate, 0) {
		return latencyResult{}, fmt.Errorf("latency scenario: a producer rate of %v records/s", rate)
	}
	t, _, err := tableFor(kind)
	if err != nil {
		return latencyResult{}, err
	}
	if err := e.resetTable(ctx, t, false); err != nil {
		return latencyResult{}, err
	}
	if err := e.kafka.create(ctx, topic); err != nil {
		return latencyResult{}, err
	}
	defer func() {
		if err := e.kafka.drop(context.WithoutCancel(ctx), topic); err != nil {
			e.logf("note: %v", err)
		}
	}()
	b, err := startBridge(ctx, e, kind, topic)
	if err != nil {
		return latencyResult{}, err
	}
	defer b.stop() // a no-op after finish
	poll, err := pgx.Connect(ctx, e.pgURL)
	if err != nil {
		return latencyResult{}, fmt.Errorf("connect to Postgres: %w", err)
	}
	defer poll.Close(context.WithoutCancel(ctx))
	if err := waitClaimed(ctx, e, b, poll, topic); err != nil {
		return latencyResult{}, err
	}

	ck0, err := readCheckpointStats(ctx, poll)
	if err != nil {
		return latencyResult{}, err
	}
	var (
		produced atomic.Int64 // the record count once the producer is done; -1 before
		commits  [partitions][]commitSeen
		paced    time.Duration // the producer's pacing time, its flush excluded
	)
	produced.Store(-1)
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		var err error
		commits, err = pollCommits(gctx, e, b, poll, topic, &produced)
		return err
	})
	g.Go(func() error {
		n, d, err := e.kafka.produceAt(gctx, topic, rate, dur)
		paced = d
		produced.Store(int64(n))
		return err
	})
	if err := g.Wait(); err != nil {
		return latencyResult{}, err
	}
	n := int(produced.Load())
	lr := latencyResult{TargetRate: rate, result: result{Kind: "latency", Table: kind, Records: n, ActiveRows: n,
		Active: paced, RecordBytes: e.recordBytes}}
	ck, err := readCheckpointStats(ctx, poll)
	if err != nil {
		return latencyResult{}, err
	}
	lr.Checkpoints, lr.CheckpointSync, lr.MaxWALSize = ck.count-ck0.count, ck.sync-ck0.sync, ck.maxWALSize
	lr.Wall = time.Since(b.t0)
	b.finish(e, &lr.result)

	rows, err := poll.Query(ctx, fmt.Sprintf("SELECT kafka_partition, kafka_offset, kafka_timestamp FROM %s ORDER BY 1, 2", t.QualifiedName()))
	if err != nil {
		return latencyResult{}, fmt.Errorf("read the timestamps of %s: %w", t.QualifiedName(), err)
	}
	var upper, lower []float64
	var ts time.Time
	var p int32
	var off int64
	next := [partitions]int{} // index into commits[p]
	_, err = pgx.ForEachRow(rows, []any{&p, &off, &ts}, func() error {
		if p < 0 || int(p) >= partitions {
			return fmt.Errorf("a row of partition %d", p)
		}
		cs := commits[p]
		i := next[p]
		for i < len(cs) && cs[i].nextOffset <= off {
			i++
		}
		next[p] = i
		if i == len(cs) {
			return fmt.Errorf("partition %d offset %d is in the table but no poll saw it committed", p, off)
		}
		upper = append(upper, cs[i].seenAt.Sub(ts).Seconds())
		lower = append(lower, cs[i].notBefore.Sub(ts).Seconds())
		return nil
	})
	if err != nil {
		return latencyResult{}, fmt.Errorf("read the timestamps of %s: %w", t.QualifiedName(), err)
	}
	lr.TableRows = int64(len(upper))
	slices.Sort(upper)
	slices.Sort(lower)
	lr.P50, lr.P90, lr.P99, lr.Max = quantile(upper, 0.5), quantile(upper, 0.9), quantile(upper, 0.99), quantile(upper, 1)
	lr.P99Lower = quantile(lower, 0.99)
	var widths []float64
	for _, cs := range commits {
		for _, c := range cs {
			widths = append(widths, c.seenAt.Sub(c.notBefore).Seconds())
		}
	}
	slices.Sort(widths)
	lr.Commits = len(widths)
	lr.ResolutionMed, lr.ResolutionMax = quantile(widths, 0.5), quantile(widths, 1)
	e.logf("%-36s %s records at %s/s (asked %s/s): p50 %s, p90 %s, p99 %s (≥ %s), max %s; commit times ±%s (max %s); RSS %s; %d Postgres checkpoints started (sync completed: %s)",
		"kafka2pg latency (zero-config)", figures.Num(float64(n), 0), figures.Num(lr.rowsPerSec(), 0), figures.Num(rate, 0), secs(lr.P50), secs(lr.P90),
		secs(lr.P99), secs(lr.P99Lower), secs(lr.Max), secs(lr.ResolutionMed), secs(lr.ResolutionMax), mib(lr.PeakRSS),
		lr.Checkpoints, secs(lr.CheckpointSync.Seconds()))
	return lr, e.dropTable(ctx, t)
}

// quantile is the nearest-rank q-quantile of sorted values: the smallest
// value with at least q×n values at or below it; NaN when empty.
func quantile(sorted []float64, q float64) float64 {
	if len(sorted) == 0 {
		return math.NaN()
	}
	k := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[min(max(k, 0), len(sorted)-1)]
}

// waitClaimed waits until the bridge has claimed every partition of topic
// (its rows exist in kafka2pg.offsets), so that no record waits for the
// group to form.
func waitClaimed(ctx context.Context, e *env, b *bridgeProc, conn *pgx.Conn, topic string) error {
	deadline := time.Now().Add(e.timeout)
	for {
		var claimed int
		err := conn.QueryRow(ctx, `SELECT count(*) FROM kafka2pg.offsets WHERE consumer_group = $1 AND topic = $2`,
			b.group, topic).Scan(&claimed)
		if err == nil && claimed == partitions {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case err := <-b.exited:
			b.exited <- err // for stop
			return fmt.Errorf("the bridge exited before claiming %s (%v):\n%s", topic, err, b.log.String())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the bridge did not claim the %d partitions of %s within %s (last: %d, %v):\n%s",
				partitions, topic, e.timeout, claimed, err, b.log.String())
		}
	}
}

// pollCommits reads the bridge's durable positions every 5 ms and records
// each change with the window it happened in, until produced is set and
// every produced record is committed (within e.timeout of that).
func pollCommits(ctx context.Context, e *env, b *bridgeProc, conn *pgx.Conn, topic string, produced *atomic.Int64) ([partitions][]commitSeen, error) {
	var out [partitions][]commitSeen
	var last [partitions]int64
	prevSend := time.Now() // nothing is produced before the poller starts
	var deadline time.Time
	tick := time.NewTicker(commitPollInterval)
	defer tick.Stop()
	for {
		send := time.Now()
		rows, err := conn.Query(ctx, `SELECT partition, coalesce(next_offset, 0) FROM kafka2pg.offsets
			WHERE consumer_group = $1 AND topic = $2`, b.group, topic)
		if err != nil {
			return out, fmt.Errorf("poll kafka2pg.offsets: %w", err)
		}
		var p int32
		var next int64
		var changed []int32
		var nexts []int64
		_, err = pgx.ForEachRow(rows, []any{&p, &next}, func() error {
			if p < 0 || int(p) >= partitions {
				return fmt.Errorf("partition %d", p)
			}
			changed, nexts = append(changed, p), append(nexts, next)
			return nil
		})
		if err != nil {
			return out, fmt.Errorf("poll kafka2pg.offsets: %w", err)
		}
		seen := time.Now()
		total := int64(0)
		for i, p := range changed {
			if nexts[i] > last[p] {
				out[p] = append(out[p], commitSeen{nextOffset: nexts[i], notBefore: prevSend, seenAt: seen})
				last[p] = nexts[i]
			}
			total += last[p]
		}
		prevSend = send
		if n := produced.Load(); n >= 0 {
			if total >= n {
				return out, nil
			}
			if deadline.IsZero() {
				deadline = time.Now().Add(e.timeout)
			}
			if time.Now().After(deadline) {
				return out, fmt.Errorf("the bridge committed %d of %d records within %s of the last produce:\n%s", total, n, e.timeout, b.log.String())
			}
		}
		select {
		case <-ctx.Done():
			return out, ctx.Err()
		case err := <-b.exited:
			b.exited <- err // for stop
			return out, fmt.Errorf("the bridge exited while producing (%v):\n%s", err, b.log.String())
		case <-tick.C:
		}
	}
}
