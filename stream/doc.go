// Package stream is the vocabulary the two sides of kafka2pg share: the
// Kafka side (package reader) cuts records into batches, the Postgres side
// (package ingest, through package offsets) writes each batch and its next
// offset in one transaction. Both speak these types, so nothing translates
// between them.
//
// # A record's one form
//
// A [Record] is a Kafka record as the rest of kafka2pg sees it, independent
// of the Kafka client. The reader copies each fetched record into a Record
// once, when it cuts a [Batch]; the mapping, the COPY and the dead letters
// read that same value. Key, Value and the header values point into the
// client's fetch buffers: they are valid while the batch is being written
// and must not be kept after the write returns.
//
// # Batches and positions
//
// A [Batch] is a span of consecutive offsets of one partition,
// [FirstOffset, NextOffset), written in one transaction together with
// NextOffset, the partition's durable next offset once it commits. The
// span may hold fewer records than offsets: transaction markers and
// compacted records only widen it.
//
// A [Position] is a partition's durable position as a claim returns it: the
// claimer's fencing Epoch, which every Batch of that owner carries, and the
// NextOffset to resume from (-1 when nothing is stored yet).
//
// # The two errors a write branches on
//
// A write returns an error that matches [ErrFenced] (a [*FencedError]) when
// the partition's stored epoch or next offset moved past the batch: another
// owner claimed it, or an operator reset it. Nothing of the batch was
// written; the owner drops what it holds and claims again.
//
// A write returns a [*StopError] when a bad record must stop the partition
// (the stop policy for bad records): the records before it are durable,
// the stored next offset is the bad record's offset, and the partition
// stays stopped until an operator fixes the table or the data.
//
// # Configuration errors
//
// A [*FieldError] names the configuration field at fault by its path
// ("reader.Config.Brokers"), so that a program which sets the fields from
// flags or a file can speak of it in its own terms. Every package that
// validates a configuration returns them.
//
// # Changes
//
// A [Change] is a record decoded as a change of a table (an upsert, a
// delete, a truncate): package cdc's decoder makes it, package ingest
// applies it in the batch's transaction. It lives here, not in ingest,
// because the decoder must not link ingest's driver.
//
// The package imports nothing of kafka2pg's and owns no goroutines.
package stream
