package reader

import (
	"context"
	"errors"
	"slices"
)

// ErrRegexSubscription is the refusal of AddTopics and RemoveTopics when
// Config.TopicsAreRegex is set: franz-go fixes a regex subscription when
// the client is made (kgo.ConsumeRegex), so it changes with a new Reader
// only.
var ErrRegexSubscription = errors.New("the subscription is a set of regular expressions, fixed when the reader starts")

// AddTopics adds topics to the subscription (kgo.Client.AddConsumeTopics).
// The member's next join of the group asks for them, which the client
// starts at once: the group's cooperative rebalance assigns their
// partitions, and each is claimed in Postgres, as at start, before its
// first fetch. Partitions the member owns keep fetching and writing
// through it. A topic that does not exist yet is consumed once it does.
func (r *Reader) AddTopics(topics ...string) error {
	if len(topics) == 0 {
		return nil
	}
	if r.cfg.TopicsAreRegex {
		return ErrRegexSubscription
	}
	r.cl.AddConsumeTopics(topics...)
	return nil
}

// RemoveTopics takes topics out of the subscription
// (kgo.Client.PurgeTopicsFromConsuming, which stops their fetches and
// rejoins the group with the smaller subscription) and gives up the
// partitions of theirs the member owns as a revoke does: each finishes
// what it has queued within Config.FlushTimeout (what is left then is
// abandoned, uncommitted), is detached, and its durable offset is
// committed to the group. The positions in Postgres stay, so a Reader
// that subscribes to a topic again resumes where this one stopped. ctx
// bounds the group commit. It returns once the partitions are given up.
func (r *Reader) RemoveTopics(ctx context.Context, topics ...string) error {
	if len(topics) == 0 {
		return nil
	}
	if r.cfg.TopicsAreRegex {
		return ErrRegexSubscription
	}
	r.cl.PurgeTopicsFromConsuming(topics...)
	owned := map[string][]int32{}
	for _, tp := range r.Assigned() {
		if slices.Contains(topics, tp.Topic) {
			owned[tp.Topic] = append(owned[tp.Topic], tp.Partition)
		}
	}
	if r.release(ctx, r.cl, owned) {
		r.log.Info("partitions given up: their topics left the subscription", "partitions", fmtPartitions(owned))
	}
	return nil
}
