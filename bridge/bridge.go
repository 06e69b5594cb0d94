package bridge

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"
	"golang.org/x/sync/errgroup"

	"github.com/kafka2pg/kafka2pg/bridge/internal/metrics"
	"github.com/kafka2pg/kafka2pg/bridge/internal/pgsession"
	"github.com/kafka2pg/kafka2pg/ingest"
	"github.com/kafka2pg/kafka2pg/migrations"
	"github.com/kafka2pg/kafka2pg/reader"
	"github.com/kafka2pg/kafka2pg/stream"
)

// caughtUpPoll is how often UntilCaughtUp asks Postgres whether the
// durable offsets reached the targets.
const caughtUpPoll = 200 * time.Millisecond

// Bridge reads Kafka topics into Postgres tables, exactly once. Create it
// with New, run it with Run, stop it with Shutdown (graceful) or Close
// (at once). Its methods are safe for concurrent use.
type Bridge struct {
	cfg     Config
	log     *slog.Logger
	m       *metrics.Metrics
	st      *bridgeStatus
	written writeCounters
	rc      reconfig // Reconfigure's state (reconfigure.go)

	mu         sync.Mutex
	state      runState
	ran        bool               // Run began: done will be closed
	cancelRun  context.CancelFunc // ends Run's context; set while it runs
	shutdown   context.Context    // the first Shutdown's, bounding the graceful stop
	cancelStop context.CancelFunc // cuts the graceful stop short; set while it runs
	closed     bool               // Close was called: stop at once
	stopErr    error              // what the graceful stop could not do
	done       chan struct{}      // closed when Run returns
}

type runState int

const (
	idle runState = iota
	running
	stopped
)

// New checks cfg and returns a Bridge that has touched nothing yet. log
// receives the bridge's logs (nil: none). The bridge's metrics are
// registered on reg (nil: a registry of its own, which nobody reads); give
// each bridge a registry of its own, or wrap one with
// prometheus.WrapRegistererWith and a label that tells them apart.
func New(cfg Config, log *slog.Logger, reg prometheus.Registerer) (*Bridge, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if len(cfg.Sinks.Fixed) == 0 && len(cfg.Sinks.Patterns) == 0 {
		return nil, stream.FieldErrorf("bridge.Config.Sinks", "empty: give every topic a sink, or a pattern for the topics it matches")
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	m, err := metrics.New(reg)
	if err != nil {
		return nil, err
	}
	return &Bridge{cfg: cfg.withDefaults(), log: log, m: m, st: newBridgeStatus(log), done: make(chan struct{})}, nil
}

var errAlreadyRun = errors.New("bridge: Run after Run, Shutdown or Close: a Bridge runs once")

// Run connects, prepares the database and the tables, joins the consumer
// group and writes every record it reads into its table until ctx ends,
// Shutdown or Close is called, a fatal error happens, or (with
// UntilCaughtUp) every partition is written up to its end offset at start.
//
// It returns nil on a clean stop: the in-flight batches written (within
// Kafka.FlushTimeout after ctx ends, or within Shutdown's context), the
// durable offsets committed to the group, the member gone from it. It
// returns the error that stopped it otherwise: a start-up step that
// failed (connection trouble is retried until ctx ends), a
// *reader.FatalError when trouble that retrying cannot fix lasted
// Kafka.FatalRetryTimeout, a partition UntilCaughtUp cannot finish, or
// UntilCaughtUp giving up after CaughtUpTimeout. A Bridge runs once.
func (b *Bridge) Run(ctx context.Context) error {
	b.mu.Lock()
	if b.state != idle {
		b.mu.Unlock()
		return errAlreadyRun
	}
	b.state, b.ran = running, true
	runCtx, cancel := context.WithCancel(ctx)
	b.cancelRun = cancel
	b.mu.Unlock()
	defer func() {
		cancel()
		b.mu.Lock()
		b.state = stopped
		b.mu.Unlock()
		b.st.stopped()
		close(b.done)
	}()
	return b.run(ctx, runCtx)
}

// Shutdown stops the bridge gracefully, as net/http's Server.Shutdown
// does: it stops fetching, writes what is queued, commits the durable
// offsets to the group and leaves it, all within ctx, and returns once Run
// has returned. Writes still in flight when ctx ends are abandoned: they
// roll back, and whoever owns their partitions next reads those records
// again. It returns ctx's error when ctx ended first, else the steps the
// stop could not finish (nil when none); a leave of the group that could
// not finish in time is reader.ErrLeaveAbandoned (errors.Is), harmless for
// the data, which is durable. Shutdown before Run makes Run return at once.
func (b *Bridge) Shutdown(ctx context.Context) error {
	b.mu.Lock()
	if !b.ran {
		b.state = stopped
		b.mu.Unlock()
		return nil
	}
	if b.shutdown == nil && !b.closed {
		b.shutdown = ctx
	}
	cancel := b.cancelRun
	b.mu.Unlock()
	if cancel != nil {
		cancel()
	}
	select {
	case <-b.done:
		b.mu.Lock()
		defer b.mu.Unlock()
		return b.stopErr
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Close stops the bridge at once: the writes in flight are cancelled
// (their transactions roll back; nothing half-written is kept), nothing
// queued is written, and the member leaves the group within a second. It
// returns once Run has returned, and cuts a Shutdown in progress short.
func (b *Bridge) Close() {
	b.mu.Lock()
	b.closed = true
	ran := b.ran
	if !ran {
		b.state = stopped // a later Run returns at once
	}
	cancelRun, cancelStop := b.cancelRun, b.cancelStop
	b.mu.Unlock()
	if !ran {
		return
	}
	if cancelRun != nil {
		cancelRun()
	}
	if cancelStop != nil {
		cancelStop()
	}
	<-b.done
}

// Ready returns nil when the bridge is running and writing, else an error
// that says why not: starting (and the step under way), stopping, Postgres
// unreachable, a partition stopped, in retry backoff or stalled
// (ReadyStallTimeout), not yet in the consumer group. It is what a
// readiness probe asks.
func (b *Bridge) Ready(ctx context.Context) error {
	if why := notReady(ctx, b.st, b.cfg.ReadyStallTimeout, time.Now()); why != "" {
		return errors.New(why)
	}
	return nil
}

// Stats returns what the bridge has done since Run began.
func (b *Bridge) Stats() Stats {
	var s Stats
	if _, _, rd, _ := b.st.snapshot(); rd != nil {
		s.Stats = rd.Stats()
	}
	s.Rows, s.DeadLetters, s.Skipped = b.written.rows.Load(), b.written.deadLetters.Load(), b.written.skipped.Load()
	return s
}

// run is Run: parent is Run's ctx, ctx the same ended by Shutdown and
// Close too.
//
// The order of the start matters: the topics are checked before a table
// is created for them, and the group is joined (reader.New) only once
// Postgres, the migrations and the tables are ready.
func (b *Bridge) run(parent, ctx context.Context) (err error) {
	cfg, log, st := b.cfg, b.log, b.st
	if cfg.UntilCaughtUp && cfg.CaughtUpTimeout > 0 {
		var stop func()
		ctx, stop = caughtUpDeadline(ctx, st, cfg.CaughtUpTimeout)
		defer stop()
		defer func() { err = givenUp(ctx, err) }()
	}
	// TLS and SASL trouble never heals: stop before touching Postgres.
	secOpts, err := cfg.KafkaSecurity.Options()
	if err != nil {
		return err
	}
	st.starting("check the Kafka brokers")
	if err := cfg.KafkaSecurity.CheckBrokers(ctx, cfg.Kafka.Brokers, 15*time.Second); err != nil {
		return err
	}
	rcfg := cfg.Kafka
	rcfg.Logger, rcfg.Permanent, rcfg.Principal = log, ingest.Permanent, cfg.KafkaSecurity.Principal()
	st.starting("check the topics")
	if err := reader.CheckTopics(ctx, rcfg, literalTopics(cfg), secOpts...); err != nil {
		return err
	}
	if !cfg.SkipMigrations {
		if err := st.retry(ctx, migrateOp, func() error { return migrations.Up(ctx, cfg.PostgresURL) }); err != nil {
			return err
		}
	}
	wcfg := cfg.Writer
	server := &serverWatch{log: log}
	pool, err := newPool(ctx, cfg.PostgresURL, cfg.PostgresMaxConns, wcfg.StatementTimeout(), server)
	if err != nil {
		return err
	}
	defer pool.Close()

	sinks := wcfg.Sinks
	b.m.InitTables(sinks)
	wcfg.Logger, wcfg.Tracer = log, writeTracers{b.m, &b.written}
	w, err := ingest.New(pool, wcfg)
	if err != nil {
		return err
	}
	if err := st.retry(ctx, "check the database's encoding", func() error {
		return pgsession.CheckEncoding(ctx, pool, log, cfg.Kafka.Group, cfg.Sinks)
	}); err != nil {
		return err
	}
	if err := st.retry(ctx, "prepare the target tables", func() error {
		err := w.EnsureTables(ctx, !cfg.SkipCreateTables)
		if missing, ok := errors.AsType[*ingest.MissingTableError](err); ok {
			// The bridge's own field decides whether it creates tables.
			return stream.FieldErrorf("bridge.Config.SkipCreateTables", "table %s for topic %q does not exist: create it, or let the bridge create it", missing.Table, missing.Topic)
		}
		return err
	}); err != nil {
		return err
	}

	rcfg.ExtraOpts = append(rcfg.ExtraOpts, secOpts...)
	rcfg.ExtraOpts = append(rcfg.ExtraOpts, kgo.WithHooks(b.m.Hooks()))
	st.starting("join the consumer group")
	rd, err := reader.New(rcfg, w)
	if err != nil {
		return err
	}
	defer rd.Close() // on an error before the stop below: abandon (after it: nothing to do)
	// Another server behind the URL (a failover, a restored backup) may
	// hold older positions than the partitions left there: idle ones
	// would not notice before their next record.
	server.onChange(rd.CheckPositions)
	queueCapacity := rcfg.QueueCapacity
	if queueCapacity == 0 {
		queueCapacity = 2 * rcfg.BatchMaxRows
	}
	if err := b.m.Register(rd, w, pool, queueCapacity); err != nil {
		return err
	}
	appliers, err := newAppliers(w, cfg.Sinks.Appliers, log)
	if err != nil {
		return err
	}
	if err := b.m.RegisterAppliers(applierStates(appliers)); err != nil {
		return err
	}
	st.withAppliers(appliers)
	b.goLive(rd, w, pool)
	defer b.leaveLive()

	runCtx, stopRun := context.WithCancel(ctx)
	defer stopRun()
	var caughtUp *caughtUpWatch
	if cfg.UntilCaughtUp {
		caughtUp, err = newCaughtUpWatch(ctx, rd.Client(), pool, cfg.Kafka.Group, cfg.Kafka.Topics, cfg.Kafka.TopicsAreRegex, cfg.Kafka.IsolationLevel)
		if err != nil {
			return err
		}
		log.Info("running until caught up", "targets", caughtUp.describe())
	}

	st.running(rd, pool)
	g, gctx := errgroup.WithContext(runCtx)
	g.Go(func() error { return rd.Run(gctx) })
	for _, a := range appliers {
		g.Go(func() error { return a.RunLeased(gctx) })
	}
	if caughtUp != nil {
		g.Go(func() error {
			if err := caughtUp.wait(gctx, rd.Settled(), func() []string { return rd.Stats().Stopped }, caughtUpPoll); err != nil {
				return err
			}
			log.Info("caught up with the end offsets seen at start; stopping")
			stopRun()
			return nil
		})
	}
	if cfg.ProgressInterval > 0 {
		g.Go(func() error {
			progressLoop(gctx, rd, log, cfg.ProgressInterval, &b.written, b.m)
			return nil
		})
	}
	log.Info("kafka2pg running", "group", cfg.Kafka.Group, "topics", strings.Join(cfg.Kafka.Topics, ","),
		tableNames(sinks), "start", cfg.Kafka.Start.String())
	err = g.Wait()
	st.stopping()
	b.leaveLive() // a reload must not race the stop
	b.stopReader(parent, rd)
	if err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	if err := givenUp(ctx, nil); err != nil {
		return err
	}
	stats := rd.Stats()
	log.Info("kafka2pg stopped cleanly", "records", stats.Records, "batches", stats.Batches, "fenced", stats.Fenced, "write_errors", stats.WriteErrors,
		"dead_letters", b.written.deadLetters.Load(), "skipped", b.written.skipped.Load())
	return nil
}

// migrateOp is the start-up step that migrates the kafka2pg schema.
const migrateOp = "migrate the kafka2pg schema"

// newPool is the pool of the bridge: kafka2pg's sessions (pgsession)
// whose timeouts outlast the writer's longest deadline, the numeric codec
// of the COPY, and every new connection shown to server, which notices a
// different Postgres server behind the URL.
func newPool(ctx context.Context, url string, maxConns int32, statementTimeout time.Duration, server *serverWatch) (*pgxpool.Pool, error) {
	pcfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, &stream.FieldError{Field: "bridge.Config.PostgresURL", Err: err}
	}
	pcfg.MaxConns = maxConns
	// A connection that sat idle is pinged before use; one on a path that
	// stopped answering while it was idle must not hold a claim or a
	// write until their deadlines: it gets what a step of a write gets at
	// least.
	pcfg.PingTimeout = ingest.DeadlineFloor
	if err := pgsession.Configure(&pcfg.ConnConfig.Config, "kafka2pg", statementTimeout); err != nil {
		return nil, &stream.FieldError{Field: "bridge.Config.PostgresURL", Err: err}
	}
	pcfg.AfterConnect = func(ctx context.Context, conn *pgx.Conn) error {
		if err := pgsession.RegisterCodecs(ctx, conn); err != nil {
			return err
		}
		return server.observe(ctx, conn)
	}
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return nil, fmt.Errorf("connect to Postgres: %w", err)
	}
	return pool, nil
}

// stopReader is the reader's stop: at once after Close; else graceful
// (flush, commit, leave) within Shutdown's context, or, when parent ended
// instead, within Kafka.FlushTimeout even though parent ended.
func (b *Bridge) stopReader(parent context.Context, rd *reader.Reader) {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		rd.Close()
		return
	}
	var ctx context.Context
	var cancel context.CancelFunc
	bound := "the Shutdown's context"
	if b.shutdown != nil {
		ctx, cancel = context.WithCancel(b.shutdown)
	} else {
		ctx, cancel = context.WithTimeout(context.WithoutCancel(parent), b.cfg.Kafka.FlushTimeout)
		bound = "reader.Config.FlushTimeout"
	}
	b.cancelStop = cancel
	b.mu.Unlock()
	defer cancel()
	if err := rd.Shutdown(ctx); err != nil {
		// The reader said at WARN that it abandoned the leave; the rest
		// is said here.
		if rest := withoutLeaveAbandoned(err); rest != nil {
			b.log.Warn("graceful stop cut short by "+bound, "error", rest.Error())
		}
		b.mu.Lock()
		b.stopErr = err
		b.mu.Unlock()
	}
}

// withoutLeaveAbandoned is err, an errors.Join of the steps of a stop,
// without reader.ErrLeaveAbandoned.
func withoutLeaveAbandoned(err error) error {
	joined, ok := err.(interface{ Unwrap() []error })
	if !ok {
		if errors.Is(err, reader.ErrLeaveAbandoned) {
			return nil
		}
		return err
	}
	var rest []error
	for _, e := range joined.Unwrap() {
		if !errors.Is(e, reader.ErrLeaveAbandoned) {
			rest = append(rest, e)
		}
	}
	return errors.Join(rest...)
}

// literalTopics are the topics named literally when the subscription is
// made of regular expressions (sinks of topics and of patterns mixed):
// they must exist as much as a topic of a literal subscription must.
func literalTopics(cfg Config) []string {
	if !cfg.Kafka.TopicsAreRegex {
		return nil
	}
	var out []string
	for t := range cfg.Sinks.Fixed {
		out = append(out, t)
	}
	return out
}

// The writer is the reader's Store and, for the fence check, its
// PositionReader: an assertion, so that a changed signature cannot turn the
// check off unnoticed.
var (
	_ reader.Store          = (*ingest.Writer)(nil)
	_ reader.PositionReader = (*ingest.Writer)(nil)
)
