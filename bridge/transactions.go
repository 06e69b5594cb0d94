package bridge

import (
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/kafka2pg/kafka2pg/bridge/internal/metrics"
	"github.com/kafka2pg/kafka2pg/ingest"
)

// The sinks with transactions (sinks.Set.Appliers) need an Applier of
// each source. Every member runs one (ingest.Applier.RunLeased), and the
// one holding the source's lock applies; the others wait for the lock.

// newAppliers makes the Appliers of cfgs on w.
func newAppliers(w *ingest.Writer, cfgs []ingest.ApplierConfig, log *slog.Logger) ([]*ingest.Applier, error) {
	var out []*ingest.Applier
	for _, c := range cfgs {
		c.Logger = log
		a, err := w.NewApplier(c)
		if err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	return out, nil
}

// applierStates are appliers as the metrics read them.
func applierStates(appliers []*ingest.Applier) []metrics.ApplierState {
	out := make([]metrics.ApplierState, len(appliers))
	for i, a := range appliers {
		out[i] = a
	}
	return out
}

// incompleteTransactions describes each source whose applier has waited
// stall or longer for the events of its next transaction, for /readyz;
// "" when none has (or stall is 0).
func incompleteTransactions(appliers []*ingest.Applier, stall time.Duration) string {
	var out []string
	for _, a := range appliers {
		in := a.Stats().Incomplete
		if stall > 0 && in.ID != "" && in.Age >= stall {
			out = append(out, fmt.Sprintf("source %s: transaction %s has waited %s for its events (%d of %d staged)",
				a.Source(), in.ID, in.Age.Round(time.Second), in.Seen, in.Expected))
		}
	}
	return strings.Join(out, "; ")
}
