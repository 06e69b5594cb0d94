package reader

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafka2pg/kafka2pg/internal/trouble"
)

// CheckTopics asks the brokers, before anything is created for them,
// whether the topics to consume exist and may be read. A topic named
// literally (cfg.Topics without TopicsAreRegex, plus literal) must exist
// and be described to this principal; a regular expression (cfg.Topics
// with TopicsAreRegex) that matches no topic yet is only a warning, since
// the reader consumes matching topics as they appear. Brokers that cannot
// be reached are retried until ctx ends, logged rate-limited; a topic that
// is missing or denied is retried for cfg.FatalRetryTimeout (a topic being
// created, ACLs being loaded after a broker restart), then reported as a
// *FatalError. opts are the client options beyond the brokers (TLS, SASL).
func CheckTopics(ctx context.Context, cfg Config, literal []string, opts ...kgo.Opt) error {
	cfg = cfg.withDefaults()
	var patterns []*regexp.Regexp
	if cfg.TopicsAreRegex {
		for _, t := range cfg.Topics {
			re, err := regexp.Compile(t)
			if err != nil {
				return fmt.Errorf("topic_regex %q: %w", t, err)
			}
			patterns = append(patterns, re)
		}
	} else {
		literal = append(slices.Clone(literal), cfg.Topics...)
	}
	slices.Sort(literal)
	literal = slices.Compact(literal)
	cl, err := kgo.NewClient(append(slices.Clone(opts), kgo.SeedBrokers(cfg.Brokers...))...)
	if err != nil {
		return fmt.Errorf("create Kafka client: %w", err)
	}
	defer cl.Close()
	unreachable := trouble.New(cfg.Logger, "kafka unreachable while checking the topics; retrying", 0)
	refused := trouble.New(cfg.Logger, "a topic to consume is missing or denied; retrying until reader.Config.FatalRetryTimeout, then stopping", 0)
	watch := newFatalWatch(cfg.FatalRetryTimeout)
	backoff := 200 * time.Millisecond
	var lastErr error
	for {
		topics, err := describeTopics(ctx, cl, literal, patterns != nil)
		if err != nil {
			if ctx.Err() != nil {
				return fmt.Errorf("check the topics %s on %s: %w (last error: %v)", strings.Join(literal, ", "), strings.Join(cfg.Brokers, ","), ctx.Err(), err)
			}
			lastErr = err
			names := aclNames{principal: cfg.Principal, group: cfg.Group}
			if len(literal) == 1 {
				names.topic = literal[0]
			}
			if fix, fatal := kafkaFix(err, false, names); fatal {
				if watch.failed("the topics' metadata", err, fix) {
					return watch.fatal()
				}
				refused.Fail(err, "fix", fix)
			} else {
				unreachable.Fail(err, "brokers", strings.Join(cfg.Brokers, ","))
			}
		} else {
			unreachable.OK()
			missing := false
			for _, t := range literal {
				terr := topics[t]
				if terr == nil {
					watch.ok(topicSubject(t))
					continue
				}
				missing = true
				fix, _ := kafkaFix(terr, true, aclNames{cfg.Principal, t, cfg.Group})
				if watch.failed(topicSubject(t), terr, fix) {
					return watch.fatal()
				}
				refused.Fail(terr, "topic", t, "fix", fix)
			}
			if !missing {
				warnUnmatched(cfg.Logger, patterns, topics)
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("check the topics %s on %s: %w (last error: %v)", strings.Join(literal, ", "), strings.Join(cfg.Brokers, ","), ctx.Err(), lastErr)
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 2*time.Second)
	}
}

// describeTopics returns the topics the brokers know, each with its error
// (nil: it exists and may be described), the literal ones always present
// (a missing one with UnknownTopicOrPartition). all asks for every topic,
// for the patterns. It never creates a topic.
func describeTopics(ctx context.Context, cl *kgo.Client, literal []string, all bool) (map[string]error, error) {
	req := kmsg.NewPtrMetadataRequest()
	req.AllowAutoTopicCreation = false
	if !all {
		req.Topics = []kmsg.MetadataRequestTopic{}
		for _, t := range literal {
			rt := kmsg.NewMetadataRequestTopic()
			rt.Topic = kmsg.StringPtr(t)
			req.Topics = append(req.Topics, rt)
		}
	}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return nil, err
	}
	out := make(map[string]error, len(resp.Topics))
	for _, t := range resp.Topics {
		if t.Topic == nil {
			continue
		}
		err := kerr.ErrorForCode(t.ErrorCode)
		if err == nil && len(t.Partitions) == 0 {
			err = kerr.UnknownTopicOrPartition
		}
		out[*t.Topic] = err
	}
	for _, t := range literal {
		if _, ok := out[t]; !ok {
			out[t] = kerr.UnknownTopicOrPartition
		}
	}
	return out, nil
}

// warnUnmatched warns about each pattern that matches no topic yet.
func warnUnmatched(log interface{ Warn(string, ...any) }, patterns []*regexp.Regexp, topics map[string]error) {
	for _, re := range patterns {
		matched := false
		for t, err := range topics {
			if err == nil && re.MatchString(t) {
				matched = true
				break
			}
		}
		if !matched {
			log.Warn("topic_regex matches no topic yet; its topics are consumed as they appear (within reader.Config.MetadataMaxAge)", "topic_regex", re.String())
		}
	}
}
