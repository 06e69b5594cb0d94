package integration_test

import (
	"fmt"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// Fault case 4: the broker goes away under the bridge. Both need the real
// cluster of `make kafka-up` (scripts/kafka-node.sh stops and starts its
// nodes) and KAFKA2PG_FAULTS=1.

// TestFault04BrokerRestart restarts the only broker of a one-node cluster in
// the middle of the stream, once with a controlled shutdown (SIGTERM) and
// once with a crash (SIGKILL, then start). The bridge must ride it out and
// go on from where Postgres says.
func TestFault04BrokerRestart(t *testing.T) {
	requireFullFaults(t)
	fc := newFaultCase(t, "4", "broker restart (single node)", 4, nil)
	s := fc.s
	requireRecordedCluster(t, s.kafka, 1)
	fc.inject("scripts/kafka-node.sh restart 1 (SIGTERM, start) and kill 1 + start 1 (SIGKILL) mid-stream")
	flags := faultFlags(s.kafka)
	b := s.start(t, "A", flags...)
	prod := fc.feed.start(t, 20, 20*time.Millisecond, 1_000_000)
	s.waitProgress(t, nil, 30*time.Second, b)
	var recovered []string
	for _, how := range [][]string{{"restart", "1"}, {"kill", "1"}} {
		at := s.runFor(t, 2*time.Second, b)
		began := time.Now()
		kafkaNode(t, how...)
		if how[0] == "kill" {
			kafkaNode(t, "start", "1")
		}
		back := time.Now()
		s.waitProgress(t, at, 2*time.Minute, b)
		recovered = append(recovered, fmt.Sprintf("%s: broker down %v, every partition advanced %v after it was back",
			how[0], back.Sub(began).Round(100*time.Millisecond), time.Since(back).Round(100*time.Millisecond)))
		fc.trial()
	}
	for _, r := range recovered {
		fc.note(t, "%s", r)
	}
	prod.stopAndCheck(t)
	b.signal(t, syscall.SIGTERM)
	b.requireExitZero(t, time.Minute)
	fc.finish(t, nil, flags...)
	fc.assertConsumerGroupCommandMatches(t)
}

// TestFault04bLeaderFailover kills the node that leads partition 0 of a
// three-node cluster (replication factor 3, min.insync.replicas 2), waits
// for the bridge to go on with the new leaders, starts the node again, and
// does it once more with a controlled stop.
func TestFault04bLeaderFailover(t *testing.T) {
	requireFullFaults(t)
	fc := newFaultCase(t, "4b", "leader failover (three nodes)", 6, nil)
	s := fc.s
	requireRecordedCluster(t, s.kafka, 3)
	fc.inject("the leader of partition 0 killed (SIGKILL) then started; again with a controlled stop (SIGTERM); a producer with acks=all writes throughout")
	flags := faultFlags(s.kafka)
	b := s.start(t, "A", flags...)
	prod := fc.feed.start(t, 20, 20*time.Millisecond, 1_000_000)
	s.waitProgress(t, nil, 30*time.Second, b)
	for _, how := range []string{"kill", "stop"} {
		at := s.runFor(t, 2*time.Second, b)
		leader := kafkaNode(t, "leader", s.topic, "0")
		if _, err := strconv.Atoi(leader); err != nil || leader == "-1" {
			t.Fatalf("leader of %s/0: %q", s.topic, leader)
		}
		began := time.Now()
		kafkaNode(t, how, leader)
		var newLeader string
		pollUntil(t, time.Minute, "a new leader for partition 0", func() (bool, string) {
			newLeader = kafkaNode(t, "leader", s.topic, "0")
			return newLeader != leader && newLeader != "-1", "leader " + newLeader
		})
		moved := time.Since(began).Round(100 * time.Millisecond)
		s.waitProgress(t, at, 2*time.Minute, b)
		progressed := time.Since(began).Round(100 * time.Millisecond)
		kafkaNode(t, "start", leader)
		fc.note(t, "%s of leader node %s: partition 0 led by node %s after %v, every partition advanced %v after the fault",
			how, leader, newLeader, moved, progressed)
		fc.trial()
	}
	prod.stopAndCheck(t)
	b.signal(t, syscall.SIGTERM)
	b.requireExitZero(t, time.Minute)
	fc.finish(t, nil, flags...)
	fc.assertConsumerGroupCommandMatches(t)
}
