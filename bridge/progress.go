package bridge

import (
	"context"
	"log/slog"
	"maps"
	"slices"
	"sync/atomic"
	"time"

	"github.com/kafka2pg/kafka2pg/bridge/internal/metrics"
	"github.com/kafka2pg/kafka2pg/ingest"
	"github.com/kafka2pg/kafka2pg/reader"
)

// Stats are what a bridge has done since Run began: the reader's counters
// and what the writer committed.
type Stats struct {
	reader.Stats
	// Rows, DeadLetters and Skipped count what the writer committed:
	// rows written, records stored in kafka2pg.dead_letters, bad records
	// skipped (ingest.OnErrorSkip).
	Rows, DeadLetters, Skipped int64
}

// writeCounters count what the writer committed, for Stats, the progress
// line and the stop line.
type writeCounters struct{ rows, deadLetters, skipped atomic.Int64 }

func (c *writeCounters) TraceBatchEnd(_ context.Context, t ingest.BatchTrace) {
	c.rows.Add(int64(t.Rows))
	c.deadLetters.Add(int64(t.DeadLetters))
	c.skipped.Add(int64(t.Skipped))
}

// writeTracers tells each of its tracers of every write.
type writeTracers []ingest.Tracer

func (ts writeTracers) TraceBatchEnd(ctx context.Context, t ingest.BatchTrace) {
	for _, tr := range ts {
		tr.TraceBatchEnd(ctx, t)
	}
}

// TraceStale tells each of its tracers that is an ingest.StaleTracer.
func (ts writeTracers) TraceStale(ctx context.Context, table string, n int) {
	for _, tr := range ts {
		if st, ok := tr.(ingest.StaleTracer); ok {
			st.TraceStale(ctx, table, n)
		}
	}
}

// progressLoop logs a progress line every interval until ctx ends: the
// rates since the last line, the lag, and what went wrong meanwhile.
func progressLoop(ctx context.Context, rd *reader.Reader, log *slog.Logger, every time.Duration, written *writeCounters, m *metrics.Metrics) {
	tick := time.NewTicker(every)
	defer tick.Stop()
	rows, deadLetters := &written.rows, &written.deadLetters
	last, lastRows, lastLog := rd.Stats(), rows.Load(), time.Now()
	lastCauses, _ := m.WriteErrorsSince(nil)
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		st := rd.Stats()
		secs := time.Since(lastLog).Seconds()
		lag := int64(0)
		for _, p := range rd.Partitions() {
			lag += max(p.Lag(), 0)
		}
		nowRows := rows.Load()
		var causes string
		lastCauses, causes = m.WriteErrorsSince(lastCauses)
		attrs := []any{"records_per_s", int64(float64(st.Records-last.Records) / secs),
			"rows_per_s", int64(float64(nowRows-lastRows) / secs), "lag", lag, "dead_letters", deadLetters.Load(),
			"batches", st.Batches, "partitions", st.Partitions, "fenced", st.Fenced, "write_errors", st.WriteErrors,
			"stopped_partitions", len(st.Stopped)}
		if causes != "" {
			attrs = append(attrs, "write_errors_since_last", causes)
		}
		log.Info("progress", attrs...)
		last, lastRows, lastLog = st, nowRows, time.Now()
	}
}

// tableNames is the sinks' tables as one log attribute per topic, each
// schema.table without SQL quotes: tables.orders=public.orders in text,
// "tables":{"orders":"public.orders"} in JSON.
func tableNames(sinks map[string]ingest.Sink) slog.Attr {
	attrs := make([]any, 0, len(sinks))
	for _, topic := range slices.Sorted(maps.Keys(sinks)) {
		attrs = append(attrs, slog.String(topic, metrics.PlainTableName(sinks[topic].Table.QualifiedName())))
	}
	return slog.Group("tables", attrs...)
}
