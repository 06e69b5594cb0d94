package ingest

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/kafka2pg/kafka2pg/offsets"
	"github.com/kafka2pg/kafka2pg/pgcopy"
	"github.com/kafka2pg/kafka2pg/schema"
	"github.com/kafka2pg/kafka2pg/stream"
)

// Every write transaction of the package goes through inBatchTx: the fast
// path and the isolating one of appends and upserts, the combined
// transactions of several partitions, the replay of dead letters. What
// differs between them is a body; the retries between them are the
// attempt loop of write (writer.go).

// attempt is one way of writing a batch. A body that meets what its way
// cannot write asks, through outcome.redo, for the batch to be written
// again another way; nothing of it is committed.
type attempt uint8

const (
	// attemptFast copies the rows as the mapping builds them, leaving to
	// Postgres the checks it makes itself while the topic's records are
	// good (unchecked.go).
	attemptFast attempt = iota + 1
	// attemptChecked is attemptFast with the mapping's checks: Postgres
	// refused a row of an unchecked COPY.
	attemptChecked
	// attemptIsolated finds the rows Postgres refuses under savepoints
	// (isolate.go), or stops at the first bad record with OnError "stop".
	attemptIsolated
)

// txSpec says what inBatchTx does around a body.
type txSpec struct {
	// batches are fenced first (offsets.Store.Advance), in this order. A
	// replay has none: it moves no offsets.
	batches []*stream.Batch
	// sink is the batches' sink: their dead letters and NOTIFYs name its
	// table.
	sink Sink
	// describe reads the column types of sink.Table in the fence's round
	// trip (fenceAndTypes), for a COPY that encodes by type (batchTx.oids).
	// One batch only.
	describe bool
	// isolating: the body copies rows set by set under savepoints, or
	// applies them one by one; it gets twice the deadline.
	isolating bool
	// rows counts what the transaction writes besides its batches'
	// records (a replay's letters), for the deadline.
	rows int
	opts pgx.TxOptions
	// notifies: the body runs the NOTIFYs itself (a routed batch, one
	// per table it wrote: routedNotify).
	notifies bool
	// kids are the child rows of the batch's records that checkChildren
	// mapped, which writeChildren writes instead of mapping them again.
	kids mappedChildren
	// stage, when set, runs after the fence and before the body: a
	// transactions sink's staging of its source transactions' events
	// (txstage.go), which must commit with the offsets.
	stage stageFunc
}

// batchTx is the transaction inBatchTx hands its body.
type batchTx struct {
	pgx.Tx
	// oids are the column types of the sink's table, read with the fence
	// (txSpec.describe).
	oids  []uint32
	state *txState
	// clock gives each step its deadline (rto.go); nil when the
	// transaction has its ceiling only.
	clock *stepClock
	// stages, when set, names the staging tables (stagingTable) the
	// transaction filled, for one that applies several change sets of a
	// table (the Applier's chunks); nil when it applies one.
	stages map[string]bool
}

// at says what the transaction waits on from now: what a DeadlineError
// names, and InFlight shows; the step's deadline starts.
func (tx *batchTx) at(s Step) {
	tx.state.step.Store(uint32(s))
	if tx.clock != nil {
		tx.clock.at(s)
	}
}

// inBatchTx runs one write transaction: BEGIN, the fence of every batch,
// the body, the dead letters of the body's bad records, the NOTIFYs,
// COMMIT. It rolls back on any error, and when the body asks for a redo;
// a body with outcome.stop set is committed, and inBatchTx returns the
// stop.
//
// The transaction has a ceiling (Writer.deadline), from the pool's Acquire
// to COMMIT, and each step from BEGIN on a deadline of its own from what
// that step took in the writes before (rto.go), within the ceiling; the
// ctx given to the body carries both. A transaction that passes either is
// cancelled, and its connection closed, never returned to the pool: pgx
// closes a connection whose statement it cancels mid-flight, and the
// rollback, under the expired ctx, closes one that was between statements.
// inBatchTx then returns a *DeadlineError. A COMMIT that failed, by the
// deadline or not, may have committed: the caller claims again, which
// re-reads the durable position.
func (w *Writer) inBatchTx(ctx context.Context, spec txSpec, body func(ctx context.Context, tx *batchTx) (outcome, error)) (res outcome, err error) {
	rows := spec.rows
	var bytes int64
	for _, b := range spec.batches {
		rows += len(b.Records)
		bytes += batchBytes(b)
	}
	d := w.deadline(rows, spec.isolating)
	st := w.track(spec.batches, d)
	defer w.untrack(spec.batches, st)
	// The ceiling bounds the wait for a pooled connection too, which is
	// the other partitions' writes and no sign of a slow database; the
	// steps' deadlines start at BEGIN.
	cctx, cancelCeiling := context.WithDeadlineCause(ctx, st.began.Add(d), errWriteDeadline)
	defer cancelCeiling()
	tctx, cancelStep := context.WithCancelCause(cctx)
	defer cancelStep(nil)
	tx := &batchTx{state: st}
	if len(spec.batches) > 0 && !spec.isolating {
		// An isolating body runs a statement per set of rows, or per
		// row: no measure of a COPY fits it, so it has its ceiling.
		tx.clock = &stepClock{l: w.lat, table: spec.sink.Table.QualifiedName(), bytes: bytes, ceiling: st.began.Add(d), state: st, cancel: cancelStep}
		defer tx.clock.stop()
	}
	defer func() {
		if err != nil && context.Cause(tctx) == errWriteDeadline {
			err = w.passedDeadline(spec.batches, st, tx.clock, d, err)
		}
	}()

	conn, err := w.pool.Acquire(cctx)
	if err != nil {
		return outcome{}, fmt.Errorf("begin: %w", err)
	}
	defer conn.Release()
	tx.at(StepBegin)
	if tx.Tx, err = conn.BeginTx(tctx, spec.opts); err != nil {
		return outcome{}, fmt.Errorf("begin: %w", err)
	}
	// The one rollback, a no-op after COMMIT, and before the connection
	// goes back to the pool. Under tctx: once a deadline has passed, or
	// the caller cancelled, pgx closes the connection instead of waiting
	// for an answer, and the server aborts the transaction when the
	// session ends.
	defer tx.Rollback(tctx)

	tx.at(StepFence)
	if tx.oids, err = w.fence(tctx, tx, spec); err != nil {
		return outcome{}, err
	}
	tx.at(StepCopy)
	var late []badRecord
	if spec.stage != nil {
		if late, err = spec.stage(tctx, tx); err != nil {
			return outcome{}, err
		}
	}
	if res, err = body(tctx, tx); err != nil || res.redo != 0 {
		return res, err
	}
	if len(spec.sink.Children) > 0 && !spec.isolating && len(spec.batches) == 1 {
		// The isolating body writes each record's children with it.
		if res.redo, err = w.writeChildren(tctx, tx, spec.batches[0], spec.sink, res.bad, spec.kids); err != nil || res.redo != 0 {
			return outcome{redo: res.redo}, err
		}
	}
	res.bad = append(res.bad, late...)
	if len(res.bad) > 0 {
		tx.at(StepDeadLetters)
		if err := w.handleBad(tctx, tx, spec.sink, res.bad, &res); err != nil {
			return outcome{}, err
		}
	}
	if w.cfg.Notify && !spec.notifies {
		tx.at(StepNotify)
		for _, b := range spec.batches {
			n := res.rows
			if len(spec.batches) > 1 {
				n = len(b.Records) // a combined transaction commits whole batches only
			}
			if err := w.notify(tctx, tx, b, spec.sink, n); err != nil {
				return outcome{}, err
			}
		}
	}
	tx.at(StepCommit)
	commitStart := time.Now()
	if err := tx.Commit(tctx); err != nil {
		return outcome{}, fmt.Errorf("commit (outcome unknown, re-read the offsets): %w", err)
	}
	res.commitDuration = time.Since(commitStart)
	if tx.clock != nil {
		tx.clock.done()
	}
	if res.stop != nil {
		return res, res.stop
	}
	for _, b := range spec.batches {
		// Counted once committed, so a batch written again is counted once.
		w.bad.note(spec.sink.Table.QualifiedName(), len(b.Records), res.bad, w.cfg.OnError == OnErrorSkip)
	}
	return res, nil
}

// fence advances the offsets of every batch of spec in tx; with
// spec.describe, it also reads the column types of the sink's table in the
// same round trip.
func (w *Writer) fence(ctx context.Context, tx *batchTx, spec txSpec) ([]uint32, error) {
	if spec.describe {
		b := spec.batches[0]
		tag, oids, err := fenceAndTypes(ctx, tx, w.offs.AdvanceStatement(b), spec.sink.Table)
		if err == nil {
			err = w.offs.CheckAdvance(ctx, tx, b, tag)
		}
		return oids, err
	}
	for _, b := range spec.batches {
		if err := w.offs.Advance(ctx, tx, b); err != nil {
			if len(spec.batches) > 1 && !errors.Is(err, stream.ErrFenced) {
				err = fmt.Errorf("fence %s/%d: %w", b.Topic, b.Partition, err)
			}
			return nil, err
		}
	}
	return nil, nil
}

// named prefixes err with the write of b, unless it names the write
// already (a *stream.FencedError, a *stream.StopError, a *DeadlineError).
func named(b *stream.Batch, err error) error {
	var stop *stream.StopError
	var late *DeadlineError
	if err == nil || errors.Is(err, stream.ErrFenced) || errors.As(err, &stop) || errors.As(err, &late) {
		return err
	}
	return fmt.Errorf("write %s/%d: %w", b.Topic, b.Partition, err)
}

// describeTable reads the types of t's columns in tx, as
// fenceAndTypes does: the parse locks t until tx ends, so no ALTER TABLE
// changes them before the write.
func describeTable(ctx context.Context, tx pgx.Tx, t schema.Table) ([]uint32, error) {
	sd, err := tx.Conn().PgConn().Prepare(ctx, "", pgcopy.DescribeSQL(t.Ident(), t.ColumnNames()), nil)
	if err != nil {
		return nil, fmt.Errorf("column types of %s: %w", t.QualifiedName(), err)
	}
	oids := make([]uint32, len(sd.Fields))
	for i, f := range sd.Fields {
		oids[i] = f.DataTypeOID
	}
	return oids, nil
}

// fenceAndTypes runs the fence and describes "select columns from t" in
// one pipelined round trip. The describe is what pgx's CopyFrom does to
// learn the column types; inside the transaction, its parse locks t
// (ACCESS SHARE, no privilege needed) until the transaction ends, so no
// ALTER TABLE can change the types before the COPY. A describe of its own
// would cost every batch one more round trip, which at high rates doubles
// the tail latency. Once the fence has answered, the transaction waits on
// the COPY's table (StepCopy): a lock held on it blocks the describe.
func fenceAndTypes(ctx context.Context, tx *batchTx, advance offsets.Statement, t schema.Table) (pgconn.CommandTag, []uint32, error) {
	// The fence is a statement prepared once per connection (pgx keeps it
	// by name), so the pipeline only binds it.
	fence, err := tx.Conn().Prepare(ctx, advance.Name, advance.SQL)
	if err != nil {
		return pgconn.CommandTag{}, nil, fmt.Errorf("advance next_offset: prepare: %w", err)
	}
	params := make([][]byte, len(advance.Args))
	for i, a := range advance.Args {
		if params[i], err = tx.Conn().TypeMap().Encode(fence.ParamOIDs[i], pgtype.TextFormatCode, a, nil); err != nil {
			return pgconn.CommandTag{}, nil, fmt.Errorf("advance next_offset: parameter %d: %w", i+1, err)
		}
	}
	p := tx.Conn().PgConn().StartPipeline(ctx)
	p.SendQueryStatement(fence, params, nil, nil)
	// The server sends the fence's answer before it parses the describe,
	// which may wait for a lock: the step then shows where it waits.
	p.SendFlushRequest()
	p.SendPrepare("", pgcopy.DescribeSQL(t.Ident(), t.ColumnNames()), nil)
	if err := p.Sync(); err != nil {
		_ = p.Close()
		return pgconn.CommandTag{}, nil, fmt.Errorf("advance next_offset: %w", err)
	}
	var tag pgconn.CommandTag
	var oids []uint32
	for step := 0; ; step++ {
		res, err := p.GetResults()
		if err != nil {
			_ = p.Close()
			if step == 0 {
				return tag, nil, fmt.Errorf("advance next_offset: %w", err)
			}
			return tag, nil, fmt.Errorf("column types of %s: %w", t.QualifiedName(), err)
		}
		switch r := res.(type) {
		case *pgconn.ResultReader:
			if tag, err = r.Close(); err != nil {
				_ = p.Close()
				return tag, nil, fmt.Errorf("advance next_offset: %w", err)
			}
			tx.at(StepCopy)
		case *pgconn.StatementDescription:
			oids = make([]uint32, len(r.Fields))
			for i, f := range r.Fields {
				oids[i] = f.DataTypeOID
			}
		case *pgconn.PipelineSync, nil:
			if err := p.Close(); err != nil {
				return tag, nil, fmt.Errorf("advance next_offset: %w", err)
			}
			if oids == nil {
				return tag, nil, fmt.Errorf("column types of %s: no description", t.QualifiedName())
			}
			return tag, oids, nil
		}
	}
}
