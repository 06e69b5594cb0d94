package integration_test

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafka2pg/kafka2pg/internal/testreport"
)

// peakRSSLimit is the memory bound of issue 9: one process, 1,000
// partitions, at most 512 MB resident at its peak.
const peakRSSLimit = 512 << 20

// TestScaleManyPartitionsBoundedMemoryFairProgress drains a backlog spread
// evenly over many topics and partitions with one process: a topic_regex
// sink whose ${topic} template gives each topic its own table. It asserts
// every record once in every table, the peak RSS the process reports
// itself (kafka2pg_process_peak_resident_memory_bytes, VmHWM) within
// 512 MB, and fair progress, from kafka2pg.offsets sampled every 500ms:
// every partition starts writing within the first half of the drain
// (starting a partition never waits for others to finish), and no partition
// with lag goes without a write for more than half of it.
//
// Smoke: 10 topics × 20 partitions, 100 records each. KAFKA2PG_SCALE=1: 50
// topics × 20 partitions (1,000), 400 records each (about 100 MB of
// records, more than the 64 MiB --max-buffered-bytes).
func TestScaleManyPartitionsBoundedMemoryFairProgress(t *testing.T) {
	topics := scaleSize(10, 50)
	const perTopic = 20
	perPartition := scaleSize(500, 1000)
	s := newScenario(t, 1)
	prefix := "sc-" + s.table[3:]
	names := make([]string, topics)
	for i := range names {
		names[i] = s.kafka.CreateTopic(t, fmt.Sprintf("%s-%02d", prefix, i), perTopic)
	}
	// The backlog, spread evenly: every partition starts with the same lag.
	// Producer batches of at most 16 KiB, the Java client's default
	// batch.size: a broker never splits a batch, so a partition whose whole
	// backlog is one batch can only be fetched whole, and a backlog larger
	// than the memory budget is then drained partition after partition
	// whatever the fetch asks (franz-go's default of 1 MB batches did
	// that here). Smaller batches let a fetch serve every partition a
	// little (the reader's per-partition share of a fetch).
	cl := s.kafka.NewClient(t, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(5*time.Millisecond),
		kgo.MaxBufferedRecords(100_000), kgo.ProducerBatchMaxBytes(16<<10))
	var id int64
	recordBytes := 0
	produceStart := time.Now()
	for _, topic := range names {
		rs := make([]*kgo.Record, 0, perTopic*perPartition)
		for p := range int32(perTopic) {
			for range perPartition {
				r := newRecord(topic, id)
				r.Partition = p
				recordBytes = len(r.Key) + len(r.Value)
				rs = append(rs, r)
				id++
			}
		}
		if err := cl.ProduceSync(t.Context(), rs...).FirstErr(); err != nil {
			t.Fatalf("produce the backlog of %s: %v", topic, err)
		}
	}
	total := id
	partitions := topics * perTopic
	t.Logf("backlog: %d records (%d bytes each, %.0f MB) over %d topics × %d partitions, produced in %v",
		total, recordBytes, float64(total)*float64(recordBytes)/1e6, topics, perTopic, time.Since(produceStart).Round(time.Millisecond))

	const maxBuffered = 64 << 20
	addr := freeAddr(t)
	config := fmt.Sprintf(`kafka-brokers: [%s]
kafka-group: %s
pg-url: %s
sinks:
  - topic_regex: %s-.*
    table: s_${topic}
`, s.kafka.Brokers(), s.group, s.pgURL, strings.ReplaceAll(prefix, "-", "\\-"))
	path := filepath.Join(t.TempDir(), "kafka2pg.yaml")
	if err := os.WriteFile(path, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	b := startBridge(t, "many", scaleFlags(append([]string{"run", "--config", path, "--metrics-addr", addr,
		"--max-buffered-bytes", fmt.Sprint(maxBuffered), "--kafka-fetch-max-wait", "250ms"}, scaleGroupFlags(s.kafka)...)...)...)

	// Sample next_offset of every partition until the backlog is durable.
	type key struct {
		topic string
		p     int32
	}
	const sampleEvery = 250 * time.Millisecond
	firstWrite := map[key]time.Time{}
	lastAdvance := map[key]time.Time{}
	last := map[key]int64{}
	stallMax := 0.0
	var t0 time.Time // the first write anywhere: the drain starts
	var lagT, lagMax, lagMean []float64
	var durable int64
	deadline := time.Now().Add(scaleSize(2*time.Minute, 6*time.Minute))
	for durable < total {
		requireRunning(t, b)
		if time.Now().After(deadline) {
			t.Fatalf("the backlog was not durable after %v: %d of %d records", time.Since(start).Round(time.Second), durable, total)
		}
		time.Sleep(sampleEvery)
		now := time.Now()
		rows, err := s.db.Query(t.Context(), `SELECT topic, "partition", next_offset FROM kafka2pg.offsets
WHERE consumer_group = $1 AND next_offset IS NOT NULL`, s.group)
		if notMigratedYet(err) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		durable = 0
		for rows.Next() {
			var k key
			var next int64
			if err := rows.Scan(&k.topic, &k.p, &next); err != nil {
				t.Fatal(err)
			}
			durable += next
			if next > last[k] {
				if _, ok := firstWrite[k]; !ok {
					firstWrite[k] = now
				}
				if t0.IsZero() {
					t0 = now
				}
				lastAdvance[k] = now
				last[k] = next
			}
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		if len(firstWrite) == 0 {
			continue
		}
		// Lag of every partition, the ones not yet claimed included.
		sum, worst := 0.0, 0.0
		for _, topic := range names {
			for p := range int32(perTopic) {
				k := key{topic, p}
				lag := float64(int64(perPartition) - last[k])
				sum += lag
				worst = max(worst, lag)
				if lag > 0 {
					// A partition not written yet has waited since
					// the drain began, as the drain is timed: the
					// bridge's start and the group's join before it
					// are nobody's starvation.
					since := lastAdvance[k]
					if since.IsZero() {
						since = t0
					}
					stallMax = max(stallMax, now.Sub(since).Seconds())
				}
			}
		}
		lagT = append(lagT, now.Sub(start).Seconds())
		lagMax = append(lagMax, worst)
		lagMean = append(lagMean, sum/float64(partitions))
	}
	drained := time.Since(start)
	peak := scrapeGauge(t, addr, "kafka2pg_process_peak_resident_memory_bytes")
	b.signal(t, syscall.SIGTERM)
	b.requireExitZero(t, time.Minute)

	for _, topic := range names {
		ends := s.kafka.EndOffsets(t, topic)
		assertExactlyOnce(t, s.db, "s_"+tableNameFor(topic), topic, ends)
		assertDurableOffsets(t, s.db, s.group, topic, ends)
	}

	// Fairness. The first row anywhere started the clock (t0).
	var lastFirst time.Time
	for _, at := range firstWrite {
		if at.After(lastFirst) {
			lastFirst = at
		}
	}
	drainSecs := drained.Seconds() - t0.Sub(start).Seconds()
	firstWriteMax := lastFirst.Sub(t0).Seconds()
	var ratios []float64
	initial := float64(perPartition)
	for i := range lagT {
		if lagMean[i] > initial/10 {
			ratios = append(ratios, lagMax[i]/lagMean[i])
		}
	}
	rate := float64(total) / drainSecs
	t.Logf("drained %d records from %d partitions into %d tables in %v (%.0f rows/s from the first row); peak RSS %.0f MB (limit %d MB)",
		total, partitions, topics, drained.Round(time.Millisecond), rate, peak/(1<<20), peakRSSLimit>>20)
	t.Logf("fairness over %d samples: max/mean lag p50 %.2f, max %.2f (while mean lag > 10%% of the start); last partition's first write %s after the first; longest stall of a partition with lag %s; drain %s",
		len(ratios), quantile(ratios, 0.5), quantile(ratios, 1), secs(firstWriteMax), secs(stallMax), secs(drainSecs))

	if peak > peakRSSLimit {
		t.Errorf("peak RSS %.0f MB, want at most %d MB with %d partitions", peak/(1<<20), peakRSSLimit>>20, partitions)
	}
	if len(firstWrite) != partitions {
		t.Errorf("%d of %d partitions wrote", len(firstWrite), partitions)
	}
	// A starved partition would start late or stall while the others
	// drain; both are bounded by half the drain, with 2s for the sampling
	// and a small run's first fetch.
	bound := drainSecs/2 + 2
	if firstWriteMax > bound {
		t.Errorf("the last partition's first write came %s after the first one's; want at most %s (half the %s drain + 2s): a partition waited for others to finish",
			secs(firstWriteMax), secs(bound), secs(drainSecs))
	}
	if stallMax > bound {
		t.Errorf("a partition with lag went %s without a write; want at most %s (half the %s drain + 2s): it starved",
			secs(stallMax), secs(bound), secs(drainSecs))
	}
	p := testreport.Partitions{
		Topics: topics, PartitionsPerTopic: perTopic, Tables: topics, Records: total, RecordBytes: recordBytes,
		WallSecs: drained.Seconds(), RowsPerSec: rate, PeakRSSBytes: int64(peak), RSSLimitBytes: peakRSSLimit,
		MaxBufferedBytes: maxBuffered, SampleSecs: sampleEvery.Seconds(), Samples: len(lagT),
		MaxOverMeanP50: quantile(ratios, 0.5), MaxOverMeanMax: quantile(ratios, 1),
		FirstWriteMax: firstWriteMax, StallMax: stallMax, LagT: lagT, LagMax: lagMax, LagMean: lagMean,
	}
	if math.IsNaN(p.MaxOverMeanMax) {
		p.MaxOverMeanP50, p.MaxOverMeanMax = 0, 0
	}
	reportScale(t, testreport.ScaleEntry{Kind: testreport.KindPartitions, Broker: brokerName(s.kafka), Partitions: &p})
}
