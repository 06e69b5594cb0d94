package main

import (
	"context"
	"errors"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/kafka2pg/kafka2pg/ingest"
	"github.com/kafka2pg/kafka2pg/stream"
)

// series gathers m's registry and returns the series of name whose labels
// include want.
func series(t *testing.T, m *bridgeMetrics, name string, want map[string]string) *dto.Metric {
	t.Helper()
	mfs, err := m.reg.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, s := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range s.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			for k, v := range want {
				if labels[k] != v {
					continue next
				}
			}
			return s
		}
	}
	t.Fatalf("no series %s%v", name, want)
	return nil
}

// The writer's traces become the ingest metrics: a committed batch's rows,
// key and value bytes, dead letters by kind, durations and end-to-end
// latency; a failed write only its cause, but a stopped one also what it
// committed before the bad record.
func TestTheWriteMetricsCountWhatTheWriterTraced(t *testing.T) {
	m := newBridgeMetrics()
	var written writeCounters
	tracer := writeTracers{m, &written}
	ctx := context.Background()
	const table = `"public"."orders"`
	ts := time.Now().Add(-time.Second)
	b := &stream.Batch{Topic: "orders", Records: []stream.Record{
		{Offset: 0, Timestamp: ts, Key: []byte("k1"), Value: []byte("12345")},
		{Offset: 1, Timestamp: ts, Value: []byte("123")},
		{Offset: 2, Key: []byte("k3")}, // no timestamp: no latency
	}}
	tracer.TraceBatchEnd(ctx, ingest.BatchTrace{Batch: b, Table: table, Rows: 2, DeadLetters: 1, DeadLetterKinds: []string{"invalid_json"},
		CopyDuration: 3 * time.Millisecond, CommitDuration: 2 * time.Millisecond, Isolated: true})
	stop := &stream.StopError{Topic: "orders", Offset: 7, Kind: "invalid_json", Err: errors.New("bad")}
	tracer.TraceBatchEnd(ctx, ingest.BatchTrace{Batch: &stream.Batch{Topic: "orders"}, Table: table, Err: stop, Rows: 4})
	tracer.TraceBatchEnd(ctx, ingest.BatchTrace{Batch: b, Table: table, Err: &stream.FencedError{Topic: "orders"}})
	tracer.TraceBatchEnd(ctx, ingest.BatchTrace{Batch: b, Table: table, Err: errors.New("boom")})

	tl := map[string]string{"table": table}
	checks := []struct {
		name   string
		labels map[string]string
		got    func(*dto.Metric) float64
		want   float64
	}{
		{"kafka2pg_ingest_batches_total", tl, func(s *dto.Metric) float64 { return s.GetCounter().GetValue() }, 2},
		{"kafka2pg_ingest_rows_total", tl, func(s *dto.Metric) float64 { return s.GetCounter().GetValue() }, 6},
		{"kafka2pg_ingest_batch_bytes", tl, func(s *dto.Metric) float64 { return s.GetHistogram().GetSampleSum() }, 7 + 3 + 2},
		{"kafka2pg_ingest_batch_bytes", tl, func(s *dto.Metric) float64 { return float64(s.GetHistogram().GetSampleCount()) }, 2},
		{"kafka2pg_ingest_dead_letters_total", map[string]string{"table": table, "kind": "invalid_json"}, func(s *dto.Metric) float64 { return s.GetCounter().GetValue() }, 1},
		{"kafka2pg_ingest_isolated_batches_total", tl, func(s *dto.Metric) float64 { return s.GetCounter().GetValue() }, 1},
		{"kafka2pg_ingest_copy_duration_seconds", tl, func(s *dto.Metric) float64 { return float64(s.GetHistogram().GetSampleCount()) }, 1},
		{"kafka2pg_ingest_commit_duration_seconds", tl, func(s *dto.Metric) float64 { return s.GetHistogram().GetSampleSum() }, 0.002},
		{"kafka2pg_end_to_end_latency_seconds", nil, func(s *dto.Metric) float64 { return float64(s.GetHistogram().GetSampleCount()) }, 2},
		{"kafka2pg_ingest_write_errors_total", map[string]string{"cause": "stopped"}, func(s *dto.Metric) float64 { return s.GetCounter().GetValue() }, 1},
		{"kafka2pg_ingest_write_errors_total", map[string]string{"cause": "fenced"}, func(s *dto.Metric) float64 { return s.GetCounter().GetValue() }, 1},
		{"kafka2pg_ingest_write_errors_total", map[string]string{"cause": "other"}, func(s *dto.Metric) float64 { return s.GetCounter().GetValue() }, 1},
		{"kafka2pg_ingest_write_errors_total", map[string]string{"cause": "postgres_unavailable"}, func(s *dto.Metric) float64 { return s.GetCounter().GetValue() }, 0},
	}
	for _, c := range checks {
		if got := c.got(series(t, m, c.name, c.labels)); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	if r, d := written.rows.Load(), written.deadLetters.Load(); r != 6 || d != 1 {
		t.Errorf("progress counters: %d rows and %d dead letters, want 6 and 1", r, d)
	}
}
