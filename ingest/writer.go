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
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/kafka2pg/kafka2pg/deadletters"
	"github.com/kafka2pg/kafka2pg/decode"
	"github.com/kafka2pg/kafka2pg/internal/enum"
	"github.com/kafka2pg/kafka2pg/offsets"
	"github.com/kafka2pg/kafka2pg/pgcopy"
	"github.com/kafka2pg/kafka2pg/schema"
	"github.com/kafka2pg/kafka2pg/stream"
)

// RowMapper builds the row of one record, appending to dst[:0]. A record that
// cannot become a row returns an error wrapping decode.ErrBadRecord; any other
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
	// Table (format debezium): see ChangeDecoder. The
	// table is created once the first event has told its columns and key.
	Changes ChangeDecoder
	// Transactions, on a Changes sink, applies its source's transactions
	// whole (txstage.go): the changes that carry a transaction are staged,
	// and an Applier applies each source transaction in one Postgres
	// transaction once all its events are staged. Optional.
	Transactions *Transactions
	// Boundaries, instead of Mapper and Changes, makes the sink the
	// transaction topic of a Transactions source: it stages the END
	// records. Optional.
	Boundaries *Boundaries
	// Filter, when set, decides which records are written: the others
	// are not written, and their offsets advance with the batch's
	// (BatchTrace.Filtered counts them). A record it cannot evaluate is a
	// bad record. Optional.
	Filter RecordFilter
	// Router, when set, names each record's table (route.go): Table is
	// then the model of the routed tables, each created and evolved like
	// Table on its first record. Formats whose Mapper has a fixed table
	// only (not a TableMapper, no Changes). Optional.
	Router Router
	// Deleted, when set, makes a delete (a tombstone of an Upsert sink with
	// DeleteOnTombstone, a change sink's delete) mark the key's row
	// instead of removing it, and an upsert of the key clear the mark
	// (guard.go). Upsert and change sinks only.
	Deleted *Deleted
	// Version, when set, names the column that orders the changes of a
	// key: a change applies only when its version is greater than the
	// stored row's (guard.go). Upsert and change sinks only; an upsert
	// sink with DeleteOnTombstone needs Deleted, whose rows keep the
	// version of deleted keys.
	Version string
	// Children map an array of each record to rows of child tables,
	// written in the batch's transaction with the record's row (see
	// children.go). A record whose children do not fit is a bad record
	// whole. With Changes, each child has Bind. Optional.
	Children []Child
}

// RecordFilter decides which records of a sink are written
// (decode.Filter). Keep's error wraps decode.ErrBadRecord for a record it
// cannot evaluate, which becomes a bad record; any other error aborts the
// batch. Safe for concurrent use.
type RecordFilter interface {
	Keep(r *stream.Record) (bool, error)
}

// ChangeDecoder decodes change events (package cdc's Decoder) into
// stream.Changes of one table, to apply in the batch's transaction in offset
// order, the last change of each key winning: an upsert of Change.Row by
// KeyColumns (after deleting Change.OldKey when the key changed; the
// Change.Unavailable columns keep their stored value), a delete by
// Change.Key, a truncate, or nothing. Decode's errors are as a
// TableMapper's Row's: decode.ErrBadRecord for a dead letter,
// decode.ErrTableChanged when Table grew for the record, which then
// decodes once the table is evolved. Safe for concurrent use.
type ChangeDecoder interface {
	Decode(r *stream.Record, ch *stream.Change) error
	Table() schema.Table
	KeyColumns() []string
}

// Upsert configures a Sink's upsert mode.
type Upsert struct {
	Key               []string // key column names, in Table
	DeleteOnTombstone bool
}

// RowAppender is a RowMapper that can also write a record's row straight
// into a binary COPY stream (decode.JSONMapper.AppendRow): the fast path
// then never builds the row's values.
type RowAppender interface {
	RowMapper
	AppendRow(r *stream.Record, dst []byte, oids []uint32, enc pgcopy.FieldEncoder) ([]byte, error)
}

// appendFunc is a RowAppender's AppendRow.
type appendFunc = func(r *stream.Record, dst []byte, oids []uint32, enc pgcopy.FieldEncoder) ([]byte, error)

// appendFuncOf is the AppendRow one COPY uses: with scratch space of its
// own when the appender offers it (decode.JSONMapper.AppendRowFunc), so
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
	// ctx is the caller's (a batch's write, a replay): building a sink
	// may read a schema registry. Optional.
	Resolve func(ctx context.Context, topic string) (Sink, bool, error)
	// ClaimLockTimeout is how long a claim waits for a writer's open
	// transaction on the offsets row before terminating its backend.
	// Default 10s.
	ClaimLockTimeout time.Duration
	// WriteTimeout bounds a write transaction of up to WriteTimeoutRows
	// rows, from the pool's Acquire to COMMIT; one of more rows (a
	// combined transaction) gets proportionally more, and one that
	// isolates bad rows twice as much. It is the ceiling: within it, each
	// step has a deadline from its measured latency, at least
	// DeadlineFloor (see the package doc). A transaction past a deadline is
	// cancelled and its connection closed, never returned to the pool;
	// Write returns a *DeadlineError. A claim gets WriteTimeout beyond its
	// lock waits (3 × ClaimLockTimeout at most). The sessions of the pool
	// should let statements run that long: see Config.StatementTimeout.
	// Default 2m.
	WriteTimeout time.Duration
	// WriteTimeoutRows is the size of the batches WriteTimeout is meant
	// for: the reader's batch size. Default 10,000.
	WriteTimeoutRows int
	// OnError says what happens to a record that cannot be written (it does
	// not fit its column, Postgres refuses the row, it is over
	// MaxRecordBytes): OnErrorDeadLetter (default) stores it in
	// kafka2pg.dead_letters in the batch's transaction; OnErrorStop commits
	// the records before it and stops the partition (Write returns a
	// *stream.StopError); OnErrorSkip logs and counts it.
	OnError OnError
	// MaxRecordBytes makes a record whose key and value are larger a bad
	// record (KindTooLarge). Default 64 MiB; a negative size sets no
	// limit.
	MaxRecordBytes int
	// Notify makes each batch transaction that wrote rows also run
	// NOTIFY on the channel NotifyChannel(table) with a JSON payload
	// (table, topic, partition, first and last offset, rows). Postgres
	// delivers it at COMMIT, so a listener never hears of rows it cannot
	// see yet.
	Notify bool
	// TableWriters bounds the transactions writing one append table at
	// once and turns on cross-partition batches: batches
	// of the table's partitions that find every writer busy wait, and the
	// next free writer takes all of them in one transaction. Default 2; a
	// negative number turns it off: every batch is written in a
	// transaction of its own, at once.
	TableWriters int
	// MaxTablesPerSink caps the tables one routed sink (one Router) sends
	// records to; a record routed to a table beyond it is a bad record of
	// kind KindRouteLimit. The tables count from the writer's start,
	// those that existed as well as those it created. Default 100; a
	// negative number sets no limit.
	MaxTablesPerSink int
	// CombineMaxRows caps the rows of one combined transaction. Default
	// 100,000.
	CombineMaxRows int
	// Logger receives warnings about zombies and dead letters. Default: discard.
	Logger *slog.Logger
	// BadRecordLogInterval is how often, at most, the log gets a line about
	// one table's bad records. Default 10s.
	BadRecordLogInterval time.Duration
	// Tracer, when set, is told what every Write did (rows, dead letters,
	// durations), for metrics and progress. Optional.
	Tracer Tracer
}

// OnError is what happens to a record that cannot be written.
type OnError int

// The OnError policies.
const (
	// OnErrorDeadLetter stores the record in kafka2pg.dead_letters, in
	// its batch's transaction, with the reason.
	OnErrorDeadLetter OnError = iota
	// OnErrorStop commits the records before it and stops the partition.
	OnErrorStop
	// OnErrorSkip logs and counts it, and writes no trace of it.
	OnErrorSkip
)

var onErrorNames = enum.Names{"dead-letter", "stop", "skip"}

func (e OnError) String() string { return onErrorNames.Name(int(e), "OnError") }

// ParseOnError reads dead-letter, stop or skip.
func ParseOnError(s string) (OnError, error) {
	v, err := onErrorNames.Parse(s)
	return OnError(v), err
}

func (e OnError) MarshalText() ([]byte, error) { return []byte(e.String()), nil }

func (e *OnError) UnmarshalText(b []byte) (err error) {
	*e, err = ParseOnError(string(b))
	return err
}

// Writer writes batches. Safe for concurrent use.
type Writer struct {
	pool *pgxpool.Pool
	offs *offsets.Store
	cfg  Config
	log  *slog.Logger
	bad  *badLog

	// routes are the sinks as Config gave them or SetSinks last set
	// them: one load per batch, no lock (reconfigure.go).
	routes atomic.Pointer[routes]

	mu       sync.Mutex
	create   bool                     // EnsureTables' create, for resolved sinks
	resolved map[string]Sink          // sinks found through Config.Resolve
	changed  map[string]Sink          // sinks whose TableMapper changed the table
	lanes    map[string]*lane         // by qualified table name, with TableWriters
	checks   map[string]*atomic.Int32 // by topic: batches to write checked (unchecked.go)
	upserts  map[string]*upsertState  // by qualified table name (upsert.go)
	routed   map[Router]*routeSet     // the tables of each routed sink (route.go)

	// flightMu guards flights, the write transactions in flight
	// (deadline.go); it is never held with mu.
	flightMu sync.Mutex
	flights  map[flightKey]*txState

	// lat are the step latencies the deadlines follow (rto.go).
	lat *latencies
}

// New returns a Writer on pool. It does not touch the database; call
// EnsureTables before the first Write. An error in cfg's fields is a
// *stream.FieldError naming the field (ingest.Config.OnError).
func New(pool *pgxpool.Pool, cfg Config) (*Writer, error) {
	if cfg.Group == "" {
		return nil, stream.FieldErrorf("ingest.Config.Group", "empty: name the consumer group the offsets are kept for")
	}
	if len(cfg.Sinks) == 0 && cfg.Resolve == nil {
		return nil, stream.FieldErrorf("ingest.Config.Sinks", "empty: give every topic a sink, or a Resolve")
	}
	for topic, sink := range cfg.Sinks {
		if err := validateSink(topic, sink); err != nil {
			return nil, err
		}
	}
	if !onErrorNames.Valid(int(cfg.OnError)) {
		return nil, stream.FieldErrorf("ingest.Config.OnError", "%s is not %s", cfg.OnError, onErrorNames.List())
	}
	for _, f := range []struct {
		field string
		v     any
		neg   bool
	}{
		{"WriteTimeout", cfg.WriteTimeout, cfg.WriteTimeout < 0},
		{"WriteTimeoutRows", cfg.WriteTimeoutRows, cfg.WriteTimeoutRows < 0},
		{"ClaimLockTimeout", cfg.ClaimLockTimeout, cfg.ClaimLockTimeout < 0},
	} {
		if f.neg {
			return nil, stream.FieldErrorf("ingest.Config."+f.field, "%v: must not be negative: use 0 for the default", f.v)
		}
	}
	cfg = cfg.withDefaults()
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	cfg.Logger = log
	offs, err := offsets.New(pool, cfg.offsetsConfig())
	if err != nil {
		return nil, err
	}
	w := &Writer{pool: pool, offs: offs, cfg: cfg, log: log, bad: newBadLog(log, cfg.BadRecordLogInterval), create: true, resolved: map[string]Sink{}, changed: map[string]Sink{},
		lanes: map[string]*lane{}, routed: map[Router]*routeSet{}, checks: map[string]*atomic.Int32{}, flights: map[flightKey]*txState{}, lat: newLatencies(DeadlineFloor)}
	w.routes.Store(&routes{fixed: cfg.Sinks, resolve: cfg.Resolve})
	for _, sink := range cfg.Sinks {
		if sink.Router != nil {
			w.routeSetOf(sink) // RoutedTables shows the sink from the start, at 0
		}
	}
	return w, nil
}

// DefaultConfig returns the configuration a zero Config stands for: every
// default, and nothing of what has none (the group, the sinks). The
// kafka2pg command's flags show these values.
func DefaultConfig() Config {
	return Config{
		ClaimLockTimeout:     10 * time.Second,
		WriteTimeout:         2 * time.Minute,
		WriteTimeoutRows:     10000,
		OnError:              OnErrorDeadLetter,
		MaxRecordBytes:       64 << 20,
		TableWriters:         2,
		MaxTablesPerSink:     100,
		CombineMaxRows:       100000,
		BadRecordLogInterval: 10 * time.Second,
	}
}

// withDefaults is cfg with the default of every optional field left zero
// (DefaultConfig's).
func (cfg Config) withDefaults() Config {
	def := DefaultConfig()
	orDefault(&cfg.ClaimLockTimeout, def.ClaimLockTimeout)
	orDefault(&cfg.WriteTimeout, def.WriteTimeout)
	orDefault(&cfg.WriteTimeoutRows, def.WriteTimeoutRows)
	orDefault(&cfg.MaxRecordBytes, def.MaxRecordBytes)
	orDefault(&cfg.TableWriters, def.TableWriters)
	orDefault(&cfg.MaxTablesPerSink, def.MaxTablesPerSink)
	if cfg.CombineMaxRows <= 0 {
		cfg.CombineMaxRows = def.CombineMaxRows
	}
	orDefault(&cfg.BadRecordLogInterval, def.BadRecordLogInterval)
	return cfg
}

// orDefault sets *p to def when *p is zero.
func orDefault[T comparable](p *T, def T) {
	var zero T
	if *p == zero {
		*p = def
	}
}

func validateSink(topic string, sink Sink) error {
	if err := validateTransactions(topic, sink); err != nil {
		return err
	}
	if sink.Boundaries != nil {
		return nil
	}
	if sink.Router != nil && sink.Changes != nil {
		return fmt.Errorf("ingest: the sink of topic %q routes by content (Router): its table cannot also follow the change events' schema (Changes)", topic)
	}
	if err := validateGuard(topic, sink); err != nil {
		return err
	}
	if sink.Changes != nil {
		for _, c := range sink.Children {
			if c.Bind == nil {
				return fmt.Errorf("ingest: the sink of topic %q decodes change events (Changes): its children need Bind, as their table follows the events' key", topic)
			}
		}
		if sink.Mapper != nil || sink.Upsert != nil {
			return fmt.Errorf("ingest: the sink of topic %q decodes change events (Changes): it takes no Mapper and no Upsert", topic)
		}
		return nil
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
// a record with decode.ErrTableChanged; Write then evolves the table to the
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
	if sink.Boundaries != nil {
		res, err := w.writeBoundaries(ctx, b, sink)
		return res, named(b, err)
	}
	if err := resolveSchemas(ctx, sink, b.Records); err != nil {
		return outcome{}, fmt.Errorf("write %s/%d: %w", b.Topic, b.Partition, err)
	}
	b, filtered, err := filterBatch(b, sink.Filter)
	if err != nil {
		return outcome{}, fmt.Errorf("write %s/%d: %w", b.Topic, b.Partition, err)
	}
	var res outcome
	switch {
	case sink.Router != nil:
		res, err = w.writeRouted(ctx, b, sink)
	case w.cfg.TableWriters > 0 && combinable(sink):
		res, err = w.writeInLane(ctx, b, sink)
	default:
		res, err = w.writeChanging(ctx, b, sink)
	}
	res.filtered = countCommitted(filtered, err)
	return res, err
}

// filterBatch is b without the records filter drops, and the offsets of
// those it drops; b itself when filter is nil. The span stays b's, so
// the dropped records' offsets advance with the batch. A record filter
// cannot evaluate stays, marked Unreadable with the reason, and becomes a
// bad record in every path's prologue (tooLarge).
func filterBatch(b *stream.Batch, filter RecordFilter) (*stream.Batch, []int64, error) {
	if filter == nil {
		return b, nil, nil
	}
	fb := *b
	fb.Records = make([]stream.Record, 0, len(b.Records))
	var dropped []int64
	for _, r := range b.Records {
		if r.Unreadable != nil {
			fb.Records = append(fb.Records, r)
			continue
		}
		keep, err := filter.Keep(&r)
		switch {
		case err != nil && !errors.Is(err, decode.ErrBadRecord):
			return b, nil, err
		case err != nil:
			r.Unreadable = err
			fb.Records = append(fb.Records, r)
		case keep:
			fb.Records = append(fb.Records, r)
		default:
			dropped = append(dropped, r.Offset)
		}
	}
	return &fb, dropped, nil
}

// countCommitted is how many of the filtered offsets a write that
// returned err committed: all of them, those before the bad record when
// it stopped the partition, none after any other error.
func countCommitted(filtered []int64, err error) int {
	if err == nil {
		return len(filtered)
	}
	var stop *stream.StopError
	if !errors.As(err, &stop) {
		return 0
	}
	n := 0
	for _, o := range filtered {
		if o < stop.Offset {
			n++
		}
	}
	return n
}

// writeChanging writes b in its own transaction, following the changes of
// a TableMapper's table.
func (w *Writer) writeChanging(ctx context.Context, b *stream.Batch, sink Sink) (outcome, error) {
	for changes := 0; ; changes++ {
		var err error
		if tm, ok := changingTable(sink); ok && !sameColumns(tm.Table(), sink.Table) {
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
		tm, ok := changingTable(sink)
		if !ok || (!errors.Is(err, decode.ErrTableChanged) && sameColumns(tm.Table(), sink.Table)) {
			return res, err
		}
	}
}

// changingTable is what tells a sink's table as it changes: its
// TableMapper, or its ChangeDecoder.
func changingTable(sink Sink) (interface{ Table() schema.Table }, bool) {
	if sink.Changes != nil {
		return sink.Changes, true
	}
	tm, ok := sink.Mapper.(TableMapper)
	return tm, ok
}

// maxTableChanges bounds how often one batch may change its table: each
// change comes from a new schema version the batch's records carry.
const maxTableChanges = 16

// write writes b in one transaction, trying the ways of writing it
// (attempt) in turn: the fast path; when Postgres refused a row of an
// unchecked COPY, the fast path with the mapping's checks; when Postgres
// refused rows (or a record stops the partition), the isolating path.
// Each attempt is a transaction of its own, and only the last one commits.
//
// Rows refused in a table with a Partition may be rows outside its
// partitions: before isolating them, the partitions they need are
// created (addPartitions), once, and the attempt that met them runs again.
func (w *Writer) write(ctx context.Context, b *stream.Batch, sink Sink) (outcome, error) {
	rechecked, partitionsTried := false, sink.Table.Partition == nil
	for next := attemptFast; ; {
		res, err := w.attempt(ctx, b, sink, next)
		if err != nil || res.redo == 0 {
			res.rechecked = rechecked
			return res, named(b, err)
		}
		if res.redo == attemptIsolated && !partitionsTried {
			partitionsTried = true
			ready, err := w.addPartitions(ctx, b, sink)
			if err != nil {
				return outcome{}, named(b, err)
			}
			if ready > 0 {
				continue
			}
		}
		next = res.redo
		rechecked = rechecked || next == attemptChecked
	}
}

// attempt writes b one way: the body of its sink's kind and the attempt.
// The records whose children do not fit are set aside first, with the
// table the attempt writes: a change of it (decode.ErrTableChanged) ends
// the attempt, and the next one, after the change, checks them again.
func (w *Writer) attempt(ctx context.Context, b *stream.Batch, sink Sink, a attempt) (outcome, error) {
	b, kids, err := checkChildren(b, sink)
	if err != nil {
		return outcome{}, err
	}
	switch {
	case sink.Changes != nil:
		return w.changesAttempt(ctx, b, sink, a, kids)
	case len(sink.Children) > 0 && a == attemptIsolated:
		return w.childrenIsolated(ctx, b, sink)
	case sink.Upsert != nil && a == attemptIsolated:
		return w.upsertIsolated(ctx, b, sink)
	case sink.Upsert != nil:
		return w.upsertFast(ctx, b, sink, kids)
	case a == attemptIsolated:
		return w.appendIsolated(ctx, b, sink)
	case a == attemptChecked:
		return w.appendFast(ctx, b, sink, nil, kids)
	default:
		return w.appendFast(ctx, b, sink, w.uncheckedFor(b.Topic, sink.Mapper), kids)
	}
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
		return fmt.Errorf("notify: %w", err)
	}
	return nil
}

// handleBad dead-letters (or, with OnError "skip", only counts) bad records
// inside the batch's transaction; inBatchTx reports them in the log after
// COMMIT (badLog).
func (w *Writer) handleBad(ctx context.Context, tx pgx.Tx, sink Sink, bad []badRecord, res *outcome) error {
	if len(bad) == 0 {
		return nil
	}
	table := sink.Table.QualifiedName()
	if w.cfg.OnError == OnErrorSkip {
		res.skipped = len(bad)
		return nil
	}
	letters := make([]deadletters.Letter, len(bad))
	for i, x := range bad {
		letters[i] = deadletters.Letter{Group: w.cfg.Group, Record: *x.rec, Table: cmp.Or(x.table, table), Kind: x.kind, Message: x.err.Error()}
	}
	if err := deadletters.Insert(ctx, tx, letters); err != nil {
		return err
	}
	res.deadLetters = len(letters)
	for _, x := range bad {
		res.deadLetterKinds = append(res.deadLetterKinds, x.kind)
	}
	return nil
}

type badRecord struct {
	rec  *stream.Record
	kind string
	err  error
	// table names the record's table in its dead letter when it is not
	// the sink's (a routed sink's, route.go).
	table string
}

// refusedByMapping: the mapping refused the record, not the size limit
// (what keeps a topic's batches checked, unchecked.go).
func (b badRecord) refusedByMapping() bool {
	return b.kind != KindTooLarge && b.kind != KindBatchTooLarge && b.kind != decode.KindFilter
}

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

func (s *rowSource) AppendsTuples() bool { return s.append != nil }

// NextTuple is Next for a RowAppender: the row goes straight into dst.
func (s *rowSource) NextTuple(dst []byte, oids []uint32, enc pgcopy.FieldEncoder) ([]byte, bool) {
	for s.i < len(s.records) {
		r := &s.records[s.i]
		s.i++
		out := dst
		bad, err := decodeRecord(r, s.maxBytes, func(r *stream.Record) (err error) {
			out, err = s.append(r, dst, oids, enc)
			return err
		})
		switch {
		case err != nil:
			s.err = err
			return dst, false
		case bad != nil:
			s.bad = append(s.bad, *bad)
			continue
		}
		return out, true
	}
	return dst, false
}

// mapRecord builds the row of r into dst, or says why r is a bad record. An
// error is not about the record: it aborts the batch.
func mapRecord(r *stream.Record, m RowMapper, maxBytes int, dst []any) (row []any, bad *badRecord, err error) {
	bad, err = decodeRecord(r, maxBytes, func(r *stream.Record) (err error) {
		row, err = m.Row(r, dst)
		return err
	})
	return row, bad, err
}

// decodeRecord is the prologue every path runs on a record: r is a bad
// record when it is unreadable or over maxBytes (tooLarge); otherwise
// decode reads it, and an error of decode is r as a bad record or an error
// not about the record, which aborts the batch (classify).
func decodeRecord(r *stream.Record, maxBytes int, decode func(r *stream.Record) error) (*badRecord, error) {
	if bad := tooLarge(r, maxBytes); bad != nil {
		return bad, nil
	}
	if err := decode(r); err != nil {
		return classify(r, err)
	}
	return nil, nil
}

// decodeRecords runs decodeRecord on each of records in order, decode
// taking the record and its index, and returns the bad records; an error
// not about a record stops it and is returned.
func decodeRecords(records []stream.Record, maxBytes int, decode func(r *stream.Record, i int) error) ([]badRecord, error) {
	var bad []badRecord
	for i := range records {
		b, err := decodeRecord(&records[i], maxBytes, func(r *stream.Record) error { return decode(r, i) })
		if err != nil {
			return nil, err
		}
		if b != nil {
			bad = append(bad, *b)
		}
	}
	return bad, nil
}

// tooLarge is r as a bad record when its key and value are over maxBytes,
// when it could not be read at all (its batch was too large), or when its
// sink's filter could not evaluate it (filterBatch).
func tooLarge(r *stream.Record, maxBytes int) *badRecord {
	if errors.Is(r.Unreadable, decode.ErrBadRecord) {
		bad, _ := classify(r, r.Unreadable)
		return bad
	}
	if r.Unreadable != nil {
		return &badRecord{rec: r, kind: KindBatchTooLarge, err: r.Unreadable}
	}
	if size := len(r.Key) + len(r.Value); maxBytes > 0 && size > maxBytes {
		return &badRecord{rec: r, kind: KindTooLarge,
			err: fmt.Errorf("the record is %d bytes (key and value), over the limit of %d", size, maxBytes)}
	}
	return nil
}

// classify sorts a mapping error: a bad record (the error wraps
// decode.ErrBadRecord), or an error that is not about the record.
func classify(r *stream.Record, err error) (*badRecord, error) {
	if !errors.Is(err, decode.ErrBadRecord) {
		return nil, err
	}
	kind := decode.KindInvalidValue
	var de *decode.DecodeError
	if errors.As(err, &de) {
		kind = de.Kind
	}
	return &badRecord{rec: r, kind: kind, err: err}, nil
}

func (s *rowSource) Values() ([]any, error) { return s.row, nil }
func (s *rowSource) Err() error             { return s.err }
