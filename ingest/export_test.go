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

// SetTracer sets w's Config.Tracer, for tests that read what a Write did
// from writers their helpers built. Call it before the writes.
func SetTracer(w *Writer, t Tracer) { w.cfg.Tracer = t }

// OnePool and BackendPID are onePool and backendPID, for tests of what
// happens to the connection of a write.
var (
	OnePool    = onePool
	BackendPID = backendPID
)

// SetAfterLook makes a's ApplyReady run f once each look ahead is done,
// before the group it ran beside applies: for tests of a look that the
// staging outdates.
func SetAfterLook(a *Applier, f func()) { a.afterLook = f }
