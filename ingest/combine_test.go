package ingest_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kafka2pg/kafka2pg/decode"
	"github.com/kafka2pg/kafka2pg/ingest"
	"github.com/kafka2pg/kafka2pg/stream"
)

// writeConcurrently writes batches of size rows for each partition, every
// partition in its own goroutine like the reader's, and returns how many
// batches shared a transaction.
func writeConcurrently(t *testing.T, w *ingest.Writer, partitions int32, batches, size int64, value func(p int32, o int64) []byte) (combined int64) {
	t.Helper()
	ctx := context.Background()
	var wg sync.WaitGroup
	var shared atomic.Int64
	errs := make(chan error, partitions)
	tr := trace(w)
	for p := range partitions {
		pos := claim(t, w, p)
		wg.Go(func() {
			for first := int64(0); first < batches*size; first += size {
				b := &stream.Batch{Topic: topic, Partition: p, Epoch: pos.Epoch, PrevOffset: prevOf(first), FirstOffset: first, NextOffset: first + size, LeaderEpoch: -1, LogEndOffset: -1}
				for o := first; o < first+size; o++ {
					b.Records = append(b.Records, stream.Record{Topic: topic, Partition: p, Offset: o, Timestamp: time.Unix(1764495120, 0), Value: value(p, o)})
				}
				res, err := tr.write(ctx, w, b)
				if err != nil {
					errs <- fmt.Errorf("partition %d batch at %d: %w", p, first, err)
					return
				}
				if res.Combined > 1 {
					shared.Add(1)
				}
				if res.Rows+res.DeadLetters != int(size) {
					errs <- fmt.Errorf("partition %d batch at %d: %d rows and %d dead letters, want %d in all", p, first, res.Rows, res.DeadLetters, size)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	return shared.Load()
}

func TestCombinedBatchesWriteEveryOffsetOnce(t *testing.T) {
	t.Parallel()
	_, pool := newWriter(t, "g")
	w := writerWith(t, pool, ingest.Config{Group: "g", TableWriters: 1,
		Sinks: map[string]ingest.Sink{topic: {Table: decode.RawTable("public", topic, decode.ValueJSON), Mapper: decode.RawMapper{Format: decode.ValueJSON}}}})
	const partitions, batches, size = 16, 20, 50
	combined := writeConcurrently(t, w, partitions, batches, size, func(p int32, o int64) []byte {
		return fmt.Appendf(nil, `{"p":%d,"o":%d}`, p, o)
	})
	if combined == 0 {
		t.Error("16 partitions on one writer slot never shared a transaction")
	}
	if n := queryInt(t, pool, `SELECT count(*) FROM public.orders`); n != partitions*batches*size {
		t.Errorf("rows: %d, want %d", n, partitions*batches*size)
	}
	if n := queryInt(t, pool, `SELECT count(*) FROM (SELECT DISTINCT kafka_partition, kafka_offset FROM public.orders) d`); n != partitions*batches*size {
		t.Errorf("distinct (partition, offset): %d, want %d: a duplicate", n, partitions*batches*size)
	}
	if n := queryInt(t, pool, `SELECT count(*) FROM public.orders WHERE (value->>'p')::int <> kafka_partition OR (value->>'o')::bigint <> kafka_offset`); n != 0 {
		t.Errorf("%d rows carry another record's value", n)
	}
	if n := queryInt(t, pool, `SELECT count(*) FROM kafka2pg.offsets WHERE consumer_group = 'g' AND next_offset = $1`, int64(batches*size)); n != partitions {
		t.Errorf("%d partitions at next_offset %d, want %d", n, batches*size, partitions)
	}
	t.Logf("%d of %d batches shared a transaction", combined, partitions*batches)
}

func TestACombinedBatchWithABadRecordIsWrittenAloneAndDeadLettered(t *testing.T) {
	t.Parallel()
	_, pool := newWriter(t, "g")
	w := writerWith(t, pool, ingest.Config{Group: "g", TableWriters: 1,
		Sinks: map[string]ingest.Sink{topic: {Table: decode.RawTable("public", topic, decode.ValueJSON), Mapper: decode.RawMapper{Format: decode.ValueJSON}}}})
	const partitions, batches, size = 8, 10, 40
	writeConcurrently(t, w, partitions, batches, size, func(p int32, o int64) []byte {
		if o%97 == 13 {
			return []byte(`{"broken":`)
		}
		return fmt.Appendf(nil, `{"p":%d,"o":%d}`, p, o)
	})
	bad := int64(0)
	for o := int64(0); o < batches*size; o++ {
		if o%97 == 13 {
			bad++
		}
	}
	if n := queryInt(t, pool, `SELECT count(*) FROM kafka2pg.dead_letters WHERE error_kind = 'invalid_json'`); n != bad*partitions {
		t.Errorf("dead letters: %d, want %d", n, bad*partitions)
	}
	if n := queryInt(t, pool, `SELECT count(*) FROM public.orders`); n != partitions*(batches*size-bad) {
		t.Errorf("rows: %d, want %d", n, partitions*(batches*size-bad))
	}
}

func TestAFencedBatchDoesNotTakeItsCombinedNeighboursDown(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, pool := newWriter(t, "g")
	w := writerWith(t, pool, ingest.Config{Group: "g", TableWriters: 1,
		Sinks: map[string]ingest.Sink{topic: {Table: decode.RawTable("public", topic, decode.ValueJSON), Mapper: decode.RawMapper{Format: decode.ValueJSON}}}})
	// Hold the one slot with a transaction on partition 9, so the next
	// batches wait and are combined.
	tr := trace(w)
	slow := claim(t, w, 9)
	pos := map[int32]stream.Position{}
	for p := range int32(4) {
		pos[p] = claim(t, w, p)
	}
	// Partition 2 is taken over: its batch is fenced.
	other := writerWith(t, pool, ingest.Config{Group: "g",
		Sinks: map[string]ingest.Sink{topic: {Table: decode.RawTable("public", topic, decode.ValueJSON), Mapper: decode.RawMapper{Format: decode.ValueJSON}}}})
	if _, err := other.Claim(ctx, topic, []int32{2}); err != nil {
		t.Fatal(err)
	}
	lock, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lock.Exec(ctx, `LOCK TABLE public.orders IN SHARE MODE`); err != nil { // COPY waits for it
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := w.Write(ctx, batch(9, slow.Epoch, 0, 10)); err != nil {
			t.Errorf("partition 9: %v", err)
		}
	})
	poll(t, "partition 9's COPY waits for the lock", func() bool {
		return queryInt(t, pool, `SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE 'copy%'`) == 1
	})
	results := make([]error, 4)
	combined := make([]int, 4)
	for p := range int32(4) {
		wg.Go(func() {
			res, err := tr.write(ctx, w, batch(p, pos[p].Epoch, 0, 10))
			results[p], combined[p] = err, res.Combined
		})
	}
	poll(t, "four batches wait in the lane", func() bool { return ingest.LaneWaiting(w, `"public"."orders"`) == 4 })
	if err := lock.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	for p, err := range results {
		if p == 2 {
			if !errors.Is(err, stream.ErrFenced) {
				t.Errorf("partition 2: %v, want ErrFenced", err)
			}
			continue
		}
		if err != nil {
			t.Errorf("partition %d: %v", p, err)
		}
	}
	if n := queryInt(t, pool, `SELECT count(*) FROM public.orders`); n != 40 {
		t.Errorf("rows: %d, want 40 (partitions 0, 1, 3 and 9)", n)
	}
	if n := queryInt(t, pool, `SELECT count(*) FROM public.orders WHERE kafka_partition = 2`); n != 0 {
		t.Errorf("the fenced partition wrote %d rows", n)
	}
}

func poll(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
	}
}
