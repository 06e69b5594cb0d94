package integration_test

import (
	"syscall"
	"testing"
	"time"
)

// TestRebalanceKeepsExactlyOnce runs three instances of one group on an
// 8-partition topic while a producer writes, makes one leave (SIGTERM) and a
// fourth join, then checks exactly-once, and that after everyone stopped
// cleanly the group's Kafka offsets mirror kafka2pg.offsets.
func TestRebalanceKeepsExactlyOnce(t *testing.T) {
	parallel(t)
	const partitions = 8
	s := newScenario(t, partitions)
	flags := append([]string{"--batch-max-rows", "1000", "--batch-max-wait", "100ms"}, fastGroupFlags...)
	prod := s.startProducer(t, 40, 40*time.Millisecond, 120_000)

	a := s.start(t, "A", flags...)
	b := s.start(t, "B", flags...)
	c := s.start(t, "C", flags...)
	members := s.kafka.WaitGroupStable(t, s.group, s.topic, 3, partitions, time.Minute)
	t.Logf("group of A, B, C: %v", members)
	s.runFor(t, 3*time.Second, a, b, c)

	b.signal(t, syscall.SIGTERM)
	b.requireExitZero(t, time.Minute)
	d := s.start(t, "D", flags...)
	members = s.kafka.WaitGroupStable(t, s.group, s.topic, 3, partitions, time.Minute)
	t.Logf("group of A, C, D: %v", members)
	s.runFor(t, 3*time.Second, a, c, d)

	n := prod.stopAndCheck(t)
	t.Logf("%d records produced", n)
	for _, x := range []*bridge{a, c, d} {
		x.signal(t, syscall.SIGTERM)
	}
	for _, x := range []*bridge{a, c, d} {
		x.requireExitZero(t, time.Minute)
	}
	// Every member committed its durable offsets to Kafka as it stopped.
	assertGroupOffsets(t, s.kafka, s.group, s.topic, s.durableOffsets(t))

	s.runUntilCaughtUp(t, "final", 2*time.Minute, flags...)
	s.verifyFinalState(t)
}
