package reader

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// truncatedAt is what franz-go reports when the leader's log ends below
// the position read (an unclean leader election): offsets [600, 1000) of
// partition 0 are gone.
func truncatedAt() *kgo.ErrDataLoss {
	return &kgo.ErrDataLoss{Topic: topic, Partition: 0, ConsumedTo: 1000, ConsumedToEpoch: 0, ResetTo: 600, ResetToEpoch: 2}
}

// With OnDataLoss skip, a truncation reads the new log from where it
// diverged: the records at the reused offsets are written (kfake's log did
// not change, so here they are the same records again), counted, and the
// stored position, ahead of them, is the one the advance expects.
func TestATruncatedLogIsReadAgainFromWhereItDivergedWithSkip(t *testing.T) {
	c := newCluster(t, 1)
	adm := admin(t, c)
	produce(t, c, 1000)
	s := newStore()
	x := start(t, c, "g", s, func(c *Config) { c.OnDataLoss = OnDataLossSkip })
	ends := endOffsets(t, adm)
	waitFor(t, 10*time.Second, "catch up", func() bool { return s.caughtUp(ends) })
	x.r.truncated(truncatedAt())
	waitFor(t, 20*time.Second, "offsets [600, 1000) written again", func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return len(s.rows[0]) == 1400 && s.next[0] == 1000
	})
	st := x.r.Stats()
	if st.Truncations != 1 || st.SkippedRecords != 0 {
		t.Errorf("Truncations %d, SkippedRecords %d; want 1 and 0 (everything read had been written)", st.Truncations, st.SkippedRecords)
	}
	x.stop()
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, o := range s.rows[0][1000:] {
		if o != 600+int64(i) {
			t.Fatalf("row %d after the truncation is offset %d, want %d", 1000+i, o, 600+i)
		}
	}
}

// With OnDataLoss stop (the default), the reader stops: Run returns a
// *FatalError naming the partition, the offsets and the fix, and nothing
// is written past the stored position.
func TestATruncatedLogStopsTheReaderWithStop(t *testing.T) {
	c := newCluster(t, 1)
	adm := admin(t, c)
	produce(t, c, 1000)
	s := newStore()
	r, err := New(Config{Brokers: c.ListenAddrs(), Group: "g", Topics: []string{topic}, FetchMaxWait: 100 * time.Millisecond,
		HeartbeatInterval: 100 * time.Millisecond, BatchMaxWait: 20 * time.Millisecond}, s)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close)
	ran := make(chan error, 1)
	go func() { ran <- r.Run(context.Background()) }()
	ends := endOffsets(t, adm)
	waitFor(t, 10*time.Second, "catch up", func() bool { return s.caughtUp(ends) })
	r.truncated(truncatedAt())
	var fe *FatalError
	select {
	case err := <-ran:
		if !errors.As(err, &fe) || !strings.Contains(err.Error(), "truncated") || !strings.Contains(err.Error(), "[600, 1000)") ||
			!strings.Contains(err.Error(), "OnDataLoss=skip") || !strings.Contains(err.Error(), topic+"/0") {
			t.Fatalf("Run = %v, want a *FatalError naming %s/0, offsets [600, 1000) and the way out", err, topic)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Run did not return after a truncation with OnDataLoss stop")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.rows[0]) != 1000 || s.next[0] != 1000 {
		t.Errorf("after the stop: %d rows, next_offset %d; want 1000 and 1000", len(s.rows[0]), s.next[0])
	}
}
