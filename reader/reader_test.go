package reader

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafka2pg/kafka2pg/stream"
)

// These tests drive the reader against kfake with an in-memory Store that
// keeps the contract of package offsets (the epoch fence and the
// continuity guard: the stored position must be the one the writer left);
// offsets is the reference, tested against a real Postgres, and this
// double must follow it.

const topic = "events"

type store struct {
	mu      sync.Mutex
	epoch   map[int32]int64
	next    map[int32]int64
	leader  map[int32]int32   // the leader epoch of the last record written
	rows    map[int32][]int64 // offsets written, in write order
	delay   time.Duration
	writes  int
	fenced  int
	failNth int   // the failNth write fails with a connection-like error (0: never)
	stopAt  int64 // a record at this offset stops the partition (0: never)
	// malformed says what was wrong with the first batch whose records
	// did not match its span (another partition's record, an offset out of
	// order or outside [FirstOffset, NextOffset)).
	malformed string
}

func newStore() *store {
	return &store{epoch: map[int32]int64{}, next: map[int32]int64{}, leader: map[int32]int32{}, rows: map[int32][]int64{}}
}

func (s *store) Claim(_ context.Context, _ string, ps []int32) (map[int32]stream.Position, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[int32]stream.Position{}
	for _, p := range ps {
		s.epoch[p]++
		next, ok := s.next[p]
		if !ok {
			next = -1
		}
		leader, ok := s.leader[p]
		if !ok {
			leader = -1
		}
		out[p] = stream.Position{Epoch: s.epoch[p], NextOffset: next, LeaderEpoch: leader}
	}
	return out, nil
}

func (s *store) Write(ctx context.Context, b *stream.Batch) error {
	if s.delay > 0 {
		select {
		case <-time.After(s.delay):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.writes++
	if s.failNth > 0 && s.writes == s.failNth {
		return fmt.Errorf("write: connection reset (injected)")
	}
	next, ok := s.next[b.Partition]
	if !ok {
		next = -1
	}
	if s.epoch[b.Partition] != b.Epoch || next != b.PrevOffset {
		s.fenced++
		return &stream.FencedError{Topic: b.Topic, Partition: b.Partition, Epoch: b.Epoch, FirstOffset: b.FirstOffset,
			PrevOffset: b.PrevOffset, StoredEpoch: s.epoch[b.Partition], StoredOffset: next}
	}
	prev := b.FirstOffset - 1
	for _, r := range b.Records {
		if s.malformed == "" && (r.Topic != b.Topic || r.Partition != b.Partition || r.Offset <= prev || r.Offset >= b.NextOffset) {
			s.malformed = fmt.Sprintf("batch %s/%d [%d, %d) holds record %s/%d@%d", b.Topic, b.Partition, b.FirstOffset, b.NextOffset, r.Topic, r.Partition, r.Offset)
		}
		prev = r.Offset
	}
	for _, r := range b.Records {
		if s.stopAt > 0 && r.Offset == s.stopAt {
			s.next[b.Partition] = r.Offset
			return &stream.StopError{Topic: b.Topic, Partition: b.Partition, Offset: r.Offset, Kind: "invalid_value", Err: errors.New("injected")}
		}
		s.rows[b.Partition] = append(s.rows[b.Partition], r.Offset)
	}
	s.next[b.Partition] = b.NextOffset
	s.leader[b.Partition] = b.LeaderEpoch
	return nil
}

func (s *store) Positions(_ context.Context, _ string) (map[int32]stream.Position, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[int32]stream.Position{}
	for p, e := range s.epoch {
		next, ok := s.next[p]
		if !ok {
			next = -1
		}
		out[p] = stream.Position{Epoch: e, NextOffset: next, LeaderEpoch: -1}
	}
	return out, nil
}

// loseCommits is a lossy failover of the store: the commits after
// next_offset to are gone, rows and position, while the epoch stays.
func (s *store) loseCommits(p int32, to int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.next[p], s.leader[p] = to, -1
	kept := s.rows[p][:0]
	for _, o := range s.rows[p] {
		if o < to {
			kept = append(kept, o)
		}
	}
	s.rows[p] = kept
}

func (s *store) caughtUp(ends map[int32]int64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for p, end := range ends {
		if end > 0 && s.next[p] < end {
			return false
		}
	}
	return true
}

// checkExactlyOnce: every offset in [start, end) of each partition written
// once, in order.
func (s *store) checkExactlyOnce(t *testing.T, starts, ends map[int32]int64) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.malformed != "" {
		t.Errorf("a batch's records did not match its span: %s", s.malformed)
	}
	for p, end := range ends {
		rows := s.rows[p]
		if int64(len(rows)) != end-starts[p] {
			t.Errorf("partition %d: %d rows, want %d", p, len(rows), end-starts[p])
		}
		for i, o := range rows {
			if o != starts[p]+int64(i) {
				t.Errorf("partition %d: row %d is offset %d, want %d (a duplicate or a gap)", p, i, o, starts[p]+int64(i))
				break
			}
		}
	}
}

func newCluster(t *testing.T, partitions int32) *kfake.Cluster {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(partitions, topic))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// produce writes n small records and returns their key and value bytes.
func produce(t *testing.T, c *kfake.Cluster, n int) (payload int) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.DefaultProduceTopic(topic))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	rs := make([]*kgo.Record, n)
	for i := range rs {
		rs[i] = &kgo.Record{Key: fmt.Appendf(nil, "k%d", i), Value: fmt.Appendf(nil, `{"i":%d}`, i)}
		payload += len(rs[i].Key) + len(rs[i].Value)
	}
	if err := cl.ProduceSync(context.Background(), rs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	return payload
}

func admin(t *testing.T, c *kfake.Cluster) *kadm.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return kadm.NewClient(cl)
}

func endOffsets(t *testing.T, adm *kadm.Client) map[int32]int64 {
	t.Helper()
	lo, err := adm.ListEndOffsets(context.Background(), topic)
	if err != nil {
		t.Fatal(err)
	}
	out := map[int32]int64{}
	lo.Each(func(o kadm.ListedOffset) { out[o.Partition] = o.Offset })
	return out
}

func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

type running struct {
	r    *Reader
	stop func()
}

func start(t *testing.T, c *kfake.Cluster, group string, s Store, tweak func(*Config)) *running {
	t.Helper()
	cfg := Config{
		Brokers: c.ListenAddrs(), Group: group, Topics: []string{topic},
		FetchMaxWait: 100 * time.Millisecond, HeartbeatInterval: 100 * time.Millisecond,
		CommitInterval: 50 * time.Millisecond, BatchMaxRows: 300, BatchMaxWait: 20 * time.Millisecond,
		RetryBackoffMax: 200 * time.Millisecond,
	}
	if tweak != nil {
		tweak(&cfg)
	}
	r, err := New(cfg, s)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = r.Run(ctx) }()
	var once sync.Once
	x := &running{r: r, stop: func() {
		once.Do(func() {
			cancel()
			<-done
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if err := r.Shutdown(ctx); err != nil {
				t.Errorf("Shutdown: %v", err)
			}
		})
	}}
	t.Cleanup(x.stop)
	return x
}

func TestStoredPositionWinsOverTheKafkaCommit(t *testing.T) {
	c := newCluster(t, 2)
	produce(t, c, 2000)
	adm := admin(t, c)
	s := newStore()
	s.next[0] = 100 // Postgres says partition 0 resumes at 100
	off := make(kadm.Offsets)
	off.AddOffset(topic, 0, 500, -1) // a stale Kafka commit says 500
	off.AddOffset(topic, 1, 50, -1)
	if err := adm.CommitAllOffsets(context.Background(), "g", off); err != nil {
		t.Fatal(err)
	}
	x := start(t, c, "g", s, func(c *Config) { c.Start = StartPolicy{Kind: StartCommitted} })
	ends := endOffsets(t, adm)
	waitFor(t, 20*time.Second, "catch up", func() bool { return s.caughtUp(ends) })
	x.stop()
	// Partition 1 has nothing stored: the committed policy adopts Kafka's 50.
	s.checkExactlyOnce(t, map[int32]int64{0: 100, 1: 50}, ends)
	fo, err := adm.FetchOffsets(context.Background(), "g")
	if err != nil {
		t.Fatal(err)
	}
	for p, end := range ends {
		if o, ok := fo.Lookup(topic, p); !ok || o.At != end {
			t.Errorf("Kafka commit of partition %d = %+v, want the durable %d", p, o, end)
		}
	}
}

func TestRebalancesKeepEveryOffsetOnce(t *testing.T) {
	c := newCluster(t, 6)
	adm := admin(t, c)
	produce(t, c, 3000)
	s := newStore()
	s.delay = time.Millisecond
	a := start(t, c, "g", s, nil)
	waitFor(t, 10*time.Second, "first writes", func() bool { s.mu.Lock(); defer s.mu.Unlock(); return s.writes > 0 })
	b := start(t, c, "g", s, nil)
	produce(t, c, 3000)
	waitFor(t, 20*time.Second, "both members own partitions", func() bool {
		return len(a.r.Assigned()) > 0 && len(b.r.Assigned()) > 0
	})
	a.stop() // revoke: flush and commit; b takes everything
	produce(t, c, 2000)
	ends := endOffsets(t, adm)
	waitFor(t, 20*time.Second, "catch up after the leave", func() bool { return s.caughtUp(ends) })
	b.stop()
	s.checkExactlyOnce(t, map[int32]int64{}, ends)
	if lags, err := adm.Lag(context.Background(), "g"); err != nil || lags["g"].Lag.Total() != 0 {
		t.Errorf("group lag after a clean stop = %v (%v), want 0", lags["g"].Lag.Total(), err)
	}
}

func TestAFencedPartitionReclaimsAndResumes(t *testing.T) {
	c := newCluster(t, 2)
	adm := admin(t, c)
	produce(t, c, 4000)
	s := newStore()
	s.delay = 2 * time.Millisecond
	x := start(t, c, "g", s, nil)
	waitFor(t, 10*time.Second, "first writes", func() bool { s.mu.Lock(); defer s.mu.Unlock(); return len(s.rows[0]) > 0 })
	// An operator (or a zombie's claim) bumps the epoch under the reader.
	if _, err := s.Claim(context.Background(), topic, []int32{0}); err != nil {
		t.Fatal(err)
	}
	ends := endOffsets(t, adm)
	waitFor(t, 30*time.Second, "catch up after the fence", func() bool { return s.caughtUp(ends) })
	x.stop()
	s.checkExactlyOnce(t, map[int32]int64{}, ends)
	if st := x.r.Stats(); st.Fenced == 0 {
		t.Errorf("stats = %+v, want a fenced write counted", st)
	}
}

func TestAFailedWriteReReadsTheStoreInsteadOfRetryingBlindly(t *testing.T) {
	c := newCluster(t, 1)
	adm := admin(t, c)
	produce(t, c, 2000)
	s := newStore()
	s.failNth = 2
	x := start(t, c, "g", s, nil)
	ends := endOffsets(t, adm)
	waitFor(t, 20*time.Second, "catch up after the failure", func() bool { return s.caughtUp(ends) })
	x.stop()
	s.checkExactlyOnce(t, map[int32]int64{}, ends)
	if st := x.r.Stats(); st.WriteErrors != 1 {
		t.Errorf("write errors = %d, want 1", st.WriteErrors)
	}
}

func TestBackpressurePausesFetchingAndLosesNothing(t *testing.T) {
	c := newCluster(t, 2)
	adm := admin(t, c)
	produce(t, c, 20000)
	// Every group commit fails meanwhile: progress must not depend on them.
	h := c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.OffsetCommit}, Err: kerr.RebalanceInProgress, Count: -1})
	s := newStore()
	s.delay = 5 * time.Millisecond
	x := start(t, c, "g", s, func(c *Config) { c.BatchMaxRows, c.QueueCapacity = 100, 400 })
	ends := endOffsets(t, adm)
	sawPause := false
	waitFor(t, 60*time.Second, "catch up", func() bool {
		if len(x.r.Client().PauseFetchPartitions(nil)) > 0 {
			sawPause = true
		}
		return s.caughtUp(ends)
	})
	if !sawPause {
		t.Error("fetching never paused although the queue capacity is far below the backlog")
	}
	if h.Hits() == 0 {
		t.Error("no group commit was attempted")
	}
	h.Remove()
	x.stop()
	s.checkExactlyOnce(t, map[int32]int64{}, ends)
}

func TestTransactionMarkersAdvanceTheDurableOffsetToTheEnd(t *testing.T) {
	c := newCluster(t, 1)
	adm := admin(t, c)
	prod, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.DefaultProduceTopic(topic), kgo.TransactionalID("tx-test"))
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	ctx := context.Background()
	for i, commit := range []bool{true, false, true} {
		if err := prod.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for j := range 10 {
			if err := prod.ProduceSync(ctx, &kgo.Record{Value: fmt.Appendf(nil, `{"tx":%d,"j":%d}`, i, j)}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
		if err := prod.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
			t.Fatal(err)
		}
	}
	s := newStore()
	x := start(t, c, "g", s, nil)
	ends := endOffsets(t, adm) // 3 × (10 records + 1 marker) = 33
	if ends[0] != 33 {
		t.Fatalf("end offset = %d, want 33", ends[0])
	}
	waitFor(t, 20*time.Second, "the durable offset reaching the end, past the last marker", func() bool { return s.caughtUp(ends) })
	x.stop()
	s.mu.Lock()
	defer s.mu.Unlock()
	want := []int64{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31}
	if fmt.Sprint(s.rows[0]) != fmt.Sprint(want) {
		t.Errorf("written offsets = %v, want %v (the aborted transaction skipped)", s.rows[0], want)
	}
}

func TestShutdownFlushesQueuedRecordsAndMirrorsTheirOffsets(t *testing.T) {
	c := newCluster(t, 2)
	adm := admin(t, c)
	produce(t, c, 4000)
	s := newStore()
	s.delay = 10 * time.Millisecond // records pile up in the queues
	x := start(t, c, "g", s, func(c *Config) { c.BatchMaxRows, c.QueueCapacity, c.CommitInterval = 100, 2000, time.Hour })
	waitFor(t, 10*time.Second, "records queued", func() bool {
		x.r.mu.Lock()
		defer x.r.mu.Unlock()
		queued := 0
		for _, p := range x.r.parts {
			p.mu.Lock()
			queued += len(p.queue)
			p.mu.Unlock()
		}
		return queued > 500
	})
	x.stop() // the revoke flushes the queues; the commit must include those batches
	fo, err := adm.FetchOffsets(context.Background(), "g")
	if err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for p, next := range s.next {
		if o, ok := fo.Lookup(topic, p); !ok || o.At != next {
			t.Errorf("partition %d: Kafka commit %+v, want the durable %d", p, o, next)
		}
	}
	if len(s.next) == 0 {
		t.Fatal("nothing was written")
	}
}

func TestSettledOnlyAfterTheAssignmentIsClaimed(t *testing.T) {
	c := newCluster(t, 3)
	s := newStore()
	x := start(t, c, "g", s, nil)
	select {
	case <-x.r.Settled():
	case <-time.After(10 * time.Second):
		t.Fatal("never settled")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.epoch) != 3 {
		t.Errorf("settled with %d partitions claimed, want all 3", len(s.epoch))
	}
}

func TestABadRecordStopsThePartitionAndMirrorsWhatWasWritten(t *testing.T) {
	c := newCluster(t, 1)
	adm := admin(t, c)
	produce(t, c, 1000)
	s := newStore()
	s.stopAt = 437
	x := start(t, c, "g", s, nil)
	var why []string
	waitFor(t, 20*time.Second, "the partition to stop", func() bool { why = x.r.Stats().Stopped; return len(why) > 0 })
	if !strings.Contains(why[0], "events/0 offset 437") || !strings.Contains(why[0], "injected") {
		t.Errorf("stop reason = %q, want the StopError's sentence naming the record and why", why[0])
	}
	time.Sleep(200 * time.Millisecond) // stopped means stopped: nothing more is written
	x.stop()
	s.checkExactlyOnce(t, map[int32]int64{}, map[int32]int64{0: 437})
	fo, err := adm.FetchOffsets(context.Background(), "g")
	if err != nil {
		t.Fatal(err)
	}
	if o, ok := fo.Lookup(topic, 0); !ok || o.At != 437 {
		t.Errorf("Kafka commit = %+v, want 437, the durable position at the stop", o)
	}
}

func TestAnIdlePartitionFencedInPostgresReclaimsAndSeeks(t *testing.T) {
	c := newCluster(t, 1)
	adm := admin(t, c)
	produce(t, c, 500)
	s := newStore()
	x := start(t, c, "g", s, func(c *Config) { c.FenceCheckInterval = 50 * time.Millisecond })
	ends := endOffsets(t, adm)
	waitFor(t, 10*time.Second, "catch up", func() bool { return s.caughtUp(ends) })
	// Reset: move the stored offset back to 100 and bump the epoch, as
	// `offsets reset` does; no new record arrives to provoke a write.
	s.mu.Lock()
	s.next[0], s.epoch[0] = 100, s.epoch[0]+1
	s.rows[0] = s.rows[0][:100]
	s.mu.Unlock()
	waitFor(t, 20*time.Second, "re-ingestion from offset 100", func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.next[0] == 500
	})
	x.stop()
	s.checkExactlyOnce(t, map[int32]int64{}, ends)
}

// A lossy failover of Postgres while the partitions are idle: the stored
// positions move back under the owner's own epoch, with their rows. The
// fence check (or CheckPositions, when a new connection finds another
// server) must notice, re-claim and read the lost records again; a guard
// of "not past the batch" would have let the next write skip them.
func TestAPositionThatMovedBackWhileIdleIsReadAgain(t *testing.T) {
	for _, tc := range []struct {
		name  string
		check time.Duration // FenceCheckInterval
		nudge bool          // call CheckPositions
	}{
		{"found by the fence check", 50 * time.Millisecond, false},
		{"found at once on CheckPositions", time.Hour, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCluster(t, 2)
			adm := admin(t, c)
			produce(t, c, 1000)
			s := newStore()
			x := start(t, c, "g", s, func(c *Config) { c.FenceCheckInterval = tc.check })
			ends := endOffsets(t, adm)
			waitFor(t, 10*time.Second, "catch up", func() bool { return s.caughtUp(ends) })
			s.loseCommits(0, ends[0]/3)
			s.loseCommits(1, 0)
			if tc.nudge {
				x.r.CheckPositions()
			}
			waitFor(t, 20*time.Second, "the lost records written again", func() bool { return s.caughtUp(ends) })
			if n := x.r.Stats().PositionsMovedBack; n != 2 {
				t.Errorf("PositionsMovedBack = %d, want 2", n)
			}
			x.stop()
			s.checkExactlyOnce(t, map[int32]int64{}, ends)
		})
	}
}

// The same loss while records flow: the next write finds the position
// moved and re-reads from it at once, without the wait a fenced owner
// makes for a zombie.
func TestAPositionThatMovedBackUnderAWriteIsReadAgain(t *testing.T) {
	c := newCluster(t, 1)
	adm := admin(t, c)
	produce(t, c, 600)
	s := newStore()
	x := start(t, c, "g", s, func(c *Config) { c.FenceCheckInterval = time.Hour })
	waitFor(t, 10*time.Second, "catch up", func() bool { return s.caughtUp(endOffsets(t, adm)) })
	s.loseCommits(0, 250)
	produce(t, c, 400)
	ends := endOffsets(t, adm)
	waitFor(t, 20*time.Second, "every record written", func() bool { return s.caughtUp(ends) })
	if n := x.r.Stats().PositionsMovedBack; n != 1 {
		t.Errorf("PositionsMovedBack = %d, want 1", n)
	}
	if n := x.r.Stats().Fenced; n != 0 {
		t.Errorf("Fenced = %d, want 0: a position that moved is not another owner", n)
	}
	x.stop()
	s.checkExactlyOnce(t, map[int32]int64{}, ends)
}
