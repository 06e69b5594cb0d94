package ingest

import (
	"context"

	"github.com/kafka2pg/kafka2pg/stream"
)

// Claim fences every earlier writer of the partitions of topic and returns
// their durable positions (offsets.Store.Claim).
func (w *Writer) Claim(ctx context.Context, topic string, partitions []int32) (map[int32]stream.Position, error) {
	return w.offs.Claim(ctx, topic, partitions)
}

// Epochs returns the epochs stored for the partitions of topic, so that a
// reader can notice it was fenced while it had nothing to write
// (offsets.Store.Epochs).
func (w *Writer) Epochs(ctx context.Context, topic string) (map[int32]int64, error) {
	return w.offs.Epochs(ctx, topic)
}
