package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math"
	"os"
	"runtime/debug"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/spf13/pflag"
	"golang.org/x/sync/errgroup"

	"github.com/kafka2pg/kafka2pg/ingest"
	"github.com/kafka2pg/kafka2pg/migrations"
	"github.com/kafka2pg/kafka2pg/reader"
	"github.com/kafka2pg/kafka2pg/schema"
)

func runCommand(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	o, _, code, ok := loadRunOptions("run", runHelp, args, stdout, stderr)
	if !ok {
		return code
	}
	log := newLogger(stderr, o.logFormat, o.logLevel)
	for _, n := range o.oldNames {
		log.Warn(n)
	}
	err := runBridge(ctx, o, log, nil)
	var bad *badRecordsError
	switch {
	case errors.As(err, &bad):
		log.Error("records of this run became dead letters or were skipped: exit 3", "dead_letters", bad.deadLetters,
			"skipped", bad.skipped, "exit_code", exitBadRecords,
			"fix", "kafka2pg dead-letters list shows why; fix the table or the mapping, then kafka2pg dead-letters replay --config ...")
		return exitBadRecords
	case err != nil:
		log.Error("kafka2pg stopped", "error", redactErr(explainPrivilege(err, o.pgURL)).Error())
		if errors.As(err, new(*bindError)) {
			return exitUsage
		}
		return exitError
	}
	return exitOK
}

// badRecordsError is runBridge's outcome with --until-caught-up when it
// caught up but records of the run became dead letters or were skipped.
type badRecordsError struct {
	deadLetters, skipped int64
}

func (e *badRecordsError) Error() string {
	return fmt.Sprintf("caught up with %d dead letter(s) and %d skipped record(s) during the run", e.deadLetters, e.skipped)
}

// loadRunOptions reads run's flags, the environment and the config file, in
// that order of precedence, and checks all of it, mappings included, before
// anything connects; `run` and `check` share it. On failure it has printed
// why (naming the command) and returns the exit code.
func loadRunOptions(command string, help *commandHelp, args []string, stdout, stderr io.Writer) (o *runOptions, sinks map[string]ingest.Sink, code int, ok bool) {
	return loadCommandOptions(command, help, args, stdout, stderr, runLoad{})
}

// runLoad is what a command that takes run's flags and config file adds to
// them (dead-letters replay, offsets reset: they must find the tables the
// bridge writes exactly as run does).
type runLoad struct {
	// flags defines the command's own flags beside run's. The config file
	// may set run's flags only.
	flags func(fs *pflag.FlagSet)
	// offline: the command does not consume. Kafka's brokers, group and
	// topics may be left out; with sinks in --config, --topic and
	// --pg-table select among them (runOptions.onlyTopics, onlyTable)
	// instead of naming what to consume.
	offline bool
}

// loadCommandOptions is loadRunOptions for a command that adds load to
// run's flags.
func loadCommandOptions(command string, help *commandHelp, args []string, stdout, stderr io.Writer, load runLoad) (o *runOptions, sinks map[string]ingest.Sink, code int, ok bool) {
	fs := newFlagSet(command)
	o = &runOptions{offline: load.offline}
	defineRunFlags(fs, o)
	keys := fs // the flags the config file may set
	if load.flags != nil {
		keys = newFlagSet(command)
		defineRunFlags(keys, &runOptions{})
		addFlagAliases(keys)
		load.flags(fs)
	}
	if code, ok := parseFlags(command, help, fs, args, stdout, stderr); !ok {
		return nil, nil, code, false
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "kafka2pg %s: unexpected argument %q: flags only (did you mean --topic %s or --config %s?)\n", command, fs.Arg(0), fs.Arg(0), fs.Arg(0))
		return nil, nil, exitUsage, false
	}
	invalid := func(err error) (*runOptions, map[string]ingest.Sink, int, bool) {
		fmt.Fprintf(stderr, "kafka2pg %s: invalid configuration; nothing was written:\n%v\n", command, err)
		return nil, nil, exitUsage, false
	}
	if o.configPath != "" {
		cfg, err := loadConfig(o.configPath, keys)
		if err == nil {
			err = cfg.apply(fs)
		}
		if err != nil {
			return invalid(err)
		}
		o.sinks = cfg.sinks
	}
	o.oldNames = oldNameNotices(fs)
	if o.offline {
		o.onlyTopics, o.onlyTable = slices.Clone(o.reader.Topics), o.table
		if len(o.sinks) > 0 {
			o.reader.Topics, o.table = nil, ""
		}
	}
	if err := resolvePGURL(o); err != nil {
		return invalid(err)
	}
	if err := o.validate(); err != nil {
		return invalid(err)
	}
	sinks, err := buildSinks(o)
	if err != nil {
		return invalid(err)
	}
	if lines := changeSinkLines(o.sinks); command == "run" && len(lines) > 0 {
		return invalid(errChangesNotApplied(lines))
	}
	return o, sinks, exitOK, true
}

func newLogger(w io.Writer, format, level string) *slog.Logger {
	lvl, _ := parseLevel(level)
	hopts := &slog.HandlerOptions{Level: lvl}
	if format == "json" {
		return slog.New(slog.NewJSONHandler(w, hopts))
	}
	return slog.New(slog.NewTextHandler(w, hopts))
}

// progressFunc receives the reader's stats every second (for the demo).
type progressFunc func(reader.Stats)

// runBridge runs the bridge until ctx ends (graceful stop: the in-flight
// batches are written within --shutdown-timeout, durable offsets are
// committed to the group, the member leaves it) or, with --until-caught-up,
// until it has caught up. It returns nil on a clean stop; a
// *badRecordsError when --until-caught-up caught up but records of the run
// became dead letters or were skipped; a *bindError
// when --metrics-addr cannot be listened on; a *reader.FatalError when
// trouble that retrying cannot fix lasted --fatal-retry-timeout.
//
// The order of the start matters: the metrics listener is bound first (a
// taken port fails at once, before anything connects or joins), the
// topics are checked before a table is created for them, and the group is
// joined (reader.New) only once Postgres, the migrations and the tables
// are ready.
func runBridge(ctx context.Context, o *runOptions, log *slog.Logger, progress progressFunc) (err error) {
	st := newBridgeStatus(log)
	m := newBridgeMetrics()
	if o.metricsAddr != "" {
		srv, err := listenHTTP(o.metricsAddr, m.reg, st, o.readyStall, log, o.pprof)
		if err != nil {
			return err
		}
		srv.serve()
		defer srv.stop(5 * time.Second) // the very last step: /healthz answers through the shutdown
	}
	if o.untilCaughtUp && o.caughtUpTimeout > 0 {
		var stop func()
		ctx, stop = caughtUpDeadline(ctx, st, o.caughtUpTimeout)
		defer stop()
		defer func() { err = givenUp(ctx, err) }()
	}
	// TLS and SASL trouble never heals: stop before touching Postgres.
	secOpts, err := o.kafkaSecurity.Options()
	if err != nil {
		return err
	}
	st.starting("check the Kafka brokers")
	if err := o.kafkaSecurity.CheckBrokers(ctx, o.reader.Brokers, 15*time.Second); err != nil {
		return err
	}
	st.starting("check the topics")
	if err := reader.CheckTopics(ctx, o.readerConfig(log), literalTopics(o), secOpts...); err != nil {
		return err
	}
	if o.migrate {
		if err := st.retry(ctx, migrateOp, func() error { return migrations.Up(ctx, o.pgURL) }); err != nil {
			return err
		}
	}
	setMemoryLimit(o, log)
	pcfg, err := pgxpool.ParseConfig(o.pgURL)
	if err != nil {
		return fmt.Errorf("--pg-url: %w", err)
	}
	pcfg.MaxConns = o.pgMaxConns
	wcfg := o.writerConfig()
	if err := configureConn(&pcfg.ConnConfig.Config, "kafka2pg", wcfg.StatementTimeout()); err != nil {
		return fmt.Errorf("--pg-url: %w", err)
	}
	pcfg.AfterConnect = registerCodecs
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return fmt.Errorf("connect to Postgres: %w", err)
	}
	defer pool.Close()

	if err := o.connectRegistry(ctx); err != nil {
		return err
	}
	sinks, err := buildSinks(o)
	if err != nil {
		return err
	}
	m.initTables(sinks)
	var written writeCounters
	wcfg.Sinks, wcfg.Resolve, wcfg.Logger, wcfg.Tracer = sinks, sinkResolver(o), log, writeTracers{m, &written}
	w, err := ingest.New(pool, wcfg)
	if err != nil {
		return err
	}
	if err := st.retry(ctx, "check the database's encoding", func() error { return checkEncoding(ctx, pool, log, o.reader.Group, sinks, regexProbes(o)) }); err != nil {
		return err
	}
	if err := st.retry(ctx, "prepare the target tables", func() error { return w.EnsureTables(ctx, o.createTables) }); err != nil {
		return err
	}

	rcfg := o.readerConfig(log)
	if o.memoryLimitAuto {
		rcfg.OnOwned = func(n int) { debug.SetMemoryLimit(autoMemoryLimit(o.reader.MaxBufferedBytes, n)) }
	}
	rcfg.ExtraOpts = append(rcfg.ExtraOpts, secOpts...)
	rcfg.ExtraOpts = append(rcfg.ExtraOpts, m.hooks())
	st.starting("join the consumer group")
	rd, err := reader.New(rcfg, w)
	if err != nil {
		return err
	}
	defer rd.Close() // on an error before the graceful stop below: abandon
	queueCapacity := rcfg.QueueCapacity
	if queueCapacity == 0 {
		queueCapacity = 2 * rcfg.BatchMaxRows
	}
	m.register(rd, pool, queueCapacity)

	runCtx, stopRun := context.WithCancel(ctx)
	defer stopRun()
	var caughtUp *caughtUpWatch
	if o.untilCaughtUp {
		caughtUp, err = newCaughtUpWatch(ctx, rd.Client(), pool, o.reader.Group, o.reader.Topics, o.reader.TopicsAreRegex, o.reader.IsolationLevel)
		if err != nil {
			return err
		}
		log.Info("running until caught up", "targets", caughtUp.describe())
	}

	st.running(rd, pool)
	g, gctx := errgroup.WithContext(runCtx)
	g.Go(func() error { return rd.Run(gctx) })
	if caughtUp != nil {
		g.Go(func() error {
			if err := caughtUp.wait(gctx, rd.Settled(), func() []string { return rd.Stats().Stopped }, o.caughtUpPeriod); err != nil {
				return err
			}
			log.Info("caught up with the end offsets seen at start; stopping")
			stopRun()
			return nil
		})
	}
	if o.progressEvery > 0 || progress != nil {
		g.Go(func() error {
			progressLoop(gctx, rd, log, o.progressEvery, progress, &written, &m.writeErrorCounts)
			return nil
		})
	}
	log.Info("kafka2pg running", "version", version, "group", o.reader.Group, "topics", strings.Join(o.reader.Topics, ","),
		tableNames(sinks), "start", o.reader.Start.String())
	err = g.Wait()
	st.stopping()
	stopReader(ctx, rd, o.reader.FlushTimeout, log)
	if err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	if err := givenUp(ctx, nil); err != nil {
		return err
	}
	stats := rd.Stats()
	log.Info("kafka2pg stopped cleanly", "records", stats.Records, "batches", stats.Batches, "fenced", stats.Fenced, "write_errors", stats.WriteErrors,
		"dead_letters", written.deadLetters.Load(), "skipped", written.skipped.Load())
	if o.untilCaughtUp && written.deadLetters.Load()+written.skipped.Load() > 0 {
		return &badRecordsError{deadLetters: written.deadLetters.Load(), skipped: written.skipped.Load()}
	}
	return nil
}

// tableNames is the sinks' tables as one log attribute per topic, each
// schema.table without SQL quotes: tables.orders=public.orders in text,
// "tables":{"orders":"public.orders"} in JSON.
func tableNames(sinks map[string]ingest.Sink) slog.Attr {
	attrs := make([]any, 0, len(sinks))
	for _, topic := range slices.Sorted(maps.Keys(sinks)) {
		attrs = append(attrs, slog.String(topic, plainTableName(sinks[topic].Table.QualifiedName())))
	}
	return slog.Group("tables", attrs...)
}

// stopReader is the graceful stop of the reader: flush, commit, leave, all
// within timeout (--shutdown-timeout), even after ctx ended.
func stopReader(ctx context.Context, rd *reader.Reader, timeout time.Duration, log *slog.Logger) {
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
	defer cancel()
	if err := rd.Shutdown(sctx); err != nil {
		log.Warn("graceful stop cut short by --shutdown-timeout", "error", err.Error())
	}
}

// readerConfig is the reader's configuration from the flags.
func (o *runOptions) readerConfig(log *slog.Logger) reader.Config {
	rcfg := o.reader
	rcfg.Logger = log
	rcfg.Permanent = ingest.Permanent
	return rcfg
}

// literalTopics are the topics named literally when the subscription is
// made of regular expressions (sinks of topic and of topic_regex mixed in
// --config): they must exist as much as a --topic must.
func literalTopics(o *runOptions) []string {
	var out []string
	if o.reader.TopicsAreRegex {
		for _, sc := range o.sinks {
			if sc.Topic != "" {
				out = append(out, sc.Topic)
			}
		}
	}
	return out
}

// The writer is the reader's Store and, for the fence check, its
// EpochReader: an assertion, so that a changed signature cannot turn the
// check off unnoticed.
var (
	_ reader.Store       = (*ingest.Writer)(nil)
	_ reader.EpochReader = (*ingest.Writer)(nil)
)

// writeCounters count what the writer committed, for the progress log and
// the exit code of --until-caught-up.
type writeCounters struct{ rows, deadLetters, skipped atomic.Int64 }

func (c *writeCounters) TraceBatchEnd(_ context.Context, t ingest.BatchTrace) {
	c.rows.Add(int64(t.Rows))
	c.deadLetters.Add(int64(t.DeadLetters))
	c.skipped.Add(int64(t.Skipped))
}

// writeTracers tells each of its tracers of every write.
type writeTracers []ingest.Tracer

func (ts writeTracers) TraceBatchEnd(ctx context.Context, t ingest.BatchTrace) {
	for _, tr := range ts {
		tr.TraceBatchEnd(ctx, t)
	}
}

func progressLoop(ctx context.Context, rd *reader.Reader, log *slog.Logger, every time.Duration, progress progressFunc, written *writeCounters, writeErrors *causeCounts) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	rows, deadLetters := &written.rows, &written.deadLetters
	last, lastRows, lastLog := rd.Stats(), rows.Load(), time.Now()
	lastCauses, _ := writeErrors.since(nil)
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		st := rd.Stats()
		if progress != nil {
			progress(st)
		}
		if every > 0 && time.Since(lastLog) >= every {
			secs := time.Since(lastLog).Seconds()
			lag := int64(0)
			for _, p := range rd.Partitions() {
				lag += max(p.Lag(), 0)
			}
			nowRows := rows.Load()
			var causes string
			lastCauses, causes = writeErrors.since(lastCauses)
			attrs := []any{"records_per_s", int64(float64(st.Records-last.Records) / secs),
				"rows_per_s", int64(float64(nowRows-lastRows) / secs), "lag", lag, "dead_letters", deadLetters.Load(),
				"batches", st.Batches, "partitions", st.Partitions, "fenced", st.Fenced, "write_errors", st.WriteErrors,
				"stopped_partitions", len(st.Stopped)}
			if causes != "" {
				attrs = append(attrs, "write_errors_since_last", causes)
			}
			log.Info("progress", attrs...)
			last, lastRows, lastLog = st, nowRows, time.Now()
		}
	}
}

// setMemoryLimit applies --memory-limit and tunes GOGC under it. Its lines
// are at debug level: they say what the flags asked for, nothing to act on.
func setMemoryLimit(o *runOptions, log *slog.Logger) {
	if o.memoryLimitN > 0 {
		debug.SetMemoryLimit(o.memoryLimitN)
		log.Debug("soft memory limit set", "memory_limit_bytes", o.memoryLimitN)
	}
	if o.memoryLimitAuto {
		limit := autoMemoryLimit(o.reader.MaxBufferedBytes, 0)
		debug.SetMemoryLimit(limit)
		log.Debug("soft memory limit set from --max-buffered-bytes; it grows with the partitions owned", "memory_limit_bytes", limit)
	}
	tuneGC(log)
}

// autoMemoryLimit is --memory-limit auto: Go's soft memory limit from the
// record budget and the partitions owned. The budget bounds the records held
// (with their overhead); a fetch being decoded, the batches being encoded
// and the runtime come on top, and Go's collector, left alone, lets the heap
// grow to twice what is live and returns freed pages lazily. Measured (make
// bench's 5,000,000-record backlog, 64 MiB budget, 8 partitions): peak RSS
// 278 MiB without a limit; 239-246 MiB at 3.5 × the budget (224 MiB), over
// the 256 MB in some runs; 206-214 MiB at 3 × (192 MiB), at the same
// rows/s and bridge CPU per row in five alternating pairs, and in six of
// the typed drain. The live heap after a collection was 76-126 MB there, so
// 3 × leaves the collector room. The RSS is the limit plus some 23 MiB of
// the binary's own pages, which no limit covers. Each owned partition adds
// 256 KiB (its goroutine, queue, client cursor and fetch buffers), so that
// 1,000 partitions get 442 MiB instead of a limit under their live set,
// which would make the collector run without pause. Never under 128 MiB: a
// small budget does not shrink the runtime, the client and the connections.
func autoMemoryLimit(maxBuffered, partitions int) int64 {
	if maxBuffered <= 0 {
		maxBuffered = 64 << 20
	}
	return max(int64(maxBuffered)*3+int64(partitions)*(256<<10), 128<<20)
}

// gcPercentUnderLimit is GOGC while a memory limit is in force. Under a
// backlog the limit paces the collector and GOGC does not matter; in a
// steady flow the heap is a few tens of MB, far under the limit, and GOGC
// 100 ran a cycle for every few tens of MB allocated: the collector was a
// quarter of the bridge's CPU at 80,000 records/s. At 400 the bridge took
// 2.3-2.7 µs of CPU a row instead of 2.8-3.3 (six alternating pairs, the
// bench's latency scenario), peak RSS 88-164 MiB instead of 47-82, the
// limit still the bound (a 5,000,000-record backlog: 244 MiB either way).
const gcPercentUnderLimit = 400

// tuneGC sets GOGC to gcPercentUnderLimit when a memory limit is in force
// and GOGC is not set in the environment (which wins, as GOMEMLIMIT does).
func tuneGC(log *slog.Logger) {
	if os.Getenv("GOGC") != "" || debug.SetMemoryLimit(-1) == math.MaxInt64 {
		return
	}
	debug.SetGCPercent(gcPercentUnderLimit)
	log.Debug("GOGC set under the memory limit (set GOGC to choose another)", "gogc", gcPercentUnderLimit)
}

// registerCodecs is the AfterConnect of every pool that COPYs rows (run,
// dead-letters replay): numeric without math/big, ~0.8 µs a row less.
func registerCodecs(_ context.Context, conn *pgx.Conn) error {
	schema.RegisterNumericCodec(conn.TypeMap())
	return nil
}
