// Package metrics holds the bridge's Prometheus metrics: the writes (from
// ingest's tracer), the reader's counters and per-partition gauges (read
// at each scrape), the Kafka client's (franz-go's kprom, with cheaper
// fetch counters), the Postgres pool's and the end-to-end latency. The
// bridge registers them on the registry its caller passes, never the
// default one; bridge.MetricFamilies lists them through Sample, for the
// kafka2pg command's reference page (docs/METRICS.md). Names follow kafka2pg_<subsystem>_<name>_<unit>.
// No goroutines of its own: collectors run on the scraper's.
package metrics

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/plugin/kprom"

	"github.com/kafka2pg/kafka2pg/ingest"
	"github.com/kafka2pg/kafka2pg/reader"
	"github.com/kafka2pg/kafka2pg/stream"
)

// Metrics are a bridge's metrics, on the registry given to New.
type Metrics struct {
	reg prometheus.Registerer

	rows, batches       *prometheus.CounterVec // table
	batchRows           *prometheus.HistogramVec
	batchBytes          *prometheus.HistogramVec
	copySeconds         *prometheus.HistogramVec
	commitSeconds       *prometheus.HistogramVec
	isolatedBatches     *prometheus.CounterVec // table
	recheckedBatches    *prometheus.CounterVec // table
	deadLetters         *prometheus.CounterVec // table, kind
	skipped             *prometheus.CounterVec // table
	filtered            *prometheus.CounterVec // table
	stale               *prometheus.CounterVec // table
	writeErrors         *prometheus.CounterVec // cause
	writeErrorCounts    causeCounts            // the same, for the progress line
	endToEndSeconds     *batchHistogram
	kafka               KafkaHooks
	partitionsCollector *partitionCollector
	config              configMetrics

	// registered is every collector registered, for the reference page
	// (Registered); tables the table labels whose series exist.
	registered []prometheus.Collector
	tables     sync.Map // table label → struct{}
}

// New registers the metrics that exist from the start on reg: the
// writes', the latency's and the fetch counters. The Kafka client's come
// with the client (Hooks), the reader's and the pool's with Register. It
// fails when reg has metrics of these names already (another bridge's).
func New(reg prometheus.Registerer) (*Metrics, error) {
	sizeBuckets, timeBuckets, e2eBuckets := rowBuckets, durationBuckets, latencyBuckets
	m := &Metrics{
		reg:              reg,
		rows:             prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kafka2pg_ingest_rows_total", Help: "Rows committed, by table."}, []string{"table"}),
		batches:          prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kafka2pg_ingest_batches_total", Help: "Batch transactions committed, by table."}, []string{"table"}),
		batchRows:        prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "kafka2pg_ingest_batch_rows", Help: "Rows per committed batch.", Buckets: sizeBuckets}, []string{"table"}),
		batchBytes:       prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "kafka2pg_ingest_batch_bytes", Help: "Key and value bytes per committed batch.", Buckets: byteBuckets}, []string{"table"}),
		copySeconds:      prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "kafka2pg_ingest_copy_duration_seconds", Help: "Duration of a batch's COPY.", Buckets: timeBuckets}, []string{"table"}),
		commitSeconds:    prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "kafka2pg_ingest_commit_duration_seconds", Help: "Duration of a batch's COMMIT.", Buckets: timeBuckets}, []string{"table"}),
		isolatedBatches:  prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kafka2pg_ingest_isolated_batches_total", Help: "Batches redone to isolate rows Postgres refused."}, []string{"table"}),
		recheckedBatches: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kafka2pg_ingest_rechecked_batches_total", Help: "Batches written without the checks Postgres makes itself (a jsonb value's JSON) whose rows Postgres refused, written again with them."}, []string{"table"}),
		deadLetters:      prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kafka2pg_ingest_dead_letters_total", Help: "Records written to kafka2pg.dead_letters, by error kind."}, []string{"table", "kind"}),
		skipped:          prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kafka2pg_ingest_skipped_records_total", Help: "Bad records skipped (--on-error=skip)."}, []string{"table"}),
		filtered:         prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kafka2pg_ingest_filtered_records_total", Help: "Records a sink's where dropped: not written, their offsets committed."}, []string{"table"}),
		stale:            prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kafka2pg_ingest_stale_changes_skipped_total", Help: "Changes a sink's version guard skipped: not newer than the stored row's version, or than a later change of the key in the batch."}, []string{"table"}),
		writeErrors:      prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kafka2pg_ingest_write_errors_total", Help: "Failed batch writes, by cause: fenced, timeout, connection, read_only, refused (a role or privilege), data, other, stopped; each but stopped is followed by a re-claim and a retry."}, []string{"cause"}),
		endToEndSeconds:  newBatchHistogram("kafka2pg_end_to_end_latency_seconds", "From a record's Kafka timestamp to the commit of its row.", e2eBuckets),
		config:           newConfigMetrics(),
	}
	for _, cause := range writeErrorCauses {
		m.writeErrors.WithLabelValues(cause)
	}
	// franz-go's own client metrics (connections, request bytes and
	// latency per broker), less those kpromFilter leaves out; fetch
	// batches, records and bytes per broker and topic come from
	// fetchCounters, which count them for less.
	m.kafka = KafkaHooks{
		Metrics: kprom.NewMetrics("kafka2pg_kafka", kprom.Registerer(kpromFilter{m}),
			kprom.Buckets(durationBuckets)),
		fetch: newFetchCounters("kafka2pg_kafka"),
		reg:   kpromFilter{m},
	}
	if err := m.register(m.rows, m.batches, m.batchRows, m.batchBytes, m.copySeconds, m.commitSeconds,
		m.isolatedBatches, m.recheckedBatches, m.deadLetters, m.skipped, m.filtered, m.stale, m.writeErrors, m.endToEndSeconds, m.kafka.fetch,
		m.config.generation, m.config.reloads); err != nil {
		return nil, err
	}
	return m, nil
}

// register registers collectors in reg and keeps them in registered.
func (m *Metrics) register(cs ...prometheus.Collector) error {
	for _, c := range cs {
		if err := m.reg.Register(c); err != nil {
			return fmt.Errorf("register the bridge's metrics: %w (give each bridge a registry of its own)", err)
		}
		m.registered = append(m.registered, c)
	}
	return nil
}

// InitTable makes the series of a table exist at zero, before its first
// batch: a counter that appears only when it first counts is invisible to
// rate() and increase() until its second scrape, so the first rows of a
// table, or its first skipped record, would go unnoticed.
func (m *Metrics) InitTable(table string) {
	if _, seen := m.tables.LoadOrStore(table, struct{}{}); seen {
		return
	}
	for _, v := range []*prometheus.CounterVec{m.rows, m.batches, m.isolatedBatches, m.recheckedBatches, m.skipped, m.filtered, m.stale} {
		v.WithLabelValues(table)
	}
	for _, v := range []*prometheus.HistogramVec{m.batchRows, m.batchBytes, m.copySeconds, m.commitSeconds} {
		v.WithLabelValues(table)
	}
}

// InitTables makes the series of the sinks' tables exist at zero.
func (m *Metrics) InitTables(sinks map[string]ingest.Sink) {
	for _, s := range sinks {
		m.InitTable(PlainTableName(s.Table.QualifiedName()))
	}
}

// Hooks are the franz-go hooks that feed the Kafka client's metrics
// (kgo.WithHooks).
func (m *Metrics) Hooks() KafkaHooks { return m.kafka }

// Registered lists every collector registered so far, for the reference
// page.
func (m *Metrics) Registered() []prometheus.Collector { return m.registered }

// WriteErrorsSince returns the failed writes by cause now and, as
// "connection=12 timeout=1", how they grew from prev ("" when they did
// not): the progress line says what went wrong since the last one.
func (m *Metrics) WriteErrorsSince(prev map[string]int64) (now map[string]int64, grew string) {
	return m.writeErrorCounts.since(prev)
}

// TraceBatchEnd records one write: the writer calls it at the end of every
// batch (ingest.Tracer).
func (m *Metrics) TraceBatchEnd(_ context.Context, t ingest.BatchTrace) {
	table := PlainTableName(t.Table)
	if table != "" { // "": a topic_regex topic whose sink a failed write did not resolve
		m.InitTable(table)
	}
	if err := t.Err; err != nil {
		var stop *stream.StopError
		cause := CauseStopped
		if !errors.As(err, &stop) {
			cause = ingest.Cause(err)
		}
		m.writeErrors.WithLabelValues(cause).Inc()
		m.writeErrorCounts.add(cause)
		if stop == nil {
			return
		}
	}
	m.batches.WithLabelValues(table).Inc()
	m.rows.WithLabelValues(table).Add(float64(t.Rows))
	m.batchRows.WithLabelValues(table).Observe(float64(t.Rows))
	if t.CopyDuration > 0 {
		m.copySeconds.WithLabelValues(table).Observe(t.CopyDuration.Seconds())
	}
	if t.CommitDuration > 0 {
		m.commitSeconds.WithLabelValues(table).Observe(t.CommitDuration.Seconds())
	}
	if t.Isolated {
		m.isolatedBatches.WithLabelValues(table).Inc()
	}
	if t.Rechecked {
		m.recheckedBatches.WithLabelValues(table).Inc()
	}
	for _, kind := range t.DeadLetterKinds {
		m.deadLetters.WithLabelValues(table, kind).Inc()
	}
	if t.Skipped > 0 {
		m.skipped.WithLabelValues(table).Add(float64(t.Skipped))
	}
	if t.Filtered > 0 {
		m.filtered.WithLabelValues(table).Add(float64(t.Filtered))
	}
	if t.Stale > 0 {
		m.stale.WithLabelValues(table).Add(float64(t.Stale))
	}
	// One walk of the batch's records, dense copies just written, for
	// their bytes and their end-to-end latency.
	now := time.Now()
	var scratch [24]uint64
	lat := m.endToEndSeconds.batch(scratch[:])
	size := 0
	recs := t.Batch.Records
	for i := range recs {
		r := &recs[i]
		size += len(r.Key) + len(r.Value)
		if !r.Timestamp.IsZero() {
			lat.observe(max(now.Sub(r.Timestamp).Seconds(), 0))
		}
	}
	lat.add()
	m.batchBytes.WithLabelValues(table).Observe(float64(size))
}

// TraceStale counts the changes a source transaction's apply skipped by
// the version guard (ingest.StaleTracer), as TraceBatchEnd counts a
// batch's.
func (m *Metrics) TraceStale(_ context.Context, table string, n int) {
	m.stale.WithLabelValues(PlainTableName(table)).Add(float64(n))
}

// ReaderState is what the metrics read of the reader at each scrape.
type ReaderState interface {
	Stats() reader.Stats
	Partitions() []reader.PartitionStats
}

// PoolState is what the metrics read of the Postgres pool.
type PoolState interface{ Stat() *pgxpool.Stat }

// WriterState is what the metrics read of the writer at each scrape.
type WriterState interface {
	Estimates() []ingest.StepEstimate
	RoutedTables() map[string]int
}

// Register adds the collectors that read the live reader, writer and
// pool.
func (m *Metrics) Register(rd ReaderState, w WriterState, pool PoolState, queueCapacity int) error {
	gauge := func(name, help string, f func() float64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, f)
	}
	m.partitionsCollector = &partitionCollector{rd: rd}
	return m.register(
		// One reader.Stats snapshot per scrape, however many series read
		// it: Stats visits every partition, and there may be thousands.
		&readerStatsCollector{rd: rd},
		gauge("kafka2pg_reader_queue_capacity_records", "Records a partition buffers before its fetching pauses.", func() float64 { return float64(queueCapacity) }),
		gauge("kafka2pg_pg_pool_connections", "Postgres connections open.", func() float64 { return float64(pool.Stat().TotalConns()) }),
		gauge("kafka2pg_pg_pool_acquired_connections", "Postgres connections in use.", func() float64 { return float64(pool.Stat().AcquiredConns()) }),
		gauge("kafka2pg_pg_pool_max_connections", "Postgres connections allowed (--pg-max-conns).", func() float64 { return float64(pool.Stat().MaxConns()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "kafka2pg_pg_pool_acquire_wait_seconds_total",
			Help: "Time spent waiting for a Postgres connection."}, func() float64 { return pool.Stat().AcquireDuration().Seconds() }),
		m.partitionsCollector,
		&estimateCollector{w: w},
		&routedTablesCollector{w: w})
}

// routedTablesCollector exports how many tables each sink routed by
// content fills (ingest.Writer.RoutedTables).
type routedTablesCollector struct{ w WriterState }

var routedTablesDesc = prometheus.NewDesc("kafka2pg_ingest_routed_tables",
	"Tables a sink routed by content (table: events_${value.type}) has sent records to since the start, by the sink's table template: at --max-tables-per-sink, records routed to further tables become dead letters of kind route_limit.", []string{"table"}, nil)

func (c *routedTablesCollector) Describe(ch chan<- *prometheus.Desc) { ch <- routedTablesDesc }

func (c *routedTablesCollector) Collect(ch chan<- prometheus.Metric) {
	for sink, n := range c.w.RoutedTables() {
		ch <- prometheus.MustNewConstMetric(routedTablesDesc, prometheus.GaugeValue, float64(n), PlainTableName(sink))
	}
}

// estimateCollector exports what the writer's step deadlines rest on
// (ingest.Writer.Estimates).
type estimateCollector struct{ w WriterState }

var (
	stepLatencyDesc = prometheus.NewDesc("kafka2pg_ingest_step_latency_seconds",
		"Smoothed latency of a write step that is one round trip (begin, fence, commit), as TCP smooths its round-trip time (SRTT): its deadline is this plus 4 times the deviation, at least 5 s, at most --pg-write-timeout.", []string{"step"}, nil)
	stepDeviationDesc = prometheus.NewDesc("kafka2pg_ingest_step_latency_deviation_seconds",
		"Smoothed deviation of a write step's latency (RTTVAR).", []string{"step"}, nil)
	copyRateDesc = prometheus.NewDesc("kafka2pg_ingest_copy_seconds_per_byte",
		"Smoothed time per key and value byte of a batch's COPY (or an upsert's statements) into the table, past one round trip: what its deadline grows with.", []string{"table"}, nil)
)

func (c *estimateCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- stepLatencyDesc
	ch <- stepDeviationDesc
	ch <- copyRateDesc
}

func (c *estimateCollector) Collect(ch chan<- prometheus.Metric) {
	for _, e := range c.w.Estimates() {
		if e.Table != "" {
			ch <- prometheus.MustNewConstMetric(copyRateDesc, prometheus.GaugeValue, e.Smoothed, PlainTableName(e.Table))
			continue
		}
		ch <- prometheus.MustNewConstMetric(stepLatencyDesc, prometheus.GaugeValue, e.Smoothed, e.Step.String())
		ch <- prometheus.MustNewConstMetric(stepDeviationDesc, prometheus.GaugeValue, e.Var, e.Step.String())
	}
}

// readerStatsCollector exports the reader's counters and gauges from one
// reader.Stats per scrape.
type readerStatsCollector struct{ rd ReaderState }

type readerStat struct {
	desc  *prometheus.Desc
	kind  prometheus.ValueType
	value func(reader.Stats) float64
}

var readerStats = func() []readerStat {
	stat := func(name, help string, kind prometheus.ValueType, f func(reader.Stats) float64) readerStat {
		return readerStat{prometheus.NewDesc(name, help, nil, nil), kind, f}
	}
	c, g := prometheus.CounterValue, prometheus.GaugeValue
	return []readerStat{
		stat("kafka2pg_reader_records_total", "Data records fetched.", c, func(s reader.Stats) float64 { return float64(s.Records) }),
		stat("kafka2pg_reader_bytes_total", "Key and value bytes fetched.", c, func(s reader.Stats) float64 { return float64(s.Bytes) }),
		stat("kafka2pg_reader_rebalances_total", "Partition assignments received.", c, func(s reader.Stats) float64 { return float64(s.Rebalances) }),
		stat("kafka2pg_reader_fetch_errors_total", "Fetch errors reported by the Kafka client.", c, func(s reader.Stats) float64 { return float64(s.FetchErrors) }),
		stat("kafka2pg_reader_deferred_batches_total", "Compressed record batches fetched but not decompressed, because the records and decompressed batches held already filled --max-buffered-bytes; each is fetched again.", c, func(s reader.Stats) float64 { return float64(s.DeferredBatches) }),
		stat("kafka2pg_reader_fenced_total", "Writes refused because another owner claimed the partition.", c, func(s reader.Stats) float64 { return float64(s.Fenced) }),
		stat("kafka2pg_reader_skipped_records_total", "Offsets never written: lost to retention, or read and then truncated away by Kafka, and skipped (--on-data-loss=skip).", c, func(s reader.Stats) float64 { return float64(s.SkippedRecords) }),
		stat("kafka2pg_reader_positions_moved_back_total", "Times a partition found its durable position in Postgres behind the one it had made durable (Postgres lost commits: a lossy failover, a restored backup); the records in between were read and written again.", c, func(s reader.Stats) float64 { return float64(s.PositionsMovedBack) }),
		stat("kafka2pg_reader_truncations_total", "Times Kafka's log of an owned partition was found truncated below what had been read (an unclean leader election, a broker restored from an old disk); --on-data-loss decides what follows.", c, func(s reader.Stats) float64 { return float64(s.Truncations) }),
		stat("kafka2pg_reader_partitions", "Partitions owned now.", g, func(s reader.Stats) float64 { return float64(s.Partitions) }),
		stat("kafka2pg_reader_partitions_halted", "Partitions in retry backoff after a failed write.", g, func(s reader.Stats) float64 { return float64(s.Halted) }),
		stat("kafka2pg_reader_partitions_stopped", "Partitions stopped by data loss or --on-error=stop.", g, func(s reader.Stats) float64 { return float64(len(s.Stopped)) }),
		stat("kafka2pg_reader_buffered_bytes", "Memory of the records buffered across partitions, queued or being written: key, value and 190 bytes a record (bounded by --max-buffered-bytes).", g, func(s reader.Stats) float64 { return float64(s.BufferedBytes) }),
	}
}()

func (c *readerStatsCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, st := range readerStats {
		ch <- st.desc
	}
}

func (c *readerStatsCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.rd.Stats()
	for _, st := range readerStats {
		ch <- prometheus.MustNewConstMetric(st.desc, st.kind, st.value(s))
	}
}

// partitionCollector exports per-partition gauges from the reader's state.
type partitionCollector struct{ rd ReaderState }

var (
	lagDesc = prometheus.NewDesc("kafka2pg_reader_partition_lag_records",
		"Log end offset seen in the last fetch minus the offset durable in Postgres.", []string{"topic", "partition"}, nil)
	queueDesc = prometheus.NewDesc("kafka2pg_reader_partition_queue_records",
		"Records fetched and buffered, not yet written.", []string{"topic", "partition"}, nil)
	durableDesc = prometheus.NewDesc("kafka2pg_reader_partition_durable_offset",
		"next_offset durable in Postgres.", []string{"topic", "partition"}, nil)
	mirrorGapDesc = prometheus.NewDesc("kafka2pg_kafka_commit_gap_records",
		"Durable offset in Postgres minus the offset last committed to the Kafka group (the mirror's delay).", []string{"topic", "partition"}, nil)
)

func (c *partitionCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- lagDesc
	ch <- queueDesc
	ch <- durableDesc
	ch <- mirrorGapDesc
}

func (c *partitionCollector) Collect(ch chan<- prometheus.Metric) {
	for _, p := range c.rd.Partitions() {
		part := strconv.Itoa(int(p.Partition))
		if lag := p.Lag(); lag >= 0 {
			ch <- prometheus.MustNewConstMetric(lagDesc, prometheus.GaugeValue, float64(lag), p.Topic, part)
		}
		ch <- prometheus.MustNewConstMetric(queueDesc, prometheus.GaugeValue, float64(p.Queued), p.Topic, part)
		if p.NextOffset >= 0 {
			ch <- prometheus.MustNewConstMetric(durableDesc, prometheus.GaugeValue, float64(p.NextOffset), p.Topic, part)
			mirrored := max(p.Mirrored, 0)
			ch <- prometheus.MustNewConstMetric(mirrorGapDesc, prometheus.GaugeValue, float64(max(p.NextOffset-mirrored, 0)), p.Topic, part)
		}
	}
}

// Sample returns metrics registered on reg as a running bridge has them:
// a stand-in reader with one partition, a pool and a Kafka client that
// dial nothing until used (so that the pool's gauges and kprom's metrics
// exist), one table and one fetched batch (so that the vectors that
// export only what they counted have a series each). It is for the
// reference page of the metrics and its tests; closeAll closes the pool
// and the client.
func Sample(ctx context.Context, reg prometheus.Registerer) (m *Metrics, closeAll func(), err error) {
	if m, err = New(reg); err != nil {
		return nil, nil, err
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers("127.0.0.1:9"), kgo.WithHooks(m.Hooks()))
	if err != nil {
		return nil, nil, fmt.Errorf("create a Kafka client for its metrics: %w", err)
	}
	pool, err := pgxpool.New(ctx, "postgres://kafka2pg@127.0.0.1:9/docs")
	if err != nil {
		cl.Close()
		return nil, nil, fmt.Errorf("create a Postgres pool for its metrics: %w", err)
	}
	if err := m.Register(sampleReader{}, sampleWriter{}, pool, 0); err != nil {
		pool.Close()
		cl.Close()
		return nil, nil, err
	}
	if err := m.RegisterAppliers([]ApplierState{sampleApplier{}}); err != nil {
		pool.Close()
		cl.Close()
		return nil, nil, err
	}
	m.InitTable("public.orders")
	m.kafka.OnFetchBatchRead(kgo.BrokerMetadata{NodeID: 1}, "orders", 0, kgo.FetchBatchMetrics{NumRecords: 1})
	return m, func() { pool.Close(); cl.Close() }, nil
}

// sampleWriter stands in for the writer: an estimate of every kind.
type sampleWriter struct{}

func (sampleWriter) Estimates() []ingest.StepEstimate {
	return []ingest.StepEstimate{{Step: ingest.StepCommit, Smoothed: 0.002, Var: 0.001, Samples: 1},
		{Step: ingest.StepCopy, Table: `"public"."orders"`, Smoothed: 1e-8, Var: 1e-9, Samples: 1}}
}

func (sampleWriter) RoutedTables() map[string]int {
	return map[string]int{`"public"."events_${value.type}"`: 1}
}

// sampleReader stands in for the reader: one partition, nothing else.
type sampleReader struct{}

func (sampleReader) Stats() reader.Stats { return reader.Stats{} }
func (sampleReader) Partitions() []reader.PartitionStats {
	return []reader.PartitionStats{{Topic: "orders", NextOffset: 0, LogEnd: 0, Mirrored: 0}}
}
