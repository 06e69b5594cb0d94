package bridge

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafka2pg/kafka2pg/offsets"
	"github.com/kafka2pg/kafka2pg/reader"
)

// caughtUpWatch knows the end offsets seen at start and tells when Postgres
// holds every partition's durable next_offset at or past them.
type caughtUpWatch struct {
	pool   *pgxpool.Pool
	group  string
	topics []string
	target map[string]map[int32]int64 // only partitions with something to read
}

func newCaughtUpWatch(ctx context.Context, cl *kgo.Client, pool *pgxpool.Pool, group string, topics []string, regex bool, isolation reader.IsolationLevel) (*caughtUpWatch, error) {
	adm := kadm.NewClient(cl)
	if regex {
		// The patterns stand for the topics that match them now.
		var res []*regexp.Regexp
		for _, t := range topics {
			res = append(res, regexp.MustCompile(t))
		}
		var listed kadm.TopicDetails
		if err := retryKafka(ctx, func() (err error) { listed, err = adm.ListTopics(ctx); return err }); err != nil {
			return nil, fmt.Errorf("bridge.Config.UntilCaughtUp: list topics: %w", err)
		}
		topics = nil
		for _, name := range listed.Names() {
			for _, re := range res {
				if re.MatchString(name) {
					topics = append(topics, name)
					break
				}
			}
		}
		sort.Strings(topics)
		if len(topics) == 0 {
			return &caughtUpWatch{pool: pool, group: group, target: map[string]map[int32]int64{}}, nil
		}
	}
	var ends, starts kadm.ListedOffsets
	err := retryKafka(ctx, func() error {
		var err error
		// Under read_committed the end is the last stable offset: records of
		// open transactions are not ours to wait for yet.
		if isolation == reader.ReadUncommitted {
			ends, err = adm.ListEndOffsets(ctx, topics...)
		} else {
			ends, err = adm.ListCommittedOffsets(ctx, topics...)
		}
		if err != nil {
			return err
		}
		starts, err = adm.ListStartOffsets(ctx, topics...)
		if err != nil {
			return err
		}
		if err := ends.Error(); err != nil {
			return err
		}
		return starts.Error()
	})
	if err != nil {
		if errors.Is(err, kerr.UnknownTopicOrPartition) {
			return nil, fmt.Errorf("bridge.Config.UntilCaughtUp: list end offsets of %v: a topic does not exist: %w", topics, err)
		}
		return nil, fmt.Errorf("bridge.Config.UntilCaughtUp: list end offsets of %v: %w", topics, err)
	}
	w := &caughtUpWatch{pool: pool, group: group, topics: topics, target: map[string]map[int32]int64{}}
	for _, t := range topics {
		if _, ok := ends[t]; !ok {
			return nil, fmt.Errorf("bridge.Config.UntilCaughtUp: topic %q does not exist (or has no partitions)", t)
		}
	}
	ends.Each(func(o kadm.ListedOffset) {
		start := int64(0)
		if s, ok := starts.Lookup(o.Topic, o.Partition); ok {
			start = s.Offset
		}
		if o.Offset > start {
			if w.target[o.Topic] == nil {
				w.target[o.Topic] = map[int32]int64{}
			}
			w.target[o.Topic][o.Partition] = o.Offset
		}
	})
	return w, nil
}

// retryKafka runs fn until it succeeds or ctx ends (Config.CaughtUpTimeout
// bounds it), with capped backoff; a topic that stays unknown for a few
// tries is returned at once.
func retryKafka(ctx context.Context, fn func() error) error {
	backoff := 250 * time.Millisecond
	for attempt := 0; ; attempt++ {
		err := fn()
		if err == nil {
			return nil
		}
		if errors.Is(err, kerr.UnknownTopicOrPartition) && attempt >= 5 {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}

func (w *caughtUpWatch) describe() string {
	var parts []string
	for t, ps := range w.target {
		for p, end := range ps {
			parts = append(parts, fmt.Sprintf("%s/%d:%d", t, p, end))
		}
	}
	sort.Strings(parts)
	if len(parts) == 0 {
		return "nothing to read"
	}
	return strings.Join(parts, " ")
}

// wait polls Postgres every period until caught up or ctx ends. It starts
// only once the member has settled (joined the group and claimed what it was
// given), so that even a run that has nothing to do corrects the group's
// Kafka offsets from Postgres as it leaves.
func (w *caughtUpWatch) wait(ctx context.Context, settled <-chan struct{}, stopped func() []string, period time.Duration) error {
	select {
	case <-settled:
	case <-ctx.Done():
		return ctx.Err()
	}
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		if why := stopped(); len(why) > 0 {
			return fmt.Errorf("bridge.Config.UntilCaughtUp cannot finish: %s", strings.Join(why, "; "))
		}
		done, err := w.check(ctx)
		if err == nil && done {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

func (w *caughtUpWatch) check(ctx context.Context) (bool, error) {
	rows, err := offsets.List(ctx, w.pool, offsets.Filter{Group: w.group, Topics: w.topics})
	if err != nil {
		return false, err
	}
	durable := map[string]map[int32]int64{}
	for _, r := range rows {
		if durable[r.Topic] == nil {
			durable[r.Topic] = map[int32]int64{}
		}
		durable[r.Topic][r.Partition] = r.NextOffset
	}
	for t, ps := range w.target {
		for p, end := range ps {
			if n, ok := durable[t][p]; !ok || n < end {
				return false, nil
			}
		}
	}
	return true, nil
}
