package testreport

import "time"

// ScaleEnv names the environment variable with the path of the JSON-lines
// file that scale tests append to. Unset, tests record nothing.
const ScaleEnv = "KAFKA2PG_SCALE_REPORT"

// Kinds of ScaleEntry.
const (
	KindThroughput = "throughput" // Throughput is set
	KindRebalance  = "rebalance"  // Rebalance is set
	KindRecovery   = "recovery"   // Recovery is set
	KindPartitions = "partitions" // Partitions is set
	KindPartman    = "partman"    // Note says what was proven
)

// ScaleEntry is one measurement of a scale test. Exactly one of the
// pointers is set, the one Kind names (none for KindPartman). Every figure
// was measured by a test against the real bridge binary (SQL over what it
// wrote, or its own /metrics).
type ScaleEntry struct {
	Kind     string    `json:"kind"`
	Test     string    `json:"test"`   // the Go test that measured it
	Broker   string    `json:"broker"` // "kfake" or "Apache Kafka, 1 node(s)"
	Note     string    `json:"note,omitempty"`
	Failed   bool      `json:"failed,omitempty"` // the test failed: the figures are what it measured before failing
	Finished time.Time `json:"finished"`

	Throughput *Throughput `json:"throughput,omitempty"`
	Rebalance  *Rebalance  `json:"rebalance,omitempty"`
	Recovery   *Recovery   `json:"recovery,omitempty"`
	Partitions *Partitions `json:"partitions,omitempty"`
}

// Throughput is one cell of the matrix: a backlog drained by some
// instances of one group over one topic.
type Throughput struct {
	Variant    string   `json:"variant"`    // the column: "default", or a name given with extra flags
	Flags      []string `json:"flags"`      // the bridge flags of the variant beyond the common ones
	Axis       string   `json:"axis"`       // "instances" or "partitions": which table the cell belongs to
	Instances  int      `json:"instances"`  // kafka2pg processes
	Partitions int      `json:"partitions"` // of the topic
	Records    int64    `json:"records"`    // the backlog
	// RowsPerSec is measured between 20% and 80% of the backlog durable in
	// kafka2pg.offsets, so start-up and the tail do not count.
	RowsPerSec float64 `json:"rows_per_sec"`
	WallSecs   float64 `json:"wall_seconds"` // first process start to the whole backlog durable
}

// Rebalance is one membership change of the rebalance test and the write
// gaps it caused: per partition, the longest time between two consecutive
// transactions around the change (written_at, the transaction's start).
type Rebalance struct {
	Round       int     `json:"round"`
	Event       string  `json:"event"`      // "kill -9 C", "add D", ...
	Partitions  int     `json:"partitions"` // of the topic
	Instances   int     `json:"instances"`  // live after the event
	Moved       int     `json:"moved"`      // partitions that changed owner (their epoch was bumped)
	StayedMax   float64 `json:"stayed_max_seconds"`
	StayedP50   float64 `json:"stayed_p50_seconds"`
	MovedMax    float64 `json:"moved_max_seconds"`
	MovedP50    float64 `json:"moved_p50_seconds"`
	SteadyMax   float64 `json:"steady_max_seconds"` // the same measure in a quiet window before the first event
	RecoverySec float64 `json:"recovery_seconds"`   // an instance lost: the change to the last moved partition's first write after it; -1 otherwise
}

// Recovery is the time from kill -9 of an instance to all of its
// partitions writing again, under one group setting.
type Recovery struct {
	Setting    string   `json:"setting"` // "dynamic membership, session 6s", ...
	Flags      []string `json:"flags"`
	Partitions int      `json:"partitions"` // of the topic
	Moved      int      `json:"moved"`      // partitions the killed instance owned
	Seconds    float64  `json:"seconds"`
}

// Partitions is the many-partitions run: one process, a backlog over many
// topics, partitions and tables.
type Partitions struct {
	Topics             int     `json:"topics"`
	PartitionsPerTopic int     `json:"partitions_per_topic"`
	Tables             int     `json:"tables"`
	Records            int64   `json:"records"`
	RecordBytes        int     `json:"record_bytes"` // key + value of one record, about
	WallSecs           float64 `json:"wall_seconds"` // process start to the backlog durable
	RowsPerSec         float64 `json:"rows_per_sec"`
	PeakRSSBytes       int64   `json:"peak_rss_bytes"`     // kafka2pg_process_peak_resident_memory_bytes at the end
	RSSLimitBytes      int64   `json:"rss_limit_bytes"`    // what the test asserts
	MaxBufferedBytes   int64   `json:"max_buffered_bytes"` // --max-buffered-bytes
	// Fairness, from kafka2pg.offsets sampled every SampleSecs: lag is the
	// end offset minus next_offset. MaxOverMean* is max lag / mean lag over
	// the samples taken while mean lag was above a tenth of its start.
	SampleSecs     float64 `json:"sample_seconds"`
	Samples        int     `json:"samples"`
	MaxOverMeanP50 float64 `json:"max_over_mean_p50"`
	MaxOverMeanMax float64 `json:"max_over_mean_max"`
	// FirstWriteMax is the time from the first row anywhere to the last
	// partition's first row; StallMax the longest time a partition with lag
	// went without advancing, both over all partitions.
	FirstWriteMax float64 `json:"first_write_max_seconds"`
	StallMax      float64 `json:"stall_max_seconds"`
	// Lag over time: seconds since the start, max and mean lag in records.
	LagT    []float64 `json:"lag_t"`
	LagMax  []float64 `json:"lag_max"`
	LagMean []float64 `json:"lag_mean"`
}
