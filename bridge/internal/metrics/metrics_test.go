package metrics

import (
	"context"
	"errors"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafka2pg/kafka2pg/decode"
	"github.com/kafka2pg/kafka2pg/ingest"
	"github.com/kafka2pg/kafka2pg/stream"
)

// The metrics a bridge exports, as a name → family map.
func gatherForTest(t *testing.T, reg prometheus.Gatherer) map[string]*dto.MetricFamily {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*dto.MetricFamily{}
	for _, mf := range mfs {
		out[mf.GetName()] = mf
	}
	return out
}

// A sink's table has its series at zero before its first batch, labeled
// schema.table without SQL quotes.
func TestTableSeriesExistAtZeroWithAPlainLabel(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := New(reg)
	if err != nil {
		t.Fatal(err)
	}
	m.InitTables(map[string]ingest.Sink{"orders": {Table: decode.RawTable("public", "orders", decode.ValueJSON)}})
	got := gatherForTest(t, reg)
	for _, name := range []string{"kafka2pg_ingest_rows_total", "kafka2pg_ingest_batches_total", "kafka2pg_ingest_skipped_records_total",
		"kafka2pg_ingest_isolated_batches_total", "kafka2pg_ingest_rechecked_batches_total", "kafka2pg_ingest_copy_duration_seconds"} {
		mf := got[name]
		if mf == nil || len(mf.GetMetric()) != 1 {
			t.Errorf("%s: %v, want one series for the sink's table", name, mf)
			continue
		}
		s := mf.GetMetric()[0]
		if l := s.GetLabel(); len(l) != 1 || l[0].GetName() != "table" || l[0].GetValue() != "public.orders" {
			t.Errorf("%s: labels %v, want table=public.orders", name, l)
		}
		if c := s.GetCounter(); c != nil && c.GetValue() != 0 {
			t.Errorf("%s = %v, want 0", name, c.GetValue())
		}
	}
}

// Every histogram bound is a round number: a few decimals at most, never
// le="372.5290298461914", in the lists and in what a registry exports,
// kprom's histograms included.
func TestHistogramBoundsAreRound(t *testing.T) {
	lists := map[string][]float64{"durationBuckets": durationBuckets, "latencyBuckets": latencyBuckets, "rowBuckets": rowBuckets, "byteBuckets": byteBuckets}
	for name, bounds := range lists {
		for i, b := range bounds {
			if !RoundBound(b) {
				t.Errorf("%s[%d] = %v: not a round bound", name, i, b)
			}
			if i > 0 && b <= bounds[i-1] {
				t.Errorf("%s[%d] = %v: not above the one before", name, i, b)
			}
		}
	}
	reg := prometheus.NewRegistry()
	m, closeAll, err := Sample(t.Context(), reg)
	if err != nil {
		t.Fatal(err)
	}
	defer closeAll()
	m.kafka.OnBrokerWrite(kgo.BrokerMetadata{NodeID: 1}, 0, 100, time.Millisecond, time.Millisecond, nil)
	histograms := 0
	for name, mf := range gatherForTest(t, reg) {
		if mf.GetType() == dto.MetricType_HISTOGRAM {
			histograms++
		}
		for _, s := range mf.GetMetric() {
			for _, bk := range s.GetHistogram().GetBucket() {
				if !RoundBound(bk.GetUpperBound()) {
					t.Errorf("%s: le=%v is not round", name, bk.GetUpperBound())
				}
			}
		}
	}
	if histograms < 5 {
		t.Errorf("%d histograms found; the check saw almost none", histograms)
	}
}

// series returns the series of name whose labels include want.
func series(t *testing.T, reg prometheus.Gatherer, name string, want map[string]string) *dto.Metric {
	t.Helper()
	mf := gatherForTest(t, reg)[name]
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
	t.Fatalf("no series %s%v", name, want)
	return nil
}

// The writer's traces become the ingest metrics: a committed batch's rows,
// key and value bytes, dead letters by kind, durations and end-to-end
// latency, and the changes a version guard skipped, of a batch or of a
// source transaction's apply; a failed write only its cause, but a stopped
// one also what it committed before the bad record.
func TestTheWriteMetricsCountWhatTheWriterTraced(t *testing.T) {
	reg := prometheus.NewRegistry()
	tracer, err := New(reg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	const table = `"public"."orders"`
	tl := map[string]string{"table": "public.orders"}
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
	tracer.TraceBatchEnd(ctx, ingest.BatchTrace{Batch: b, Table: table, Err: &ingest.DeadlineError{Topic: "orders", Step: ingest.StepCopy, Err: context.DeadlineExceeded}})
	tracer.TraceBatchEnd(ctx, ingest.BatchTrace{Batch: b, Table: table, Stale: 2})
	var applier ingest.StaleTracer = tracer // a source transaction's apply
	applier.TraceStale(ctx, table, 3)

	checks := []struct {
		name   string
		labels map[string]string
		got    func(*dto.Metric) float64
		want   float64
	}{
		{"kafka2pg_ingest_batches_total", tl, func(s *dto.Metric) float64 { return s.GetCounter().GetValue() }, 3},
		{"kafka2pg_ingest_rows_total", tl, func(s *dto.Metric) float64 { return s.GetCounter().GetValue() }, 6},
		{"kafka2pg_ingest_batch_bytes", tl, func(s *dto.Metric) float64 { return s.GetHistogram().GetSampleSum() }, 2 * (7 + 3 + 2)},
		{"kafka2pg_ingest_batch_bytes", tl, func(s *dto.Metric) float64 { return float64(s.GetHistogram().GetSampleCount()) }, 3},
		{"kafka2pg_ingest_stale_changes_skipped_total", tl, func(s *dto.Metric) float64 { return s.GetCounter().GetValue() }, 5},
		{"kafka2pg_ingest_dead_letters_total", map[string]string{"table": "public.orders", "kind": "invalid_json"}, func(s *dto.Metric) float64 { return s.GetCounter().GetValue() }, 1},
		{"kafka2pg_ingest_isolated_batches_total", tl, func(s *dto.Metric) float64 { return s.GetCounter().GetValue() }, 1},
		{"kafka2pg_ingest_copy_duration_seconds", tl, func(s *dto.Metric) float64 { return float64(s.GetHistogram().GetSampleCount()) }, 1},
		{"kafka2pg_ingest_commit_duration_seconds", tl, func(s *dto.Metric) float64 { return s.GetHistogram().GetSampleSum() }, 0.002},
		{"kafka2pg_end_to_end_latency_seconds", nil, func(s *dto.Metric) float64 { return float64(s.GetHistogram().GetSampleCount()) }, 4},
		{"kafka2pg_ingest_write_errors_total", map[string]string{"cause": "stopped"}, func(s *dto.Metric) float64 { return s.GetCounter().GetValue() }, 1},
		{"kafka2pg_ingest_write_errors_total", map[string]string{"cause": "fenced"}, func(s *dto.Metric) float64 { return s.GetCounter().GetValue() }, 1},
		{"kafka2pg_ingest_write_errors_total", map[string]string{"cause": "other"}, func(s *dto.Metric) float64 { return s.GetCounter().GetValue() }, 1},
		{"kafka2pg_ingest_write_errors_total", map[string]string{"cause": "connection"}, func(s *dto.Metric) float64 { return s.GetCounter().GetValue() }, 0},
		{"kafka2pg_ingest_write_errors_total", map[string]string{"cause": "timeout"}, func(s *dto.Metric) float64 { return s.GetCounter().GetValue() }, 1},
	}
	for _, c := range checks {
		if got := c.got(series(t, reg, c.name, c.labels)); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
}

func TestPlainTableNameDropsTheSQLQuotes(t *testing.T) {
	for in, want := range map[string]string{
		`"public"."orders"`:         "public.orders",
		`"sales"."Order ""Lines"""`: `sales.Order "Lines"`,
		`"orders"`:                  "orders",
		`"a.b"."c"`:                 "a.b.c",
		"orders":                    "orders",
	} {
		if got := PlainTableName(in); got != want {
			t.Errorf("PlainTableName(%s) = %q, want %q", in, got, want)
		}
	}
}
