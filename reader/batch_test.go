package reader

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafka2pg/kafka2pg/stream"
)

// queued builds a claimed partition whose queue holds records at the given
// offsets; offsets in markers are transaction markers.
func queued(t *testing.T, cfg Config, valueSize int, offsets []int64, markers map[int64]bool) *partition {
	t.Helper()
	cfg.Brokers, cfg.Group, cfg.Topics = []string{"127.0.0.1:1"}, "g", []string{"t"}
	r := &Reader{cfg: cfg.withDefaults()}
	p := newPartition(r, TopicPartition{"t", 0})
	t.Cleanup(p.cancel)
	p.setClaim(stream.Position{Epoch: 7, NextOffset: -1})
	var rs []*kgo.Record
	for _, o := range offsets {
		rec := &kgo.Record{Topic: "t", Offset: o, Value: make([]byte, valueSize), LeaderEpoch: 3}
		if markers[o] {
			rec.Attrs = kgo.NewRecordAttrs(kgo.RecordAttrsOpts{Control: true, Transactional: true})
			rec.Value = nil
		}
		rs = append(rs, rec)
	}
	p.enqueue(rs)
	return p
}

// take cuts the next batch as next does: under the lock, then the copy.
func take(p *partition) *stream.Batch {
	p.mu.Lock()
	b, taken, rows := p.takeLocked()
	p.mu.Unlock()
	p.fill(b, taken, rows)
	return b
}

func offsets(from, to int64) []int64 {
	var out []int64
	for o := from; o < to; o++ {
		out = append(out, o)
	}
	return out
}

func TestABatchStopsAtMaxRowsAndCarriesTheSpan(t *testing.T) {
	p := queued(t, Config{BatchMaxRows: 4}, 10, offsets(10, 20), nil)
	b := take(p)
	if len(b.Records) != 4 || b.FirstOffset != 10 || b.NextOffset != 14 || b.Epoch != 7 || b.LeaderEpoch != 3 {
		t.Fatalf("batch = %d records [%d, %d) epoch %d, want 4 records [10, 14) epoch 7", len(b.Records), b.FirstOffset, b.NextOffset, b.Epoch)
	}
	if p.queueRows != 6 || len(p.queue) != 6 {
		t.Errorf("left in the queue: %d rows, %d records; want 6", p.queueRows, len(p.queue))
	}
}

func TestABatchStopsAtMaxBytes(t *testing.T) {
	p := queued(t, Config{BatchMaxRows: 1000, BatchMaxBytes: 250}, 100, offsets(0, 10), nil)
	b := take(p)
	if len(b.Records) != 3 || b.NextOffset != 3 {
		t.Fatalf("batch of 100-byte records under a 250-byte limit has %d records up to %d, want 3 (the one that crosses the limit included)", len(b.Records), b.NextOffset)
	}
	bytes := 0
	for _, r := range b.Records {
		bytes += len(r.Key) + len(r.Value)
	}
	if p.queueBytes != 700 || bytes != 300 || p.inflight != 300+3*recordOverhead {
		t.Errorf("queue bytes = %d, batch bytes %d, in flight %d; want 700, 300 and %d", p.queueBytes, bytes, p.inflight, 300+3*recordOverhead)
	}
}

func TestAnOversizedRecordStillMakesABatch(t *testing.T) {
	p := queued(t, Config{BatchMaxRows: 10, BatchMaxBytes: 10}, 1000, offsets(0, 2), nil)
	if b := take(p); len(b.Records) != 1 {
		t.Fatalf("a record above --batch-max-bytes must be written alone, got %d records", len(b.Records))
	}
}

func TestMarkersWidenTheSpanButAreNotRows(t *testing.T) {
	// offsets 0-2 data, 3 a commit marker, 4-5 data, 6 a marker
	p := queued(t, Config{BatchMaxRows: 100}, 10, offsets(0, 7), map[int64]bool{3: true, 6: true})
	b := take(p)
	if len(b.Records) != 5 || b.FirstOffset != 0 || b.NextOffset != 7 {
		t.Fatalf("batch = %d records [%d, %d), want 5 records spanning [0, 7)", len(b.Records), b.FirstOffset, b.NextOffset)
	}
	var got []int64
	for _, r := range b.Records {
		got = append(got, r.Offset)
	}
	if fmt.Sprint(got) != "[0 1 2 4 5]" {
		t.Errorf("records at offsets %v, want [0 1 2 4 5] (the markers at 3 and 6 left out)", got)
	}
}

// A batch's records are the fetched ones in stream's form, every field
// kept, the key, value and header values shared rather than copied; once
// written they are given back cleared, holding no record's memory.
func TestABatchCarriesEveryFieldOfItsRecordsAndReleaseClearsThem(t *testing.T) {
	cfg := Config{Brokers: []string{"127.0.0.1:1"}, Group: "g", Topics: []string{"t"}, BatchMaxRows: 10}
	r := &Reader{cfg: cfg.withDefaults()}
	p := newPartition(r, TopicPartition{"t", 2})
	t.Cleanup(p.cancel)
	p.setClaim(stream.Position{Epoch: 1, NextOffset: -1})
	ts := time.UnixMilli(1764495120123)
	logAppend := kgo.NewRecordAttrs(kgo.RecordAttrsOpts{TimestampType: 1})
	fetched := []*kgo.Record{
		{Topic: "t", Partition: 2, Offset: 40, Timestamp: ts, Key: []byte("k1"), Value: []byte(`{"a":1}`),
			Headers: []kgo.RecordHeader{{Key: "trace", Value: []byte("x")}, {Key: "src", Value: nil}}},
		{Topic: "t", Partition: 2, Offset: 41, Timestamp: ts.Add(time.Second), Attrs: logAppend, Value: nil},
	}
	p.enqueue(fetched)
	b := take(p)
	want := []stream.Record{
		{Topic: "t", Partition: 2, Offset: 40, Timestamp: ts, TimestampType: stream.TimestampCreateTime, Key: []byte("k1"), Value: []byte(`{"a":1}`),
			Headers: []stream.Header{{Key: "trace", Value: []byte("x")}, {Key: "src"}}},
		{Topic: "t", Partition: 2, Offset: 41, Timestamp: ts.Add(time.Second), TimestampType: stream.TimestampLogAppendTime},
	}
	if !reflect.DeepEqual(b.Records, want) {
		t.Fatalf("records = %+v\nwant %+v", b.Records, want)
	}
	if &b.Records[0].Value[0] != &fetched[0].Value[0] {
		t.Error("the value was copied; a batch shares the fetched bytes")
	}
	recs := b.Records
	p.release()
	if p.recs != nil || recs[0].Value != nil || recs[0].Headers != nil || recs[1].Topic != "" {
		t.Errorf("after release the pooled records still hold %+v", recs)
	}
}

func TestRedeliveredRecordsBeforeThePositionAreDropped(t *testing.T) {
	p := queued(t, Config{}, 1, offsets(5, 8), nil)
	p.enqueue([]*kgo.Record{{Offset: 6}, {Offset: 7}, {Offset: 8}})
	var got []int64
	for _, r := range p.queue {
		got = append(got, r.Offset)
	}
	if fmt.Sprint(got) != "[5 6 7 8]" {
		t.Errorf("queue offsets = %v, want [5 6 7 8]", got)
	}
}

func TestQueueCapacityAsksToPauseOnce(t *testing.T) {
	p := queued(t, Config{BatchMaxRows: 10, QueueCapacity: 20}, 1, offsets(0, 15), nil)
	p.r.pausesDirty.Store(false)
	p.enqueue(recordsAt(15, 20))
	if !p.paused || !p.r.pausesDirty.Swap(false) {
		t.Fatalf("reaching the queue capacity must pause and ask the poll loop to reconcile (paused %v)", p.paused)
	}
	p.enqueue(recordsAt(20, 21))
	if p.r.pausesDirty.Load() {
		t.Error("an already paused partition must not ask again")
	}
}

func recordsAt(from, to int64) []*kgo.Record {
	var rs []*kgo.Record
	for o := from; o < to; o++ {
		rs = append(rs, &kgo.Record{Offset: o, Value: []byte("x")})
	}
	return rs
}

func TestNextWaitsForBatchMaxWaitWhenTheBatchIsNotFull(t *testing.T) {
	p := queued(t, Config{BatchMaxRows: 100, BatchMaxWait: 150 * time.Millisecond}, 1, offsets(0, 3), nil)
	start := time.Now()
	b, _, ok := p.next()
	if !ok || len(b.Records) != 3 {
		t.Fatalf("next = %v, %v", b, ok)
	}
	if waited := time.Since(start); waited < 100*time.Millisecond {
		t.Errorf("a partial batch was flushed after %v, before --batch-max-wait", waited)
	}
}

// At its end offset a partition writes at once, but at most one batch per
// BatchLinger: the second batch, at the end too, waits out the linger; with
// a negative BatchLinger (off) it does not.
func TestAtTheEndABatchIsTakenAtOnceButOncePerLinger(t *testing.T) {
	for _, linger := range []time.Duration{time.Second, -1} {
		p := queued(t, Config{BatchMaxRows: 100, BatchMaxWait: 10 * time.Second, BatchLinger: linger}, 1, offsets(0, 3), nil)
		p.logEnd = 3
		take := func() (int, time.Duration) {
			t.Helper()
			start := time.Now()
			b, _, ok := p.next()
			if !ok || b == nil {
				t.Fatalf("linger %v: next = %v, %v", linger, b, ok)
			}
			return len(b.Records), time.Since(start)
		}
		if n, waited := take(); n != 3 || waited > 500*time.Millisecond {
			t.Errorf("linger %v: the first batch at the end: %d records after %v, want 3 at once", linger, n, waited)
		}
		p.enqueue(recordsAt(3, 5))
		p.logEnd = 5
		n, waited := take()
		switch {
		case n != 2:
			t.Errorf("linger %v: the second batch has %d records, want 2", linger, n)
		case linger > 0 && waited < 800*time.Millisecond:
			t.Errorf("linger %v: the second batch at the end came %v after the first, want the linger", linger, waited)
		case linger < 0 && waited > 500*time.Millisecond:
			t.Errorf("linger off: the second batch at the end waited %v, want at once", waited)
		}
	}
}

// The client's paused set follows the partitions' own flags, whoever flipped
// them: the poll loop pauses the newly paused, resumes the others, and
// resumes a partition the client still holds paused that is no longer owned
// (the client keeps pauses across revocation).
func TestReconcilingMakesTheClientsPausesFollowThePartitionFlags(t *testing.T) {
	cl, err := kgo.NewClient(kgo.SeedBrokers("127.0.0.1:1"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	cfg := Config{Brokers: []string{"127.0.0.1:1"}, Group: "g", Topics: []string{"t"}}
	r := &Reader{cfg: cfg.withDefaults(), cl: cl, parts: map[TopicPartition]*partition{}}
	for n := range int32(4) {
		r.parts[TopicPartition{"t", n}] = newPartition(r, TopicPartition{"t", n})
	}
	cl.PauseFetchPartitions(map[string][]int32{"t": {1}, "gone": {9}}) // 1 left paused; gone/9 revoked while paused
	r.parts[TopicPartition{"t", 0}].paused = true
	r.parts[TopicPartition{"t", 2}].paused = true
	r.reconcilePauses()
	if got := fmt.Sprint(sorted(pausedIn(cl))); got != "[{t 0} {t 2}]" {
		t.Fatalf("client paused %s, want [{t 0} {t 2}]", got)
	}

	// A write resumes partition 2 from its own goroutine: only the flag
	// changes and the poll loop is told; the next round resumes it.
	p := r.parts[TopicPartition{"t", 2}]
	p.mu.Lock()
	p.setPausedLocked(false)
	p.mu.Unlock()
	r.pausesChanged()
	if !r.pausesDirty.Load() || !r.wakeDue {
		t.Fatal("a flag change must mark the pauses dirty and wake the next poll at once")
	}
	if r.pausesDirty.Swap(false) {
		r.reconcilePauses()
	}
	if got := fmt.Sprint(sorted(pausedIn(cl))); got != "[{t 0}]" {
		t.Fatalf("client paused %s after the resume, want [{t 0}]", got)
	}
}

func pausedIn(cl *kgo.Client) []TopicPartition {
	var out []TopicPartition
	for topic, ps := range cl.PauseFetchPartitions(nil) {
		for _, n := range ps {
			out = append(out, TopicPartition{topic, n})
		}
	}
	return out
}

// Cutting a batch costs allocations per batch (the Batch, and the records'
// slice when the pool has none), never per record: the copy into
// stream.Records writes into a reused slice.
func TestCuttingABatchAllocatesNothingPerRecord(t *testing.T) {
	allocs := func(n int) float64 {
		cfg := Config{Brokers: []string{"127.0.0.1:1"}, Group: "g", Topics: []string{"t"}, BatchMaxRows: n, QueueCapacity: 2 * n}
		r := &Reader{cfg: cfg.withDefaults()}
		p := newPartition(r, TopicPartition{"t", 0})
		t.Cleanup(p.cancel)
		p.setClaim(stream.Position{Epoch: 1, NextOffset: -1})
		fetched := make([]*kgo.Record, n)
		for i := range fetched {
			fetched[i] = &kgo.Record{Topic: "t", Offset: int64(i), Key: []byte("k"), Value: []byte(`{"n":1}`)}
		}
		queue := make([]*kgo.Record, n)
		return testing.AllocsPerRun(50, func() {
			copy(queue, fetched) // fill clears what it took
			p.mu.Lock()
			p.queue, p.queueRows, p.queueBytes = queue, n, 8*n
			p.mu.Unlock()
			b := take(p)
			if len(b.Records) != n {
				t.Fatalf("batch of %d records, want %d", len(b.Records), n)
			}
			p.release()
		})
	}
	small, large := allocs(10), allocs(2000)
	if large > small+1 {
		t.Fatalf("a batch of 2000 records took %.1f allocations, one of 10 took %.1f: the copy allocates per record", large, small)
	}
}
