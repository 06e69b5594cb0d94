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
	// Unreadable, when set, says the record cannot be written as a row,
	// before any mapping: the writer makes it a bad record with this
	// reason, so that its offset is accounted for in the fenced
	// transaction like any other. The reader sets it when the record's
	// batch decompresses to more than it may hold (Key, Value and Headers
	// are empty then; kind batch_too_large); a sink's filter sets it to a
	// decode error (wrapping decode.ErrBadRecord, which names its kind)
	// for a value it cannot evaluate.
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
	// PrevOffset is the stored next offset the writer expects to find: the
	// position it last made durable, or the one its claim returned; -1
	// when its claim found nothing stored. The write succeeds only if the
	// stored position is exactly this one, so that a position Postgres
	// rolled back (a lossy failover, a restored backup) is noticed instead
	// of overwritten. It need not be FirstOffset: offsets skip
	// (compaction, transaction markers, retention), and a truncated Kafka
	// log is read again from below it.
	PrevOffset int64
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

// ErrFenced means the partition's stored position is not the writer's:
// another writer claimed it (a new owner, an operator's offsets reset), or
// the position moved under the writer's own epoch (ErrPositionMoved).
// Nothing of the batch was written. The writer drops its local state for
// the partition and claims it again.
var ErrFenced = errors.New("fenced: another writer owns this partition")

// ErrPositionMoved means the stored position is not the one the writer
// left, although no newer owner claimed the partition: Postgres lost
// commits (a lossy failover, a restored backup) and moved back, or a
// commit whose outcome was unknown did land and moved it forward. A
// *FencedError matches it with errors.Is when that is the case. The writer
// reads the stored position again and goes on from there at once: there
// is no other owner to wait for.
var ErrPositionMoved = errors.New("the stored position moved under this owner")

// FencedError carries what the partition's stored position held when a
// write was refused. It matches ErrFenced with errors.Is, and
// ErrPositionMoved when no newer epoch refused it (Moved).
type FencedError struct {
	Topic        string
	Partition    int32
	Epoch        int64 // the writer's epoch
	FirstOffset  int64 // the batch's first offset
	PrevOffset   int64 // the stored next offset the writer expected; -1: none
	StoredEpoch  int64 // -1 when the row was not found
	StoredOffset int64 // the stored next offset; -1 when none or not found
}

// Moved reports whether the write was refused by its own history rather
// than by a newer owner: the row is missing, holds an older epoch (the
// claim itself was lost), or holds this epoch at another position.
func (e *FencedError) Moved() bool { return e.StoredEpoch <= e.Epoch }

// MovedBack reports whether the stored position is behind the one the
// writer left: commits the writer saw succeed are gone from Postgres.
func (e *FencedError) MovedBack() bool {
	return e.Moved() && e.PrevOffset >= 0 && e.StoredOffset < e.PrevOffset
}

func (e *FencedError) Error() string {
	if e.Moved() {
		return fmt.Sprintf("write %s/%d: the stored position moved under this owner (epoch %d): it left next_offset %d, but the offsets row holds epoch %d and next_offset %d%s",
			e.Topic, e.Partition, e.Epoch, e.PrevOffset, e.StoredEpoch, e.StoredOffset, e.why())
	}
	return fmt.Sprintf("write %s/%d: fenced: batch from offset %d with epoch %d, but the offsets row holds epoch %d and next_offset %d",
		e.Topic, e.Partition, e.FirstOffset, e.Epoch, e.StoredEpoch, e.StoredOffset)
}

func (e *FencedError) why() string {
	if e.MovedBack() {
		return " (Postgres lost commits: a failover or a restore?)"
	}
	return ""
}

func (e *FencedError) Unwrap() error { return ErrFenced }

// Is matches ErrPositionMoved when Moved.
func (e *FencedError) Is(target error) bool { return target == ErrPositionMoved && e.Moved() }

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
