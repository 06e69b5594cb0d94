package integration_test

import (
	"fmt"
	"maps"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/kafka2pg/kafka2pg/internal/testreport"
)

// TestScaleRebalanceWriteGaps runs three instances of one group under a
// steady producer, kills instances with SIGKILL, adds new ones and restarts
// one with the same --kafka-instance-id, then checks exactly-once by SQL
// and measures, for every membership change, how long each partition went
// without a write transaction. Partitions that did not change owner must
// keep writing through the rebalance (the cooperative-sticky promise): their
// longest gap stays under half the session timeout, while the moved ones
// wait for the session timeout and a claim.
//
// The target table has an extra column, written_at DEFAULT now(), that COPY
// leaves out, so every row carries the start of its transaction. Smoke: 12
// partitions, three changes; KAFKA2PG_SCALE=1: 48 partitions, six.
func TestScaleRebalanceWriteGaps(t *testing.T) {
	partitions := scaleSize[int32](12, 48)
	s := newScenario(t, partitions)
	createTimedRawTable(t, s.db, s.table)
	group := append([]string{"--batch-max-rows", "1000", "--batch-max-wait", "100ms"}, scaleGroupFlags(s.kafka)...)
	session := sessionTimeout(s.kafka)
	// Every instance is static, as docs/OPERATIONS.md advises (the pod name): a
	// SIGKILLed one is replaced after the session timeout like a dynamic
	// one, and a restarted one takes its own partitions back.
	instance := func(name string) *bridge {
		return s.start(t, name, scaleFlags(append(slices.Clone(group), "--kafka-instance-id", "scale-"+name, "--kafka-client-id", "kafka2pg-"+name)...)...)
	}
	prod := s.startProducer(t, 48, 40*time.Millisecond, 2_000_000)

	live := map[string]*bridge{}
	for _, n := range []string{"A", "B", "C"} {
		live[n] = instance(n)
	}
	alive := func() []*bridge { return slices.Collect(maps.Values(live)) }
	s.kafka.WaitGroupStable(t, s.group, s.topic, 3, partitions, 2*time.Minute)
	s.runFor(t, 2*time.Second, alive()...)
	steadyFrom := pgNow(t, s.db)
	s.runFor(t, 3*time.Second, alive()...)
	steadyTo := pgNow(t, s.db)

	type event struct {
		name      string
		from, to  time.Time // the change, and the group settled again
		before    map[int32]int64
		after     map[int32]int64
		instances int
		lost      bool // an instance died in the change
	}
	var events []event
	// change applies one membership change and waits until the group is
	// stable with want members and every partition wrote after it.
	change := func(name string, want int, lost bool, do func()) {
		t.Helper()
		e := event{name: name, before: epochs(t, s.db, s.group, s.topic), from: pgNow(t, s.db), instances: want, lost: lost}
		do()
		s.kafka.WaitGroupStable(t, s.group, s.topic, want, partitions, 2*time.Minute)
		s.waitProgress(t, s.durableOffsets(t), time.Minute, alive()...)
		e.to = pgNow(t, s.db)
		e.after = epochs(t, s.db, s.group, s.topic)
		t.Logf("%s: settled %v after it", name, e.to.Sub(e.from).Round(time.Millisecond))
		events = append(events, e)
		s.runFor(t, 2*time.Second, alive()...)
	}
	kill := func(n string) func() {
		return func() { live[n].kill(t); delete(live, n) }
	}
	add := func(n string) func() {
		return func() { live[n] = instance(n) }
	}
	// A restart with the same instance id takes the member's place without
	// a rebalance; the new process claims (re-fences) its partitions.
	restart := func(n string) func() {
		return func() {
			live[n].kill(t)
			live[n] = instance(n)
			if !live[n].waitLog("partitions assigned", time.Minute) {
				t.Fatalf("restarted %s never got partitions (%s)", n, live[n].status())
			}
		}
	}
	change("kill -9 C", 2, true, kill("C"))
	change("add D", 3, false, add("D"))
	change("kill -9 B, restart with the same instance id", 3, true, restart("B"))
	if fullScale() {
		change("kill -9 A", 2, true, kill("A"))
		change("add E", 3, false, add("E"))
		change("kill -9 D and add F at once", 3, true, func() { kill("D")(); add("F")() })
	}

	n := prod.stopAndCheck(t)
	for _, b := range alive() {
		b.signal(t, syscall.SIGTERM)
	}
	for _, b := range alive() {
		b.requireExitZero(t, time.Minute)
	}
	s.runUntilCaughtUp(t, "final", 3*time.Minute, group...)
	s.verifyFinalState(t)
	t.Logf("%d records produced over %d partitions; exactly once", n, partitions)

	steady := writeGaps(t, s.db, s.table, steadyFrom, steadyTo)
	steadyMax := quantile(slices.Collect(maps.Values(steady)), 1)
	t.Logf("steady state, %d partitions: longest gap %s, p50 %s", len(steady), secs(steadyMax), secs(quantile(slices.Collect(maps.Values(steady)), 0.5)))
	limit := session.Seconds() / 2
	for i, e := range events {
		gaps := writeGaps(t, s.db, s.table, e.from, e.to)
		firsts := firstWritesAfter(t, s.db, s.table, e.from)
		var stayed, moved []float64
		recovery := 0.0
		var movedParts []int32
		for p := range partitions {
			if e.after[p] > e.before[p] {
				moved = append(moved, gaps[p])
				movedParts = append(movedParts, p)
				recovery = max(recovery, firsts[p])
			} else {
				stayed = append(stayed, gaps[p])
				if gaps[p] > limit {
					t.Errorf("%s: partition %d did not move but went %s without a write (limit %s, half the session timeout): the rebalance stopped a partition it should not have touched",
						e.name, p, secs(gaps[p]), secs(limit))
				}
			}
		}
		if !e.lost {
			recovery = -1 // moved partitions wrote on their old owner until revoked: no loss to recover from
		}
		r := testreport.Rebalance{
			Round: i + 1, Event: e.name, Partitions: int(partitions), Instances: e.instances, Moved: len(moved),
			StayedMax: quantile(stayed, 1), StayedP50: quantile(stayed, 0.5),
			MovedMax: quantile(moved, 1), MovedP50: quantile(moved, 0.5),
			SteadyMax: steadyMax, RecoverySec: recovery,
		}
		t.Logf("%s: %d moved %v (gap max %s, p50 %s; all writing again %s after), %d stayed (gap max %s, p50 %s)",
			e.name, r.Moved, movedParts, secs(r.MovedMax), secs(r.MovedP50), secs(recovery), len(stayed), secs(r.StayedMax), secs(r.StayedP50))
		if len(moved) == 0 {
			t.Errorf("%s: no partition changed owner (epochs before %v, after %v): the change did not happen", e.name, e.before, e.after)
		}
		if len(stayed) == 0 {
			t.Errorf("%s: every partition changed owner: a sticky assignor moves only what it must", e.name)
		}
		reportScale(t, testreport.ScaleEntry{Kind: testreport.KindRebalance, Broker: brokerName(s.kafka), Rebalance: &r,
			Note: fmt.Sprintf("%d records produced during the run; exactly once", n)})
	}
}
