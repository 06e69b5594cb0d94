package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/kafka2pg/kafka2pg/internal/pgserver"
)

// The lossy-failover scenario: each sink writes through a forwarder
// (forwarder.go) to a primary that streams to an asynchronous standby of
// the harness's own (pgserver). The standby's walreceiver is stopped
// (SIGSTOP) until the primary holds commits of the sink that it can never
// send, then until the sink's Kafka consumer group has committed offsets
// past what the standby can hold (bounded: an at-least-once sink loses
// rows only when its Kafka commit covers lost commits, and the scenario
// asks what it loses then). The primary is killed with -9, the standby
// replays what it received and is promoted, and the forwarder moves to it.
// The sink goes on by itself; the harness only restarts what an operator
// would (a FAILED Connect task, an exited Flink job). SQL on the new
// primary then counts the records produced whose row is missing (lost for
// good) and the rows beyond one per record (duplicates).

// failoverVariant is how a sink meets the failover: the three rounds of
// kafka2pg's fault cases 23a-c.
type failoverVariant string

const (
	// variantFlowing: records keep flowing during and after the
	// failover.
	variantFlowing failoverVariant = "flowing"
	// variantKilled: the sink is killed with -9 with the primary and
	// started again after the promote.
	variantKilled failoverVariant = "killed"
	// variantIdle: the producer stops once the primary holds commits it
	// never sent, the primary is killed once the sink has written every
	// record, and records resume failoverIdle after the promote. Nothing
	// fails a write at the failover: only a sink that checks the
	// continuity of its positions can notice the loss.
	variantIdle failoverVariant = "idle"
)

var failoverVariants = []failoverVariant{variantFlowing, variantKilled, variantIdle}

func (v failoverVariant) title() string {
	switch v {
	case variantKilled:
		return "sink killed with the primary"
	case variantIdle:
		return "partitions idle at the failover"
	}
	return "records flowing"
}

// parseVariants reads a comma-separated list of variants ("" is none).
func parseVariants(flagName, s string) ([]failoverVariant, error) {
	var out []failoverVariant
	for v := range strings.SplitSeq(s, ",") {
		if v = strings.TrimSpace(v); v == "" {
			continue
		}
		fv := failoverVariant(v)
		if !strings.Contains(","+joinVariants(failoverVariants)+",", ","+v+",") {
			return nil, fmt.Errorf("-%s has %q: it takes %s, comma-separated", flagName, v, joinVariants(failoverVariants))
		}
		out = append(out, fv)
	}
	return out, nil
}

func joinVariants(vs []failoverVariant) string {
	s := make([]string, len(vs))
	for i, v := range vs {
		s[i] = string(v)
	}
	return strings.Join(s, ",")
}

const (
	// failoverIdle is how long the partitions stay idle after the
	// promote in variantIdle.
	failoverIdle = 5 * time.Second
	// failoverTail is how long records keep flowing after the sink's
	// first write on the new primary.
	failoverTail = 3 * time.Second
	// failoverLead is how long before a sink's next Kafka offset commit
	// the standby is frozen, when the sink commits seldom.
	failoverLead = 5 * time.Second
)

// failoverResult is what one failover run measured.
type failoverResult struct {
	System  string
	Variant failoverVariant
	// Records is how many records the producer wrote (Kafka acknowledged
	// every one).
	Records int64
	// OldRows are the sink's rows on the old primary just before the
	// kill, NewRows on the promoted standby before the sink wrote to it:
	// the commits the failover lost are the difference. WALLost is the
	// WAL the old primary had written past what the standby replayed (the
	// harness's padding included).
	OldRows, NewRows int64
	WALLost          int64
	// Frozen is how long the standby's walreceiver was stopped before
	// the kill: how far behind the standby was.
	Frozen time.Duration
	// KafkaCovered: the sink's consumer group had committed offsets to
	// Kafka past the rows the standby could hold when the primary was
	// killed; KafkaNote says what the harness saw.
	KafkaCovered bool
	KafkaNote    string
	// Rows, Lost and Duplicates are counted on the new primary at the
	// end: Lost the records with no row, Duplicates the rows beyond one
	// per record.
	Rows, Lost, Duplicates int64
	// Recovery says how the sink went on; Recover is the time from the
	// promote's start to its first write on the new primary.
	Recovery string
	Recover  time.Duration
	// Failed is set when the sink never wrote to the new primary.
	Failed string
	NotRun string
	Wall   time.Duration
	// Server is the servers' PostgreSQL version.
	Server string
}

// failoverEnv is what the failover runs share.
type failoverEnv struct {
	h       *harness
	k       *kafka
	rate    float64
	pgBin   string
	settle  time.Duration // how long a table that misses records must stand still
	flushAt time.Duration // the longest a sink takes to commit its Kafka offsets
	// offsetFlush is the Connect worker's offset.flush.interval.ms.
	offsetFlush time.Duration
}

// commitPeriod is how often sys commits its Kafka offsets, when that is
// its own schedule: Connect's offset flush; 0 for kafka2pg (every second)
// and Flink (at its checkpoints).
func (e *failoverEnv) commitPeriod(sys system) time.Duration {
	if _, ok := sys.(*debeziumSystem); ok {
		return e.offsetFlush
	}
	return 0
}

// committedSum is the sum of group's offsets committed to Kafka for
// topic.
func (e *failoverEnv) committedSum(ctx context.Context, group, topic string) (int64, error) {
	offs, err := e.k.admin.FetchOffsets(ctx, group)
	if err != nil {
		return 0, err
	}
	var sum int64
	offs.Each(func(o kadm.OffsetResponse) {
		if o.Topic == topic && o.At > 0 {
			sum += o.At
		}
	})
	return sum, nil
}

// waitCommitChange waits until group commits new offsets for topic and
// returns when it saw them.
func (e *failoverEnv) waitCommitChange(ctx context.Context, group, topic string, w *sinkWatch, timeout time.Duration) (time.Time, error) {
	first := int64(-1)
	err := poll(ctx, time.Now().Add(timeout), func() time.Duration { return 100 * time.Millisecond }, func() (bool, error) {
		if err := w.health(ctx); err != nil {
			return false, err
		}
		sum, err := e.committedSum(ctx, group, topic)
		if err != nil {
			return false, nil // asked again at the next look
		}
		if first < 0 {
			first = sum
		}
		return sum != first, nil
	})
	if errors.Is(err, errDeadline) {
		return time.Time{}, fmt.Errorf("group %s committed no offsets for %s within %s", group, topic, timeout)
	}
	return time.Now(), err
}

// failover runs sys through one failover of variant v.
func (e *failoverEnv) failover(ctx context.Context, sys system, v failoverVariant) (res failoverResult, err error) {
	res = failoverResult{System: sys.label(), Variant: v}
	t0 := time.Now()
	logf := func(format string, args ...any) {
		e.h.logf("  %-18s failover %-8s %s", sys.label(), v, fmt.Sprintf(format, args...))
	}
	set, err := pgserver.NewSet(e.pgBin)
	if err != nil {
		return res, err
	}
	defer func() {
		if cerr := set.Close(); cerr != nil {
			logf("note: %v", cerr)
		}
	}()
	// Flink's XA sink prepares transactions; a standby needs at least as
	// many as its primary. The walsender waits for the stopped standby
	// without a timeout, so that the primary's state at the kill is the
	// one the scenario describes.
	primary, err := set.Primary(ctx, "primary", "max_prepared_transactions = 64\nwal_sender_timeout = 0\n")
	if err != nil {
		return res, err
	}
	if err := primary.QueryRow(ctx, "SELECT current_setting('server_version')", nil, &res.Server); err != nil {
		return res, err
	}
	table := "peers_failover"
	d, err := connectDB(ctx, primary)
	if err != nil {
		return res, err
	}
	defer func() { d.conn.Close(context.WithoutCancel(ctx)) }()
	if _, err := d.conn.Exec(ctx, tableDDL(table, false)); err != nil {
		return res, fmt.Errorf("create table %s on %s: %w", table, primary.Name, err)
	}
	standby, err := primary.Standby(ctx, "standby")
	if err != nil {
		return res, err
	}
	walReceiver, err := standby.WaitStreaming(ctx, primary)
	if err != nil {
		return res, err
	}
	fwd, err := newForwarder(primary.Addr())
	if err != nil {
		return res, err
	}
	defer fwd.Close()
	onFwd, ok := onServer(sys, "postgres://postgres@"+fwd.addr()+"/postgres?sslmode=disable", d)
	if !ok {
		res.NotRun = "the harness has no failover for this system"
		return res, nil
	}

	name := e.h.name(sys, "failover-"+string(v))
	topic := "peers_" + name
	if err := e.k.create(ctx, topic); err != nil {
		return res, err
	}
	defer func() { _ = e.k.drop(context.WithoutCancel(ctx), topic) }()
	f := &feed{k: e.k, topic: topic, rate: e.rate}
	f.start(ctx)
	defer func() { _, _ = f.halt(context.WithoutCancel(ctx)) }()
	sc := scenario{key: "failover", title: "lossy failover, " + v.title(), data: dataset{name: "failover", n: 10_000_000}}
	// A killed sink's partitions move after the probe's session timeout.
	run, err := onFwd.start(ctx, sc, topic, table, name, v == variantKilled)
	if err != nil {
		return res, err
	}
	defer func() { _ = run.stop(context.WithoutCancel(ctx)) }()
	w := &sinkWatch{run: run, name: name, logf: logf}

	// Running: rows on the primary, then 2 s more.
	if err := e.waitRows(ctx, d, table, w, func(n int64) bool { return n > 0 }, "the first row"); err != nil {
		return res, e.h.failed(sys, sc, run, err)
	}
	if err := w.sleep(ctx, 2*time.Second); err != nil {
		return res, e.h.failed(sys, sc, run, err)
	}

	// A sink that commits its Kafka offsets seldom (Connect: every
	// offset.flush.interval.ms) is frozen shortly before its next commit,
	// so that the standby lags by seconds at the kill, as an asynchronous
	// standby does, not by a whole commit interval.
	if period := e.commitPeriod(sys); period > failoverLead {
		at, err := e.waitCommitChange(ctx, groupOf(sys, name), topic, w, period+15*time.Second)
		if err != nil {
			return res, e.h.failed(sys, sc, run, err)
		}
		if err := w.sleep(ctx, time.Until(at.Add(period-failoverLead))); err != nil {
			return res, e.h.failed(sys, sc, run, err)
		}
	}

	// Frozen: the standby's walreceiver stopped until the primary holds
	// commits of the sink it can never send.
	frozenAt := time.Now()
	if err := syscall.Kill(walReceiver, syscall.SIGSTOP); err != nil {
		return res, fmt.Errorf("SIGSTOP walreceiver %d: %w", walReceiver, err)
	}
	defer syscall.Kill(walReceiver, syscall.SIGCONT)
	// The connection's buffers hold tens of MB on loopback (tcp_rmem):
	// the harness fills them with WAL of its own (a logical message, no
	// table), so that the sink's commits stop reaching the standby within
	// seconds instead of minutes.
	unsent, err := primary.WaitUnsent(ctx, 2*time.Minute, func() error {
		if err := w.health(ctx); err != nil {
			return err
		}
		_, err := d.conn.Exec(ctx, "SELECT pg_logical_emit_message(false, 'kafka2pg-bench-padding', repeat('x', 4000000))")
		return err
	})
	if err != nil {
		return res, e.h.failed(sys, sc, run, err)
	}
	// Every row after this count is past the stalled sent_lsn: the
	// standby holds at most this many.
	atStall, err := d.count(ctx, table)
	if err != nil {
		return res, err
	}
	if err := e.waitRows(ctx, d, table, w, func(n int64) bool { return n > atStall }, "rows past what the standby can hold"); err != nil {
		return res, e.h.failed(sys, sc, run, err)
	}
	if v == variantIdle {
		produced, err := f.halt(ctx)
		if err != nil {
			return res, err
		}
		if err := e.waitRows(ctx, d, table, w, func(n int64) bool { return n >= produced }, fmt.Sprintf("all %d records written", produced)); err != nil {
			return res, e.h.failed(sys, sc, run, err)
		}
	}
	res.KafkaCovered, res.KafkaNote = e.waitKafkaCommit(ctx, groupOf(sys, name), topic, atStall, w)
	logf("%s; %s", fmtUnsent(unsent, atStall), res.KafkaNote)

	var oldLSN string
	if err := d.conn.QueryRow(ctx, "SELECT count(*), pg_current_wal_lsn()::text FROM "+pgx.Identifier{table}.Sanitize()).Scan(&res.OldRows, &oldLSN); err != nil {
		return res, fmt.Errorf("read the old primary: %w", err)
	}
	res.Frozen = time.Since(frozenAt)
	if v == variantKilled {
		if err := run.kill9(ctx); err != nil {
			return res, err
		}
	}
	if err := primary.Kill(); err != nil {
		return res, err
	}
	if err := syscall.Kill(walReceiver, syscall.SIGCONT); err != nil {
		return res, fmt.Errorf("SIGCONT walreceiver %d: %w", walReceiver, err)
	}
	if err := standby.WaitReplayed(ctx); err != nil {
		return res, err
	}
	if err := standby.QueryRow(ctx, "SELECT count(*), pg_wal_lsn_diff($1::pg_lsn, pg_last_wal_replay_lsn())::bigint FROM "+pgx.Identifier{table}.Sanitize(),
		[]any{oldLSN}, &res.NewRows, &res.WALLost); err != nil {
		return res, err
	}
	if res.NewRows >= res.OldRows {
		return res, fmt.Errorf("%s, failover %s: the promoted standby holds %d rows, the old primary held %d: Postgres lost no commit, so the run proves nothing", sys.label(), v, res.NewRows, res.OldRows)
	}
	promoteAt := time.Now()
	if err := standby.Promote(ctx); err != nil {
		return res, err
	}
	fwd.switchTo(standby.Addr())
	d.conn.Close(ctx)
	nd, err := connectDB(ctx, standby)
	if err != nil {
		return res, err
	}
	d.conn = nd.conn // the sink's checks (and Flink's stop) use d
	logf("primary killed with %d rows, the promoted standby holds %d (%d bytes of WAL lost); forwarder moved to it", res.OldRows, res.NewRows, res.WALLost)

	switch v {
	case variantKilled:
		if err := run.restart(ctx); err != nil {
			return res, err
		}
		w.notes = append(w.notes, killedRestart(sys))
	case variantIdle:
		if err := w.sleep(ctx, failoverIdle); err != nil {
			return res, e.h.failed(sys, sc, run, err)
		}
		f.start(ctx)
	}
	err = e.waitRows(ctx, d, table, w, func(n int64) bool { return n > res.NewRows }, "the first write on the new primary")
	if err != nil {
		res.Failed = err.Error()
		logf("never wrote to the new primary: %v", err)
	} else {
		res.Recover = time.Since(promoteAt)
		if err := w.sleep(ctx, failoverTail); err != nil {
			res.Failed = err.Error()
		}
	}
	produced, err := f.halt(ctx)
	if err != nil {
		return res, err
	}
	res.Records = produced
	if res.Failed == "" {
		if err := e.waitSettled(ctx, d, table, produced, w); err != nil {
			res.Failed = err.Error()
		}
	}
	if err := d.conn.QueryRow(ctx, `SELECT count(*), count(DISTINCT seq) FILTER (WHERE seq < $1) FROM `+pgx.Identifier{table}.Sanitize(), produced).
		Scan(&res.Rows, &res.Lost); err != nil {
		return res, fmt.Errorf("count the rows on the new primary: %w", err)
	}
	distinct := res.Lost
	res.Lost = produced - distinct
	res.Duplicates = res.Rows - distinct
	res.Recovery = w.recovery(sys)
	res.Wall = time.Since(t0)
	logf("%d records: %d rows on the new primary, %d lost, %d duplicates; first write %.1fs after the promote; %s",
		res.Records, res.Rows, res.Lost, res.Duplicates, res.Recover.Seconds(), res.Recovery)
	e.k.dropGroups(context.WithoutCancel(ctx), groupOf(sys, name))
	return res, nil
}

func fmtUnsent(u pgserver.Unsent, atStall int64) string {
	return fmt.Sprintf("sent_lsn stood at %s with %d bytes of WAL unsent; the standby holds at most %d rows", u.SentLSN, u.Bytes, atStall)
}

// connectDB connects the harness to a server of the failover.
func connectDB(ctx context.Context, s *pgserver.Server) (*db, error) {
	conn, err := s.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &db{conn: conn, url: s.URL()}, nil
}

// onServer is sys writing to Postgres at url, its checks on d.
func onServer(sys system, url string, d *db) (system, bool) {
	switch s := sys.(type) {
	case *kafka2pgSystem:
		c := *s
		c.pgURL, c.db = url, d
		return &c, true
	case *debeziumSystem:
		c := *s
		c.pgURL, c.db = url, d
		return &c, true
	case *flinkSystem:
		c := *s
		c.pgURL, c.db, c.restore = url, d, true
		return &c, true
	}
	return nil, false
}

// groupOf is the Kafka consumer group of a sink's run: Connect names a
// sink connector's group connect-NAME.
func groupOf(sys system, name string) string {
	if _, ok := sys.(*debeziumSystem); ok {
		return "connect-" + name
	}
	return name
}

// waitRows polls the count of table until ok accepts it, checking the
// sink's health between looks.
func (e *failoverEnv) waitRows(ctx context.Context, d *db, table string, w *sinkWatch, ok func(int64) bool, what string) error {
	var n int64
	err := poll(ctx, time.Now().Add(e.h.timeout), func() time.Duration { return 50 * time.Millisecond }, func() (bool, error) {
		if err := w.health(ctx); err != nil {
			return false, err
		}
		var err error
		n, err = d.count(ctx, table)
		return ok(n), err
	})
	if errors.Is(err, errDeadline) {
		return fmt.Errorf("waited %s (-run-timeout) for %s: %d rows", e.h.timeout, what, n)
	}
	return err
}

// waitKafkaCommit waits, for at most e.flushAt, until the group's offsets
// committed to Kafka for topic sum to more than atStall (the most rows the
// standby can hold): a sink that resumes from them skips records whose
// rows the failover loses.
func (e *failoverEnv) waitKafkaCommit(ctx context.Context, group, topic string, atStall int64, w *sinkWatch) (bool, string) {
	var sum int64
	var lastErr error
	err := poll(ctx, time.Now().Add(e.flushAt), func() time.Duration { return 200 * time.Millisecond }, func() (bool, error) {
		if err := w.health(ctx); err != nil {
			return false, err
		}
		var err error
		if sum, err = e.committedSum(ctx, group, topic); err != nil {
			lastErr = err
			return false, nil
		}
		return sum > atStall, nil
	})
	switch {
	case err == nil:
		return true, fmt.Sprintf("group %s committed %d records to Kafka", group, sum)
	case errors.Is(err, errDeadline) && lastErr != nil:
		return false, fmt.Sprintf("group %s: no Kafka offsets past %d within %s (%v)", group, atStall, e.flushAt, lastErr)
	case errors.Is(err, errDeadline):
		return false, fmt.Sprintf("group %s: Kafka offsets at %d records, not past %d, after %s", group, sum, atStall, e.flushAt)
	}
	return false, fmt.Sprintf("group %s: %v", group, err)
}

// waitSettled waits until the table holds a row of every record produced
// and stays still for 2 s, or stays still for e.settle while it misses
// some (lost for good).
func (e *failoverEnv) waitSettled(ctx context.Context, d *db, table string, produced int64, w *sinkWatch) error {
	var st tableState
	var since time.Time
	return poll(ctx, time.Now().Add(e.h.timeout), func() time.Duration { return 200 * time.Millisecond }, func() (bool, error) {
		if err := w.health(ctx); err != nil {
			return false, err
		}
		prev := st
		var err error
		if st, err = d.state(ctx, table); err != nil {
			return false, err
		}
		if st != prev || since.IsZero() {
			since = time.Now()
		}
		if st.distinct < produced {
			return time.Since(since) >= e.settle, nil
		}
		return time.Since(since) >= 2*time.Second, nil
	})
}

// failovers runs the failover variants o asks of each system (o.failover
// for kafka2pg, o.failoverPeers for the others) and adds the results to
// rep. A kafka2pg run that fails is an error; a peer's is its result.
func failovers(ctx context.Context, o options, h *harness, k *kafka, peers []system, rep *report) error {
	if len(o.failover) == 0 && len(o.failoverPeers) == 0 {
		return nil
	}
	e := &failoverEnv{h: h, k: k, rate: o.failoverRate, pgBin: pgserver.BinDir(), settle: lossSettle,
		// kafka2pg mirrors its offsets to Kafka every second, Flink at
		// its checkpoints, Connect every offset.flush.interval.ms.
		flushAt: max(o.offsetFlush, 5*time.Second) + 15*time.Second, offsetFlush: o.offsetFlush}
	if e.pgBin == "" {
		rep.failoverNote = pgserver.ErrNoServerBinaries.Error()
		o.logf("no lossy failover: %s", rep.failoverNote)
		return nil
	}
	o.logf("== the lossy failover (%.0f records/s, servers of %s)", o.failoverRate, e.pgBin)
	for _, sys := range peers {
		_, isK2P := sys.(*kafka2pgSystem)
		variants := o.failoverPeers
		if isK2P {
			variants = o.failover
		}
		for _, v := range variants {
			r, err := e.failover(ctx, sys, v)
			if err != nil {
				if isK2P || ctx.Err() != nil {
					return err
				}
				r.Failed = err.Error()
				o.logf("  %-18s failover %-8s failed: %v", sys.label(), v, err)
			}
			rep.failovers = append(rep.failovers, r)
		}
	}
	return nil
}

// failoverVerdict is an error when kafka2pg lost or duplicated a record
// in a failover.
func failoverVerdict(rep *report) error {
	for _, r := range rep.failovers {
		if r.System == "kafka2pg" && (r.Lost != 0 || r.Duplicates != 0 || r.Failed != "") {
			return fmt.Errorf("kafka2pg, lossy failover (%s): %d lost, %d duplicates%s", r.Variant.title(), r.Lost, r.Duplicates, map[bool]string{true: "; " + r.Failed}[r.Failed != ""])
		}
	}
	return nil
}

// killedRestart says how a killed sink started again after the promote.
func killedRestart(sys system) string {
	switch sys.(type) {
	case *debeziumSystem:
		return "the worker started again after the promote (as after a crash), resuming the connector from its committed offsets"
	case *flinkSystem:
		return "started again after the promote (as after a crash) from its latest retained checkpoint"
	}
	return "started again after the promote (as after a crash)"
}
