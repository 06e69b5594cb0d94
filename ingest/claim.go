package ingest

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/kafka2pg/kafka2pg/stream"
)

// Claim fences every earlier writer of the partitions of topic and returns
// their durable positions (offsets.Store.Claim). A claim that passes its
// deadline (Config.WriteTimeout beyond its lock waits) returns a
// *DeadlineError with StepClaim.
func (w *Writer) Claim(ctx context.Context, topic string, partitions []int32) (map[int32]stream.Position, error) {
	start := time.Now()
	pos, err := w.offs.Claim(ctx, topic, partitions)
	// A connect timeout is a context.DeadlineExceeded too: only a claim that
	// ran out its own deadline passed it.
	if err != nil && ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) && time.Since(start) >= w.cfg.offsetsConfig().ClaimDeadline() {
		de := &DeadlineError{Topic: topic, Partition: -1, Step: StepClaim, Waited: time.Since(start),
			Deadline: w.cfg.offsetsConfig().ClaimDeadline(), Err: err}
		if len(partitions) == 1 {
			de.Partition = partitions[0]
		}
		w.log.Warn("claim passed its deadline: cancelled, its connection closed; retrying", "topic", topic,
			"partitions", fmt.Sprint(partitions), "step", de.Step.String(), "waited", de.Waited.Round(time.Millisecond),
			"deadline", de.Deadline, "error", err.Error())
		return nil, de
	}
	return pos, err
}

// Positions returns what is stored for the partitions of topic, so that a
// reader can notice, while it has nothing to write, that it was fenced or
// that its position moved (offsets.Store.Positions). It has
// Config.WriteTimeout to answer.
func (w *Writer) Positions(ctx context.Context, topic string) (map[int32]stream.Position, error) {
	ctx, cancel := context.WithTimeout(ctx, w.cfg.WriteTimeout)
	defer cancel()
	return w.offs.Positions(ctx, topic)
}
