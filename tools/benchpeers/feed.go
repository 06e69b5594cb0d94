package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// feed produces append records to a topic at a steady rate, from record
// 0 on, between start and halt; a halted feed starts again where it
// stopped.
type feed struct {
	k     *kafka
	topic string
	rate  float64
	next  int // the next record, between runs
	stop  chan struct{}
	done  chan struct{}

	mu     sync.Mutex
	failed error
}

func (f *feed) start(ctx context.Context) {
	f.stop, f.done = make(chan struct{}), make(chan struct{})
	go func() {
		defer close(f.done)
		d := dataset{name: "failover", n: 1 << 30}
		t0, from := time.Now(), f.next
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-f.stop:
				return
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			for due := from + int(f.rate*time.Since(t0).Seconds()); f.next < due; f.next++ {
				key, value := d.appendRecord(nil, make([]byte, 0, 1024), f.next)
				// Produced under ctx, not the stop: a halt must not fail
				// records already handed over.
				f.k.cl.Produce(ctx, &kgo.Record{Topic: f.topic, Partition: partition(d.id(f.next)), Key: key, Value: value}, func(_ *kgo.Record, err error) {
					if err != nil {
						f.mu.Lock()
						f.failed = errors.Join(f.failed, err)
						f.mu.Unlock()
					}
				})
			}
		}
	}()
}

// halt stops the feed, waits until Kafka acknowledged every record, and
// returns how many records the feed has produced in all.
func (f *feed) halt(ctx context.Context) (int64, error) {
	if f.stop != nil {
		close(f.stop)
		<-f.done
		f.stop = nil
	}
	if err := f.k.cl.Flush(ctx); err != nil {
		return int64(f.next), fmt.Errorf("produce to %s: %w", f.topic, err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.failed != nil {
		return int64(f.next), fmt.Errorf("produce to %s: %w", f.topic, f.failed)
	}
	return int64(f.next), nil
}
