package main

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafka2pg/kafka2pg/tools/internal/figures"
)

// latencyResult is one system's record-to-visible latency at a steady
// producer rate.
type latencyResult struct {
	System string
	Rate   float64 // records/s asked of the producer
	// Records is how many records the figures cover: those acknowledged
	// by Kafka in the measured window.
	Records  int
	P50, P99 time.Duration
	// Resolution is the polling interval: every latency is at most this
	// much late.
	Resolution time.Duration
	// Visibility is what decides when a row becomes visible: kafka2pg's
	// flush, Flink's checkpoint interval.
	Visibility string
}

// latencyPoll is how often the latency run looks for new rows.
const latencyPoll = 25 * time.Millisecond

// latency runs sys on a topic of its own, empty at its start, while a
// producer writes records to it at rate records/s: first until the system
// wrote its first row (start-up), then for warm more, then for dur, the
// measured window. A record's latency is the time from Kafka's
// acknowledgement of it to the first poll of the table that saw it, by
// partition: both systems commit a partition's records in their order, so
// a partition's highest seq in the table makes every record before it
// visible.
func (h *harness) latency(ctx context.Context, k *kafka, sys system, rate float64, warm, dur time.Duration) (latencyResult, error) {
	lr := latencyResult{System: sys.label(), Rate: rate, Resolution: latencyPoll}
	if !(rate > 0) || math.IsInf(rate, 0) {
		return lr, fmt.Errorf("latency: a producer rate of %v records/s", rate)
	}
	table := "peers_" + sys.short()
	if err := h.db.reset(ctx, table, false, false); err != nil {
		return lr, err
	}
	name := h.name(sys, "latency")
	topic := "peers_latency_" + name
	if err := k.create(ctx, topic); err != nil {
		return lr, err
	}
	defer func() { _ = k.drop(context.WithoutCancel(ctx), topic) }()
	// More records than the producer writes before the deadline: no
	// system ever sees itself done.
	sc := scenario{key: "latency", title: "latency", data: dataset{name: "latency", n: int(rate*h.timeout.Seconds()) + 1}}
	run, err := sys.start(ctx, sc, topic, table, name, false)
	if err != nil {
		return lr, err
	}
	defer func() { _ = run.stop(context.WithoutCancel(ctx)) }()

	var (
		mu    sync.Mutex
		acked []time.Time // by seq
		fail  error
	)
	pctx, stopProducing := context.WithCancel(ctx)
	defer stopProducing()
	produced := make(chan int, 1)
	go func() { produced <- k.produceAt(pctx, topic, rate, &mu, &acked, &fail) }()

	deadline := time.Now().Add(h.timeout)
	var from, to time.Time // the measured window of acknowledgements
	visible := make([]int64, partitions)
	for p := range visible {
		visible[p] = -1
	}
	var lat []float64
	next := make([]int64, partitions) // the next seq of partition p to see
	for p := range next {
		next[p] = int64(p)
	}
	for {
		select {
		case <-ctx.Done():
			return lr, ctx.Err()
		case <-time.After(latencyPoll):
		}
		if time.Now().After(deadline) {
			return lr, h.failed(sys, sc, run, errDeadline)
		}
		now := time.Now()
		if err := h.db.visible(ctx, table, visible); err != nil {
			return lr, err
		}
		if from.IsZero() && slices.Max(visible) >= 0 {
			from = now.Add(warm)
			to = from.Add(dur)
		}
		mu.Lock()
		if fail != nil {
			mu.Unlock()
			return lr, fmt.Errorf("produce to %s: %w", topic, fail)
		}
		// Record i is in partition i % partitions (its key is i).
		complete := !to.IsZero() && now.After(to)
		for p := range partitions {
			for ; next[p] <= visible[p] && next[p] < int64(len(acked)); next[p] += partitions {
				at := acked[next[p]]
				if !at.IsZero() && !at.Before(from) && at.Before(to) {
					lat = append(lat, now.Sub(at).Seconds())
				}
			}
			// The window is complete when every partition shows a
			// record acknowledged after it.
			if complete && (next[p] >= int64(len(acked)) || acked[next[p]].IsZero() || acked[next[p]].Before(to)) {
				complete = false
			}
		}
		mu.Unlock()
		if complete {
			break
		}
		if _, err := run.done(ctx); err != nil {
			return lr, h.failed(sys, sc, run, err)
		}
	}
	stopProducing()
	<-produced
	slices.Sort(lat)
	lr.Records = len(lat)
	lr.P50, lr.P99 = secondsDuration(quantile(lat, 0.5)), secondsDuration(quantile(lat, 0.99))
	h.logf("  %-18s latency at %.0f records/s: p50 %s, p99 %s over %d records", sys.label(), rate, lr.P50.Round(time.Millisecond), lr.P99.Round(time.Millisecond), lr.Records)
	if err := run.stop(ctx); err != nil {
		return lr, err
	}
	return lr, h.db.drop(ctx, table)
}

func secondsDuration(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// quantile is the nearest-rank q-quantile of sorted values; NaN when empty.
func quantile(sorted []float64, q float64) float64 {
	if len(sorted) == 0 {
		return math.NaN()
	}
	return sorted[min(max(int(math.Ceil(q*float64(len(sorted))))-1, 0), len(sorted)-1)]
}

// visible sets, per partition, the highest seq in table (-1 while none).
func (d *db) visible(ctx context.Context, table string, out []int64) error {
	rows, err := d.conn.Query(ctx, fmt.Sprintf("SELECT id %% %d, max(seq) FROM %s GROUP BY 1", partitions, pgx.Identifier{table}.Sanitize()))
	if err != nil {
		return fmt.Errorf("read the highest seq of %s: %w", table, err)
	}
	var p, seq int64
	_, err = pgx.ForEachRow(rows, []any{&p, &seq}, func() error {
		out[p] = max(out[p], seq)
		return nil
	})
	if err != nil {
		return fmt.Errorf("read the highest seq of %s: %w", table, err)
	}
	return nil
}

// produceAt produces append records (record i has key i, in partition i %
// partitions) to topic at rate records/s until ctx ends, recording each
// record's acknowledgement time in acked[i] and the first failure in fail
// (under mu). It returns how many it produced.
func (k *kafka) produceAt(ctx context.Context, topic string, rate float64, mu *sync.Mutex, acked *[]time.Time, fail *error) int {
	d := dataset{name: "latency", n: math.MaxInt32}
	t0 := time.Now()
	i := 0
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			_ = k.cl.Flush(context.WithoutCancel(ctx))
			return i
		case <-tick.C:
		}
		due := int(rate * time.Since(t0).Seconds())
		mu.Lock()
		for len(*acked) < due {
			*acked = append(*acked, time.Time{})
		}
		mu.Unlock()
		for ; i < due; i++ {
			key, value := d.appendRecord(nil, make([]byte, 0, 1024), i)
			seq := i
			k.cl.Produce(ctx, &kgo.Record{Topic: topic, Partition: partition(d.id(i)), Key: key, Value: value}, func(_ *kgo.Record, err error) {
				mu.Lock()
				defer mu.Unlock()
				if err != nil && ctx.Err() == nil && *fail == nil {
					*fail = err
				}
				if err == nil {
					(*acked)[seq] = time.Now()
				}
			})
		}
	}
}

// latencies runs every system's latency run at o's rate (by default half
// the slowest system's median append rate: every system keeps up with it)
// and adds the results to rep.
func latencies(ctx context.Context, o options, h *harness, k *kafka, peers []system, rep *report) error {
	rate := o.latencyRate
	if rate < 0 {
		return nil
	}
	if rate == 0 {
		rate = math.Inf(1)
		for _, sys := range peers {
			if _, ok := sys.(*debeziumSystem); ok {
				continue // no latency run (below)
			}
			s := figures.SpreadOver(rep.series("append-batch", sys.label()), result.rate)
			if s.N > 0 {
				rate = min(rate, s.Med/2)
			}
		}
		if math.IsInf(rate, 1) {
			o.logf("no latency runs: no append-batch run measured a rate to halve (pass -latency-rate)")
			return nil
		}
		rate = math.Round(rate/100) * 100
	}
	o.logf("== latency at %.0f records/s (%s warm-up, %s measured)", rate, o.latencyWindow, o.latencyWindow)
	for _, sys := range peers {
		if _, ok := sys.(*debeziumSystem); ok {
			// Its visibility is its offset flush, not what the
			// exactly-once comparison asks; not measured.
			continue
		}
		lr, err := h.latency(ctx, k, sys, rate, o.latencyWindow, o.latencyWindow)
		if err != nil {
			return err
		}
		switch s := sys.(type) {
		case *flinkSystem:
			lr.Visibility = "checkpoint every " + s.checkpoint.String()
		case *kafka2pgSystem:
			lr.Visibility = "its flush (defaults)"
		}
		rep.latency = append(rep.latency, lr)
	}
	return nil
}
