package admin

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/kafka2pg/kafka2pg/ingest"
	"github.com/kafka2pg/kafka2pg/offsets"
	"github.com/kafka2pg/kafka2pg/sinks"
)

// kafkaTimeout bounds an action's questions to Kafka.
const kafkaTimeout = 30 * time.Second

// TargetKind is where a reset moves partitions.
type TargetKind int

const (
	Earliest TargetKind = iota + 1 // the log's start offset
	Latest                         // its end offset
	AtOffset                       // Target.Offset
	AtTime                         // the first offset at or after Target.Time
)

// Target is where a reset moves partitions.
type Target struct {
	Kind   TargetKind
	Offset int64     // AtOffset
	Time   time.Time // AtTime
}

// ResetRequest is what PlanReset plans.
type ResetRequest struct {
	// Group is the consumer group whose offsets move.
	Group string
	// Topics are the topics that move (GroupTopics lists the group's);
	// Partitions, when given, the only partitions that do.
	Topics     []string
	Partitions []int32
	To         Target
	// DeleteRows says a partition moved back loses, in the reset's
	// transaction, the rows and dead letters its records read again will
	// write again (see RewindMode).
	DeleteRows bool
	// Sinks are the sinks the bridge writes the topics with, and Specs
	// their config, whose metadata names the columns that say which
	// record wrote a row.
	Sinks sinks.Set
	Specs []sinks.Sink
}

// ResetPlan is a planned reset: one step per partition, in (topic,
// partition) order.
type ResetPlan struct {
	Group string
	Steps []ResetStep
}

// ResetStep moves one partition.
type ResetStep struct {
	Topic     string
	Partition int32
	// From is the partition's next_offset in kafka2pg.offsets now; nil
	// when it has none.
	From *int64
	To   int64
	// Rewind is what moving back does to the partition's table; nil when
	// the step does not move back.
	Rewind *Rewind
}

// Rewind is what moving one partition back does to its table.
type Rewind struct {
	RewindTarget
	// Delete is ResetRequest.DeleteRows: the dead letters go, and the
	// rows where the mode is RewindDelete.
	Delete bool
	// Rows and Letters are what the delete would take now.
	Rows, Letters int64
}

// Refused counts the steps whose rewind would write rows twice.
func (p ResetPlan) Refused() int {
	n := 0
	for _, s := range p.Steps {
		if s.Rewind != nil && s.Rewind.Mode == RewindRefused {
			n++
		}
	}
	return n
}

// ErrNoOffsets is GroupTopics' error for a group without offsets in
// kafka2pg.offsets.
var ErrNoOffsets = errors.New("the group has no offsets in Postgres")

// GroupTopics lists the topics of group in kafka2pg.offsets, in order.
func GroupTopics(ctx context.Context, pool *pgxpool.Pool, group string) ([]string, error) {
	states, err := loadStates(ctx, pool, Filter{Group: group})
	if err != nil {
		return nil, err
	}
	var topics []string
	for _, s := range states {
		if len(topics) == 0 || topics[len(topics)-1] != s.Topic {
			topics = append(topics, s.Topic)
		}
	}
	if len(topics) == 0 {
		return nil, fmt.Errorf("group %q: %w", group, ErrNoOffsets)
	}
	return topics, nil
}

// PlanReset asks k's brokers where r.To is in each partition, reads the
// partitions' next offsets, and works out, for each partition moving back,
// what the reset does to its table (reading it, changing nothing).
func PlanReset(ctx context.Context, pool *pgxpool.Pool, k Kafka, r ResetRequest) (ResetPlan, error) {
	plan := ResetPlan{Group: r.Group}
	adm, closeAdm, err := k.Client()
	if err != nil {
		return plan, err
	}
	defer closeAdm()
	if plan.Steps, err = planSteps(ctx, adm, r.Topics, r.Partitions, r.To); err != nil {
		return plan, err
	}
	before, err := loadStates(ctx, pool, Filter{Group: r.Group, Topics: r.Topics})
	if err != nil {
		return plan, err
	}
	for i := range plan.Steps {
		s := &plan.Steps[i]
		for _, b := range before {
			if b.Topic == s.Topic && b.Partition == s.Partition {
				s.From = b.NextOffset
			}
		}
	}
	return plan, planRewinds(ctx, pool, r, plan.Steps)
}

// planSteps finds where target is in each partition of topics (only those
// of only, when given).
func planSteps(ctx context.Context, adm *kadm.Client, topics []string, only []int32, target Target) ([]ResetStep, error) {
	ctx, cancel := context.WithTimeout(ctx, kafkaTimeout)
	defer cancel()
	starts, err := adm.ListStartOffsets(ctx, topics...)
	if err != nil {
		return nil, fmt.Errorf("list start offsets of %v: %w", topics, err)
	}
	ends, err := adm.ListEndOffsets(ctx, topics...)
	if err != nil {
		return nil, fmt.Errorf("list end offsets of %v: %w", topics, err)
	}
	var at kadm.ListedOffsets
	if target.Kind == AtTime {
		if at, err = adm.ListOffsetsAfterMilli(ctx, target.Time.UnixMilli(), topics...); err != nil {
			return nil, fmt.Errorf("list offsets at %s: %w", target.Time.Format(time.RFC3339), err)
		}
	}
	var steps []ResetStep
	var errs []error
	for _, t := range topics {
		if _, ok := ends[t]; !ok {
			errs = append(errs, fmt.Errorf("topic %q does not exist", t))
		}
	}
	ends.Each(func(e kadm.ListedOffset) {
		if len(only) > 0 && !slices.Contains(only, e.Partition) {
			return
		}
		if e.Err != nil {
			errs = append(errs, fmt.Errorf("%s/%d: %w", e.Topic, e.Partition, e.Err))
			return
		}
		s, _ := starts.Lookup(e.Topic, e.Partition)
		step := ResetStep{Topic: e.Topic, Partition: e.Partition}
		switch target.Kind {
		case Earliest:
			step.To = s.Offset
		case Latest:
			step.To = e.Offset
		case AtOffset:
			step.To = target.Offset
			if step.To < s.Offset || step.To > e.Offset {
				errs = append(errs, fmt.Errorf("%s/%d: offset %d is outside the log [%d, %d]", e.Topic, e.Partition, step.To, s.Offset, e.Offset))
				return
			}
		case AtTime:
			a, ok := at.Lookup(e.Topic, e.Partition)
			if !ok || a.Err != nil {
				errs = append(errs, fmt.Errorf("%s/%d: no offset for %s", e.Topic, e.Partition, target.Time.Format(time.RFC3339)))
				return
			}
			step.To = a.Offset
		default:
			errs = append(errs, fmt.Errorf("reset target kind %d is not one of Earliest, Latest, AtOffset, AtTime", target.Kind))
			return
		}
		steps = append(steps, step)
	})
	for _, p := range only {
		found := slices.ContainsFunc(steps, func(s ResetStep) bool { return s.Partition == p })
		if !found && len(errs) == 0 {
			errs = append(errs, fmt.Errorf("partition %d does not exist in %v", p, topics))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	sort.Slice(steps, func(i, j int) bool {
		if steps[i].Topic != steps[j].Topic {
			return steps[i].Topic < steps[j].Topic
		}
		return steps[i].Partition < steps[j].Partition
	})
	return steps, nil
}

// planRewinds finds, for every step that moves a partition back, its table
// and what the reset does there (planRewind), and counts the rows and dead
// letters it would delete.
func planRewinds(ctx context.Context, pool *pgxpool.Pool, r ResetRequest, steps []ResetStep) error {
	sinkOf := func(topic string) (ingest.Sink, bool, error) {
		if s, ok := r.Sinks.Fixed[topic]; ok {
			return s, true, nil
		}
		return r.Sinks.Resolve(ctx, topic)
	}
	targets := map[string]RewindTarget{}
	for i := range steps {
		p := &steps[i]
		if p.From == nil || p.To >= *p.From {
			continue // not back: nothing was written at or past the new offset
		}
		t, ok := targets[p.Topic]
		if !ok {
			sink, found, err := sinkOf(p.Topic)
			if err != nil {
				return err
			}
			var gathered []string // other topics into the same table
			for other, s := range r.Sinks.Fixed {
				if other != p.Topic && found && s.Table.QualifiedName() == sink.Table.QualifiedName() {
					gathered = append(gathered, other)
				}
			}
			slices.Sort(gathered)
			if t, err = planRewind(ctx, pool, r.Specs, p.Topic, sink, found, r.DeleteRows, gathered); err != nil {
				return err
			}
			targets[p.Topic] = t
		}
		rw := &Rewind{RewindTarget: t, Delete: r.DeleteRows}
		if r.DeleteRows {
			var err error
			if rw.Rows, rw.Letters, err = countRewound(ctx, pool, t, r.Group, p.Topic, p.Partition, p.To); err != nil {
				return err
			}
		}
		p.Rewind = rw
	}
	return nil
}

// Deleted is what ApplyReset deleted.
type Deleted struct{ Rows, Letters int64 }

// ApplyReset moves every partition of plan in one transaction, bumping
// their epochs (offsets.Reset), and deletes what the records read again
// wrote (each step's Rewind). The offsets rows come first, in the plan's
// (topic, partition) order, as a combined write fences them: once they are
// locked no writer of those partitions is in flight (it committed before,
// and its rows are seen and deleted) or can commit after (its fence finds
// the new epoch). ApplyReset applies refused rewinds too, without
// deleting their rows: refusing is the caller's (see ResetPlan.Refused).
func ApplyReset(ctx context.Context, pool *pgxpool.Pool, plan ResetPlan) (Deleted, error) {
	var d Deleted
	moves := make([]offsets.Move, len(plan.Steps))
	for i, p := range plan.Steps {
		moves[i] = offsets.Move{Topic: p.Topic, Partition: p.Partition, NextOffset: p.To}
	}
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		d = Deleted{}
		if err := offsets.Reset(ctx, tx, plan.Group, moves); err != nil {
			return err
		}
		for _, p := range plan.Steps {
			if p.Rewind == nil || !p.Rewind.Delete {
				continue
			}
			rows, letters, err := deleteRewound(ctx, tx, p.Rewind.RewindTarget, plan.Group, p.Topic, p.Partition, p.To)
			if err != nil {
				return err
			}
			d.Rows, d.Letters = d.Rows+rows, d.Letters+letters
		}
		return nil
	})
	return d, err
}

// MirrorReset commits the plan's offsets to the group in Kafka, so that
// tools reading Kafka's group offsets see them at once. The bridges mirror
// them anyway as they claim the partitions again.
func MirrorReset(ctx context.Context, k Kafka, plan ResetPlan) error {
	adm, closeAdm, err := k.Client()
	if err != nil {
		return err
	}
	defer closeAdm()
	offs := make(kadm.Offsets)
	for _, p := range plan.Steps {
		offs.AddOffset(p.Topic, p.Partition, p.To, -1)
	}
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	return adm.CommitAllOffsets(ctx, plan.Group, offs)
}
