package integration_test

import (
	"fmt"
	"math/rand/v2"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/kafka2pg/kafka2pg/internal/kafkatest"
)

// Fault cases 1, 5 and 6: the bridge process itself is killed, frozen, or
// started and stopped at random. Full matrix only (KAFKA2PG_FAULTS=1).

// TestFault01KillLoop SIGKILLs the bridge at random points, at least 20
// times, while a producer writes; part of the records come from kcat (a
// librdkafka client) when it is installed. It ends with the group's Kafka
// offsets, read by kafka-consumer-groups when the Kafka jars are there,
// compared with kafka2pg.offsets.
func TestFault01KillLoop(t *testing.T) {
	requireFullFaults(t)
	const kills = 24
	fc := newFaultCase(t, "1", "bridge SIGKILL at random points", 6, nil)
	s := fc.s
	fc.inject("SIGKILL 0.1-3 s after start (during migrate, join, claim or the first batches) or 0.1-0.9 s after the instance's first commit (mid-stream), alternating at random")
	flags := faultFlags(s.kafka)
	prod := fc.feed.start(t, 40, 40*time.Millisecond, 1_000_000)
	_, kcatErr := exec.LookPath("kcat")
	midStream := 0
	for i := range kills {
		if i == kills/2 && kcatErr == nil {
			fc.feed.kcatProduce(t, 2000)
		}
		before := totalDurable(s.durableOffsets(t))
		b := s.start(t, fmt.Sprintf("kill-%02d", i), flags...)
		if rand.IntN(2) == 0 {
			pollUntil(t, time.Minute, "bridge "+b.name+" to commit a batch", func() (bool, string) {
				requireRunning(t, b)
				now := totalDurable(s.durableOffsets(t))
				return b.joined() && now > before, fmt.Sprintf("sum of next_offset %d, %d when it started; joined %v", now, before, b.joined())
			})
			midStream++
			time.Sleep(randomDuration(100*time.Millisecond, 900*time.Millisecond)) // the chaos schedule
		} else if s.kafka.Fake() {
			// kfake keeps a member killed while its JoinGroup waits forever
			// (see TestCrashLoopKeepsExactlyOnce): kill after the join.
			if !b.waitLog("partitions assigned", time.Minute) {
				t.Fatalf("bridge %s never joined the group (%s)", b.name, b.status())
			}
			time.Sleep(randomDuration(0, 300*time.Millisecond))
		} else {
			time.Sleep(randomDuration(100*time.Millisecond, 3*time.Second)) // the chaos schedule
		}
		requireRunning(t, b)
		if !b.kill(t) {
			t.Fatalf("bridge %s ended on its own (%s) before it could be killed", b.name, b.status())
		}
		fc.trial()
		after := totalDurable(s.durableOffsets(t))
		t.Logf("killed %s %v after start; it committed %d records", b.name, time.Since(b.started).Round(time.Millisecond), after-before)
	}
	if kcatErr == nil {
		fc.note(t, "2000 of the records were produced by kcat (librdkafka), checked by id")
	} else {
		fc.note(t, "kcat not installed: all records from franz-go")
	}
	fc.note(t, "%d kills, %d of them mid-stream", kills, midStream)
	fc.finish(t, prod, flags...)
	if !s.kafka.Fake() {
		fc.assertConsumerGroupCommandMatches(t)
	}
}

// TestFault05Zombie freezes instance A with SIGSTOP, preferably inside a
// write transaction, past its session timeout; instance B of the same group
// takes over (its claim fences A and terminates A's open transaction); then
// A gets SIGCONT and wakes with stale state while B writes.
func TestFault05Zombie(t *testing.T) {
	requireFullFaults(t)
	fc := newFaultCase(t, "5", "zombie: SIGSTOP past the session timeout, takeover, SIGCONT", 4, nil)
	s := fc.s
	fc.inject("SIGSTOP of instance A (caught holding kafka2pg.offsets row locks when possible), instance B started, SIGCONT of A after its session expired and B wrote")
	flags := faultFlags(s.kafka)
	prod := fc.feed.start(t, 20, 20*time.Millisecond, 1_000_000)
	const trials = 2
	for i := range trials {
		a := s.start(t, fmt.Sprintf("A%d", i), flags...)
		s.waitProgress(t, s.durableOffsets(t), 30*time.Second, a)
		fc.feed.mustProduce(t, 20_000) // a backlog keeps A inside transactions
		how := s.freezeMidTransaction(t, a)
		frozenAt := time.Now()
		atFreeze := s.durableOffsets(t)
		b := s.start(t, fmt.Sprintf("B%d", i), flags...)
		s.waitProgress(t, atFreeze, time.Minute, b)
		tookOver := time.Since(frozenAt).Round(100 * time.Millisecond)
		if d := 8*time.Second - time.Since(frozenAt); d > 0 {
			time.Sleep(d) // keep A frozen well past its session timeout: the schedule
		}
		atThaw := s.durableOffsets(t)
		a.signal(t, syscall.SIGCONT)
		pollUntil(t, time.Minute, "A to rejoin the group or end", func() (bool, string) {
			requireRunning(t, b)
			if a.exited() {
				return true, ""
			}
			state, members := s.kafka.GroupState(t, s.group, s.topic)
			return state == "Stable" && kafkatest.Covers(members, 2, s.partitions), fmt.Sprintf("state %s, members %v", state, members)
		})
		s.waitProgress(t, atThaw, time.Minute, b)
		fc.note(t, "trial %d: A frozen %s; B wrote past A's offsets %v later; after SIGCONT A %s", i, how, tookOver, map[bool]string{true: "ended: " + a.status(), false: "rejoined"}[a.exited()])
		a.signal(t, syscall.SIGTERM)
		b.signal(t, syscall.SIGTERM)
		b.requireExitZero(t, time.Minute)
		if !a.wait(time.Minute) {
			t.Errorf("zombie %s still running a minute after SIGTERM", a.name)
		}
		fc.trial()
	}
	fc.finish(t, prod, flags...)
}

// TestFault06RebalanceStorm starts and stops 4 instances at random for a
// minute under load: each step starts an instance in an empty slot, or
// stops a running one with SIGTERM (2 in 3) or SIGKILL.
func TestFault06RebalanceStorm(t *testing.T) {
	requireFullFaults(t)
	fc := newFaultCase(t, "6", "rebalance storm", 8, nil)
	s := fc.s
	const (
		slots = 4
		storm = time.Minute
	)
	fc.inject(fmt.Sprintf("%d instance slots for %v: every 0.5-4 s one slot flips, started if empty, else stopped by SIGTERM (2 in 3) or SIGKILL", slots, storm))
	flags := faultFlags(s.kafka)
	prod := fc.feed.start(t, 40, 20*time.Millisecond, 1_000_000)
	running := make([]*bridge, slots)
	var stopping []*bridge
	var starts, terms, kills int
	began := time.Now()
	for n := 0; time.Since(began) < storm; n++ {
		i := rand.IntN(slots)
		switch b := running[i]; {
		case b == nil || b.exited():
			if b != nil && b.exited() {
				t.Fatalf("bridge %s ended by itself: %s", b.name, b.status())
			}
			running[i] = s.start(t, fmt.Sprintf("storm-%03d", n), flags...)
			starts++
		case rand.IntN(3) == 0:
			b.kill(t)
			running[i] = nil
			kills++
		default:
			b.signal(t, syscall.SIGTERM)
			stopping = append(stopping, b)
			running[i] = nil
			terms++
		}
		fc.trial()
		time.Sleep(randomDuration(500*time.Millisecond, 4*time.Second)) // the chaos schedule
	}
	for _, b := range running {
		if b != nil {
			b.signal(t, syscall.SIGTERM)
			stopping = append(stopping, b)
		}
	}
	for _, b := range stopping {
		b.requireExitZero(t, 2*time.Minute)
	}
	fc.note(t, "%d starts, %d SIGTERM (each exited 0), %d SIGKILL in %v", starts, terms, kills, time.Since(began).Round(time.Second))
	fc.finish(t, prod, flags...)
	if !s.kafka.Fake() {
		fc.assertConsumerGroupCommandMatches(t)
	}
}
