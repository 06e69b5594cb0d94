package reader

import (
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

func TestTheBufferBudgetBoundsMemoryAcrossPartitions(t *testing.T) {
	const partitions, records = 64, 64000
	c := newCluster(t, partitions)
	adm := admin(t, c)
	payload := produce(t, c, records) // about 20 bytes of key and value each: 1.3 MB in all
	s := newStore()
	s.delay = 2 * time.Millisecond
	const budget, fetchMax = 32 << 10, 64 << 10
	var peak atomic.Int64
	x := start(t, c, "g", s, func(c *Config) {
		c.MaxBufferedBytes, c.FetchMaxBytes, c.FetchMaxPartitionBytes = budget, fetchMax, fetchMax
		c.BatchMaxRows = 200
	})
	ends := endOffsets(t, adm)
	sawBudgetPause := false
	waitFor(t, 90*time.Second, "catch up", func() bool {
		b := x.r.buffered.Load()
		if b > peak.Load() {
			peak.Store(b)
		}
		if x.r.overBudget.Load() {
			sawBudgetPause = true
		}
		return s.caughtUp(ends)
	})
	x.stop()
	s.checkExactlyOnce(t, map[int32]int64{}, ends)
	// One poll may bring up to a fetch's worth past the budget before the
	// poll loop waits for writes.
	if p, limit := peak.Load(), budget+fetchMemory(fetchMax, payload, records); p > limit {
		t.Errorf("peak buffered %d bytes, want at most the budget %d plus one fetch %d", p, budget, limit-budget)
	}
	if !sawBudgetPause {
		t.Error("no partition paused for the budget although the backlog is 40 times larger")
	}
	if b := x.r.buffered.Load(); b != 0 {
		t.Errorf("after the stop %d bytes are still counted as buffered: the accounting leaks", b)
	}
	t.Logf("peak buffered %d bytes with a budget of %d over %d partitions", peak.Load(), budget, partitions)
}

func TestStaticMembershipKeepsPartitionsAcrossARestart(t *testing.T) {
	c := newCluster(t, 6)
	adm := admin(t, c)
	produce(t, c, 3000)
	s := newStore()
	static := func(id string) func(*Config) {
		return func(c *Config) { c.InstanceID, c.SessionTimeout = id, 20*time.Second }
	}
	// a joins first and leads the group; b is the member that restarts (a
	// restarting leader rejoins on purpose, so that a changed subscription
	// is noticed).
	a := start(t, c, "g", s, static("a"))
	waitFor(t, 30*time.Second, "a owns every partition", func() bool { return len(a.r.Assigned()) == 6 })
	b := start(t, c, "g", s, static("b"))
	stable(t, a.r, b.r)
	before := sorted(b.r.Assigned())
	aOwned, aParts := sorted(a.r.Assigned()), partitionsOf(a.r)
	if len(before) == 0 || len(aOwned) == 0 {
		t.Fatalf("a owns %v and b owns %v: want both to own partitions", aOwned, before)
	}
	b.stop()
	// A dynamic member leaves on stop and the other takes its partitions at
	// once; a static one does not leave: its partitions wait for it.
	for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if got := sorted(a.r.Assigned()); !slices.Equal(got, aOwned) {
			t.Fatalf("while b restarts, a owns %v, want only its own %v: b left the group", got, aOwned)
		}
	}
	produce(t, c, 3000)
	b2 := start(t, c, "g", s, static("b"))
	waitFor(t, 30*time.Second, "the restarted member owns partitions", func() bool { return len(b2.r.Assigned()) > 0 })
	if got := sorted(b2.r.Assigned()); !slices.Equal(got, before) {
		t.Errorf("the restarted member owns %v, want its old %v", got, before)
	}
	ends := endOffsets(t, adm)
	waitFor(t, 30*time.Second, "catch up", func() bool { return s.caughtUp(ends) })
	// The rejoin carries new cooperative metadata (it owns nothing yet), so
	// the group may run a generation; what matters is that the other
	// member's partitions were never revoked: the same partition
	// goroutines kept writing through it.
	if got := sorted(a.r.Assigned()); !slices.Equal(got, aOwned) {
		t.Errorf("the other member owns %v after the restart, want %v", got, aOwned)
	}
	for tp, p := range partitionsOf(a.r) {
		if aParts[tp] != p {
			t.Errorf("the other member's partition %v was revoked and assigned again during the restart", tp)
		}
	}
	b2.stop()
	a.stop()
	s.checkExactlyOnce(t, map[int32]int64{}, ends)
}

func partitionsOf(r *Reader) map[TopicPartition]*partition {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[TopicPartition]*partition, len(r.parts))
	for tp, p := range r.parts {
		out[tp] = p
	}
	return out
}

// stable waits until the readers own every partition between them and their
// rebalance counters have not moved for a second.
func stable(t *testing.T, rs ...*Reader) {
	t.Helper()
	count := func() (owned int, rebalances int64) {
		for _, r := range rs {
			owned += len(r.Assigned())
			rebalances += r.Stats().Rebalances
		}
		return owned, rebalances
	}
	_, last := count()
	since := time.Now()
	waitFor(t, 30*time.Second, "a stable assignment", func() bool {
		owned, n := count()
		if n != last {
			last, since = n, time.Now()
		}
		return owned == 6 && time.Since(since) > time.Second
	})
}

func TestTheConsumerGroupProtocolSharesPartitionsExactlyOnce(t *testing.T) {
	c := newCluster(t, 6)
	adm := admin(t, c)
	produce(t, c, 3000)
	s := newStore()
	s.delay = time.Millisecond
	next := func(c *Config) { c.GroupProtocol = GroupProtocolConsumer }
	a := start(t, c, "g", s, next)
	waitFor(t, 20*time.Second, "first writes", func() bool { s.mu.Lock(); defer s.mu.Unlock(); return s.writes > 0 })
	b := start(t, c, "g", s, next)
	produce(t, c, 3000)
	waitFor(t, 30*time.Second, "both members own partitions", func() bool {
		return len(a.r.Assigned()) > 0 && len(b.r.Assigned()) > 0
	})
	a.stop()
	produce(t, c, 2000)
	ends := endOffsets(t, adm)
	waitFor(t, 30*time.Second, "catch up after the leave", func() bool { return s.caughtUp(ends) })
	b.stop()
	s.checkExactlyOnce(t, map[int32]int64{}, ends)
}

func TestGroupProtocolAndInstanceIDAreValidated(t *testing.T) {
	base := Config{Brokers: []string{"127.0.0.1:9092"}, Group: "g", Topics: []string{"t"}}
	for _, tc := range []struct {
		name  string
		tweak func(*Config)
		want  string
	}{
		{"an unknown protocol", func(c *Config) { c.GroupProtocol = 7 }, "reader.Config.GroupProtocol: GroupProtocol(7) is not"},
		{"consumer with round-robin", func(c *Config) { c.GroupProtocol, c.Balancers = GroupProtocolConsumer, []Balancer{RoundRobin} }, "reader.Config.Balancers: \"round-robin\" with reader.Config.GroupProtocol consumer"},
		{"an instance id with a newline", func(c *Config) { c.InstanceID = "a\nb" }, "reader.Config.InstanceID: "},
		{"a negative budget", func(c *Config) { c.MaxBufferedBytes = -1 }, "reader.Config.MaxBufferedBytes: -1: "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := base
			tc.tweak(&cfg)
			err := cfg.Validate()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Validate() = %v, want an error naming %s", err, tc.want)
			}
		})
	}
	for _, ok := range []func(*Config){
		func(c *Config) { c.GroupProtocol = GroupProtocolConsumer },
		func(c *Config) { c.GroupProtocol, c.Balancers = GroupProtocolConsumer, []Balancer{Range} },
		func(c *Config) { c.InstanceID = "pod-7" },
	} {
		cfg := base
		ok(&cfg)
		if err := cfg.Validate(); err != nil {
			t.Errorf("Validate(%+v) = %v, want nil", cfg, err)
		}
	}
}

func sorted(tps []TopicPartition) []TopicPartition {
	slices.SortFunc(tps, func(a, b TopicPartition) int {
		if a.Topic != b.Topic {
			if a.Topic < b.Topic {
				return -1
			}
			return 1
		}
		return int(a.Partition - b.Partition)
	})
	return tps
}

func TestAPartitionThatReachedTheEndWritesWithoutWaitingForTheBatchToFill(t *testing.T) {
	for _, waitAtEnd := range []bool{false, true} {
		t.Run(map[bool]string{false: "by default", true: "unless told to wait"}[waitAtEnd], func(t *testing.T) {
			c := newCluster(t, 1)
			adm := admin(t, c)
			s := newStore()
			x := start(t, c, "g", s, func(c *Config) {
				c.BatchMaxWait, c.BatchMaxRows, c.WaitAtEnd = 4*time.Second, 100000, waitAtEnd
			})
			waitFor(t, 20*time.Second, "the assignment", func() bool { return len(x.r.Assigned()) == 1 })
			produce(t, c, 50)
			ends := endOffsets(t, adm)
			produced := time.Now()
			waitFor(t, 20*time.Second, "the write", func() bool { return s.caughtUp(ends) })
			took := time.Since(produced)
			if !waitAtEnd && took > 2*time.Second {
				t.Errorf("50 records at the end of the partition were written after %v: they waited for a batch that could not fill", took)
			}
			if waitAtEnd && took < 3*time.Second {
				t.Errorf("with WaitAtEnd the records were written after %v, before --batch-max-wait (4s)", took)
			}
			x.stop()
			s.checkExactlyOnce(t, map[int32]int64{}, ends)
		})
	}
}

func TestPartitionsPausedByTheirQueueResumeWhileTheBudgetIsHalfFull(t *testing.T) {
	// Queues fill to their capacity (the per-partition pause) while the
	// partitions together hold more than half the budget: the write that
	// empties a queue must not leave its partition paused forever.
	const partitions = 8
	c := newCluster(t, partitions)
	adm := admin(t, c)
	produce(t, c, 40000) // about 20 bytes of key and value each
	s := newStore()
	s.delay = time.Millisecond
	x := start(t, c, "g", s, func(c *Config) {
		c.BatchMaxRows, c.QueueCapacity = 100, 200
		// Full queues hold more than half of it, as the budget counts
		// records: about 20 bytes of key and value plus recordOverhead.
		c.MaxBufferedBytes = partitions * 200 * (20 + recordOverhead) * 3 / 4
	})
	ends := endOffsets(t, adm)
	waitFor(t, 60*time.Second, "catch up", func() bool { return s.caughtUp(ends) })
	x.stop()
	s.checkExactlyOnce(t, map[int32]int64{}, ends)
}

func TestOverTheBudgetEveryPartitionStopsFetchingNotOnlyTheOnesWithRecords(t *testing.T) {
	// Small fetches bring a few partitions at a time; if only partitions
	// that received records paused, each of the 200 would bring its whole
	// backlog once before pausing: 40 times the budget.
	const partitions = 200
	c := newCluster(t, partitions)
	adm := admin(t, c)
	payload := produce(t, c, 40000) // 200 records of about 20 bytes per partition
	s := newStore()
	s.delay = 20 * time.Millisecond
	const budget, fetchMax = 8 << 10, 4 << 10
	var peak atomic.Int64
	x := start(t, c, "g", s, func(c *Config) {
		c.MaxBufferedBytes, c.FetchMaxBytes, c.FetchMaxPartitionBytes = budget, fetchMax, fetchMax
	})
	ends := endOffsets(t, adm)
	waitFor(t, 120*time.Second, "catch up", func() bool {
		if b := x.r.buffered.Load(); b > peak.Load() {
			peak.Store(b)
		}
		return s.caughtUp(ends)
	})
	x.stop()
	s.checkExactlyOnce(t, map[int32]int64{}, ends)
	if p, limit := peak.Load(), budget+2*fetchMemory(fetchMax, payload, 40000); p > limit {
		t.Errorf("peak buffered %d bytes over %d partitions, want at most the budget %d plus a fetch or two (%d)", p, partitions, budget, limit-budget)
	}
	t.Logf("peak buffered %d bytes with a budget of %d over %d partitions", peak.Load(), budget, partitions)
}

// fetchMemory is what the budget counts for one fetch of fetchMax bytes of
// n records of payload key and value bytes in all: their keys and values
// and, for each, recordOverhead (a fetch of small records holds many).
func fetchMemory(fetchMax, payload, n int) int64 {
	perRecord := float64(payload) / float64(n)
	return int64(float64(fetchMax) * (perRecord + recordOverhead) / perRecord)
}

// fetchedRecords counts the records the client fetched and decoded.
type fetchedRecords struct{ n *atomic.Int64 }

func (h fetchedRecords) OnFetchBatchRead(_ kgo.BrokerMetadata, _ string, _ int32, m kgo.FetchBatchMetrics) {
	h.n.Add(int64(m.NumRecords))
}

func TestOverTheBudgetFetchedRecordsAreKeptNotFetchedAgain(t *testing.T) {
	// The budget, not the partitions' queues, holds the reader back.
	// Pausing every partition made the client drop the records it had
	// fetched for them and fetch them again after the resume; waiting to
	// poll keeps them, so each record is fetched once.
	const partitions, records = 8, 40000
	c := newCluster(t, partitions)
	adm := admin(t, c)
	produce(t, c, records)
	s := newStore()
	s.delay = 2 * time.Millisecond
	var fetched atomic.Int64
	x := start(t, c, "g", s, func(c *Config) {
		c.MaxBufferedBytes, c.FetchMaxBytes = 64<<10, 16<<10
		c.BatchMaxRows, c.QueueCapacity = 200, records // a queue never fills
		c.ExtraOpts = append(c.ExtraOpts, kgo.WithHooks(fetchedRecords{&fetched}))
	})
	ends := endOffsets(t, adm)
	waited := false
	waitFor(t, 90*time.Second, "catch up", func() bool {
		waited = waited || x.r.overBudget.Load()
		return s.caughtUp(ends)
	})
	x.stop()
	s.checkExactlyOnce(t, map[int32]int64{}, ends)
	if !waited {
		t.Fatal("the budget never held the reader back: the test checks nothing")
	}
	if f := fetched.Load(); f != records {
		t.Errorf("the client fetched %d records for %d produced: %d fetched more than once", f, records, f-records)
	}
}
