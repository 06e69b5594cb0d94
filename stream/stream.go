package stream

import (
	"errors"
	"fmt"
	"time"
)

// Record is one Kafka record.
type Record struct {
	Topic     string
	Partition int32
	Offset    int64
	Timestamp time.Time
	// TimestampType is TimestampCreateTime or TimestampLogAppendTime; ""
	// when unknown.
	TimestampType string
	Key           []byte // nil when the record has no key
	Value         []byte // nil for a tombstone
	Headers       []Header
	// Unreadable, when set, says the record could not be read: its record
	// batch decompresses to more than the reader may hold. Key, Value and
	// Headers are empty; the writer makes the record a bad record (kind
	// batch_too_large) with this reason, so that its offset is accounted
	// for in the fenced transaction like any other.
	Unreadable error
}

// Header is one Kafka record header.
type Header struct {
	Key   string
	Value []byte
}

// Record.TimestampType values, as Kafka names them.
const (
	TimestampCreateTime    = "CreateTime"
	TimestampLogAppendTime = "LogAppendTime"
)

// Batch is a span of consecutive offsets of one partition, written in one
// transaction together with NextOffset.
type Batch struct {
	Topic     string
	Partition int32
	// Epoch is the writer's fencing epoch, from its claim (Position.Epoch).
	Epoch int64
	// FirstOffset is the offset the span starts at (its first record, data
	// or transaction marker). NextOffset is the offset after its last
	// record: the partition's durable next offset after the commit.
	FirstOffset int64
	NextOffset  int64
	// LeaderEpoch is the Kafka leader epoch of the last record, -1 if
	// unknown.
	LeaderEpoch int32
	// LogEndOffset is the partition's end offset as last fetched (the last
	// stable offset under read_committed), -1 if unknown.
	LogEndOffset int64
	// Records are the data records of the span in offset order;
	// transaction markers are not records here, they only widen the span.
	Records []Record
}

// Position is a partition's durable position, as a claim returns it.
type Position struct {
	Epoch       int64 // the claimer's fencing epoch; every Batch it writes carries it
	NextOffset  int64 // the next offset to consume; -1 when nothing is stored
	LeaderEpoch int32 // Kafka leader epoch of the last stored record, -1 if unknown
}

// ErrFenced means the partition's stored position moved: another writer
// claimed it (a new owner, an operator's offsets reset) or already wrote
// past the batch. Nothing of the batch was written. The writer drops its
// local state for the partition and claims it again.
var ErrFenced = errors.New("fenced: another writer owns this partition")

// FencedError carries what the partition's stored position held when a
// write was fenced. It matches ErrFenced with errors.Is.
type FencedError struct {
	Topic        string
	Partition    int32
	Epoch        int64 // the writer's epoch
	FirstOffset  int64 // the batch's first offset
	StoredEpoch  int64 // -1 when the row was not found
	StoredOffset int64 // the stored next offset; -1 when none or not found
}

func (e *FencedError) Error() string {
	return fmt.Sprintf("write %s/%d: fenced: batch from offset %d with epoch %d, but the offsets row holds epoch %d and next_offset %d",
		e.Topic, e.Partition, e.FirstOffset, e.Epoch, e.StoredEpoch, e.StoredOffset)
}

func (e *FencedError) Unwrap() error { return ErrFenced }

// StopError is returned by a write when a bad record stops the partition:
// the records before Offset were written and are durable, the stored next
// offset is Offset, and nothing after it was written. The partition stays
// stopped until it is revoked or the bridge restarts.
type StopError struct {
	Topic     string
	Partition int32
	// Offset is the bad record's offset, and so the partition's durable
	// next offset now.
	Offset int64
	// Kind is the bad record's error kind, as kafka2pg.dead_letters.error_kind
	// would name it.
	Kind string
	Err  error // why the record is bad
}

func (e *StopError) Error() string {
	return fmt.Sprintf("bad record at %s/%d offset %d stopped the partition (ingest.Config.OnError=stop): %s: %v; "+
		"fix the table or the data, or run with ingest.Config.OnError=dead-letter, then restart",
		e.Topic, e.Partition, e.Offset, e.Kind, e.Err)
}

func (e *StopError) Unwrap() error { return e.Err }
