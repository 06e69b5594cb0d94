package integration_test

import (
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Fault cases 7-10: what the topic itself does under the bridge
// (transactions, compaction, added partitions, retention). Each runs small
// inside `make test` and bigger with KAFKA2PG_FAULTS=1.

// TestFault07AbortedTransactionsNeverLand runs a transactional producer that
// commits some transactions and aborts others, next to a plain producer,
// while the bridge consumes with its default isolation (read_committed).
// No aborted record may land; every committed one lands once.
func TestFault07AbortedTransactionsNeverLand(t *testing.T) {
	parallel(t)
	fc := newFaultCase(t, "7", "transactions: committed and aborted", 3, nil)
	txns := 30
	if fullFaults() {
		txns = 200
	}
	fc.inject(fmt.Sprintf("a transactional producer runs %d transactions of 1-40 records, about 1 in 3 aborted, next to a plain producer; bridge with default --kafka-isolation-level", txns))
	flags := faultFlags(fc.s.kafka)
	b := fc.s.start(t, "A", flags...)
	prod := fc.feed.start(t, 20, 30*time.Millisecond, 1_000_000)
	tp := fc.feed.newTxnProducer(t)
	aborted, abortedRecords := 0, 0
	for range txns {
		n := 1 + rand.IntN(40)
		abort := rand.IntN(3) == 0
		if err := tp.transaction(t.Context(), n, abort); err != nil {
			t.Fatal(err)
		}
		if abort {
			aborted++
			abortedRecords += n
		}
		fc.trial()
		requireRunning(t, b)
		time.Sleep(randomDuration(0, 40*time.Millisecond)) // the schedule: spread transactions over the bridge's run
	}
	fc.note(t, "%d of %d transactions aborted (%d records that must not land)", aborted, txns, abortedRecords)
	fc.s.waitProgress(t, nil, 30*time.Second, b)
	prod.stopAndCheck(t)
	b.signal(t, syscall.SIGTERM)
	b.requireExitZero(t, time.Minute)
	fc.finish(t, nil, flags...)
}

// TestFault08OffsetGapsAreAccepted gives the bridge offsets that skip: a
// compacted topic (records superseded by a later one with the same key
// vanish, including the record the bridge would resume at) written with
// transactions (each commit marker takes an offset). The bridge must resume
// past the gaps, accept them in its continuity guard, and end with
// next_offset at the end offset.
func TestFault08OffsetGapsAreAccepted(t *testing.T) {
	parallel(t)
	configs := map[string]string{
		"cleanup.policy":            "compact",
		"min.cleanable.dirty.ratio": "0.01",
		"min.compaction.lag.ms":     "0",
		"segment.ms":                "100",
	}
	fc := newFaultCase(t, "8", "offset gaps: compaction and transaction markers", 3, configs)
	s, f := fc.s, fc.feed
	perPhase := 600
	if fullFaults() {
		perPhase = 3000
	}
	keyspace := int64(perPhase / 10) // every key written about 10 times in phase 2
	compaction := "kfake Cluster.Compact"
	if !s.kafka.Fake() {
		compaction = "the broker's log cleaner (segment.ms=100, min.cleanable.dirty.ratio=0.01)"
	}
	fc.inject(fmt.Sprintf("cleanup.policy=compact topic; half the records in committed transactions (markers); records with repeating keys compacted by %s while the bridge is stopped, then it resumes", compaction))
	flags := faultFlags(s.kafka)
	tp := f.newTxnProducer(t)

	// produceMix writes n records, alternating plain batches and committed
	// transactions, so markers sit between data records.
	produceMix := func(n int) {
		for n > 0 {
			k := min(n, 50)
			if rand.IntN(2) == 0 {
				f.mustProduce(t, k)
			} else if err := tp.transaction(t.Context(), k, false); err != nil {
				t.Fatal(err)
			}
			n -= k
		}
	}

	// Phase 1: unique keys (nothing to compact), the bridge reads
	// everything, up to the end offsets (past the last marker).
	produceMix(perPhase)
	s.runUntilCaughtUp(t, "phase1", 2*time.Minute, flags...)
	resumeAt := s.durableOffsets(t)
	ends1 := s.kafka.EndOffsets(t, s.topic)
	if formatOffsets(resumeAt) != formatOffsets(ends1) {
		t.Fatalf("after phase 1 next_offset %s, want the end offsets %s (markers included)", formatOffsets(resumeAt), formatOffsets(ends1))
	}
	stored := f.ledger()

	// Phase 2, bridge stopped: keys that repeat, then compaction down to
	// the last record of each key.
	f.keyspace = keyspace
	produceMix(perPhase)
	f.keyspace = 0
	atResume := fc.compact(t)
	fc.trial()
	var gapAtResume []string
	for p, o := range resumeAt {
		found := false
		for _, r := range atResume {
			if r.partition == p && r.offset == o {
				found = true
				break
			}
		}
		if !found {
			gapAtResume = append(gapAtResume, fmt.Sprintf("%d@%d", p, o))
		}
	}
	fc.note(t, "compaction left %d of %d phase-2 records readable; resume positions with no record any more: %v",
		countFrom(atResume, resumeAt), perPhase, gapAtResume)

	// Phase 3: the bridge resumes over the gaps and keeps running while
	// more transactions (markers) come in.
	b := s.start(t, "A", flags...)
	for range 10 {
		if err := tp.transaction(t.Context(), 1+rand.IntN(20), false); err != nil {
			t.Fatal(err)
		}
		f.mustProduce(t, 5)
		fc.trial()
		time.Sleep(randomDuration(0, 100*time.Millisecond)) // the schedule: markers while the bridge runs
	}
	s.waitProgress(t, resumeAt, time.Minute, b)
	b.signal(t, syscall.SIGTERM)
	b.requireExitZero(t, time.Minute)

	until := f.sentinels(t)
	s.runUntilCaughtUp(t, "final", 2*time.Minute, flags...)
	final := fc.readable(t, until)

	// What must be in the table: what the bridge read in phase 1 (it was
	// all there then), and from the resume positions on, what a consumer
	// reads now (compaction is over: every repeating key has one record).
	want := make(map[int64]expectedRecord)
	for id, l := range stored {
		want[id] = expectedRecord{id: id, partition: l.partition, offset: l.offset}
	}
	for id, r := range final {
		if r.offset >= resumeAt[r.partition] {
			want[id] = r
		}
	}
	fc.verifyAgainst(t, want)
}

// countFrom counts the records at or past from[partition].
func countFrom(rs map[int64]expectedRecord, from map[int32]int64) int {
	n := 0
	for _, r := range rs {
		if r.offset >= from[r.partition] {
			n++
		}
	}
	return n
}

// compact gets the topic compacted and waits until a consumer reads exactly
// what full compaction leaves: of the records with a repeating key, the
// last of each key in each partition, and every other record. It returns
// what the consumer reads then. Once there, no later cleaning can remove
// anything more.
func (fc *faultCase) compact(t testing.TB) map[int64]expectedRecord {
	t.Helper()
	s, f := fc.s, fc.feed
	// Roll the active segment, which is never cleaned: segment.ms=100 rolls
	// it at the next append, and one record per partition with a unique key
	// is all the new active segment then holds.
	time.Sleep(200 * time.Millisecond) // let segment.ms pass: the schedule of a segment roll
	f.sentinels(t)
	var got map[int64]expectedRecord
	pollUntil(t, 2*time.Minute, "topic "+s.topic+" compacted to the last record of each key", func() (bool, string) {
		if s.kafka.Fake() {
			s.kafka.Compact(t)
		}
		got = fc.readable(t, f.sentinels(t))
		want := compactedIDs(f.ledger())
		missing, extra := 0, 0
		for id := range got {
			if !want[id] {
				extra++
			}
		}
		for id := range want {
			if _, ok := got[id]; !ok {
				missing++
			}
		}
		if missing > 0 {
			t.Fatalf("compaction of %s removed %d records that were the last of their key, or unique", s.topic, missing)
		}
		return extra == 0, fmt.Sprintf("%d readable, %d of them superseded but not cleaned yet", len(got), extra)
	})
	return got
}

// TestFault09AddedPartitionsAreConsumed adds partitions to the topic while
// the bridge runs with --kafka-metadata-max-age 2s; records produced to the
// new partitions must land.
func TestFault09AddedPartitionsAreConsumed(t *testing.T) {
	parallel(t)
	fc := newFaultCase(t, "9", "partitions added while running", 2, nil)
	s, f := fc.s, fc.feed
	fc.inject("CreatePartitions twice (2 → 3 → 5) while a producer writes to every partition; bridge with --kafka-metadata-max-age 2s")
	flags := faultFlags(s.kafka, "--kafka-metadata-max-age", "2s")
	b := s.start(t, "A", flags...)
	prod := f.start(t, 20, 20*time.Millisecond, 1_000_000)
	s.waitProgress(t, nil, 30*time.Second, b)
	for _, add := range []int{1, 2} {
		at := s.durableOffsets(t)
		s.kafka.AddPartitions(t, s.topic, add)
		s.partitions += int32(add)
		f.setPartitions(t, s.partitions)
		added := time.Now()
		s.waitProgress(t, at, time.Minute, b)
		fc.trial()
		fc.note(t, "%d partition(s) added: every one of the %d partitions had rows %v later", add, s.partitions, time.Since(added).Round(100*time.Millisecond))
	}
	prod.stopAndCheck(t)
	b.signal(t, syscall.SIGTERM)
	b.requireExitZero(t, time.Minute)
	fc.finish(t, nil, flags...)
}

// TestFault10DataLossIsNeverSilent deletes records the bridge has not read
// yet (DeleteRecords moves the log start offset past them, as retention
// does). By default the bridge stops that partition with an error naming the
// lost range and --until-caught-up exits non-zero; with --on-data-loss=skip
// it goes on and logs the range.
func TestFault10DataLossIsNeverSilent(t *testing.T) {
	parallel(t)
	fc := newFaultCase(t, "10", "records deleted by retention before they were read", 3, nil)
	s, f := fc.s, fc.feed
	perPhase := 300
	if fullFaults() {
		perPhase = 3000
	}
	fc.inject("DeleteRecords (the log start offset moves, as retention moves it) past unread records of partition 0; --on-data-loss=stop (default), then skip")
	flags := faultFlags(s.kafka)

	f.mustProduce(t, perPhase)
	s.runUntilCaughtUp(t, "phase1", 2*time.Minute, flags...)
	read := s.durableOffsets(t)
	stored := f.ledger()
	f.mustProduce(t, perPhase)
	ends := s.kafka.EndOffsets(t, s.topic)
	lostFrom, lostTo := read[0], read[0]+(ends[0]-read[0])/2
	s.kafka.DeleteRecordsBefore(t, s.topic, map[int32]int64{0: lostTo})
	fc.trial()
	t.Logf("deleted partition 0 below %d; the bridge had read up to %d", lostTo, lostFrom)

	// Default: stop the partition, name the range, exit non-zero.
	stop := s.start(t, "stop", append([]string{"--until-caught-up"}, flags...)...)
	if !stop.wait(2 * time.Minute) {
		t.Fatalf("bridge %s: still running 2m after it met lost records", stop.name)
	}
	if stop.state.ExitCode() == 0 {
		t.Errorf("bridge %s with --on-data-loss=stop: exit status 0 over lost records, want non-zero", stop.name)
	}
	wantStop := fmt.Sprintf("data loss on %s/0: offsets [%d, %d) were deleted by retention", s.topic, lostFrom, lostTo)
	log, _ := os.ReadFile(stop.logPath)
	if !strings.Contains(string(log), wantStop) {
		t.Errorf("bridge %s log lacks %q:\n%s", stop.name, wantStop, tail(stop.logPath, 20))
	}
	after := s.durableOffsets(t)
	if after[0] != lostFrom {
		t.Errorf("after the stop, partition 0 next_offset = %d, want %d (nothing skipped)", after[0], lostFrom)
	}
	for p := int32(1); p < s.partitions; p++ {
		if after[p] != ends[p] {
			t.Errorf("after the stop, partition %d next_offset = %d, want the end offset %d (other partitions go on)", p, after[p], ends[p])
		}
	}
	fc.note(t, "stop: %s, log %q; partition 0 stayed at next_offset %d", stop.status(), wantStop, after[0])

	// skip: go on and say so.
	until := f.sentinels(t)
	skip := s.start(t, "skip", append([]string{"--until-caught-up", "--on-data-loss=skip"}, flags...)...)
	skip.requireExitZero(t, 2*time.Minute)
	wantSkip := fmt.Sprintf("data loss: offsets [%d, %d) were deleted by retention", lostFrom, lostTo)
	log, _ = os.ReadFile(skip.logPath)
	if !strings.Contains(string(log), wantSkip) || !strings.Contains(string(log), "skipping them") {
		t.Errorf("bridge %s log lacks %q ... \"skipping them\":\n%s", skip.name, wantSkip, tail(skip.logPath, 20))
	}
	fc.note(t, "skip: exit 0, log %q ... skipping them; %d records deleted unread", wantSkip, lostTo-lostFrom)

	// The table holds what the bridge read before the deletion and what is
	// readable from its positions on; the deleted records are unexpected.
	want := make(map[int64]expectedRecord)
	for id, l := range stored {
		want[id] = expectedRecord{id: id, partition: l.partition, offset: l.offset}
	}
	for id, r := range fc.readable(t, until) {
		if r.offset >= read[r.partition] {
			want[id] = r
		}
	}
	fc.verifyAgainst(t, want)
}

// compactedIDs returns the ids that full compaction keeps of the ledger's
// committed records: every record with a unique key ("k<id>"), and of the
// records with a repeating key ("c<n>") the last of each key per partition.
func compactedIDs(ledger map[int64]fed) map[int64]bool {
	keep := make(map[int64]bool)
	last := make(map[string]fed)
	for id, l := range ledger {
		if l.aborted {
			continue
		}
		if !strings.HasPrefix(l.key, "c") {
			keep[id] = true
			continue
		}
		k := fmt.Sprintf("%d/%s", l.partition, l.key)
		if prev, ok := last[k]; !ok || l.offset > prev.offset {
			last[k] = l
		}
	}
	for _, l := range last {
		keep[l.id] = true
	}
	return keep
}
