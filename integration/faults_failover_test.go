package integration_test

import (
	"fmt"
	"syscall"
	"testing"
	"time"
)

// Fault cases 23 and 24: Postgres's history moves back under a running
// bridge. A lossy failover (23a-c) and the restore of an older base backup
// (24) both leave a server without commits the bridge saw succeed; the
// bridge must write those records again, exactly once. Each case owns its
// Postgres servers (internal/pgserver, through pgservers_test.go), so it
// needs the server binaries, not scripts/pg-up.sh's cluster.

// failoverRound is how the bridge meets the failover.
type failoverRound int

const (
	// roundFlowing: records keep flowing during and after the failover.
	roundFlowing failoverRound = iota
	// roundBridgeKilled: the bridge is killed with -9 with the primary and
	// started again after the promote.
	roundBridgeKilled
	// roundIdle: the partitions are idle at the failover, and records
	// resume a few seconds after the promote. The producer stops once the
	// primary holds commits it never sent (before that there is nothing to
	// lose), and the primary is killed once the bridge has written every
	// record. Nothing fails a write here: only the bridge's own checks can
	// notice that the durable positions moved back.
	roundIdle
)

// idleAfterPromote is how long the partitions stay idle after the promote
// in roundIdle.
const idleAfterPromote = 5 * time.Second

// movedBackWarn starts the WARN the bridge logs when a partition's durable
// position is behind the one it last made durable or claimed.
const movedBackWarn = "durable position moved back"

// movedBackMetric counts those WARNs.
const movedBackMetric = "kafka2pg_reader_positions_moved_back_total"

// serverChangedWarn starts the WARN the bridge logs when a new connection
// lands on a different server than the pool's previous ones.
const serverChangedWarn = "Postgres server changed"

// TestFault23aLossyFailoverRecordsFlowing: an asynchronous standby that
// lags is promoted after the primary is killed, while records flow.
func TestFault23aLossyFailoverRecordsFlowing(t *testing.T) {
	testLossyFailover(t, "23a", "lossy Postgres failover, records flowing", roundFlowing)
}

// TestFault23bLossyFailoverBridgeKilled: the same failover, with the bridge
// killed at the failover and started again after the promote.
func TestFault23bLossyFailoverBridgeKilled(t *testing.T) {
	testLossyFailover(t, "23b", "lossy Postgres failover, bridge killed at the failover", roundBridgeKilled)
}

// TestFault23cLossyFailoverIdlePartitions: the same failover while every
// partition is idle; records resume after the promote.
func TestFault23cLossyFailoverIdlePartitions(t *testing.T) {
	testLossyFailover(t, "23c", "lossy Postgres failover, partitions idle at the failover", roundIdle)
}

// testLossyFailover runs one round: a primary and an asynchronous standby
// (pg_basebackup -R), the bridge on the multi-host URL of both with
// target_session_attrs=read-write, the standby's walreceiver stopped
// (SIGSTOP) until the primary holds commits of the bridge it never sent,
// the primary killed with -9, the walreceiver continued so the standby
// replays what it received, and the standby promoted. It first proves that
// commits were lost (fewer rows and a smaller sum of next_offset on the new
// primary than on the old one just before the kill), then checks exactly
// once.
func testLossyFailover(t *testing.T, num, name string, round failoverRound) {
	requireFullFaults(t)
	started := time.Now()
	primary := newPgPrimary(t, "primary")
	standby := primary.standby(t, "standby")
	walReceiver, err := standby.WaitStreaming(t.Context(), primary.Server)
	failOn(t, err)
	pgURL := fmt.Sprintf("postgres://postgres@%s,%s/postgres?sslmode=disable&target_session_attrs=read-write",
		primary.Addr(), standby.Addr())
	s := newScenarioOn(t, 4, pgURL)
	fc := newFaultCaseOf(t, num, name, s, started)
	fc.inject("a primary and an asynchronous standby (pg_basebackup -R); the standby's walreceiver SIGSTOPped until the primary holds commits it never sent; the primary killed with -9 (postmaster and children); the walreceiver continued, then pg_ctl promote; the bridge on the multi-host URL with target_session_attrs=read-write")
	fc.trial()
	addr := freePort(t)
	flags := faultFlags(s.kafka)
	bridgeFlags := append([]string{"--metrics-addr=" + addr}, flags...)
	b := s.start(t, "A", bridgeFlags...)
	prod := fc.feed.start(t, 100, 10*time.Millisecond, 10_000_000)
	s.waitProgress(t, nil, time.Minute, b)
	s.runFor(t, 2*time.Second, b)

	unsent := freezeUntilUnsent(t, s, primary, walReceiver, b)
	if round == roundIdle {
		prod.stopAndCheck(t)
		ends := s.kafka.EndOffsets(t, s.topic)
		waitDurableOn(t, primary, s, ends, b)
		t.Logf("idle: every partition written to its end %s on the primary", formatOffsets(ends))
	}
	before := readHistory(t, primary, s)
	if round == roundBridgeKilled {
		b.kill(t)
	}
	primary.kill(t)
	t.Logf("killed the primary with -9: %s; %s", before, unsent)
	if err := syscall.Kill(walReceiver, syscall.SIGCONT); err != nil {
		t.Fatalf("SIGCONT walreceiver %d: %v", walReceiver, err)
	}
	failOn(t, standby.WaitReplayed(t.Context()))
	after := readHistory(t, standby, s)
	requireLoss(t, fc, before, after)

	promoteAt := time.Now()
	standby.promote(t)
	promoted := time.Since(promoteAt)
	s.db.Reset() // its connections died with the primary
	switch round {
	case roundBridgeKilled:
		b = s.start(t, "B", bridgeFlags...)
	case roundIdle:
		idleUntil := time.Now().Add(idleAfterPromote)
		for time.Now().Before(idleUntil) {
			requireRunning(t, b)
			time.Sleep(100 * time.Millisecond) // the idle time is the schedule
		}
		prod = fc.feed.start(t, 100, 10*time.Millisecond, 10_000_000)
	}
	first := waitFirstWrite(t, standby, s, promoteAt, b)
	fc.note(t, "lost by Postgres: %d rows (%d before the kill, %d on the promoted standby), sum of next_offset %d -> %d; pg_ctl promote took %v; first write on the new primary %v after the promote began%s",
		before.rows-after.rows, before.rows, after.rows, before.sumNext, after.sumNext,
		promoted.Round(10*time.Millisecond), first.Sub(promoteAt).Round(10*time.Millisecond), roundNote(round))

	s.runFor(t, 2*time.Second, b)
	prod.stopAndCheck(t)
	movedBack := scrapeCounter(t, addr, movedBackMetric)
	b.signal(t, syscall.SIGTERM)
	b.requireExitZero(t, time.Minute)
	warned := b.logged(movedBackWarn)
	fc.note(t, "the bridge logged %q: %v, %q: %v; %s %s",
		movedBackWarn, warned, serverChangedWarn, b.logged(serverChangedWarn), movedBackMetric, movedBack)
	fc.finish(t, nil, flags...)
	if round == roundIdle {
		// Nothing failed a write in this round: unless the bridge checks
		// the continuity of the durable positions, the loss is silent.
		if !warned {
			t.Errorf("bridge %s logged no %q WARN after Postgres lost %d rows under idle partitions: the loss went unreported", b.name, movedBackWarn, before.rows-after.rows)
		}
		if movedBack == "absent" || movedBack == "0" {
			t.Errorf("bridge %s: %s is %s after Postgres lost %d rows under idle partitions; want > 0", b.name, movedBackMetric, movedBack, before.rows-after.rows)
		}
	}
}

// roundNote says what the time to the first write includes.
func roundNote(round failoverRound) string {
	switch round {
	case roundBridgeKilled:
		return " (the bridge started again right after the promote)"
	case roundIdle:
		return fmt.Sprintf(" (records resumed %v after the promote)", idleAfterPromote)
	}
	return ""
}

// freezeUntilUnsent stops the standby's walreceiver (SIGSTOP) and waits
// until the primary holds commits of the bridge that it never sent: the
// walsender's sent_lsn stands still for a second (the connection's buffers
// are full, pgserver's WaitUnsent), and the durable positions on the
// primary then rise further. Those commits come after sent_lsn, so the
// standby can never have them. It returns what it saw, for the log.
func freezeUntilUnsent(t testing.TB, s *scenario, primary *pgServer, walReceiver int, alive ...*bridge) string {
	t.Helper()
	if err := syscall.Kill(walReceiver, syscall.SIGSTOP); err != nil {
		t.Fatalf("SIGSTOP walreceiver %d: %v", walReceiver, err)
	}
	// Continued if the test fails while it is stopped: the kill at the end
	// would end it anyway, but the standby's log should read as a standby
	// that was killed, not one that hung.
	t.Cleanup(func() { syscall.Kill(walReceiver, syscall.SIGCONT) })
	frozen := time.Now()
	unsent, err := primary.WaitUnsent(t.Context(), 2*time.Minute, func() error {
		requireRunning(t, alive...)
		return nil
	})
	failOn(t, err)
	const q = `SELECT coalesce(sum(next_offset), 0)::bigint FROM kafka2pg.offsets WHERE consumer_group = $1 AND topic = $2`
	var atStall int64
	primary.queryRow(t, q, []any{s.group, s.topic}, &atStall)
	pollUntil(t, 2*time.Minute, "the primary to hold commits it never sent to the frozen standby", func() (bool, string) {
		requireRunning(t, alive...)
		var sumNow int64
		if err := primary.QueryRow(t.Context(), q, []any{s.group, s.topic}, &sumNow); err != nil {
			return false, err.Error()
		}
		return sumNow > atStall, fmt.Sprintf("sum of next_offset %d (%d when sent_lsn %s had stood still for 1 s)", sumNow, atStall, unsent.SentLSN)
	})
	return fmt.Sprintf("walreceiver %d stopped %v before: sent_lsn %s, %d bytes of WAL unsent when it had stood still for 1 s",
		walReceiver, time.Since(frozen).Round(100*time.Millisecond), unsent.SentLSN, unsent.Bytes)
}

// history is what a server holds of the scenario: its rows and its
// durable positions.
type history struct {
	server        string
	rows          int64 // rows of the topic in the target table
	sumNext       int64 // the sum of next_offset over the partitions
	lastCommitted time.Time
}

func (h history) String() string {
	return fmt.Sprintf("%s holds %d rows, sum of next_offset %d, last commit %s",
		h.server, h.rows, h.sumNext, h.lastCommitted.Format("15:04:05.000"))
}

// readHistory reads the scenario's rows and positions on a server.
func readHistory(t testing.TB, server *pgServer, s *scenario) history {
	t.Helper()
	q := `SELECT (SELECT count(*) FROM ` + tableName(s.table) + ` WHERE kafka_topic = $2),
  (SELECT coalesce(sum(next_offset), 0) FROM kafka2pg.offsets WHERE consumer_group = $1 AND topic = $2)::bigint,
  (SELECT coalesce(max(committed_at), '-infinity') FROM kafka2pg.offsets WHERE consumer_group = $1 AND topic = $2)`
	h := history{server: server.Name}
	server.queryRow(t, q, []any{s.group, s.topic}, &h.rows, &h.sumNext, &h.lastCommitted)
	return h
}

// requireLoss fails the test unless the server after the fault holds fewer
// rows and a smaller sum of next_offset than before: a case that lost no
// commit would prove nothing.
func requireLoss(t testing.TB, fc *faultCase, before, after history) {
	t.Helper()
	if after.rows >= before.rows || after.sumNext >= before.sumNext {
		t.Fatalf("Postgres lost no commits, so the case proves nothing: before the fault %s; after it %s", before, after)
	}
	t.Logf("Postgres lost commits: before the fault %s; after it %s", before, after)
}

// waitDurableOn waits until the server's kafka2pg.offsets hold ends for
// every partition of the scenario.
func waitDurableOn(t testing.TB, server *pgServer, s *scenario, ends map[int32]int64, alive ...*bridge) {
	t.Helper()
	const q = `SELECT count(*) FROM kafka2pg.offsets o JOIN unnest($3::int[], $4::bigint[]) AS e(p, next) ON o."partition" = e.p
WHERE o.consumer_group = $1 AND o.topic = $2 AND o.next_offset = e.next`
	var parts []int32
	var nexts []int64
	for p, n := range ends {
		parts, nexts = append(parts, p), append(nexts, n)
	}
	pollUntil(t, time.Minute, "every partition written to its end "+formatOffsets(ends)+" on "+server.Name, func() (bool, string) {
		requireRunning(t, alive...)
		var n int
		if err := server.QueryRow(t.Context(), q, []any{s.group, s.topic, parts, nexts}, &n); err != nil {
			return false, err.Error()
		}
		return n == len(ends), fmt.Sprintf("%d of %d partitions at their end", n, len(ends))
	})
}

// waitFirstWrite waits for the first data transaction of the scenario on
// the server that began after since, and returns when it began
// (committed_at, the transaction's start).
func waitFirstWrite(t testing.TB, server *pgServer, s *scenario, since time.Time, alive ...*bridge) time.Time {
	t.Helper()
	const q = `SELECT coalesce(min(committed_at), '-infinity') FROM kafka2pg.offsets
WHERE consumer_group = $1 AND topic = $2 AND committed_at > $3`
	var first time.Time
	pollUntil(t, 2*time.Minute, "the bridge's first write on "+server.Name, func() (bool, string) {
		requireRunning(t, alive...)
		if err := server.QueryRow(t.Context(), q, []any{s.group, s.topic, since}, &first); err != nil {
			return false, err.Error()
		}
		return first.After(since), "no data transaction yet"
	})
	return first
}

// scrapeCounter reads a metric's value (summed over its series) from the
// bridge's /metrics at addr: "absent" when the bridge does not export it.
func scrapeCounter(t testing.TB, addr, name string) string {
	t.Helper()
	v, ok := scrapeMetric(t, addr, name)
	if !ok {
		return "absent"
	}
	return fmt.Sprint(v)
}

// TestFault24RestoreOlderBaseBackup restores, under a running bridge, a
// base backup taken while the bridge wrote (point-in-time recovery to an
// older point): the server is stopped and the backup started in its place,
// on the same port. It first proves that the restored server lacks commits
// the bridge saw succeed, then checks exactly once.
func TestFault24RestoreOlderBaseBackup(t *testing.T) {
	requireFullFaults(t)
	started := time.Now()
	primary := newPgPrimary(t, "primary")
	s := newScenarioOn(t, 4, primary.URL())
	fc := newFaultCaseOf(t, "24", "restore an older base backup under a running bridge", s, started)
	fc.inject("pg_basebackup while the bridge writes; 3 s more of writes; pg_ctl stop -m fast; the backup started in its place on the same port")
	fc.trial()
	flags := faultFlags(s.kafka)
	b := s.start(t, "A", flags...)
	prod := fc.feed.start(t, 100, 10*time.Millisecond, 10_000_000)
	s.waitProgress(t, nil, time.Minute, b)
	s.runFor(t, 2*time.Second, b)

	// The backup first starts on a port of its own, so that the test reads
	// what it holds before the bridge can write to it.
	backup := primary.baseBackup(t, "backup")
	at := readHistory(t, primary, s)
	s.runFor(t, 3*time.Second, b)
	before := readHistory(t, primary, s)
	primary.stop(t)
	stoppedAt := time.Now()
	backup.start(t)
	after := readHistory(t, backup, s)
	t.Logf("the primary when the backup ended: %s", at)
	requireLoss(t, fc, before, after)
	backup.stop(t)
	backup.setPort(t, primary.Port)
	restoreAt := time.Now()
	backup.start(t)
	restored := time.Since(restoreAt)
	s.db.Reset() // its connections died with the server
	first := waitFirstWrite(t, backup, s, restoreAt, b)
	fc.note(t, "lost by Postgres: %d rows (%d before the stop, %d in the backup), sum of next_offset %d -> %d; Postgres down %v, the restored server started in %v; first write on it %v after its start began",
		before.rows-after.rows, before.rows, after.rows, before.sumNext, after.sumNext,
		restoreAt.Sub(stoppedAt).Round(10*time.Millisecond), restored.Round(10*time.Millisecond), first.Sub(restoreAt).Round(10*time.Millisecond))

	s.runFor(t, 2*time.Second, b)
	prod.stopAndCheck(t)
	b.signal(t, syscall.SIGTERM)
	b.requireExitZero(t, time.Minute)
	fc.note(t, "the bridge logged %q: %v, %q: %v", movedBackWarn, b.logged(movedBackWarn), serverChangedWarn, b.logged(serverChangedWarn))
	fc.finish(t, nil, flags...)
}
