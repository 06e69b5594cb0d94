// Package scalereport records what kafka2pg's scale tests measure
// (integration/scale*_test.go) and renders it as docs/SCALING.md and its
// charts, the way package faultreport renders docs/RELIABILITY.md.
//
// Each measurement appends one JSON line ([Entry]) to the file named by the
// KAFKA2PG_SCALE_REPORT environment variable; `go run
// ./internal/scalereport/cmd` turns the file into the page and the SVGs.
// Every figure in an Entry was measured by a test against the real bridge
// binary (SQL over what it wrote, or its own /metrics); Render only prints
// and charts them, and says so when a section has no measurement.
//
// No goroutines; no I/O beyond Append, Read and the writers it is given.
package scalereport

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"time"
)

// EnvFile names the environment variable with the path of the JSON-lines
// file that scale tests append to. Unset, tests record nothing.
const EnvFile = "KAFKA2PG_SCALE_REPORT"

// Kinds of Entry.
const (
	KindThroughput = "throughput" // Throughput is set
	KindRebalance  = "rebalance"  // Rebalance is set
	KindRecovery   = "recovery"   // Recovery is set
	KindPartitions = "partitions" // Partitions is set
	KindPartman    = "partman"    // Note says what was proven
)

// Entry is one measurement. Exactly one of the pointers is set, the one
// Kind names (none for KindPartman).
type Entry struct {
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

// Append writes e as one JSON line at the end of the file at path, creating
// it when missing. Whole lines from concurrent appenders do not interleave
// (O_APPEND, one write).
func Append(path string, e Entry) error {
	line, err := json.Marshal(e)
	if err != nil {
		return fmt.Errorf("append scale result to %s: %w", path, err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("append scale result: %w", err)
	}
	if _, err := f.Write(append(line, '\n')); err != nil {
		f.Close()
		return fmt.Errorf("append scale result to %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("append scale result to %s: %w", path, err)
	}
	return nil
}

// Read parses a JSON-lines file of entries. Blank lines are skipped; a line
// that does not parse, or whose kind does not match its content, is an
// error naming its number.
func Read(r io.Reader) ([]Entry, error) {
	var out []Entry
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 16*1024*1024)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		var e Entry
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			return nil, fmt.Errorf("read scale results: line %d: %w", n, err)
		}
		if err := e.check(); err != nil {
			return nil, fmt.Errorf("read scale results: line %d: %w", n, err)
		}
		out = append(out, e)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read scale results: %w", err)
	}
	return out, nil
}

// check says whether the entry's payload is the one its kind names.
func (e Entry) check() error {
	var ok bool
	switch e.Kind {
	case KindThroughput:
		ok = e.Throughput != nil
	case KindRebalance:
		ok = e.Rebalance != nil
	case KindRecovery:
		ok = e.Recovery != nil
	case KindPartitions:
		ok = e.Partitions != nil
	case KindPartman:
		ok = true
	default:
		return fmt.Errorf("unknown kind %q", e.Kind)
	}
	if !ok {
		return fmt.Errorf("kind %q without its %s object", e.Kind, e.Kind)
	}
	return nil
}
