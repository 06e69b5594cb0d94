package integration_test

import (
	"fmt"
	"testing"
	"time"
)

// TestCrashLoopKeepsExactlyOnce SIGKILLs the bridge over and over while a
// producer keeps writing, with small batches so that a kill often lands
// inside a transaction, then lets a last run catch up and checks that no
// record was lost or written twice.
//
// Two of every three instances are killed 100-900ms after they committed
// their first batch (so they die mid-stream); every third 100-900ms after the
// process started (so it dies while migrating, joining or claiming). A killed
// member stays in the group until its 6s session times out, so each
// mid-stream cycle takes about 7s.
//
// On kfake the early kill waits until the member has joined and then lands
// 0-300ms later (while it claims or starts fetching): kfake never starts the
// session timer of a member whose JoinGroup response could not be delivered
// (groups.go reply() returns before updateHeartbeat when the connection is
// gone), so a member killed while its JoinGroup waits stays in the group, with
// its partitions, forever. A real broker expires it; there the kill stays
// random.
func TestCrashLoopKeepsExactlyOnce(t *testing.T) {
	parallel(t)
	const (
		partitions = 6
		kills      = 12
	)
	s := newScenario(t, partitions)
	flags := append([]string{"--batch-max-rows", "500", "--batch-max-wait", "50ms"}, fastGroupFlags...)
	loopStart := time.Now()
	prod := s.startProducer(t, 40, 40*time.Millisecond, 150_000)

	midStream := 0
	for i := range kills {
		before := totalDurable(s.durableOffsets(t))
		b := s.start(t, fmt.Sprintf("crash-%02d", i), flags...)
		delay := randomDuration(100*time.Millisecond, 900*time.Millisecond)
		if i%3 != 2 {
			pollUntil(t, 45*time.Second, "bridge "+b.name+" to commit a batch", func() (bool, string) {
				requireRunning(t, b)
				now := totalDurable(s.durableOffsets(t))
				return b.joined() && now > before, fmt.Sprintf("sum of next_offset %d, %d when it started; joined %v", now, before, b.joined())
			})
			midStream++
			time.Sleep(delay) // the chaos schedule, not a wait for a condition
		} else if s.kafka.Fake() {
			if !b.waitLog("partitions assigned", 45*time.Second) {
				t.Fatalf("bridge %s never joined the group (%s)", b.name, b.status())
			}
			time.Sleep(randomDuration(0, 300*time.Millisecond))
		} else {
			time.Sleep(delay - time.Since(b.started))
		}
		requireRunning(t, b)
		if !b.kill(t) {
			t.Fatalf("bridge %s: ended on its own (%s) before it could be killed", b.name, b.status())
		}
		after := totalDurable(s.durableOffsets(t))
		t.Logf("killed %s %v after start; it committed %d records (sum of next_offset %d -> %d), %d produced so far",
			b.name, time.Since(b.started).Round(time.Millisecond), after-before, before, after, prod.count.Load())
	}
	n := prod.stopAndCheck(t)
	t.Logf("%d kills (%d mid-stream) in %v while %d records were produced", kills, midStream,
		time.Since(loopStart).Round(time.Millisecond), n)

	took := s.runUntilCaughtUp(t, "final", 2*time.Minute, flags...)
	t.Logf("final --until-caught-up run took %v", took.Round(time.Millisecond))
	s.verifyFinalState(t)
}
