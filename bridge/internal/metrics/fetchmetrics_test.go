package metrics

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestFetchCountersCountWhatWasFetched: a client with the bridge's hooks
// consumes a topic from kfake; the registry gathers without a clash with
// kprom's vectors of the same names, and the fetch counters say how many
// records, batches and bytes came, by broker and topic.
func TestFetchCountersCountWhatWasFetched(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(2, "events"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	prod, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.DefaultProduceTopic("events"), kgo.ProducerLinger(0))
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	const records = 500
	var valueBytes int
	for i := range records {
		r := &kgo.Record{Value: fmt.Appendf(nil, `{"i":%d}`, i), Partition: int32(i % 2)}
		valueBytes += len(r.Value)
		if err := prod.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}

	reg := prometheus.NewRegistry()
	m, err := New(reg)
	if err != nil {
		t.Fatal(err)
	}
	cons, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.ConsumeTopics("events"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.WithHooks(m.Hooks()))
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	for got := 0; got < records; {
		fs := cons.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatal(err)
		}
		got += fs.NumRecords()
	}

	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	// The exposition carries them under kprom's names and labels, once.
	want := map[string]float64{"kafka2pg_kafka_fetch_records_total": records}
	seen := map[string]int{}
	for _, mf := range mfs {
		switch name := mf.GetName(); name {
		case "kafka2pg_kafka_fetch_records_total", "kafka2pg_kafka_fetch_batches_total", "kafka2pg_kafka_fetch_bytes_total":
			for _, s := range mf.GetMetric() {
				seen[name]++
				labels := map[string]string{}
				for _, l := range s.GetLabel() {
					labels[l.GetName()] = l.GetValue()
				}
				if labels["topic"] != "events" || labels["node_id"] != "0" {
					t.Errorf("%s has labels %v", name, labels)
				}
				if w, ok := want[name]; ok && s.GetCounter().GetValue() != w {
					t.Errorf("%s is %v, want %v", name, s.GetCounter().GetValue(), w)
				}
			}
		}
	}
	if len(seen) != 3 || seen["kafka2pg_kafka_fetch_records_total"] != 1 || seen["kafka2pg_kafka_fetch_batches_total"] != 1 || seen["kafka2pg_kafka_fetch_bytes_total"] != 1 {
		t.Fatalf("fetch series gathered: %v, want one of each", seen)
	}
	f := m.kafka.fetch
	c0 := f.of(0, "events")
	if got := c0.records.Load(); got != records {
		t.Errorf("records fetched: %d, want %d", got, records)
	}
	if b := c0.batches.Load(); b == 0 || b > records {
		t.Errorf("batches fetched: %d for %d records", b, records)
	}
	if b := c0.bytes.Load(); b < uint64(valueBytes) {
		t.Errorf("uncompressed bytes fetched: %d, less than the %d bytes of values", b, valueBytes)
	}
}
