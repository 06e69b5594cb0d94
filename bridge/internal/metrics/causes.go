package metrics

import (
	"fmt"
	"strings"
	"sync"

	"github.com/kafka2pg/kafka2pg/ingest"
)

// CauseStopped is the cause of a write that stopped its partition
// (--on-error=stop): not a failure to retry, but counted with them.
const CauseStopped = "stopped"

// writeErrorCauses are the values of the cause label of
// kafka2pg_ingest_write_errors_total, each exported from the start so that
// a rate over it is 0, not absent.
var writeErrorCauses = []string{ingest.CauseFenced, ingest.CauseTimeout, ingest.CauseConnection, ingest.CauseReadOnly,
	ingest.CauseRefused, ingest.CauseData, ingest.CauseOther, CauseStopped}

// causeCounts counts failed writes by cause for the progress line, which
// says what went wrong since the last line, not only how often.
type causeCounts struct {
	mu sync.Mutex
	n  map[string]int64
}

func (c *causeCounts) add(cause string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = make(map[string]int64)
	}
	c.n[cause]++
}

// since returns the counts now and, as "connection=12 timeout=1" in the
// order of writeErrorCauses, how they grew from prev ("" when they did not).
func (c *causeCounts) since(prev map[string]int64) (now map[string]int64, grew string) {
	c.mu.Lock()
	now = make(map[string]int64, len(c.n))
	for k, v := range c.n {
		now[k] = v
	}
	c.mu.Unlock()
	var parts []string
	for _, cause := range writeErrorCauses {
		if d := now[cause] - prev[cause]; d > 0 {
			parts = append(parts, fmt.Sprintf("%s=%d", cause, d))
		}
	}
	return now, strings.Join(parts, " ")
}
