package main

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafka2pg/kafka2pg/ingest"
	"github.com/kafka2pg/kafka2pg/schema"
	"github.com/kafka2pg/kafka2pg/stream"
)

// The metrics a bridge exports, as a name → family map.
func gatherForTest(t *testing.T, m *bridgeMetrics) map[string]*dto.MetricFamily {
	t.Helper()
	mfs, err := m.reg.Gather()
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
	m := newBridgeMetrics()
	m.initTables(map[string]ingest.Sink{"orders": {Table: schema.RawTable("public", "orders", schema.ValueJSON)}})
	got := gatherForTest(t, m)
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

// The Kafka client's metrics are a consumer's: none of a producer, the
// buffered records gauge named as a gauge, no name twice.
func TestKafkaClientMetricsAreAConsumers(t *testing.T) {
	families, err := bridgeMetricFamilies(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]metricFamily{}
	for _, f := range families {
		if strings.Contains(f.name, "produce") {
			t.Errorf("%s: a producer's metric in a consumer", f.name)
		}
		if strings.HasSuffix(f.name, "_total") && f.typ != "counter" {
			t.Errorf("%s is a %s: only counters end in _total", f.name, f.typ)
		}
		byName[f.name] = f
	}
	for _, r := range renamedMetrics {
		if _, ok := byName[r.old]; ok {
			t.Errorf("the old name %s is still exported", r.old)
		}
		if _, ok := byName[r.new]; r.new != "" && !ok {
			t.Errorf("the new name %s is not exported", r.new)
		}
	}
	if f := byName["kafka2pg_kafka_connects_total"]; f.typ != "counter" || len(f.labels) != 1 || f.labels[0] != "node_id" {
		t.Errorf("kafka2pg_kafka_connects_total: %+v, want a counter by node_id (kprom's, registered)", f)
	}
}

// Every histogram bound is a round number: a few decimals at most, never
// le="372.5290298461914".
func TestHistogramBoundsAreRound(t *testing.T) {
	families, err := bridgeMetricFamilies(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	histograms := 0
	for _, f := range families {
		if f.typ == "histogram" {
			histograms++
		}
	}
	lists := map[string][]float64{"durationBuckets": durationBuckets, "latencyBuckets": latencyBuckets, "rowBuckets": rowBuckets, "byteBuckets": byteBuckets}
	for name, bounds := range lists {
		for i, b := range bounds {
			if !roundBound(b) {
				t.Errorf("%s[%d] = %v: not a round bound", name, i, b)
			}
			if i > 0 && b <= bounds[i-1] {
				t.Errorf("%s[%d] = %v: not above the one before", name, i, b)
			}
		}
	}
	// The same in what a registry exports, kprom's histograms included.
	m, closeAll, err := docMetrics(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer closeAll()
	m.kafka.OnBrokerWrite(kgo.BrokerMetadata{NodeID: 1}, 0, 100, time.Millisecond, time.Millisecond, nil)
	for name, mf := range gatherForTest(t, m) {
		for _, s := range mf.GetMetric() {
			for _, bk := range s.GetHistogram().GetBucket() {
				if !roundBound(bk.GetUpperBound()) {
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
func series(t *testing.T, m *bridgeMetrics, name string, want map[string]string) *dto.Metric {
	t.Helper()
	mf := gatherForTest(t, m)[name]
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
// latency; a failed write only its cause, but a stopped one also what it
// committed before the bad record.
func TestTheWriteMetricsCountWhatTheWriterTraced(t *testing.T) {
	m := newBridgeMetrics()
	var written writeCounters
	tracer := writeTracers{m, &written}
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
		{"kafka2pg_ingest_dead_letters_total", map[string]string{"table": "public.orders", "kind": "invalid_json"}, func(s *dto.Metric) float64 { return s.GetCounter().GetValue() }, 1},
		{"kafka2pg_ingest_isolated_batches_total", tl, func(s *dto.Metric) float64 { return s.GetCounter().GetValue() }, 1},
		{"kafka2pg_ingest_copy_duration_seconds", tl, func(s *dto.Metric) float64 { return float64(s.GetHistogram().GetSampleCount()) }, 1},
		{"kafka2pg_ingest_commit_duration_seconds", tl, func(s *dto.Metric) float64 { return s.GetHistogram().GetSampleSum() }, 0.002},
		{"kafka2pg_end_to_end_latency_seconds", nil, func(s *dto.Metric) float64 { return float64(s.GetHistogram().GetSampleCount()) }, 2},
		{"kafka2pg_ingest_write_errors_total", map[string]string{"cause": "stopped"}, func(s *dto.Metric) float64 { return s.GetCounter().GetValue() }, 1},
		{"kafka2pg_ingest_write_errors_total", map[string]string{"cause": "fenced"}, func(s *dto.Metric) float64 { return s.GetCounter().GetValue() }, 1},
		{"kafka2pg_ingest_write_errors_total", map[string]string{"cause": "other"}, func(s *dto.Metric) float64 { return s.GetCounter().GetValue() }, 1},
		{"kafka2pg_ingest_write_errors_total", map[string]string{"cause": "connection"}, func(s *dto.Metric) float64 { return s.GetCounter().GetValue() }, 0},
		{"kafka2pg_ingest_write_errors_total", map[string]string{"cause": "timeout"}, func(s *dto.Metric) float64 { return s.GetCounter().GetValue() }, 1},
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
