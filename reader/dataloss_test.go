package reader

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
)

func deleteBelow(t *testing.T, adm *kadm.Client, offset int64) {
	t.Helper()
	off := make(kadm.Offsets)
	off.AddOffset(topic, 0, offset, -1)
	resp, err := adm.DeleteRecords(context.Background(), off)
	if err != nil {
		t.Fatal(err)
	}
	if err := resp.Error(); err != nil {
		t.Fatal(err)
	}
}

// lostBelow is a one-partition cluster of 100 records whose first 50
// retention deleted, and a store whose next offset is 10: [10, 50) is lost.
func lostBelow(t *testing.T) (*kfake.Cluster, *kadm.Client, *store) {
	t.Helper()
	c := newCluster(t, 1)
	adm := admin(t, c)
	produce(t, c, 100)
	deleteBelow(t, adm, 50)
	s := newStore()
	s.next[0] = 10
	return c, adm, s
}

func TestDataLossStopsThePartitionNamingTheRange(t *testing.T) {
	c, _, s := lostBelow(t)
	x := start(t, c, "g", s, nil)
	var why []string
	waitFor(t, 20*time.Second, "the partition to stop", func() bool { why = x.r.Stats().Stopped; return len(why) > 0 })
	if !strings.Contains(why[0], "[10, 50)") || !strings.Contains(why[0], "reader.Config.OnDataLoss=skip") {
		t.Errorf("stop reason %q does not name the lost range [10, 50) and the way out", why[0])
	}
	time.Sleep(300 * time.Millisecond) // a stopped partition must stay stopped: nothing may be written
	s.mu.Lock()
	rows, next := len(s.rows[0]), s.next[0]
	s.mu.Unlock()
	if rows != 0 || next != 10 {
		t.Errorf("after data loss with --on-data-loss=stop: %d rows written, next_offset %d; want none and 10", rows, next)
	}
	x.stop() // a stopped partition must not hold up the revoke
}

func TestDataLossSkipContinuesAtTheLogStart(t *testing.T) {
	c, adm, s := lostBelow(t)
	x := start(t, c, "g", s, func(c *Config) { c.OnDataLoss = OnDataLossSkip })
	ends := endOffsets(t, adm)
	waitFor(t, 20*time.Second, "catch up past the gap", func() bool { return s.caughtUp(ends) })
	x.stop()
	s.checkExactlyOnce(t, map[int32]int64{0: 50}, ends)
	if got := x.r.Stats().SkippedRecords; got != 40 {
		t.Errorf("skipped records = %d, want 40 (offsets 10-49)", got)
	}
}
