package integration_test

import (
	"testing"
	"time"
)

// TestEightPartitionsLandExactlyOnce backfills 200,000 JSON records from 8
// partitions with --until-caught-up and checks that every one is in the
// table exactly once, with its value, key and headers, and that both
// kafka2pg.offsets and the group's Kafka offsets end at the end offsets.
func TestEightPartitionsLandExactlyOnce(t *testing.T) {
	parallel(t)
	const (
		partitions = 8
		records    = 200_000
	)
	s := newScenario(t, partitions)

	produceStart := time.Now()
	s.produce(t, records)
	ends := s.kafka.EndOffsets(t, s.topic)
	s.requireAllPartitionsHaveData(t, ends)
	if got := totalDurable(ends); got != records {
		t.Fatalf("test setup: end offsets %s add up to %d, want %d", formatOffsets(ends), got, records)
	}
	t.Logf("produced %d records in %v; end offsets %s", records, time.Since(produceStart).Round(time.Millisecond), formatOffsets(ends))

	took := s.runUntilCaughtUp(t, "backfill", 3*time.Minute)
	t.Logf("bridge ingested %d records in %v: %.0f rows/s (process wall time, including start and group join)",
		records, took.Round(time.Millisecond), float64(records)/took.Seconds())

	got := s.verifyFinalState(t)
	for p, end := range ends {
		if got[p] != end {
			t.Errorf("partition %d: end offset moved from %d to %d with no producer running", p, end, got[p])
		}
	}
	assertHeaders(t, s.db, s.table, s.topic, s.ledger)
}
