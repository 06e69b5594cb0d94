package main

import (
	"cmp"
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// kafka is the broker both systems read from.
type kafka struct {
	brokers []string
	cl      *kgo.Client
	admin   *kadm.Client
}

func newKafka(brokers []string) (*kafka, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.MaxBufferedRecords(100_000), kgo.ProducerLinger(5*time.Millisecond),
		// A topic just created is unknown until the next metadata
		// refresh, by default at most every 5 s.
		kgo.MetadataMinAge(100*time.Millisecond))
	if err != nil {
		return nil, fmt.Errorf("kafka client for %v: %w", brokers, err)
	}
	return &kafka{brokers: brokers, cl: cl, admin: kadm.NewClient(cl)}, nil
}

func (k *kafka) Close() { k.cl.Close() }

// fill creates topic (8 partitions, the broker's replication factor) and
// produces every record of d into it, waiting until Kafka acknowledged them
// all.
func (k *kafka) fill(ctx context.Context, topic string, d dataset) error {
	if err := k.create(ctx, topic); err != nil {
		return err
	}
	return k.produceAll(ctx, topic, func(send func(*kgo.Record)) {
		for i := range d.n {
			key, value := d.appendRecord(nil, make([]byte, 0, 1024), i)
			p := partition(d.id(i))
			send(&kgo.Record{Topic: topic, Partition: p, Key: key, Value: value})
			if d.changes != nil && d.changes[i].op == 'd' {
				// The tombstone Debezium writes after a delete.
				send(&kgo.Record{Topic: topic, Partition: p, Key: key})
			}
		}
	})
}

// produceAll produces the records produce sends to topic without waiting
// for each (a slice of them all would hold the whole dataset), then waits
// until Kafka acknowledged every one, and returns the first error.
func (k *kafka) produceAll(ctx context.Context, topic string, produce func(send func(*kgo.Record))) error {
	var mu sync.Mutex
	var failed error
	promise := func(_ *kgo.Record, err error) {
		if err != nil {
			mu.Lock()
			failed = cmp.Or(failed, err)
			mu.Unlock()
		}
	}
	produce(func(r *kgo.Record) { k.cl.Produce(ctx, r, promise) })
	if err := k.cl.Flush(ctx); err != nil {
		return fmt.Errorf("produce to %s: %w", topic, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if failed != nil {
		return fmt.Errorf("produce to %s: %w", topic, failed)
	}
	return nil
}

// create creates topic: 8 partitions, the broker's replication factor.
func (k *kafka) create(ctx context.Context, topic string) error {
	resp, err := k.admin.CreateTopic(ctx, partitions, -1, nil, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		return fmt.Errorf("create topic %s: %w", topic, err)
	}
	return nil
}

// drop deletes topics, so the broker frees their records.
func (k *kafka) drop(ctx context.Context, topics ...string) error {
	resps, err := k.admin.DeleteTopics(ctx, topics...)
	if err == nil {
		err = resps.Error()
	}
	if err != nil {
		return fmt.Errorf("delete topics %v: %w", topics, err)
	}
	return nil
}

// dropGroups deletes consumer groups (the sinks' and kafka2pg's mirrors),
// ignoring those already gone.
func (k *kafka) dropGroups(ctx context.Context, groups ...string) {
	if len(groups) > 0 {
		_, _ = k.admin.DeleteGroups(ctx, groups...)
	}
}
