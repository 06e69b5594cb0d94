package ingest

import (
	"testing"
	"time"
)

// The step estimates, samples in, deadline out: a path that stops answering
// is cut at the floor once the database answered fast, while a slow but
// alive one (latency, bandwidth, a big batch) gets the time it takes.

// sample is one step that succeeded: what it took, writing bytes.
type sample struct {
	step  Step
	bytes int64
	took  time.Duration
}

// steps repeats the samples of one write n times.
func steps(n int, write ...sample) []sample {
	var out []sample
	for range n {
		out = append(out, write...)
	}
	return out
}

const (
	kb = 1 << 10
	mb = 1 << 20
	gb = 1 << 30
)

func TestStepDeadlinesFollowTheMeasuredLatency(t *testing.T) {
	fast := steps(50, sample{StepBegin, 0, time.Millisecond}, sample{StepFence, 0, 2 * time.Millisecond},
		sample{StepCopy, mb, 20 * time.Millisecond}, sample{StepCommit, 0, 3 * time.Millisecond})
	for _, tc := range []struct {
		name    string
		samples []sample
		step    Step
		bytes   int64
		// want: the deadline is at least min and at most max; 0, 0: the
		// step has no estimate (the ceiling applies).
		min, max time.Duration
	}{
		{name: "a step never measured has the ceiling", step: StepCommit},
		{name: "a body whose fence was never measured has the ceiling", samples: steps(3, sample{StepCopy, mb, time.Second}), step: StepCopy, bytes: mb},
		{name: "a fast database's commit is cut at the floor", samples: fast, step: StepCommit, min: DeadlineFloor, max: DeadlineFloor},
		{name: "a fast database's COPY of the usual size is cut at the floor", samples: fast, step: StepCopy, bytes: mb, min: DeadlineFloor, max: DeadlineFloor},
		{name: "a fast database's BEGIN is cut at the floor", samples: fast, step: StepBegin, min: DeadlineFloor, max: DeadlineFloor},
		{name: "100 ms ± 50 ms of latency each way stays under the floor",
			samples: steps(20, sample{StepFence, 0, 150 * time.Millisecond}, sample{StepFence, 0, 350 * time.Millisecond}, sample{StepCommit, 0, 100 * time.Millisecond}, sample{StepCommit, 0, 300 * time.Millisecond}),
			step:    StepCommit, min: DeadlineFloor, max: DeadlineFloor},
		{name: "a commit that takes seconds gets more than it takes",
			samples: steps(20, sample{StepCommit, 0, 4 * time.Second}, sample{StepCommit, 0, 6 * time.Second}),
			step:    StepCommit, min: 6 * time.Second, max: 15 * time.Second},
		{name: "64 KB/s: a batch of 1 MB that takes 16 s gets three times that",
			samples: steps(10, sample{StepFence, 0, 200 * time.Millisecond}, sample{StepCopy, mb, 16 * time.Second}),
			step:    StepCopy, bytes: mb, min: 45 * time.Second, max: 50 * time.Second},
		{name: "64 KB/s: a batch of 100 KB takes its share",
			samples: steps(10, sample{StepFence, 0, 200 * time.Millisecond}, sample{StepCopy, mb, 16 * time.Second}),
			step:    StepCopy, bytes: 100 * kb, min: DeadlineFloor, max: 5 * time.Second},
		{name: "a COPY of 1 GB after batches of 10 MB at 100 MB/s gets three times its 10 s",
			samples: steps(30, sample{StepFence, 0, 2 * time.Millisecond}, sample{StepCopy, 10 * mb, 100 * time.Millisecond}),
			step:    StepCopy, bytes: gb, min: 30 * time.Second, max: 35 * time.Second},
		{name: "a COPY of 1 GB after small batches gets more still: their fixed part counts as bytes",
			samples: steps(30, sample{StepFence, 0, 2 * time.Millisecond}, sample{StepCopy, 100 * kb, 12 * time.Millisecond}),
			step:    StepCopy, bytes: gb, min: 3 * time.Minute},
		{name: "a jittery COPY rate widens the deadline",
			samples: steps(20, sample{StepFence, 0, 2 * time.Millisecond}, sample{StepCopy, 10 * mb, 100 * time.Millisecond}, sample{StepCopy, 10 * mb, 300 * time.Millisecond}),
			step:    StepCopy, bytes: gb, min: 60 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := newLatencies(DeadlineFloor)
			for _, s := range tc.samples {
				l.observe(s.step, "t", s.bytes, s.took)
			}
			d, _, ok := l.expect(tc.step, "t", tc.bytes)
			switch {
			case tc.min == 0 && tc.max == 0:
				if ok {
					t.Errorf("deadline %s, want none (the ceiling)", d)
				}
			case !ok:
				t.Errorf("no deadline, want one in [%s, %s]", tc.min, tc.max)
			case d < tc.min || (tc.max > 0 && d > tc.max):
				t.Errorf("deadline %s, want one in [%s, %s]", d, tc.min, tc.max)
			}
			t.Logf("%s of %d bytes: deadline %s", tc.step, tc.bytes, d)
		})
	}
}

func TestACutStepDoublesItsDeadlineOncePerStallUntilItSucceeds(t *testing.T) {
	l := newLatencies(DeadlineFloor)
	for range 20 {
		l.observe(StepCommit, "t", 0, 10*time.Millisecond)
	}
	d, gen, _ := l.expect(StepCommit, "t", 0)
	if d != DeadlineFloor {
		t.Fatalf("deadline %s, want the floor", d)
	}
	// Four partitions cut by the same stall, each with the deadline of
	// the same generation: one doubling.
	for range 4 {
		l.cut(StepCommit, "t", gen)
	}
	d2, gen2, _ := l.expect(StepCommit, "t", 0)
	if d2 != 2*DeadlineFloor {
		t.Errorf("after one stall: deadline %s, want %s", d2, 2*DeadlineFloor)
	}
	l.cut(StepCommit, "t", gen2)
	if d3, _, _ := l.expect(StepCommit, "t", 0); d3 != 4*DeadlineFloor {
		t.Errorf("after two stalls: deadline %s, want %s", d3, 4*DeadlineFloor)
	}
	// Other steps keep theirs.
	l.observe(StepFence, "t", 0, 10*time.Millisecond)
	if d, _, _ := l.expect(StepFence, "t", 0); d != DeadlineFloor {
		t.Errorf("the fence after the commit's stalls: deadline %s, want the floor", d)
	}
	for range maxBackoff + 5 {
		_, g, _ := l.expect(StepCommit, "t", 0)
		l.cut(StepCommit, "t", g)
	}
	if d, _, _ := l.expect(StepCommit, "t", 0); d != DeadlineFloor<<maxBackoff {
		t.Errorf("after many stalls: deadline %s, want %s (doubled %d times at most)", d, DeadlineFloor<<maxBackoff, maxBackoff)
	}
	l.observe(StepCommit, "t", 0, 10*time.Millisecond)
	if d, _, _ := l.expect(StepCommit, "t", 0); d != DeadlineFloor {
		t.Errorf("after a commit that succeeded: deadline %s, want the floor again", d)
	}
}

func TestEachTableHasItsOwnRate(t *testing.T) {
	l := newLatencies(DeadlineFloor)
	for range 10 {
		l.observe(StepFence, "", 0, time.Millisecond)
		l.observe(StepCopy, "fast", 10*mb, 100*time.Millisecond)
		l.observe(StepCopy, "slow", 10*mb, time.Second)
	}
	fast, _, _ := l.expect(StepCopy, "fast", gb)
	slow, _, _ := l.expect(StepCopy, "slow", gb)
	if slow < 9*fast {
		t.Errorf("1 GB into a table 10x slower: %s, into the fast one %s", slow, fast)
	}
	if _, _, ok := l.expect(StepCopy, "new", mb); ok {
		t.Errorf("a table never written has a body deadline, want the ceiling")
	}
}
