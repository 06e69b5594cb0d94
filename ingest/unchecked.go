package ingest

import (
	"sync/atomic"

	"github.com/kafka2pg/kafka2pg/pgcopy"
	"github.com/kafka2pg/kafka2pg/stream"
)

// Checks Postgres makes itself. A jsonb column parses every value it reads
// and refuses what is not JSON it can store; a mapper that checks the same
// values before the COPY (the zero-config table's CheckJSON) does that work
// twice, and on the zero-config table it was a third of the bridge's CPU.
// A mapper that can leave such checks to Postgres is an UncheckedAppender.
// The fast path writes a topic's rows unchecked while its records are good;
// when Postgres refuses a row of an unchecked COPY, the batch is written
// again at once with the checks (so bad records become dead letters with
// the mapping's kinds and messages, as before), and so are the topic's next
// recheckBatches batches after the last one in which the mapping found a
// bad record. A topic with frequent bad records thus stays checked, and one
// with a rare one pays one refused COPY for it.

// UncheckedAppender is a RowAppender that can leave to Postgres the checks
// Postgres makes itself when it reads the row (see
// decode.RawMapper.AppendRowUnchecked): a record AppendRow refuses makes
// AppendRowUnchecked either refuse it too or write a row Postgres refuses
// with a data exception (SQLSTATE class 22).
type UncheckedAppender interface {
	RowAppender
	AppendRowUnchecked(r *stream.Record, dst []byte, oids []uint32, enc pgcopy.FieldEncoder) ([]byte, error)
}

// recheckBatches is how many batches of a topic are written with the
// mapping's checks after one in which a bad record was found.
const recheckBatches = 64

// checksOf is the number of the topic's next batches to write checked.
func (w *Writer) checksOf(topic string) *atomic.Int32 {
	w.mu.Lock()
	defer w.mu.Unlock()
	c := w.checks[topic]
	if c == nil {
		c = new(atomic.Int32)
		w.checks[topic] = c
	}
	return c
}

// leavingChecks is the RowAppender of rows written unchecked: its AppendRow
// is the mapper's AppendRowUnchecked, so the COPY sources append through
// one method either way.
type leavingChecks struct{ UncheckedAppender }

func (l leavingChecks) AppendRow(r *stream.Record, dst []byte, oids []uint32, enc pgcopy.FieldEncoder) ([]byte, error) {
	return l.AppendRowUnchecked(r, dst, oids, enc)
}

// uncheckedFor returns the appender that leaves the checks to Postgres when
// the mapper can and the topic's next batch may be written so, else nil.
func (w *Writer) uncheckedFor(topic string, m RowMapper) RowAppender {
	u, ok := m.(UncheckedAppender)
	if !ok || w.checksOf(topic).Load() > 0 {
		return nil
	}
	return leavingChecks{u}
}

// checked records the outcome of a batch written with the checks by a
// mapper that could have left them: bad records keep the topic checked for
// recheckBatches more batches; a clean batch counts one down.
func (w *Writer) checked(topic string, m RowMapper, bad bool) {
	if _, ok := m.(UncheckedAppender); !ok {
		return
	}
	c := w.checksOf(topic)
	if bad {
		c.Store(recheckBatches)
		return
	}
	for {
		n := c.Load()
		if n <= 0 || c.CompareAndSwap(n, n-1) {
			return
		}
	}
}

// recheck turns the checks on for the topic's next batches after Postgres
// refused a row of an unchecked COPY.
func (w *Writer) recheck(topic string) {
	w.checksOf(topic).Store(recheckBatches)
	w.log.Info("Postgres refused a row of a batch written without the mapping's checks: writing it again with them, and the topic's next batches too",
		"topic", topic, "batches", recheckBatches)
}
