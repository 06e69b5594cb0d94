package ingest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/kafka2pg/kafka2pg/internal/enum"
	"github.com/kafka2pg/kafka2pg/stream"
)

// An Applier applies the staged source transactions of one source
// (txstage.go), whole and in order. Its turn is fenced as a partition's
// is: Claim bumps the source's epoch in kafka2pg.cdc_appliers, and every
// apply transaction first moves the source's applied position only if
// that epoch is still the Applier's, so an Applier that lost its turn (a
// paused process, a partitioned member) commits nothing, and its row lock
// orders it behind the newer one.
//
// The order is the END records' on the transaction topic: Debezium's
// Postgres connector reads the write-ahead log through logical decoding,
// which hands over each transaction whole at its commit, in commit order,
// so it writes BEGIN, the events and END of one transaction before the
// BEGIN of the next (MySQL's binlog holds committed transactions in commit
// order as well). The topic must have one partition: its records are keyed
// by transaction id, so with more, Kafka keeps no order between the
// transactions.
//
// One apply transaction reads the staged events of consecutive source
// transactions in order through a cursor, FetchBytes at a time (within
// FetchRows), and applies each chunk by key (txset.go), so a transaction
// of any size is applied whole while the Applier holds two chunks of it:
// one decoding while the other applies.

// ErrApplierFenced means another Applier claimed the source: nothing of
// the apply transaction was committed.
var ErrApplierFenced = errors.New("fenced: another applier claimed this source")

// OnIncomplete is what an Applier does with a source transaction whose
// events do not all arrive.
type OnIncomplete int

const (
	// IncompleteWait waits for them: the transaction, and every one after
	// it, waits; the Applier reports it (ApplierStats, a WARN).
	IncompleteWait OnIncomplete = iota
	// IncompleteApply applies the events that arrived once the
	// transaction has waited IncompleteTimeout; the events that arrive
	// later become dead letters.
	IncompleteApply
)

var onIncompleteNames = enum.Names{"wait", "apply"}

func (o OnIncomplete) String() string { return onIncompleteNames.Name(int(o), "OnIncomplete") }

// ParseOnIncomplete reads wait or apply.
func ParseOnIncomplete(s string) (OnIncomplete, error) {
	v, err := onIncompleteNames.Parse(s)
	return OnIncomplete(v), err
}

// ApplierConfig configures an Applier. The zero value of each optional
// field means the default written next to it.
type ApplierConfig struct {
	// Source is the Transactions.Source whose transactions it applies.
	// Required.
	Source string
	// PollInterval is how often an idle Applier looks for a complete
	// transaction. Default 50ms.
	PollInterval time.Duration
	// FetchRows is the most staged events one FETCH of the cursor reads.
	// Default 5,000.
	FetchRows int
	// FetchBytes is the size of the staged events one FETCH reads, as
	// the events read so far in the apply transaction measure it: large
	// events are read fewer at a time (the first FETCH reads 256 at
	// most), small ones up to FetchRows. The Applier holds two FETCHes'
	// events, one decoding while the other applies. Default 8 MiB.
	FetchBytes int
	// GroupEvents bounds the events of the complete source transactions
	// that one Postgres transaction applies together, in order: a reader
	// sees them at once, never part of one, and each costs fewer round
	// trips. A transaction larger than it is applied alone. Default
	// 10,000.
	GroupEvents int
	// IncompleteWarn is the age of an incomplete transaction (since its
	// END was staged) past which the Applier logs a WARN naming it, its
	// events seen and expected, at most once per IncompleteWarn. Default 30s.
	IncompleteWarn time.Duration
	// OnIncomplete says what happens to an incomplete transaction; default
	// IncompleteWait.
	OnIncomplete OnIncomplete
	// IncompleteTimeout is how long IncompleteApply waits. Default 5m.
	IncompleteTimeout time.Duration
	// RetainEnds is how many offsets of the transaction topic an applied
	// END is kept for behind the END last applied; then the apply
	// transaction deletes it. While kept, it marks a later copy of the
	// transaction's END or events (a connector restarted after a crash
	// sends again what came after the last source offset it flushed, a
	// few offset.flush.interval.ms of transactions) as applied, and a
	// late event of a transaction applied partially as a dead letter.
	// Default 1,000,000 (two records per transaction: BEGIN and END).
	RetainEnds int64
	// OrphanAfter is how long an event stays staged without the END of
	// its transaction before it becomes a dead letter (txprune.go): a
	// copy of an event whose END was deleted already, or one whose END
	// never came. Default 1h.
	OrphanAfter time.Duration
	// Logger: default the Writer's.
	Logger *slog.Logger
}

// ApplierStats is what an Applier did and waits on.
type ApplierStats struct {
	// Epoch is the Applier's claim; 0 before Claim.
	Epoch int64
	// Applied counts the source transactions it applied, AppliedEvents
	// their events, Partial those applied without all their events.
	Applied, AppliedEvents, Partial int64
	// Incomplete describes the next transaction in order while its
	// events are not all staged; zero otherwise.
	Incomplete IncompleteTx
	// Leading is true while RunLeased holds the source's lock.
	Leading bool
}

// IncompleteTx is a transaction whose END is staged but not all of its
// events.
type IncompleteTx struct {
	ID       string
	Age      time.Duration // since its END was staged
	Seen     int64         // events staged
	Expected int64         // the END's event_count
}

// Applier applies one source's staged transactions. Run it in one
// goroutine; Stats is safe for concurrent use.
type Applier struct {
	w   *Writer
	cfg ApplierConfig
	log *slog.Logger

	epoch     int64 // from Claim; read and written by the Run goroutine only
	lastWarn  time.Time
	lastSweep time.Time   // of the orphans (sweepOrphans)
	schemas   schemaCache // of the staged events (txschemas.go); the Run goroutine's

	mu    sync.Mutex
	stats ApplierStats

	// afterLook, set by tests, runs once a look ahead is done and before
	// the group it ran beside applies.
	afterLook func()
}

// NewApplier returns an Applier of cfg.Source on w's pool and sinks: it
// decodes each staged event again with the sink of its topic, and applies
// it as that sink's change would be.
func (w *Writer) NewApplier(cfg ApplierConfig) (*Applier, error) {
	if cfg.Source == "" {
		return nil, stream.FieldErrorf("ingest.ApplierConfig.Source", "empty: name the source (Transactions.Source) whose transactions to apply")
	}
	if !onIncompleteNames.Valid(int(cfg.OnIncomplete)) {
		return nil, stream.FieldErrorf("ingest.ApplierConfig.OnIncomplete", "%s is not %s", cfg.OnIncomplete, onIncompleteNames.List())
	}
	orDefault(&cfg.PollInterval, 50*time.Millisecond)
	orDefault(&cfg.FetchRows, 5000)
	orDefault(&cfg.FetchBytes, 8<<20)
	orDefault(&cfg.GroupEvents, 10000)
	orDefault(&cfg.IncompleteWarn, 30*time.Second)
	orDefault(&cfg.IncompleteTimeout, 5*time.Minute)
	orDefault(&cfg.RetainEnds, 1_000_000)
	orDefault(&cfg.OrphanAfter, time.Hour)
	if cfg.FetchRows < 0 {
		return nil, stream.FieldErrorf("ingest.ApplierConfig.FetchRows", "%d is negative: give the most staged events one FETCH reads, or 0 for the default", cfg.FetchRows)
	}
	if cfg.FetchBytes < 0 {
		return nil, stream.FieldErrorf("ingest.ApplierConfig.FetchBytes", "%d is negative: give the bytes of staged events one FETCH reads, or 0 for the default", cfg.FetchBytes)
	}
	if cfg.GroupEvents < 0 {
		return nil, stream.FieldErrorf("ingest.ApplierConfig.GroupEvents", "%d is negative: give the most events one apply takes, or 0 for the default", cfg.GroupEvents)
	}
	if cfg.RetainEnds < 0 {
		return nil, stream.FieldErrorf("ingest.ApplierConfig.RetainEnds", "%d is negative: give the offsets of the transaction topic to keep applied ENDs for, or 0 for the default", cfg.RetainEnds)
	}
	if cfg.OrphanAfter < 0 {
		return nil, stream.FieldErrorf("ingest.ApplierConfig.OrphanAfter", "%s is negative: give how long an event may wait for its END, or 0 for the default", cfg.OrphanAfter)
	}
	log := cfg.Logger
	if log == nil {
		log = w.log
	}
	return &Applier{w: w, cfg: cfg, log: log.With("source", cfg.Source), schemas: schemaCache{}}, nil
}

// Source is the source whose transactions the Applier applies.
func (a *Applier) Source() string { return a.cfg.Source }

// Stats returns what the Applier did, and the transaction it waits on.
func (a *Applier) Stats() ApplierStats {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.stats
}

const claimApplierSQL = `INSERT INTO kafka2pg.cdc_appliers (consumer_group, source, epoch) VALUES ($1, $2, 1)
ON CONFLICT (consumer_group, source) DO UPDATE SET epoch = kafka2pg.cdc_appliers.epoch + 1, updated_at = now()
RETURNING epoch`

// Claim takes the source's turn: it bumps the epoch, which fences every
// earlier Applier of the source, and waits for the apply transaction one
// of them has open.
func (a *Applier) Claim(ctx context.Context) error {
	var epoch int64
	if err := a.w.pool.QueryRow(ctx, claimApplierSQL, a.w.cfg.Group, a.cfg.Source).Scan(&epoch); err != nil {
		return fmt.Errorf("claim the applier of source %q: %w", a.cfg.Source, err)
	}
	a.epoch = epoch
	a.mu.Lock()
	a.stats.Epoch = epoch
	a.mu.Unlock()
	return nil
}

// Run claims the source, then applies its transactions as they complete,
// until ctx ends (it returns nil) or another Applier claims the source
// (an error wrapping ErrApplierFenced). An apply that fails otherwise is
// logged and tried again after a pause.
func (a *Applier) Run(ctx context.Context) error {
	if err := a.Claim(ctx); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	t := time.NewTicker(a.cfg.PollInterval)
	defer t.Stop()
	pause := a.cfg.PollInterval
	for {
		n, err := a.ApplyReady(ctx)
		switch {
		case ctx.Err() != nil:
			return nil
		case errors.Is(err, ErrApplierFenced):
			return err
		case err != nil:
			a.log.Warn("apply a source transaction", "error", err, "retry_in", pause)
			pause = min(2*pause, 30*time.Second)
		default:
			pause = a.cfg.PollInterval
		}
		if n > 0 && err == nil {
			continue
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(pause - a.cfg.PollInterval):
			select {
			case <-ctx.Done():
				return nil
			case <-t.C:
			}
		}
	}
}

// pendingTx is a source transaction not applied yet, as nextSQL reads it.
type pendingTx struct {
	id       string
	part     int32
	offset   int64
	expected int64
	seen     int64
	age      time.Duration
}

// appliedPosition is the Applier's position: the offset of the
// transaction topic after the last END applied, -1 before any. An END is
// applied if and only if it is before it (ENDs apply in their offset
// order, and each apply moves the position in its transaction); only
// those applied partially are marked besides (partialSQL), for their
// late events.
const appliedPosition = `(SELECT coalesce(max(a.applied_tx_offset), -1) FROM kafka2pg.cdc_appliers a
 WHERE a.consumer_group = $1 AND a.source = $2)`

// headSQL reads the next END not applied at $3 or after, with its staged
// events seen. $3 is -1, or the offset after a group whose apply has not
// committed yet (lookAfter), whose ENDs the look still sees pending.
const headSQL = `SELECT e.txid, e.tx_partition, e.tx_offset, e.event_count, extract(epoch FROM now() - e.staged_at),
       (SELECT count(*) FROM kafka2pg.cdc_staged s
        WHERE s.consumer_group = e.consumer_group AND s.source = e.source AND s.txid = e.txid)
FROM kafka2pg.cdc_tx_ends e
WHERE e.consumer_group = $1 AND e.source = $2 AND e.applied_at IS NULL AND e.tx_offset >= greatest($3, ` + appliedPosition + `)
ORDER BY e.tx_offset
LIMIT 1`

// pendingSQL reads the ENDs not applied after the one at $3, in order,
// as headSQL does, but for their staged events seen: those of the ones
// that fit in one apply are counted next (countStaged).
const pendingSQL = `SELECT e.txid, e.tx_partition, e.tx_offset, e.event_count, extract(epoch FROM now() - e.staged_at), 0
FROM kafka2pg.cdc_tx_ends e
WHERE e.consumer_group = $1 AND e.source = $2 AND e.applied_at IS NULL AND e.tx_offset > $3
ORDER BY e.tx_offset
LIMIT $4`

// stagedCountsSQL counts the staged events of each transaction of $3, in
// order: one probe of the staging's key each.
const stagedCountsSQL = `SELECT (SELECT count(*) FROM kafka2pg.cdc_staged s
        WHERE s.consumer_group = $1 AND s.source = $2 AND s.txid = t.txid)
FROM unnest($3::text[]) WITH ORDINALITY AS t(txid, n)
ORDER BY t.n`

// pendingRead is how many pending transactions pending reads at once.
const pendingRead = 4096

// ApplyReady applies the source's transactions in order while the next
// one is complete, several in one Postgres transaction (up to
// GroupEvents events). It returns how many it applied. Call Claim first
// (Run does).
func (a *Applier) ApplyReady(ctx context.Context) (int, error) {
	if a.epoch == 0 {
		return 0, fmt.Errorf("apply source %q: the applier has not claimed it", a.cfg.Source)
	}
	if _, err := a.sweepOrphans(ctx); err != nil {
		return 0, err
	}
	n := 0
	var ahead *lookAhead
	defer func() { ahead.stop() }()
	for {
		// A look taken while the group before applied is as good as a
		// new one when its first transaction was complete, since a
		// transaction's staged events only grow until it applies. Else
		// that transaction may have completed since: look again.
		pending, err := ahead.take()
		if err == nil && (len(pending) == 0 || pending[0].seen < pending[0].expected) {
			pending, err = a.pending(ctx, -1)
		}
		ahead = nil
		if err != nil {
			return n, err
		}
		if len(pending) == 0 {
			a.setIncomplete(IncompleteTx{})
			return n, nil
		}
		group, events := 0, int64(0)
		for _, p := range pending {
			if p.seen < p.expected || group > 0 && events+p.expected > int64(a.cfg.GroupEvents) {
				break
			}
			group++
			events += p.expected
		}
		if group == 0 {
			p := pending[0]
			a.incomplete(ctx, p)
			if a.cfg.OnIncomplete != IncompleteApply || p.age < a.cfg.IncompleteTimeout {
				return n, nil
			}
			a.log.Warn("applying an incomplete source transaction: its missing events will be dead letters",
				"txid", p.id, "seen", p.seen, "expected", p.expected, "waited", p.age.Round(time.Second))
			group = 1
		}
		a.setIncomplete(IncompleteTx{})
		// The next look runs on a connection of its own while this group
		// applies: once the staging has run ahead, the apply's session is
		// what the source waits for, and the look (the next ENDs, their
		// staged events counted) is a fifth of its statements' time.
		ahead = a.lookAfter(ctx, pending[group-1].offset+1)
		if a.afterLook != nil {
			<-ahead.done
			a.afterLook()
		}
		if err := a.applyEvolving(ctx, pending[:group]); err != nil {
			return n, err
		}
		n += group
	}
}

// lookAhead is a look (pending) that runs while a group applies.
type lookAhead struct {
	cancel  context.CancelFunc
	done    chan struct{}
	pending []pendingTx
	err     error
}

// lookAfter starts the look at the ENDs from offset on: those after the
// group that applies, whose ENDs and staged events its apply does not
// touch.
func (a *Applier) lookAfter(ctx context.Context, offset int64) *lookAhead {
	ctx, cancel := context.WithCancel(ctx)
	l := &lookAhead{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(l.done)
		l.pending, l.err = a.pending(ctx, offset)
	}()
	return l
}

// take returns the look once it is done; nil returns none.
func (l *lookAhead) take() ([]pendingTx, error) {
	if l == nil {
		return nil, nil
	}
	<-l.done
	l.cancel()
	return l.pending, l.err
}

// stop ends a look that is not to be read (the apply failed); nil stops
// nothing.
func (l *lookAhead) stop() {
	if l != nil {
		l.cancel()
		<-l.done
	}
}

// pending reads the next pending transactions in order from the END at
// offset from on (-1: from the Applier's position), with the staged
// events seen of those that one apply could take: the first, and, when
// it is complete, those after it up to GroupEvents events. While the
// first waits, a look costs one probe.
func (a *Applier) pending(ctx context.Context, from int64) ([]pendingTx, error) {
	what := fmt.Sprintf("apply source %q: find the next transactions", a.cfg.Source)
	tx, err := a.w.pool.BeginTx(ctx, pgx.TxOptions{AccessMode: pgx.ReadOnly})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	var out []pendingTx
	look := func(sql string, args ...any) error {
		q := &pgx.Batch{}
		queueProbe(q, sql, args...).Query(func(rows pgx.Rows) error {
			var p pendingTx
			var age float64
			_, err := pgx.ForEachRow(rows, []any{&p.id, &p.part, &p.offset, &p.expected, &age, &p.seen}, func() error {
				if p.part != 0 {
					return fmt.Errorf("an END record of partition %d of the transaction topic: the topic must have one partition, so that its records keep the source's commit order", p.part)
				}
				p.age = time.Duration(age * float64(time.Second))
				out = append(out, p)
				return nil
			})
			return err
		})
		if err := tx.SendBatch(ctx, q).Close(); err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		return nil
	}
	if err := look(headSQL, a.w.cfg.Group, a.cfg.Source, from); err != nil {
		return nil, err
	}
	if len(out) == 0 || out[0].seen < out[0].expected {
		return out, nil
	}
	// A transaction has an event at least: no more than GroupEvents
	// of them fit in the window. (Reading pendingRead every time read
	// thousands of ENDs for each apply of a few.)
	if err := look(pendingSQL, a.w.cfg.Group, a.cfg.Source, out[0].offset, min(pendingRead, a.cfg.GroupEvents)); err != nil {
		return nil, err
	}
	window, events := 1, out[0].expected
	for window < len(out) && events+out[window].expected <= int64(a.cfg.GroupEvents) {
		events += out[window].expected
		window++
	}
	out = out[:window]
	if err := a.countStaged(ctx, tx, out[1:]); err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return out, nil
}

// countStaged sets the staged events seen of each of ps.
func (a *Applier) countStaged(ctx context.Context, tx pgx.Tx, ps []pendingTx) error {
	if len(ps) == 0 {
		return nil
	}
	ids := make([]string, len(ps))
	for i, p := range ps {
		ids[i] = p.id
	}
	q := &pgx.Batch{}
	queueProbe(q, stagedCountsSQL, a.w.cfg.Group, a.cfg.Source, ids).Query(func(rows pgx.Rows) error {
		i := 0
		var n int64
		_, err := pgx.ForEachRow(rows, []any{&n}, func() error {
			ps[i].seen = n
			i++
			return nil
		})
		return err
	})
	return tx.SendBatch(ctx, q).Close()
}

func (a *Applier) setIncomplete(t IncompleteTx) {
	a.mu.Lock()
	a.stats.Incomplete = t
	a.mu.Unlock()
}

// incomplete reports p, which waits for events: in Stats at once, in a
// WARN once it is IncompleteWarn old, with its counts per table.
func (a *Applier) incomplete(ctx context.Context, p pendingTx) {
	a.setIncomplete(IncompleteTx{ID: p.id, Age: p.age, Seen: p.seen, Expected: p.expected})
	if p.age < a.cfg.IncompleteWarn || time.Since(a.lastWarn) < a.cfg.IncompleteWarn {
		return
	}
	a.lastWarn = time.Now()
	var seen, expected string
	err := a.w.pool.QueryRow(ctx, `SELECT
    coalesce((SELECT string_agg(data_collection || '=' || n, ' ' ORDER BY data_collection)
              FROM (SELECT data_collection, count(*) AS n FROM kafka2pg.cdc_staged
                    WHERE consumer_group = $1 AND source = $2 AND txid = $3 GROUP BY 1) c), ''),
    coalesce((SELECT string_agg(key || '=' || value, ' ' ORDER BY key) FROM jsonb_each_text(e.data_collections)), '')
FROM kafka2pg.cdc_tx_ends e WHERE consumer_group = $1 AND source = $2 AND txid = $3`,
		a.w.cfg.Group, a.cfg.Source, p.id).Scan(&seen, &expected)
	if err != nil {
		seen = "(unknown: " + err.Error() + ")"
	}
	a.log.Warn("a source transaction waits for events that have not arrived: it and every later one are not applied",
		"txid", p.id, "seen", p.seen, "expected", p.expected, "waiting", p.age.Round(time.Second),
		"seen_per_table", seen, "expected_per_table", expected, "on_incomplete", a.cfg.OnIncomplete.String())
}

// tableChanged is an apply stopped by an event that changes its table:
// the table is evolved outside the apply transaction, then the apply runs
// again.
type tableChanged struct {
	topic string
	sink  Sink
}

func (e *tableChanged) Error() string {
	return fmt.Sprintf("the table of topic %q changed", e.topic)
}

// applyEvolving applies group, evolving the tables its events change
// first.
func (a *Applier) applyEvolving(ctx context.Context, group []pendingTx) error {
	for changes := 0; ; changes++ {
		err := a.apply(ctx, group)
		var tc *tableChanged
		if !errors.As(err, &tc) || changes >= maxTableChanges {
			return err
		}
		if _, err := a.w.changeTable(ctx, tc.topic, tc.sink, tc.sink.Changes.Table()); err != nil {
			return fmt.Errorf("apply source %q transaction %q: %w", a.cfg.Source, group[0].id, err)
		}
	}
}

const (
	advanceApplierSQL = `UPDATE kafka2pg.cdc_appliers SET applied_tx_offset = $3, applied_txid = $4, updated_at = now()
WHERE consumer_group = $1 AND source = $2 AND epoch = $5`
	// $3 are the transactions' ids in order: the events of the first
	// come first.
	// The lateral join reads each transaction's events by the index of
	// its id, whatever the size of the staging (OFFSET 0 keeps the
	// planner from flattening it into a scan of all the source's staged
	// events, which stale statistics of a table that fills and empties
	// make it choose).
	declareStagedSQL = `DECLARE kafka2pg_staged NO SCROLL CURSOR FOR
SELECT s.row_id, s.topic, s.partition, s.kafka_offset, s.key, s.value, s.kafka_timestamp, s.key_schema, s.value_schema
FROM unnest($3::text[]) WITH ORDINALITY AS t(txid, n)
CROSS JOIN LATERAL (SELECT s.ctid AS row_id, s.* FROM kafka2pg.cdc_staged s
                    WHERE s.consumer_group = $1 AND s.source = $2 AND s.txid = t.txid
                    ORDER BY s.total_order OFFSET 0) s
ORDER BY t.n, s.total_order`
	// partialSQL marks the END of a lone transaction applied partially
	// (OnIncomplete apply, $4 its events applied): its late events become
	// dead letters. A whole transaction's END is applied by the Applier's
	// position alone (appliedPosition), and is not written again.
	partialSQL = `UPDATE kafka2pg.cdc_tx_ends SET applied_at = now(), applied_events = $4
WHERE consumer_group = $1 AND source = $2 AND txid = $3`
	// The ENDs behind $3 go: the unmarked ones and those applied
	// partially, each through its partial index. (cdc_tx_ends has no index
	// of all ENDs by offset: with an empty queue's statistics Postgres took
	// one for the probes of an END by its id, migration 5 says.)
	pruneEndsSQL        = `DELETE FROM kafka2pg.cdc_tx_ends WHERE consumer_group = $1 AND source = $2 AND applied_at IS NULL AND tx_offset < $3`
	prunePartialEndsSQL = `DELETE FROM kafka2pg.cdc_tx_ends WHERE consumer_group = $1 AND source = $2 AND applied_at IS NOT NULL AND tx_offset < $3`
)

// apply applies the staged events of group, consecutive transactions, in
// one transaction: the fence first, then the events in order, then the
// staged events go and the ENDs are marked applied. Each but a lone
// transaction (OnIncomplete apply) is complete.
func (a *Applier) apply(ctx context.Context, group []pendingTx) error {
	g, src := a.w.cfg.Group, a.cfg.Source
	last := group[len(group)-1]
	ids := make([]string, len(group))
	var partial *pendingTx
	for i, p := range group {
		ids[i] = p.id
		if p.seen < p.expected {
			partial = &group[i]
		}
	}
	what := fmt.Sprintf("apply source %q transaction %q", src, group[0].id)
	if len(group) > 1 {
		what = fmt.Sprintf("apply source %q transactions %q to %q", src, group[0].id, last.id)
	}
	tx, err := a.w.pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("%s: begin: %w", what, err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	tag, err := tx.Exec(ctx, advanceApplierSQL, g, src, last.offset+1, last.id, a.epoch)
	if err != nil {
		return fmt.Errorf("%s: fence: %w", what, err)
	}
	if tag.RowsAffected() != 1 {
		return fmt.Errorf("%s with epoch %d: %w", what, a.epoch, ErrApplierFenced)
	}
	// The cursor is read to its end: plan it for all its rows, not the
	// first tenth, and with the staging's key (noSeqScan), which the
	// statements that apply the events then plan without.
	q := &pgx.Batch{}
	q.Queue("SET LOCAL cursor_tuple_fraction = 1")
	queueProbe(q, declareStagedSQL, g, src, ids)
	if err := tx.SendBatch(ctx, q).Close(); err != nil {
		return fmt.Errorf("%s: declare the cursor: %w", what, err)
	}
	ap := newEventApplier(a.w, a.schemas)
	events, err := ap.applyAll(ctx, tx, fetchSize{rows: a.cfg.FetchRows, bytes: a.cfg.FetchBytes})
	if err != nil {
		var tc *tableChanged
		if errors.As(err, &tc) {
			return err
		}
		return fmt.Errorf("%s: %w", what, err)
	}
	// One round trip ends the apply: the cursor closes, the ENDs are
	// marked applied, and the ENDs RetainEnds behind the applied position
	// are deleted. (Each chunk deleted its staged events.)
	q = &pgx.Batch{}
	q.Queue("CLOSE kafka2pg_staged")
	if partial != nil {
		queueProbe(q, partialSQL, g, src, partial.id, partial.seen)
	}
	queueProbe(q, pruneEndsSQL, g, src, last.offset-a.cfg.RetainEnds)
	queueProbe(q, prunePartialEndsSQL, g, src, last.offset-a.cfg.RetainEnds)
	if err := tx.SendBatch(ctx, q).Close(); err != nil {
		return fmt.Errorf("%s: mark the ENDs applied: %w", what, err)
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("%s: commit (outcome unknown): %w", what, err)
	}
	a.w.traceStale(ctx, ap.stale)
	a.mu.Lock()
	a.stats.Applied += int64(len(group))
	a.stats.AppliedEvents += events
	for _, p := range group {
		if p.seen < p.expected {
			a.stats.Partial++
		}
	}
	a.mu.Unlock()
	return nil
}
