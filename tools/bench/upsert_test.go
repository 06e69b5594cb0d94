package main

import "testing"

// finalState is what the bench checks every upsert table against: here
// against a fold of a small stream, worked out by hand.
func TestFinalStateIsTheLastRecordOfEveryID(t *testing.T) {
	// keysNew: every record its own id, in partition id mod 8 at offset
	// id / 8: 12 records, offsets 0 0 0 0 0 0 0 0 1 1 1 1.
	got := finalState(keysNew, 12)
	want := upsertState{rows: 12, offsets: 4}
	for id := range int64(12) {
		want.mix += id ^ (id / 8)
	}
	if got != want {
		t.Errorf("new keys: %+v, want %+v", got, want)
	}
	// keysUpdates: ids 0..2 brought by records 0, 10, 20; the others
	// update an earlier id, all in partitions 0..2.
	m := keysUpdates
	next := map[int64]int64{}
	last := map[int64]int64{}
	for i := range 25 {
		id := m.id(i)
		if id > int64(i/10) || (i%10 == 0 && id != int64(i/10)) {
			t.Fatalf("record %d has id %d: not one brought by record 10k ≤ %d", i, id, i)
		}
		last[id] = next[id%8]
		next[id%8]++
	}
	want = upsertState{}
	for id, off := range last {
		want.rows++
		want.offsets += off
		want.mix += id ^ off
	}
	if got := finalState(m, 25); got != want || got.rows != 3 {
		t.Errorf("updates: %+v, want %+v with 3 rows", got, want)
	}
}
