package admin

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/kafka2pg/kafka2pg/offsets"
)

// PartitionState is one partition as kafka2pg.offsets holds it, with what
// Kafka says of it when Status is given brokers. Its JSON is what
// `kafka2pg status --json` prints.
type PartitionState struct {
	Group          string     `json:"consumer_group"`
	Topic          string     `json:"topic"`
	Partition      int32      `json:"partition"`
	NextOffset     *int64     `json:"next_offset"` // durable in Postgres; nil: claimed, nothing written
	Epoch          int64      `json:"epoch"`
	LastCommit     *time.Time `json:"last_commit_at"`
	EndOffset      *int64     `json:"end_offset,omitempty"` // from Kafka now (the last stable offset)
	Lag            *int64     `json:"lag,omitempty"`
	KafkaCommitted *int64     `json:"kafka_committed,omitempty"` // the group's offset in Kafka (the mirror)
	Owner          string     `json:"owner,omitempty"`
}

// Filter selects partitions of kafka2pg.offsets; an empty field selects
// all.
type Filter struct {
	Group      string
	Topics     []string
	Partitions []int32
}

// Status reads the partitions f selects from kafka2pg.offsets, in (group,
// topic, partition) order. With brokers in k it adds, from Kafka, each
// partition's end offset and lag, the group's committed offset (the
// mirror) and the member that owns it.
func Status(ctx context.Context, pool *pgxpool.Pool, f Filter, k Kafka) ([]PartitionState, error) {
	states, err := loadStates(ctx, pool, f)
	if err != nil {
		return nil, err
	}
	if len(k.Brokers) == 0 || len(states) == 0 {
		return states, nil
	}
	adm, closeAdm, err := k.Client()
	if err != nil {
		return nil, err
	}
	defer closeAdm()
	if err := addKafkaState(ctx, adm, states); err != nil {
		return nil, err
	}
	return states, nil
}

// loadStates reads the partitions f selects from kafka2pg.offsets.
func loadStates(ctx context.Context, pool *pgxpool.Pool, f Filter) ([]PartitionState, error) {
	rows, err := offsets.List(ctx, pool, offsets.Filter{Group: f.Group, Topics: f.Topics, Partitions: f.Partitions})
	if err != nil {
		return nil, err
	}
	out := make([]PartitionState, len(rows))
	for i, r := range rows {
		s := PartitionState{Group: r.Group, Topic: r.Topic, Partition: r.Partition, Epoch: r.Epoch}
		if r.NextOffset >= 0 {
			s.NextOffset = &r.NextOffset
		}
		if !r.CommittedAt.IsZero() {
			s.LastCommit = &r.CommittedAt
		}
		out[i] = s
	}
	return out, nil
}

// addKafkaState fills end offsets, lag, the groups' Kafka offsets and the
// owners from Kafka.
func addKafkaState(ctx context.Context, adm *kadm.Client, states []PartitionState) error {
	ctx, cancel := context.WithTimeout(ctx, kafkaTimeout)
	defer cancel()
	var topics, groups []string
	for _, s := range states {
		if !slices.Contains(topics, s.Topic) {
			topics = append(topics, s.Topic)
		}
		if !slices.Contains(groups, s.Group) {
			groups = append(groups, s.Group)
		}
	}
	ends, err := adm.ListCommittedOffsets(ctx, topics...)
	if err != nil {
		return fmt.Errorf("list end offsets of %v: %w", topics, err)
	}
	owners := map[string]string{} // group/topic/partition → owner
	commits := map[string]kadm.OffsetResponses{}
	described, err := adm.DescribeGroups(ctx, groups...)
	if err != nil {
		return fmt.Errorf("describe groups %v: %w", groups, err)
	}
	for _, g := range groups {
		if fo, err := adm.FetchOffsets(ctx, g); err == nil {
			commits[g] = fo
		}
		for _, m := range described[g].Members {
			ca, ok := m.Assigned.AsConsumer()
			if !ok {
				continue
			}
			for _, t := range ca.Topics {
				for _, p := range t.Partitions {
					owners[fmt.Sprintf("%s/%s/%d", g, t.Topic, p)] = fmt.Sprintf("%s@%s", m.ClientID, strings.TrimPrefix(m.ClientHost, "/"))
				}
			}
		}
	}
	for i := range states {
		s := &states[i]
		if e, ok := ends.Lookup(s.Topic, s.Partition); ok && e.Err == nil {
			end := e.Offset
			next := int64(0)
			if s.NextOffset != nil {
				next = max(*s.NextOffset, 0)
			}
			lag := end - next
			s.EndOffset, s.Lag = &end, &lag
		}
		if o, ok := commits[s.Group].Lookup(s.Topic, s.Partition); ok && o.Err == nil && o.At >= 0 {
			at := o.At
			s.KafkaCommitted = &at
		}
		s.Owner = owners[fmt.Sprintf("%s/%s/%d", s.Group, s.Topic, s.Partition)]
	}
	return nil
}
