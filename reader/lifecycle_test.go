package reader

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

func TestTheLifecycleFollowsItsTransitionTable(t *testing.T) {
	var l lifecycle
	if l.takesRecords() || l.checksFence() {
		t.Fatal("an unclaimed partition takes records or checks its fence")
	}
	l.claim()
	if l.phase != phaseReading || !l.takesRecords() || !l.checksFence() {
		t.Fatalf("claimed: phase %d, want reading, taking records and checking its fence", l.phase)
	}
	l.halt()
	if l.phase != phaseHalted || l.takesRecords() || !l.halted() {
		t.Fatalf("halted: phase %d, want halted and taking no records", l.phase)
	}
	l.claim() // a claim while halted changes no phase
	if l.phase != phaseHalted {
		t.Fatalf("a claim moved a halted partition to phase %d", l.phase)
	}
	l.resume()
	if l.phase != phaseReading {
		t.Fatalf("resumed: phase %d, want reading", l.phase)
	}
	l.halt()
	l.stopFor("data loss")
	for _, step := range []func(){l.resume, l.halt, l.claim} {
		step()
		if l.phase != phaseStopped || l.why != "data loss" || !l.halted() {
			t.Fatalf("a stopped partition left stopped: phase %d, why %q", l.phase, l.why)
		}
	}
}

func TestAnEndAskedDecidesWhenTheGoroutineReturns(t *testing.T) {
	for _, tc := range []struct {
		name      string
		phase     phase
		asks      []bool // stop(flush) calls, in order
		empty     bool
		returns   bool
		takesRecs bool
	}{
		{"reading, no end", phaseReading, nil, true, false, true},
		{"reading, flush, queued", phaseReading, []bool{true}, false, false, false},
		{"reading, flush, written", phaseReading, []bool{true}, true, true, false},
		{"reading, drop, queued", phaseReading, []bool{false}, false, true, false},
		{"reading, flush then drop", phaseReading, []bool{true, false}, false, true, false},
		{"reading, drop then flush", phaseReading, []bool{false, true}, false, true, false},
		{"halted, flush", phaseHalted, []bool{true}, false, true, false},
		{"stopped, flush", phaseStopped, []bool{true}, false, true, false},
		{"unclaimed, flush", phaseUnclaimed, []bool{true}, true, true, false},
	} {
		l := lifecycle{phase: tc.phase}
		for _, flush := range tc.asks {
			l.ask(flush)
		}
		if got := l.returns(tc.empty); got != tc.returns {
			t.Errorf("%s: returns %v, want %v", tc.name, got, tc.returns)
		}
		if got := l.takesRecords(); got != tc.takesRecs {
			t.Errorf("%s: takes records %v, want %v", tc.name, got, tc.takesRecs)
		}
		if l.ending() != (len(tc.asks) > 0) {
			t.Errorf("%s: ending %v after %d stops", tc.name, l.ending(), len(tc.asks))
		}
	}
}

func TestEventsAreDrainedOnlyWhileReadingTruncationAndFenceTogether(t *testing.T) {
	lost := &kgo.ErrDataLoss{Topic: "t", ConsumedTo: 10, ResetTo: 5}
	l := lifecycle{phase: phaseReading}
	l.note(evLossCheck)
	l.note(evFenced)
	l.truncated(lost)
	if l.checksFence() {
		t.Error("the fence is checked again with a fence pending")
	}

	l.halt()
	if look := l.drain(true, 3); look.events != 0 {
		t.Fatalf("drained %b while halted", look.events)
	}
	l.resume()
	look := l.drain(false, 3)
	if look.events != evFenced|evTruncated || look.truncation != lost || look.pos != 3 {
		t.Fatalf("first drain: events %b, truncation %v, pos %d; want fence and truncation at 3", look.events, look.truncation, look.pos)
	}
	if look := l.drain(false, 3); look.events != 0 {
		t.Fatalf("the loss check drained with records queued: %b", look.events)
	}
	if look := l.drain(true, 4); look.events != evLossCheck {
		t.Fatalf("with the queue written, drained %b, want the loss check", look.events)
	}
	if l.events != 0 || l.truncation != nil {
		t.Errorf("left after the drains: events %b, truncation %v", l.events, l.truncation)
	}
	l.note(evMoved)
	l.stopFor("stop")
	if look := l.drain(true, 4); look.events != 0 {
		t.Errorf("drained %b while stopped", look.events)
	}
}
