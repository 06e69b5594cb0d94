package ingest

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/kafka2pg/kafka2pg/cdc"
	"github.com/kafka2pg/kafka2pg/offsets"
	"github.com/kafka2pg/kafka2pg/schema"
	"github.com/kafka2pg/kafka2pg/stream"
)

// RowMapper builds the row of one record, appending to dst[:0]. A record that
// cannot become a row returns an error wrapping schema.ErrBadRecord; any other
// error aborts the batch.
type RowMapper interface {
	Row(r *stream.Record, dst []any) ([]any, error)
}

// Sink is where the records of one topic go.
type Sink struct {
	Table  schema.Table
	Mapper RowMapper
	// NoCreate keeps EnsureTables from creating this sink's table even when
	// asked to create tables.
	NoCreate bool
	// Evolve adds the columns the mapping has and the table lacks, and
	// widens columns safely (schema.PlanEvolve), before the first write.
	Evolve bool
	// Upsert, when set, writes by key instead of appending: the last record
	// of each key in a batch wins (by offset), existing rows are updated,
	// and tombstones delete when DeleteOnTombstone is set. Mapper must then
	// be a KeyMapper, and Table must have a unique index on Upsert.Key.
	Upsert *Upsert
	// Changes, instead of Mapper, decodes each record into a change of
	// Table (format debezium): see ChangeDecoder. The writer does not
	// apply changes yet, so New and Resolve refuse such a sink.
	Changes ChangeDecoder
}

// ChangeDecoder decodes change events (package cdc's Decoder) into
// changes of one table, to apply in the batch's transaction in offset
// order, the last change of each key winning: an upsert of Change.Row by
// KeyColumns (after deleting Change.OldKey when the key changed; the
// Change.Unavailable columns keep their stored value), a delete by
// Change.Key, a truncate, or nothing. Decode's errors are as a
// TableMapper's Row's: schema.ErrBadRecord for a dead letter,
// schema.ErrTableChanged when Table grew for the record, which then
// decodes once the table is evolved. Safe for concurrent use.
type ChangeDecoder interface {
	Decode(r *stream.Record, ch *cdc.Change) error
	Table() schema.Table
	KeyColumns() []string
}

// Upsert configures a Sink's upsert mode.
type Upsert struct {
	Key               []string // key column names, in Table
	DeleteOnTombstone bool
}

// RowAppender is a RowMapper that can also write a record's row straight
// into a binary COPY stream (schema.JSONMapper.AppendRow): the fast path
// then never builds the row's values.
type RowAppender interface {
	RowMapper
	AppendRow(r *stream.Record, dst []byte, oids []uint32, enc schema.FieldEncoder) ([]byte, error)
}

// appendFunc is a RowAppender's AppendRow.
type appendFunc = func(r *stream.Record, dst []byte, oids []uint32, enc schema.FieldEncoder) ([]byte, error)

// appendFuncOf is the AppendRow one COPY uses: with scratch space of its
// own when the appender offers it (schema.JSONMapper.AppendRowFunc), so
// that the table's concurrent COPYs share no per-row state.
func appendFuncOf(a RowAppender) appendFunc {
	if f, ok := a.(interface{ AppendRowFunc() appendFunc }); ok {
		return f.AppendRowFunc()
	}
	return a.AppendRow
}

// copyAppender is the AppendRow a COPY of the mapper's rows uses: the
// unchecked appender when set (uncheckedFor), else the mapper when it is a
// RowAppender, each through appendFuncOf; nil when neither (the COPY takes
// the mapper's Row values).
func copyAppender(mapper RowMapper, unchecked RowAppender) appendFunc {
	if unchecked != nil {
		return appendFuncOf(unchecked)
	}
	if a, ok := mapper.(RowAppender); ok {
		return appendFuncOf(a)
	}
	return nil
}

// KeyMapper is the RowMapper of an upsert sink: it also recognises
// tombstones and builds the key of one, for the delete.
type KeyMapper interface {
	RowMapper
	IsTombstone(r *stream.Record) bool
	// KeyRow returns the key columns' values, in Upsert.Key order.
	KeyRow(r *stream.Record) ([]any, error)
}

// Config configures a Writer. The zero value of each optional field means
// the default written next to it.
type Config struct {
	// Group is the consumer group the offsets rows belong to. Required.
	Group string
	// Sinks maps each topic to its table and mapping. Required unless
	// Resolve is set.
	Sinks map[string]Sink
	// Resolve returns the sink of a topic that is not in Sinks (a topic a
	// regex subscription matched); its table is prepared on first use.
	// Optional.
	Resolve func(topic string) (Sink, bool, error)
	// ClaimLockTimeout is how long a claim waits for a writer's open
	// transaction on the offsets row before terminating its backend.
	// Default 10s.
	ClaimLockTimeout time.Duration
	// OnError says what happens to a record that cannot be written (it does
	// not fit its column, Postgres refuses the row, it is over
	// MaxRecordBytes): OnErrorDeadLetter (default) stores it in
	// kafka2pg.dead_letters in the batch's transaction; OnErrorStop commits
	// the records before it and stops the partition (Write returns a
	// *stream.StopError); OnErrorSkip logs and counts it.
	OnError string
	// MaxRecordBytes makes a record whose key and value are larger a bad
	// record (KindTooLarge). 0 means no limit.
	MaxRecordBytes int
	// Notify makes each batch transaction that wrote rows also run
	// NOTIFY on the channel NotifyChannel(table) with a JSON payload
	// (table, topic, partition, first and last offset, rows). Postgres
	// delivers it at COMMIT, so a listener never hears of rows it cannot
	// see yet.
	Notify bool
	// TableWriters bounds the transactions writing one append table at
	// once and turns on cross-partition batches (see combine.go): batches
	// of the table's partitions that find every writer busy wait, and the
	// next free writer takes all of them in one transaction. 0 (default)
	// writes every batch in a transaction of its own, at once.
	TableWriters int
	// CombineMaxRows caps the rows of one combined transaction. Default
	// 100,000.
	CombineMaxRows int
	// Logger receives warnings about zombies and dead letters. Default: discard.
	Logger *slog.Logger
	// BadRecordLogInterval is how often, at most, the log gets a line about
	// one table's bad records (badlog.go). Default 10s.
	BadRecordLogInterval time.Duration
	// Tracer, when set, is told what every Write did (rows, dead letters,
	// durations), for metrics and progress. Optional.
	Tracer Tracer
}

// The OnError policies.
const (
	OnErrorDeadLetter = "dead-letter"
	OnErrorStop       = "stop"
	OnErrorSkip       = "skip"
)

// Writer writes batches. Safe for concurrent use.
type Writer struct {
	pool *pgxpool.Pool
	offs *offsets.Store
	cfg  Config
	log  *slog.Logger
	bad  *badLog

	mu       sync.Mutex
	create   bool                     // EnsureTables' create, for resolved sinks
	resolved map[string]Sink          // sinks found through Config.Resolve
	changed  map[string]Sink          // sinks whose TableMapper changed the table
	lanes    map[string]*lane         // by qualified table name, with TableWriters
	checks   map[string]*atomic.Int32 // by topic: batches to write checked (unchecked.go)
}

// New returns a Writer on pool. It does not touch the database; call
// EnsureTables before the first Write.
func New(pool *pgxpool.Pool, cfg Config) (*Writer, error) {
	if cfg.Group == "" {
		return nil, errors.New("ingest: Config.Group is empty")
	}
	if len(cfg.Sinks) == 0 && cfg.Resolve == nil {
		return nil, errors.New("ingest: Config.Sinks is empty")
	}
	for topic, sink := range cfg.Sinks {
		if err := validateSink(topic, sink); err != nil {
			return nil, err
		}
	}
	switch cfg.OnError {
	case "":
		cfg.OnError = OnErrorDeadLetter
	case OnErrorDeadLetter, OnErrorStop, OnErrorSkip:
	default:
		return nil, fmt.Errorf("--on-error: %q is not dead-letter, stop or skip", cfg.OnError)
	}
	if cfg.TableWriters < 0 {
		return nil, fmt.Errorf("--table-writers is %d: use 0 (off) or the number of transactions that may write one table at once", cfg.TableWriters)
	}
	if cfg.CombineMaxRows <= 0 {
		cfg.CombineMaxRows = 100000
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	offs, err := offsets.New(pool, offsets.Config{Group: cfg.Group, ClaimLockTimeout: cfg.ClaimLockTimeout, Logger: log})
	if err != nil {
		return nil, err
	}
	return &Writer{pool: pool, offs: offs, cfg: cfg, log: log, bad: newBadLog(log, cfg.BadRecordLogInterval), create: true, resolved: map[string]Sink{}, changed: map[string]Sink{}, lanes: map[string]*lane{}, checks: map[string]*atomic.Int32{}}, nil
}

func validateSink(topic string, sink Sink) error {
	if sink.Changes != nil {
		return fmt.Errorf("ingest: the sink of topic %q decodes change events (format debezium), which this writer does not apply yet", topic)
	}
	if sink.Upsert == nil {
		return nil
	}
	if _, ok := sink.Mapper.(KeyMapper); !ok {
		return fmt.Errorf("ingest: the upsert sink of topic %q needs a KeyMapper", topic)
	}
	if len(sink.Upsert.Key) == 0 {
		return fmt.Errorf("ingest: the upsert sink of topic %q has no key columns", topic)
	}
	for _, k := range sink.Upsert.Key {
		if !slices.Contains(sink.Table.ColumnNames(), k) {
			return fmt.Errorf("ingest: key column %q of topic %q is not a column of %s", k, topic, sink.Table.QualifiedName())
		}
	}
	return nil
}

var deadLetterTable = pgx.Identifier{"kafka2pg", "dead_letters"}

var deadLetterColumns = []string{"consumer_group", "topic", "partition", "kafka_offset", "kafka_timestamp",
	"key", "value", "headers", "target_table", "error_kind", "error_message"}

// Write stores b in one transaction: the fenced offset advance, the rows,
// the dead letters. It returns a *stream.FencedError (errors.Is
// stream.ErrFenced) when another writer owns the partition; then nothing
// was written. With OnError "stop", a bad record makes Write commit only
// the records before it and return a *stream.StopError. Any other error
// leaves the outcome of the transaction unknown if it came from COMMIT:
// claim again and resume from the durable position, never retry blindly.
// Write keeps nothing of b after it returns; Config.Tracer hears what it
// did.
//
// The fast path copies the rows as the mapping builds them. If Postgres
// refuses a row (a data exception or a constraint, SQLSTATE classes 22 and
// 23), the transaction is rolled back and redone with the rows isolated:
// each half of a failing set is copied under a savepoint, down to the single
// rows that fail, which become dead letters; the rest lands in the same
// transaction.
//
// A mapper whose table follows a changing schema (a TableMapper) may refuse
// a record with schema.ErrTableChanged; Write then evolves the table to the
// mapper's new Table and writes the batch again.
func (w *Writer) Write(ctx context.Context, b *stream.Batch) error {
	res, err := w.writeBatch(ctx, b)
	if w.cfg.Tracer != nil {
		w.trace(ctx, b, res, err)
	}
	return err
}

func (w *Writer) writeBatch(ctx context.Context, b *stream.Batch) (outcome, error) {
	sink, err := w.sinkFor(ctx, b.Topic)
	if err != nil {
		return outcome{}, fmt.Errorf("write %s/%d: %w", b.Topic, b.Partition, err)
	}
	if b.NextOffset <= b.FirstOffset {
		return outcome{}, fmt.Errorf("write %s/%d: empty span [%d, %d)", b.Topic, b.Partition, b.FirstOffset, b.NextOffset)
	}
	if w.cfg.TableWriters > 0 && combinable(sink) {
		return w.writeInLane(ctx, b, sink)
	}
	return w.writeChanging(ctx, b, sink)
}

// writeChanging writes b in its own transaction, following the changes of
// a TableMapper's table.
func (w *Writer) writeChanging(ctx context.Context, b *stream.Batch, sink Sink) (outcome, error) {
	for changes := 0; ; changes++ {
		var err error
		if tm, ok := sink.Mapper.(TableMapper); ok && !sameColumns(tm.Table(), sink.Table) {
			if sink, err = w.changeTable(ctx, b.Topic, sink, tm.Table()); err != nil {
				return outcome{}, fmt.Errorf("write %s/%d: %w", b.Topic, b.Partition, err)
			}
		}
		res, err := w.write(ctx, b, sink)
		if err == nil || changes >= maxTableChanges {
			return res, err
		}
		// A table change shows as ErrTableChanged from the record that
		// needed it, or, in a batch that ran while another partition's
		// record changed it, as rows that no longer fit the COPY's columns.
		// Nothing was committed either way (a COMMIT error included: then
		// the fence of the retry decides).
		tm, ok := sink.Mapper.(TableMapper)
		if !ok || (!errors.Is(err, schema.ErrTableChanged) && sameColumns(tm.Table(), sink.Table)) {
			return res, err
		}
	}
}

// maxTableChanges bounds how often one batch may change its table: each
// change comes from a new schema version the batch's records carry.
const maxTableChanges = 16

func (w *Writer) write(ctx context.Context, b *stream.Batch, sink Sink) (outcome, error) {
	if sink.Upsert != nil {
		res, err := w.upsertFast(ctx, b, sink)
		if !errors.Is(err, errIsolate) {
			return res, err
		}
		return w.upsertIsolated(ctx, b, sink)
	}
	res, err := w.writeFast(ctx, b, sink, w.uncheckedFor(b.Topic, sink.Mapper))
	rechecked := errors.Is(err, errRecheck)
	if rechecked {
		res, err = w.writeFast(ctx, b, sink, nil)
	}
	if errors.Is(err, errIsolate) {
		res, err = w.writeIsolated(ctx, b, sink)
	}
	res.rechecked = rechecked
	return res, err
}

// errIsolate sends Write to the isolating path.
var errIsolate = errors.New("isolate bad rows")

// begin starts the batch's transaction and runs the fence.
func (w *Writer) begin(ctx context.Context, b *stream.Batch) (pgx.Tx, func(), error) {
	tx, rollback, _, err := w.beginCopy(ctx, b, nil)
	return tx, rollback, err
}

// beginCopy is begin that, when into is set, also reads the types of the
// COPY target's columns in the fence's round trip (fenceAndTypes).
func (w *Writer) beginCopy(ctx context.Context, b *stream.Batch, into *schema.Table) (pgx.Tx, func(), []uint32, error) {
	tx, err := w.pool.Begin(ctx)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("write %s/%d: begin: %w", b.Topic, b.Partition, err)
	}
	rollback := func() {
		// Rollback after Commit is a no-op; after a cancel it still must run.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = tx.Rollback(rctx)
	}
	var oids []uint32
	if into == nil {
		err = w.offs.Advance(ctx, tx, b)
	} else {
		var tag pgconn.CommandTag
		if tag, oids, err = fenceAndTypes(ctx, tx, w.offs.AdvanceStatement(b), *into); err == nil {
			err = w.offs.CheckAdvance(ctx, tx, b, tag)
		}
	}
	if err != nil {
		rollback()
		if errors.Is(err, stream.ErrFenced) {
			return nil, nil, nil, err
		}
		return nil, nil, nil, fmt.Errorf("write %s/%d: %w", b.Topic, b.Partition, err)
	}
	return tx, rollback, oids, nil
}

// fenceAndTypes runs the fence and describes "select columns from t" in
// one pipelined round trip. The describe is what pgx's CopyFrom does to
// learn the column types; inside the transaction, its parse locks t
// (ACCESS SHARE, no privilege needed) until the transaction ends, so no
// ALTER TABLE can change the types before the COPY. A describe of its own
// would cost every batch one more round trip: 2-3x the p99 latency at
// 80,000 records/s on this machine.
func fenceAndTypes(ctx context.Context, tx pgx.Tx, advance offsets.Statement, t schema.Table) (pgconn.CommandTag, []uint32, error) {
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
	p.SendPrepare("", describeSQL(t.Ident(), t.ColumnNames()), nil)
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

// writeFast copies the rows as the mapping builds them; with unchecked set
// (uncheckedFor), through it. errRecheck: Postgres refused a row of the
// unchecked COPY. errIsolate: go the isolating path.
func (w *Writer) writeFast(ctx context.Context, b *stream.Batch, sink Sink, unchecked RowAppender) (outcome, error) {
	tx, rollback, oids, err := w.beginCopy(ctx, b, &sink.Table)
	if err != nil {
		return outcome{}, err
	}
	defer rollback()
	src := newRowSource(b.Records, sink.Mapper, unchecked, w.cfg.MaxRecordBytes)
	var res outcome
	if len(b.Records) > 0 {
		copyStart := time.Now()
		n, err := copyTyped(ctx, tx, sink.Table.Ident(), sink.Table.ColumnNames(), oids, src)
		res.copyDuration = time.Since(copyStart)
		if src.err != nil {
			// The mapping failed, not Postgres (which only reports that
			// the COPY was cancelled): say why, keeping ErrTableChanged.
			err = src.err
		}
		if rowError(err) && unchecked != nil {
			w.recheck(b.Topic)
			return outcome{}, errRecheck
		}
		if unchecked == nil {
			w.checked(b.Topic, sink.Mapper, slices.ContainsFunc(src.bad, badRecord.refusedByMapping))
		}
		if rowError(err) {
			return outcome{}, errIsolate
		}
		if err != nil {
			return outcome{}, fmt.Errorf("write %s/%d: copy into %s: %w", b.Topic, b.Partition, sink.Table.QualifiedName(), err)
		}
		res.rows = int(n)
	}
	if len(src.bad) > 0 && w.cfg.OnError == OnErrorStop {
		return outcome{}, errIsolate // commit only what comes before the first bad record
	}
	return w.finish(ctx, tx, b, sink, src.bad, res)
}

// writeIsolated redoes a batch whose fast path met bad rows: it finds every
// row Postgres refuses, then applies OnError.
func (w *Writer) writeIsolated(ctx context.Context, b *stream.Batch, sink Sink) (outcome, error) {
	rows, bad, err := materialize(b.Records, sink.Mapper, w.cfg.MaxRecordBytes)
	if err != nil {
		return outcome{}, fmt.Errorf("write %s/%d: %w", b.Topic, b.Partition, err)
	}
	tx, rollback, err := w.begin(ctx, b)
	if err != nil {
		return outcome{}, err
	}
	defer rollback()
	if _, err := tx.Exec(ctx, "SAVEPOINT kafka2pg_batch"); err != nil {
		return outcome{}, fmt.Errorf("write %s/%d: savepoint: %w", b.Topic, b.Partition, err)
	}
	copyStart := time.Now()
	refused, copied, err := copyIsolating(ctx, tx, sink.Table, rows)
	copyDuration := time.Since(copyStart)
	if err != nil {
		return outcome{}, fmt.Errorf("write %s/%d: copy into %s: %w", b.Topic, b.Partition, sink.Table.QualifiedName(), err)
	}
	bad = append(bad, refused...)
	slices.SortFunc(bad, func(x, y badRecord) int { return cmp.Compare(x.rec.Offset, y.rec.Offset) })

	res := outcome{rows: copied, copyDuration: copyDuration, isolated: true}
	if w.cfg.OnError == OnErrorStop && len(bad) > 0 {
		first := bad[0]
		// Undo everything, then keep only the rows before the first bad
		// record (all good: the first bad one is the earliest).
		if _, err := tx.Exec(ctx, "ROLLBACK TO SAVEPOINT kafka2pg_batch"); err != nil {
			return outcome{}, fmt.Errorf("write %s/%d: rollback to savepoint: %w", b.Topic, b.Partition, err)
		}
		var prefix [][]any
		for _, r := range rows {
			if r.rec.Offset < first.rec.Offset {
				prefix = append(prefix, r.values)
			}
		}
		if len(prefix) > 0 {
			if _, err := CopyFrom(ctx, tx, sink.Table.Ident(), sink.Table.ColumnNames(), pgx.CopyFromRows(prefix)); err != nil {
				return outcome{}, fmt.Errorf("write %s/%d: copy into %s: %w", b.Topic, b.Partition, sink.Table.QualifiedName(), err)
			}
		}
		// The fence above holds the row lock; move next_offset back to the
		// bad record, so nothing past it is committed.
		if err := w.offs.Rewind(ctx, tx, b, first.rec.Offset); err != nil {
			return outcome{}, fmt.Errorf("write %s/%d: stop at offset %d: %w", b.Topic, b.Partition, first.rec.Offset, err)
		}
		if err := w.notify(ctx, tx, b, sink, len(prefix)); err != nil {
			return outcome{}, err
		}
		if err := tx.Commit(ctx); err != nil {
			return outcome{}, fmt.Errorf("write %s/%d: commit (outcome unknown, re-read the offsets): %w", b.Topic, b.Partition, err)
		}
		return outcome{rows: len(prefix)}, &stream.StopError{Topic: b.Topic, Partition: b.Partition, Offset: first.rec.Offset,
			Kind: first.kind, Err: first.err}
	}
	return w.finish(ctx, tx, b, sink, bad, res)
}

// NotifyChannel is the channel a table's batches are announced on with
// Config.Notify: "kafka2pg_" and the table name, cut to Postgres' 63-byte
// limit. LISTEN on it quoted: LISTEN "kafka2pg_orders".
func NotifyChannel(t schema.Table) string {
	ch := "kafka2pg_" + t.Name
	for len(ch) > 63 {
		_, size := utf8.DecodeLastRuneInString(ch)
		ch = ch[:len(ch)-size]
	}
	return ch
}

func (w *Writer) notify(ctx context.Context, tx pgx.Tx, b *stream.Batch, sink Sink, rows int) error {
	if !w.cfg.Notify || rows == 0 {
		return nil
	}
	payload, _ := json.Marshal(map[string]any{
		"table": sink.Table.QualifiedName(), "topic": b.Topic, "partition": b.Partition,
		"first_offset": b.FirstOffset, "last_offset": b.NextOffset - 1, "rows": rows,
	})
	if _, err := tx.Exec(ctx, "SELECT pg_notify($1, $2)", NotifyChannel(sink.Table), string(payload)); err != nil {
		return fmt.Errorf("write %s/%d: notify: %w", b.Topic, b.Partition, err)
	}
	return nil
}

// finish ends a batch's transaction: the bad records by OnError, the
// notification, COMMIT.
func (w *Writer) finish(ctx context.Context, tx pgx.Tx, b *stream.Batch, sink Sink, bad []badRecord, res outcome) (outcome, error) {
	if err := w.handleBad(ctx, tx, b, sink, bad, &res); err != nil {
		return outcome{}, err
	}
	if err := w.notify(ctx, tx, b, sink, res.rows); err != nil {
		return outcome{}, err
	}
	commitStart := time.Now()
	if err := tx.Commit(ctx); err != nil {
		return outcome{}, fmt.Errorf("write %s/%d: commit (outcome unknown, re-read the offsets): %w", b.Topic, b.Partition, err)
	}
	res.commitDuration = time.Since(commitStart)
	w.bad.note(sink.Table.QualifiedName(), len(b.Records), bad, w.cfg.OnError == OnErrorSkip)
	return res, nil
}

// handleBad dead-letters (or, with OnError "skip", only counts) bad records
// inside the batch's transaction; finish reports them in the log (badLog).
func (w *Writer) handleBad(ctx context.Context, tx pgx.Tx, b *stream.Batch, sink Sink, bad []badRecord, res *outcome) error {
	if len(bad) == 0 {
		return nil
	}
	table := sink.Table.QualifiedName()
	if w.cfg.OnError == OnErrorSkip {
		res.skipped = len(bad)
		return nil
	}
	text := letterTextFor(tx.Conn().PgConn()) // the database may not hold every character (encoding.go)
	rows := make([][]any, len(bad))
	for i, x := range bad {
		r, msg := x.rec, x.err.Error()
		rows[i] = []any{w.cfg.Group, r.Topic, r.Partition, r.Offset, r.Timestamp, r.Key, r.Value, text.headers(r.Headers),
			table, x.kind, text.message(msg)}
	}
	if _, err := CopyFrom(ctx, tx, deadLetterTable, deadLetterColumns, pgx.CopyFromRows(rows)); err != nil {
		return fmt.Errorf("write %s/%d: copy into kafka2pg.dead_letters: %w", b.Topic, b.Partition, err)
	}
	res.deadLetters = len(rows)
	for _, x := range bad {
		res.deadLetterKinds = append(res.deadLetterKinds, x.kind)
	}
	return nil
}

type badRecord struct {
	rec  *stream.Record
	kind string
	err  error
}

// refusedByMapping: the mapping refused the record, not the size limit
// (what keeps a topic's batches checked, unchecked.go).
func (b badRecord) refusedByMapping() bool { return b.kind != KindTooLarge }

// rowSource feeds CopyFrom, mapping records as pgx asks for them; records the
// mapping refuses are set aside as dead letters.
type rowSource struct {
	records []stream.Record
	mapper  RowMapper
	// append writes a row straight into the COPY: the mapper's AppendRow
	// when it is a RowAppender, or the unchecked one (unchecked.go), for
	// this COPY (appendFuncOf); nil: rows go through Next.
	append   appendFunc
	maxBytes int
	i        int
	row      []any
	err      error
	bad      []badRecord
}

// newRowSource is the source of a COPY of records; unchecked, when set,
// appends the rows in place of the mapper (uncheckedFor).
func newRowSource(records []stream.Record, mapper RowMapper, unchecked RowAppender, maxBytes int) *rowSource {
	return &rowSource{records: records, mapper: mapper, maxBytes: maxBytes, append: copyAppender(mapper, unchecked)}
}

func (s *rowSource) Next() bool {
	for s.i < len(s.records) {
		r := &s.records[s.i]
		s.i++
		row, bad, err := mapRecord(r, s.mapper, s.maxBytes, s.row)
		if err != nil {
			s.err = err
			return false
		}
		if bad != nil {
			s.bad = append(s.bad, *bad)
			continue
		}
		s.row = row
		return true
	}
	return false
}

func (s *rowSource) appends() bool { return s.append != nil }

// nextTuple is Next for a RowAppender: the row goes straight into dst.
func (s *rowSource) nextTuple(dst []byte, oids []uint32, enc schema.FieldEncoder) ([]byte, bool) {
	for s.i < len(s.records) {
		r := &s.records[s.i]
		s.i++
		if bad := tooLarge(r, s.maxBytes); bad != nil {
			s.bad = append(s.bad, *bad)
			continue
		}
		out, err := s.append(r, dst, oids, enc)
		if err != nil {
			bad, err := classify(r, err)
			if err != nil {
				s.err = err
				return dst, false
			}
			s.bad = append(s.bad, *bad)
			continue
		}
		return out, true
	}
	return dst, false
}

// mapRecord builds the row of r into dst, or says why r is a bad record. An
// error is not about the record: it aborts the batch.
func mapRecord(r *stream.Record, m RowMapper, maxBytes int, dst []any) ([]any, *badRecord, error) {
	if bad := tooLarge(r, maxBytes); bad != nil {
		return nil, bad, nil
	}
	row, err := m.Row(r, dst)
	if err == nil {
		return row, nil, nil
	}
	bad, err := classify(r, err)
	return nil, bad, err
}

// tooLarge is r as a bad record when its key and value are over maxBytes.
func tooLarge(r *stream.Record, maxBytes int) *badRecord {
	if size := len(r.Key) + len(r.Value); maxBytes > 0 && size > maxBytes {
		return &badRecord{rec: r, kind: KindTooLarge,
			err: fmt.Errorf("the record is %d bytes (key and value), over --max-record-bytes %d", size, maxBytes)}
	}
	return nil
}

// classify sorts a mapping error: a bad record (the error wraps
// schema.ErrBadRecord), or an error that is not about the record.
func classify(r *stream.Record, err error) (*badRecord, error) {
	if !errors.Is(err, schema.ErrBadRecord) {
		return nil, err
	}
	kind := schema.KindInvalidValue
	var de *schema.DecodeError
	if errors.As(err, &de) {
		kind = de.Kind
	}
	return &badRecord{rec: r, kind: kind, err: err}, nil
}

func (s *rowSource) Values() ([]any, error) { return s.row, nil }
func (s *rowSource) Err() error             { return s.err }
