package ingest

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/kafka2pg/kafka2pg/pgcopy"
	"github.com/kafka2pg/kafka2pg/stream"
)

// Cross-partition batches (Config.TableWriters): each append table has a
// lane with TableWriters writer slots. A batch that finds a free slot is written
// alone, at once, as without combining. A batch that finds every slot busy
// waits in the lane; when a slot frees, the first waiter takes every
// waiting batch of that table and writes them in one transaction: one
// fenced advance per partition, one COPY of all their rows (sorted by
// topic and partition), one COMMIT. With many partitions and small batches
// that replaces many small transactions (each a COMMIT's fsync, and the
// backend's fixed cost of a COPY statement) by a few large ones; with few
// busy partitions nothing waits and nothing changes.
//
// A combined transaction that meets anything unusual (a fence, a bad
// record, a row Postgres refuses) is rolled back and its batches are
// written one by one through the ordinary path, which knows how to report
// each of those per partition. So the combined path only ever commits
// batches that are entirely good, and exactly-once rests on the same fenced
// advances as always.

// lane is one table's writer slots and waiting batches.
type lane struct {
	mu      sync.Mutex
	busy    int
	waiting []*pending
}

// pending is a batch waiting in a lane. Its done channel receives the
// outcome, or, for the waiter that is handed the slot, the batches to write.
type pending struct {
	b    *stream.Batch
	sink Sink
	done chan laneOutcome // cap 1
}

type laneOutcome struct {
	res  outcome
	err  error
	lead []*pending // set when this waiter now owns the slot and writes these
}

// combinable reports whether a sink's batches may share a transaction:
// appends with a fixed table (not upserts, not change events).
func combinable(s Sink) bool {
	if s.Upsert != nil || s.Changes != nil || len(s.Children) > 0 {
		return false
	}
	_, changing := s.Mapper.(TableMapper)
	return !changing
}

func (w *Writer) laneOf(table string) *lane {
	w.mu.Lock()
	defer w.mu.Unlock()
	l := w.lanes[table]
	if l == nil {
		l = &lane{}
		w.lanes[table] = l
	}
	return l
}

// writeInLane writes b alone when its table has a free slot, or else waits
// to be written with the table's other waiting batches.
func (w *Writer) writeInLane(ctx context.Context, b *stream.Batch, sink Sink) (outcome, error) {
	l := w.laneOf(sink.Table.QualifiedName())
	l.mu.Lock()
	if l.busy < w.cfg.TableWriters {
		l.busy++
		l.mu.Unlock()
		res, err := w.writeChanging(ctx, b, sink)
		w.release(ctx, l)
		return res, err
	}
	p := &pending{b: b, sink: sink, done: make(chan laneOutcome, 1)}
	l.waiting = append(l.waiting, p)
	l.mu.Unlock()

	var o laneOutcome
	select {
	case o = <-p.done:
	case <-ctx.Done():
		l.mu.Lock()
		if i := slices.Index(l.waiting, p); i >= 0 {
			l.waiting = slices.Delete(l.waiting, i, i+1)
			l.mu.Unlock()
			return outcome{}, fmt.Errorf("write %s/%d: %w", b.Topic, b.Partition, ctx.Err())
		}
		l.mu.Unlock()
		o = <-p.done // taken already: its transaction decides
	}
	if o.lead == nil {
		return o.res, o.err
	}
	// This waiter owns a slot now and writes the batches handed to it
	// (its own among them) in one transaction.
	var res outcome
	var err error
	results := w.writeCombined(ctx, o.lead)
	for i, q := range o.lead {
		if q == p {
			res, err = results[i].res, results[i].err
			continue
		}
		q.done <- results[i]
	}
	w.release(ctx, l)
	return res, err
}

// release frees a slot, or hands it to the first waiter together with every
// waiting batch (up to CombineMaxRows rows).
func (w *Writer) release(ctx context.Context, l *lane) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.waiting) == 0 {
		l.busy--
		return
	}
	rows, n := 0, 0
	for n < len(l.waiting) && (n == 0 || rows+len(l.waiting[n].b.Records) <= w.cfg.CombineMaxRows) {
		rows += len(l.waiting[n].b.Records)
		n++
	}
	take := slices.Clone(l.waiting[:n])
	l.waiting = slices.Delete(l.waiting, 0, n)
	take[0].done <- laneOutcome{lead: take}
}

// writeCombined writes the batches in one transaction and returns each
// one's outcome, in order. A single batch, or a combined transaction that
// cannot commit every batch whole, goes through the ordinary path batch by
// batch.
func (w *Writer) writeCombined(ctx context.Context, ps []*pending) []laneOutcome {
	out := make([]laneOutcome, len(ps))
	one := func() []laneOutcome {
		for i, p := range ps {
			res, err := w.writeChanging(ctx, p.b, p.sink)
			out[i] = laneOutcome{res: res, err: err}
		}
		return out
	}
	if len(ps) == 1 {
		return one()
	}
	for _, p := range ps[1:] {
		if !sameColumns(p.sink.Table, ps[0].sink.Table) {
			return one()
		}
	}
	res, err := w.combinedTx(ctx, ps)
	if errors.Is(err, stream.ErrFenced) || res.redo != 0 {
		// The ordinary path reports a fence, a bad record or a refused
		// row for its partition.
		one()
		if res.redo == attemptChecked {
			for i := range out {
				out[i].res.rechecked = true
			}
		}
		return out
	}
	for i, p := range ps {
		if err != nil {
			out[i] = laneOutcome{err: combinedError(p.b, err)}
			continue
		}
		r := res
		r.rows, r.combined = len(p.b.Records), len(ps)
		if i > 0 {
			// One COPY and one COMMIT: timed once, so duration histograms
			// count each statement once.
			r.copyDuration, r.commitDuration = 0, 0
		}
		out[i] = laneOutcome{res: r}
	}
	return out
}

// combinedError is the error of a combined transaction as the write of b
// returns it: a *DeadlineError names b's partition.
func combinedError(b *stream.Batch, err error) error {
	var late *DeadlineError
	if errors.As(err, &late) {
		e := *late
		e.Topic, e.Partition = b.Topic, b.Partition
		return &e
	}
	return fmt.Errorf("write %s/%d: %w", b.Topic, b.Partition, err)
}

// combinedTx is the combined transaction: every fence first (in topic and
// partition order, so two combined transactions never wait on each other
// in a cycle), the rows in one COPY, the notifications, COMMIT. A fence
// (stream.ErrFenced), a bad record or a row Postgres refused roll it back
// and ask for the batches to be written one by one (outcome.redo: with
// attemptChecked after a row written unchecked was refused).
func (w *Writer) combinedTx(ctx context.Context, ps []*pending) (outcome, error) {
	order := slices.Clone(ps)
	slices.SortFunc(order, func(x, y *pending) int {
		return cmp.Or(cmp.Compare(x.b.Topic, y.b.Topic), cmp.Compare(x.b.Partition, y.b.Partition))
	})
	spec := txSpec{sink: order[0].sink}
	for _, p := range order {
		spec.batches = append(spec.batches, p.b)
	}
	src := &multiSource{ps: order, maxBytes: w.cfg.MaxRecordBytes, unchecked: make([]RowAppender, len(order)), append: make([]appendFunc, len(order))}
	res, err := w.inBatchTx(ctx, spec, func(ctx context.Context, tx *batchTx) (outcome, error) {
		for i, p := range order {
			src.unchecked[i] = w.uncheckedFor(p.b.Topic, p.sink.Mapper)
			src.append[i] = copyAppender(p.sink.Mapper, src.unchecked[i])
		}
		t := spec.sink.Table
		copyStart := time.Now()
		n, err := pgcopy.CopyFrom(ctx, tx, t.Ident(), t.ColumnNames(), src)
		res := outcome{copyDuration: time.Since(copyStart)}
		if src.err != nil {
			err = src.err
		}
		if rowError(err) {
			// Which row Postgres refused is not known here: every topic
			// whose rows went unchecked is checked from now on, so the
			// batches written one by one next are (unchecked.go).
			redo := attemptIsolated
			for i, p := range order {
				if src.unchecked[i] != nil {
					w.recheck(p.b.Topic)
					redo = attemptChecked
				}
			}
			return outcome{redo: redo}, nil
		}
		if src.bad {
			if src.badTopic != "" {
				w.checked(src.badTopic, order[0].sink.Mapper, true)
			}
			return outcome{redo: attemptIsolated}, nil
		}
		if err != nil {
			return outcome{}, fmt.Errorf("copy into %s: %w", t.QualifiedName(), err)
		}
		if want := src.rows; int(n) != want {
			return outcome{}, fmt.Errorf("copy into %s: %d rows copied, want %d", t.QualifiedName(), n, want)
		}
		return res, nil
	})
	if err == nil && res.redo == 0 {
		for i, p := range order {
			if src.unchecked[i] == nil {
				w.checked(p.b.Topic, p.sink.Mapper, false)
			}
		}
	}
	return res, err
}

// multiSource feeds the records of several batches to one COPY; the first
// record that is not a good row stops it (bad is set), since the combined
// path commits only whole, good batches.
type multiSource struct {
	ps       []*pending
	maxBytes int
	bi, ri   int
	row      []any
	rows     int
	bad      bool
	badTopic string // of the record the mapping refused, when bad
	err      error
	// unchecked[i], when set, appends the rows of ps[i] instead of its
	// mapper, leaving checks to Postgres (uncheckedFor).
	unchecked []RowAppender
	// append[i] appends the rows of ps[i] (unchecked[i], or the mapper when
	// it is a RowAppender) for this COPY (appendFuncOf); nil: not one.
	append []appendFunc
}

// record returns the next record and its batch; nil when none is left.
func (s *multiSource) record() (*stream.Record, *pending) {
	for s.bi < len(s.ps) {
		p := s.ps[s.bi]
		if s.ri >= len(p.b.Records) {
			s.bi, s.ri = s.bi+1, 0
			continue
		}
		s.ri++
		return &p.b.Records[s.ri-1], p
	}
	return nil, nil
}

func (s *multiSource) Next() bool {
	r, p := s.record()
	if r == nil {
		return false
	}
	row, bad, err := mapRecord(r, p.sink.Mapper, s.maxBytes, s.row)
	if !s.took(r, bad, err) {
		return false
	}
	s.row = row
	return true
}

// took notes what decoding r came to (decodeRecord), and says whether its
// row is in the COPY: a bad record ends the COPY, as any error does.
func (s *multiSource) took(r *stream.Record, bad *badRecord, err error) bool {
	switch {
	case err != nil:
		s.err = err
		return false
	case bad != nil:
		s.bad = true
		if bad.refusedByMapping() {
			s.badTopic = r.Topic
		}
		s.err = errBadInCombined
		return false
	}
	s.rows++
	return true
}

var errBadInCombined = errors.New("a bad record in a combined batch")

// appends: the batches share one table, so their sinks one mapper type.
func (s *multiSource) AppendsTuples() bool {
	for _, f := range s.append {
		if f == nil {
			return false
		}
	}
	return true
}

// NextTuple is Next for RowAppenders: the row goes straight into dst.
func (s *multiSource) NextTuple(dst []byte, oids []uint32, enc pgcopy.FieldEncoder) ([]byte, bool) {
	r, _ := s.record()
	if r == nil {
		return dst, false
	}
	out := dst
	bad, err := decodeRecord(r, s.maxBytes, func(r *stream.Record) (err error) {
		out, err = s.append[s.bi](r, dst, oids, enc)
		return err
	})
	if !s.took(r, bad, err) {
		return dst, false
	}
	return out, true
}

func (s *multiSource) Values() ([]any, error) { return s.row, nil }
func (s *multiSource) Err() error             { return s.err }

var _ pgx.CopyFromSource = (*multiSource)(nil)
