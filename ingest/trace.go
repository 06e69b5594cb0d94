package ingest

import (
	"context"
	"time"

	"github.com/kafka2pg/kafka2pg/stream"
)

// Tracer is told what every Write did, for metrics and progress counters.
// TraceBatchEnd is called at the end of each Write, on the goroutine that
// called Write, concurrently for different partitions; it must not block.
type Tracer interface {
	TraceBatchEnd(ctx context.Context, t BatchTrace)
}

// A StaleTracer is a Tracer that is also told of the changes a sink's
// version guard skipped outside a Write: in an Applier's apply of source
// transactions, whose rows belong to no batch. table is the qualified
// name, as BatchTrace.Table; it is called after the apply's COMMIT, on
// the Applier's goroutine, and must not block.
type StaleTracer interface {
	TraceStale(ctx context.Context, table string, n int)
}

// traceStale tells the Tracer, when it is a StaleTracer, of the changes
// the version guard skipped, by table.
func (w *Writer) traceStale(ctx context.Context, stale map[string]int) {
	st, ok := w.cfg.Tracer.(StaleTracer)
	if !ok {
		return
	}
	for table, n := range stale {
		if n > 0 {
			st.TraceStale(ctx, table, n)
		}
	}
}

// BatchTrace says what one Write did.
type BatchTrace struct {
	// Batch is the batch written. Its Records are the caller's: read them
	// during TraceBatchEnd only.
	Batch *stream.Batch
	// Table is the qualified name of the table the batch's topic goes to;
	// "" when the topic has no sink yet.
	Table string
	// Err is what Write returns. With a *stream.StopError the fields below
	// say what was committed before the bad record; with any other error
	// nothing was (or the COMMIT's outcome is unknown).
	Err error

	Rows            int      // rows written into Table
	DeadLetters     int      // records stored in kafka2pg.dead_letters
	DeadLetterKinds []string // the error kind of each dead letter
	Skipped         int      // bad records only logged (OnError "skip")
	// Filtered counts the records the sink's Filter dropped: not written,
	// their offsets committed with the batch's.
	Filtered int
	// Stale counts the changes the sink's version guard skipped (Sink.
	// Version): older than, or as old as, the stored row's version, or
	// than a later change of the same key in the batch.
	Stale int
	// CopyDuration and CommitDuration time the COPY (or the upsert's
	// statements) and the COMMIT; zero when not run, and in a combined
	// transaction for every batch but the first, so that each statement is
	// timed once.
	CopyDuration   time.Duration
	CommitDuration time.Duration
	// Isolated: Postgres refused rows, and the batch was redone isolating
	// them.
	Isolated bool
	// Rechecked: Postgres refused a row of the batch written without the
	// mapping's checks (unchecked.go), and the batch was written again with
	// them.
	Rechecked bool
	// Combined is how many batches shared this batch's transaction (see
	// Config.TableWriters); 0 when it had one of its own.
	Combined int
}

// outcome is what a batch's transaction stored: what BatchTrace reports;
// and, from a body to inBatchTx, what to do with the transaction.
type outcome struct {
	rows            int
	deadLetters     int
	deadLetterKinds []string
	skipped         int
	filtered        int
	stale           int
	copyDuration    time.Duration
	commitDuration  time.Duration
	isolated        bool
	rechecked       bool
	combined        int

	// bad are the bad records a body set aside: inBatchTx stores them as
	// dead letters (or only counts them, OnError "skip") before COMMIT.
	bad []badRecord
	// stop, from a body with OnError "stop": inBatchTx commits what the
	// body wrote, and returns stop.
	stop *stream.StopError
	// redo, from a body: nothing may be committed; write the batch again
	// this way.
	redo attempt
}

func (w *Writer) trace(ctx context.Context, b *stream.Batch, res outcome, err error) {
	w.cfg.Tracer.TraceBatchEnd(ctx, BatchTrace{Batch: b, Table: w.TableName(b.Topic), Err: err,
		Rows: res.rows, DeadLetters: res.deadLetters, DeadLetterKinds: res.deadLetterKinds, Skipped: res.skipped, Filtered: res.filtered, Stale: res.stale,
		CopyDuration: res.copyDuration, CommitDuration: res.commitDuration,
		Isolated: res.isolated, Rechecked: res.rechecked, Combined: res.combined})
}
