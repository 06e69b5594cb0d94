package ingest

// LaneWaiting is how many batches wait in the lane of a table, for tests of
// cross-partition batches.
func LaneWaiting(w *Writer, table string) int {
	l := w.laneOf(table)
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.waiting)
}

// RecheckBatches is recheckBatches, for tests of unchecked writes.
const RecheckBatches = recheckBatches
