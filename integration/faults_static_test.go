package integration_test

import (
	"fmt"
	"os"
	"regexp"
	"slices"
	"strconv"
	"testing"
	"time"
)

// staticRestartBound is how soon a bridge restarted with its static
// membership id must write again: it gets its partitions back from the
// group coordinator without a rebalance, so only its start, its claim and
// one fetch stand between the restart and the write.
const staticRestartBound = 2 * time.Second

// TestFault26StaticMembershipKillLoop SIGKILLs a bridge that runs with
// --kafka-instance-id and restarts it at once, again and again, under a
// steady producer: each restart must write within staticRestartBound of
// its start. The session timeout (30 s) outlasts the restart, so the
// coordinator still holds the killed member when its successor joins with
// the same id and hands it the same partitions; a dynamic member would wait
// for the session to expire and a rebalance (TestFault01KillLoop).
func TestFault26StaticMembershipKillLoop(t *testing.T) {
	requireFullFaults(t)
	fc := newFaultCase(t, "26", "kill -9 loop with static membership", 4, nil)
	s := fc.s
	requireRealBroker(t, s.kafka)
	const restarts = 8
	fc.inject(fmt.Sprintf("SIGKILL of a bridge with --kafka-instance-id 0.2-1 s after its first write, and an immediate restart, %d times", restarts))
	flags := faultFlags(s.kafka, "--kafka-instance-id", "kafka2pg-static-0",
		// Later flags win: a session that outlasts a restart, so the
		// coordinator keeps the killed member's partitions for its
		// successor.
		"--kafka-session-timeout", "30s", "--kafka-heartbeat-interval", "1s", "--kafka-rebalance-timeout", "30s")
	prod := fc.feed.start(t, 20, 20*time.Millisecond, 1_000_000)
	var gaps []time.Duration
	for i := range restarts + 1 {
		b := s.start(t, fmt.Sprintf("static-%02d", i), flags...)
		var wrote time.Duration
		pollUntil(t, time.Minute, "bridge "+b.name+" to write", func() (bool, string) {
			requireRunning(t, b)
			if s.wroteSinceClaim(t, b) {
				wrote = time.Since(b.started)
				return true, ""
			}
			return false, "no write under the epoch of its claims yet"
		})
		if i > 0 { // the first start joins an empty group: not a restart
			gaps = append(gaps, wrote)
			if wrote > staticRestartBound {
				t.Errorf("restart %d: first write %v after the start, want under %v (a static member rejoins without a rebalance)", i, wrote.Round(time.Millisecond), staticRestartBound)
			}
		}
		t.Logf("bridge %s wrote %v after its start", b.name, wrote.Round(time.Millisecond))
		time.Sleep(randomDuration(200*time.Millisecond, time.Second)) // the chaos schedule
		if !b.kill(t) {
			t.Fatalf("bridge %s ended on its own (%s) before it could be killed", b.name, b.status())
		}
		fc.trial()
	}
	slices.Sort(gaps)
	fc.note(t, "%d restarts with a static membership id: first write %v to %v after the restart (median %v)",
		len(gaps), gaps[0].Round(time.Millisecond), gaps[len(gaps)-1].Round(time.Millisecond), gaps[len(gaps)/2].Round(time.Millisecond))
	fc.finish(t, prod, flags...)
}

// claimedRE reads a "partition claimed" line of a bridge's log.
var claimedRE = regexp.MustCompile(`msg="partition claimed" topic=\S+ partition=(\d+) next_offset=(-?\d+) epoch=(\d+)`)

// wroteSinceClaim reports whether b committed a write: a partition it
// claimed (its log says at which next_offset and epoch) whose stored
// position moved past the claim under the claim's epoch. A COMMIT of the
// killed instance that lands after the restart does not count: it carries
// an older epoch, or lands before the claim.
func (s *scenario) wroteSinceClaim(t testing.TB, b *bridge) bool {
	t.Helper()
	data, err := os.ReadFile(b.logPath)
	if err != nil {
		return false
	}
	type claimPos struct{ next, epoch int64 }
	claims := map[int32]claimPos{}
	for _, m := range claimedRE.FindAllStringSubmatch(string(data), -1) {
		p, _ := strconv.ParseInt(m[1], 10, 32)
		next, _ := strconv.ParseInt(m[2], 10, 64)
		epoch, _ := strconv.ParseInt(m[3], 10, 64)
		claims[int32(p)] = claimPos{next, epoch}
	}
	if len(claims) == 0 {
		return false
	}
	rows, err := s.db.Query(t.Context(), `SELECT partition, next_offset, epoch FROM kafka2pg.offsets WHERE consumer_group = $1 AND topic = $2`, s.group, s.topic)
	if err != nil {
		t.Fatalf("read kafka2pg.offsets: %v", err)
	}
	defer rows.Close()
	for rows.Next() {
		var p int32
		var next, epoch int64
		if err := rows.Scan(&p, &next, &epoch); err != nil {
			t.Fatalf("read kafka2pg.offsets: %v", err)
		}
		if c, ok := claims[p]; ok && epoch == c.epoch && next > c.next {
			return true
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("read kafka2pg.offsets: %v", err)
	}
	return false
}
