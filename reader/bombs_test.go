package reader

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafka2pg/kafka2pg/internal/kafkatest"
	"github.com/kafka2pg/kafka2pg/stream"
)

// bombBatch compresses values records of valueBytes zeros each with codec
// (zstd or gzip), as a stream that does not declare its size, as Java's
// producer writes them.
func bombBatch(t *testing.T, codec kgo.CompressionCodecType, values, valueBytes int) []byte {
	t.Helper()
	var out bytes.Buffer
	var w io.WriteCloser
	switch codec {
	case kgo.CodecZstd:
		enc, err := zstd.NewWriter(&out, zstd.WithEncoderLevel(zstd.SpeedFastest))
		if err != nil {
			t.Fatal(err)
		}
		w = enc
	case kgo.CodecGzip:
		enc, err := gzip.NewWriterLevel(&out, gzip.BestCompression)
		if err != nil {
			t.Fatal(err)
		}
		w = enc
	default:
		t.Fatalf("bombBatch: codec %d", codec)
	}
	zeros := make([]byte, 1<<20)
	for i := range values {
		if err := kafkatest.WriteRecord(w, i, nil, zeros, valueBytes, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

// unreadCounting is the test store, counting the offsets each partition
// wrote as unreadable.
type unreadCounting struct {
	*store
	mu     sync.Mutex
	unread map[int32][]int64
}

func (s *unreadCounting) Write(ctx context.Context, b *stream.Batch) error {
	if err := s.store.Write(ctx, b); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range b.Records {
		if r.Unreadable != nil {
			s.unread[b.Partition] = append(s.unread[b.Partition], r.Offset)
		}
	}
	return nil
}

// produceTo writes n small records to partition.
func produceTo(t *testing.T, cl *kgo.Client, partition int32, n int) {
	t.Helper()
	rs := make([]*kgo.Record, n)
	for i := range rs {
		rs[i] = &kgo.Record{Topic: topic, Partition: partition, Value: fmt.Appendf(nil, `{"i":%d}`, i)}
	}
	if err := cl.ProduceSync(context.Background(), rs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

func TestBombsOnManyPartitionsOfOneFetchAllBecomeUnreadableSpans(t *testing.T) {
	// A bomb decodes to 24 MiB, over the 16 MiB a batch may when the
	// budget is 1 MiB; partition 0 has none and keeps flowing.
	const values, valueBytes, around = 3, 8 << 20, 5
	for _, tc := range []struct {
		name  string
		codec kgo.CompressionCodecType
		bombs int32
		// before(p) says whether partition p has records before its
		// bomb: a fetch meets the bomb of a partition without in its first
		// response, of one with in its second.
		before func(p int32) bool
		// pollRows is how many records a poll takes at most
		// (BatchMaxRows): a fetch that a poll does not drain holds the
		// bombs of the partitions after the last taken.
		pollRows int
		// latest starts the reader at the latest offsets (Config.Start),
		// past records produced before, and produces the bombs only then.
		latest bool
	}{
		{"2 zstd bombs after records", kgo.CodecZstd, 2, always, 300, false},
		{"2 zstd bombs first", kgo.CodecZstd, 2, never, 300, false},
		{"2 zstd bombs, one first, one after records", kgo.CodecZstd, 2, even, 300, false},
		{"2 zstd bombs, polls of 3 records", kgo.CodecZstd, 2, always, 3, false},
		{"8 zstd bombs, half first", kgo.CodecZstd, 8, even, 300, false},
		{"8 zstd bombs, polls of 3 records", kgo.CodecZstd, 8, odd, 3, false},
		{"8 gzip bombs, half first", kgo.CodecGzip, 8, odd, 300, false},
		{"8 gzip bombs, polls of 3 records", kgo.CodecGzip, 8, never, 3, false},
		{"8 zstd bombs first, polls of 3 records, from the latest offsets", kgo.CodecZstd, 8, never, 3, true},
		{"2 gzip bombs first, polls of 3 records, from the latest offsets", kgo.CodecGzip, 2, never, 3, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCluster(t, tc.bombs+1)
			adm := admin(t, c)
			cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			bomb := bombBatch(t, tc.codec, values, valueBytes)
			s := &unreadCounting{store: newStore(), unread: map[int32][]int64{}}
			tweak := func(c *Config) { c.MaxBufferedBytes, c.BatchMaxRows = 1<<20, tc.pollRows }
			starts := map[int32]int64{}
			var x *running
			var logs lockedBuffer
			var positioned, holding, released atomic.Bool
			release := make(chan struct{})
			if tc.latest {
				for p := int32(0); p <= tc.bombs; p++ {
					produceTo(t, cl, p, around)
				}
				starts = endOffsets(t, adm)
				// The client is at the latest offsets once a fetch asks for
				// every partition from there; the bombs come only then, and
				// the fetches wait while they come, so that the next
				// response holds most of them.
				c.ControlKey(int16(kmsg.Fetch), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
					if released.Load() {
						return nil, nil, false // the last call: the control is dropped
					}
					c.KeepControl()
					if holding.Load() {
						c.SleepControl(func() { <-release })
						return nil, nil, false
					}
					n := 0
					for _, ft := range kreq.(*kmsg.FetchRequest).Topics {
						for _, fp := range ft.Partitions {
							if fp.FetchOffset == starts[fp.Partition] {
								n++
							}
						}
					}
					if n == int(tc.bombs)+1 {
						positioned.Store(true)
					}
					return nil, nil, false
				})
				x = start(t, c, "g", s, func(c *Config) {
					tweak(c)
					c.Start = StartPolicy{Kind: StartLatest}
					c.Logger = slog.New(slog.NewTextHandler(&logs, nil))
				})
				waitFor(t, 10*time.Second, "a fetch of every partition from its latest offset", positioned.Load)
				holding.Store(true)
				defer func() {
					if holding.Swap(false) {
						close(release) // the test failed before the bombs were all produced
					}
				}()
			}
			firsts := map[int32]int64{}
			for p := int32(1); p <= tc.bombs; p++ {
				if tc.before(p) {
					produceTo(t, cl, p, around)
				}
				firsts[p], _ = kafkatest.ProduceRawBatch(t, cl, topic, p, tc.codec, values, bomb)
				produceTo(t, cl, p, around)
			}
			produceTo(t, cl, 0, 500)
			ends := endOffsets(t, adm)
			if tc.latest {
				if holding.Swap(false) {
					close(release)
				}
				released.Store(true)
			} else {
				x = start(t, c, "g", s, func(c *Config) { tweak(c); c.Logger = slog.New(slog.NewTextHandler(&logs, nil)) })
			}
			// A partition the client stopped for good makes the reader
			// stand still: the test fails after 30 s without progress. The
			// progress itself may be slow (polls of 3 records under the
			// race detector on a busy machine, with a 1 MiB buffer that
			// keeps the client from fetching the bombs' partitions again
			// until the busy partition drains), so it is bounded apart.
			started, lastMove, last := time.Now(), time.Now(), ""
			for !s.caughtUp(ends) {
				s.store.mu.Lock()
				next := fmt.Sprint(s.next)
				s.store.mu.Unlock()
				s.mu.Lock()
				unread := fmt.Sprint(s.unread)
				s.mu.Unlock()
				if now := next + unread; now != last {
					last, lastMove = now, time.Now()
				}
				if stood, took := time.Since(lastMove), time.Since(started); stood > 30*time.Second || took > 3*time.Minute {
					stacks := make([]byte, 1<<20)
					stacks = stacks[:runtime.Stack(stacks, true)]
					t.Fatalf("after %v (%v without progress), next offsets %s of ends %v; unreadable offsets %s; the reader logged:\n%s\nthe goroutines:\n%s",
						took.Round(time.Second), stood.Round(time.Second), next, ends, unread, logs.String(), stacks)
				}
				time.Sleep(10 * time.Millisecond)
			}
			x.stop()
			t.Logf("fetched a partition again %d times after the client dropped its refusal", strings.Count(logs.String(), "dropped the report of a record batch too large"))
			s.checkExactlyOnce(t, starts, ends)
			s.mu.Lock()
			defer s.mu.Unlock()
			for p := int32(0); p <= tc.bombs; p++ {
				var want []int64
				if p > 0 {
					for o := firsts[p]; o < firsts[p]+values; o++ {
						want = append(want, o)
					}
				}
				if fmt.Sprint(s.unread[p]) != fmt.Sprint(want) {
					t.Errorf("partition %d: offsets %v written as unreadable, want %v", p, s.unread[p], want)
				}
			}
		})
	}
}

func always(int32) bool { return true }
func never(int32) bool  { return false }
func even(p int32) bool { return p%2 == 0 }
func odd(p int32) bool  { return p%2 == 1 }

func TestARefusalNoPollReportsIsDueAfterAGraceThatDoubles(t *testing.T) {
	var rs refusals
	tp := TopicPartition{topic, 3}
	if due := rs.due(time.Now().Add(time.Hour)); len(due) != 0 {
		t.Fatalf("due %v before a refused batch was read", due)
	}
	rs.matched(tp)
	now := time.Now()
	for _, tc := range []struct {
		after time.Duration
		due   bool
	}{
		{refusalQuiet / 2, false}, // the client may still be decoding the response
		{refusalGrace / 2, false}, // a poll may still report it
		{refusalGrace, true},      // dropped: fetched again
		{refusalGrace * 2, false}, // the grace doubled
		{refusalGrace * 3, true},  // the doubled grace after the first attempt
		{refusalGrace * 4, false},
	} {
		due := rs.due(now.Add(tc.after))
		if got := len(due) == 1 && due[0] == tp; got != tc.due || len(due) > 1 {
			t.Errorf("%v after the refusal: due %v, want due %v", tc.after, due, tc.due)
		}
	}
	rs.reported(tp)
	if due := rs.due(now.Add(time.Hour)); len(due) != 0 {
		t.Errorf("due %v after a poll reported the refusal", due)
	}
}

func TestAPartitionThatReadNothingIsFetchedAgainWhereTheStartPolicyPutIt(t *testing.T) {
	c := newCluster(t, 1)
	adm := admin(t, c)
	ctx := t.Context()
	produce(t, c, 10) // offsets 0-9
	before := time.Now().UnixMilli()
	waitFor(t, time.Second, "a millisecond after the first records", func() bool { return time.Now().UnixMilli() > before })
	claimedAt := time.Now()
	produce(t, c, 5) // offsets 10-14, stamped at or after the claim
	var cut, commit kadm.Offsets
	cut.AddOffset(topic, 0, 3, -1)
	commit.AddOffset(topic, 0, 7, -1)
	if _, err := adm.DeleteRecords(ctx, cut); err != nil {
		t.Fatal(err)
	}
	if _, err := adm.CommitOffsets(ctx, "committed", commit); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		start StartPolicy
		group string
		want  int64
	}{
		{StartPolicy{Kind: StartEarliest}, "earliest", 3}, // the log start, past what retention deleted
		{StartPolicy{Kind: StartLatest}, "latest", 10},    // the first record since the claim
		{StartPolicy{Kind: StartAtTime, At: claimedAt}, "at-time", 10},
		{StartPolicy{Kind: StartCommitted}, "committed", 7},
		{StartPolicy{Kind: StartCommitted}, "nothing-committed", 3},
	} {
		r, err := New(Config{Brokers: c.ListenAddrs(), Group: tc.group, Topics: []string{topic}, Start: tc.start}, newStore())
		if err != nil {
			t.Fatal(err)
		}
		got, err := r.startOffset(ctx, TopicPartition{topic, 0}, claimedAt)
		r.Close()
		if err != nil || got != tc.want {
			t.Errorf("start %s, group %s: offset %d (%v), want %d", tc.start, tc.group, got, err, tc.want)
		}
	}
}

func TestAPartitionMovedAgainToWhereItStandsIsMovedWithAnotherEpoch(t *testing.T) {
	// SetOffsets ignores a position equal to the one it last set, and a
	// refused partition it ignores is never fetched again.
	var rs refusals
	tp := TopicPartition{topic, 1}
	rs.matched(tp)
	var epochs []int32
	for range 4 {
		epochs = append(epochs, rs.moving(tp, true))
	}
	for i, e := range epochs {
		if e >= 0 {
			t.Fatalf("move %d with epoch %d: the client would validate it against the broker", i, e)
		}
		if i > 0 && e == epochs[i-1] {
			t.Fatalf("moves %d and %d with the same epoch %d: the client ignores the second (epochs %v)", i-1, i, e, epochs)
		}
	}
}
