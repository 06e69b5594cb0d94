package integration_test

import (
	"testing"
	"time"
)

// TestPostgresIsTheSourceOfTruth rewinds the group's Kafka offsets to 0
// behind the bridge's back between two runs. The second run must resume from
// kafka2pg.offsets: it writes only the new records, and afterwards the
// group's Kafka offsets again mirror Postgres.
func TestPostgresIsTheSourceOfTruth(t *testing.T) {
	parallel(t)
	const (
		partitions = 8
		first      = 20_000
		second     = 5_000
	)
	s := newScenario(t, partitions)

	s.produce(t, first)
	s.runUntilCaughtUp(t, "first", 2*time.Minute, fastGroupFlags...)
	s.verifyFinalState(t)
	if t.Failed() {
		t.FailNow()
	}

	s.kafka.WaitGroupEmpty(t, s.group, 30*time.Second)
	rewound := make(map[int32]int64)
	for p := range int32(partitions) {
		rewound[p] = 0
	}
	s.kafka.CommitGroupOffsets(t, s.group, s.topic, rewound)
	assertGroupOffsets(t, s.kafka, s.group, s.topic, rewound)
	if t.Failed() {
		t.Fatal("test setup: the group's offsets were not rewound")
	}
	t.Logf("rewound the group's Kafka offsets to 0; kafka2pg.offsets still says %s", formatOffsets(s.durableOffsets(t)))

	s.produce(t, second)
	s.runUntilCaughtUp(t, "second", 2*time.Minute, fastGroupFlags...)
	ends := s.verifyFinalState(t)
	if got := totalDurable(ends); got != first+second {
		t.Errorf("end offsets %s add up to %d, want %d records", formatOffsets(ends), got, first+second)
	}
}
