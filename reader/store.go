package reader

import (
	"context"

	"github.com/kafka2pg/kafka2pg/stream"
)

// Store is where the reader keeps durable positions and writes batches:
// the Postgres side (ingest.Writer). The reader resumes every partition
// from what Claim returns, never from Kafka's commits.
//
// A Store must be safe for concurrent use: the reader calls it from
// franz-go's group goroutine (Claim, on assignment) and from every
// partition's goroutine (Claim after a failed write, Write), concurrently
// for different partitions, never concurrently for one partition.
type Store interface {
	// Claim fences every earlier owner of the partitions of topic and
	// returns their durable positions; a partition missing from the map has
	// nothing stored (as NextOffset -1). On assignment ctx ends if a revoke
	// begins; after a failed write it is the partition's, which ends when
	// the partition is given up.
	Claim(ctx context.Context, topic string, partitions []int32) (map[int32]stream.Position, error)

	// Write stores b's records and b.NextOffset durably, in one
	// transaction, or nothing. It returns an error matching
	// stream.ErrFenced when another owner holds the partition, and a
	// *stream.StopError when a bad record stops the partition (what comes
	// before it is durable). After any other error the outcome is unknown:
	// the reader claims again and resumes from the durable position.
	//
	// ctx is the partition's: it ends when the partition is abandoned
	// (lost, or a revoke's flush ran out of Config.FlushTimeout), and Write
	// should then return soon. b.Records and the memory they point to
	// belong to the reader: Write must not keep them after it returns.
	Write(ctx context.Context, b *stream.Batch) error
}

// PositionReader is a Store that can also read the positions stored for
// the partitions of a topic (a partition missing from the map has no
// row). When the Store is one, the reader compares them with its own
// every Config.FenceCheckInterval and on Reader.CheckPositions, so that a
// partition fenced while it had nothing to write (an offsets reset, a new
// owner), or whose position Postgres lost (a lossy failover, a restored
// backup), claims its position again without waiting for a write to
// fail. Positions is called from the reader's fence-check goroutine.
type PositionReader interface {
	Positions(ctx context.Context, topic string) (map[int32]stream.Position, error)
}
