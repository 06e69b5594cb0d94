package integration_test

import (
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/kafka2pg/kafka2pg/internal/kafkatest"
)

// TestZombieIsFenced freezes instance A with SIGSTOP while it writes, lets
// instance B of the same group take over once A's session times out, then
// wakes A up. A may hold an open transaction and believes it still owns its
// partitions; whatever it does next must not write a record twice or lose
// one. A must end when told (with any status, but within a deadline); B must
// stop cleanly.
func TestZombieIsFenced(t *testing.T) {
	parallel(t)
	const partitions = 4
	s := newScenario(t, partitions)
	flags := append([]string{"--batch-max-rows", "500", "--batch-max-wait", "50ms"}, fastGroupFlags...)
	prod := s.startProducer(t, 20, 20*time.Millisecond, 120_000)

	a := s.start(t, "A", flags...)
	s.waitProgress(t, nil, 30*time.Second, a)
	s.runFor(t, 2*time.Second, a) // A is mid-stream on every partition

	// A backlog keeps A in back-to-back transactions, so it can be caught
	// inside one.
	s.produce(t, 40_000)
	how := s.freezeMidTransaction(t, a)
	frozenAt := time.Now()
	atFreeze := s.durableOffsets(t)
	t.Logf("froze A %s; durable next_offset %s", how, formatOffsets(atFreeze))

	b := s.start(t, "B", flags...)
	// B needs A's session to time out (6s), and its claim may wait for the
	// grace period before it terminates A's open transaction (~10s).
	s.waitProgress(t, atFreeze, 45*time.Second, b)
	t.Logf("B wrote past A's offsets on every partition %v after A froze", time.Since(frozenAt).Round(time.Millisecond))
	if d := 9*time.Second - time.Since(frozenAt); d > 0 {
		time.Sleep(d) // keep A frozen well past its session timeout
	}

	atThaw := s.durableOffsets(t)
	a.signal(t, syscall.SIGCONT)
	thawedAt := time.Now()
	t.Logf("thawed A; durable next_offset %s", formatOffsets(atThaw))

	// A wakes with stale state: it learns it lost its partitions, and either
	// rejoins (then the group settles with two members) or gives up and ends.
	pollUntil(t, 45*time.Second, "A to rejoin the group or end", func() (bool, string) {
		requireRunning(t, b)
		if a.exited() {
			return true, ""
		}
		state, members := s.kafka.GroupState(t, s.group, s.topic)
		return state == "Stable" && kafkatest.Covers(members, 2, partitions), fmt.Sprintf("state %s, members %v", state, members)
	})
	if a.exited() {
		t.Logf("A ended by itself %v after it was thawed: %s", time.Since(thawedAt).Round(time.Millisecond), a.status())
	} else {
		_, members := s.kafka.GroupState(t, s.group, s.topic)
		t.Logf("A rejoined %v after it was thawed; group %v", time.Since(thawedAt).Round(time.Millisecond), members)
	}
	s.waitProgress(t, atThaw, 45*time.Second, b)
	s.runFor(t, 3*time.Second, b)

	n := prod.stopAndCheck(t)
	b.signal(t, syscall.SIGTERM)
	a.signal(t, syscall.SIGTERM)
	b.requireExitZero(t, time.Minute)
	if !a.wait(time.Minute) {
		a.kill(t)
		t.Errorf("zombie A: still running a minute after SIGTERM; killed it")
	} else {
		t.Logf("zombie A ended: %s", a.status())
	}
	t.Logf("%d records produced", n)

	s.runUntilCaughtUp(t, "final", 2*time.Minute, flags...)
	s.verifyFinalState(t)
}

// freezeMidTransaction stops the bridge with SIGSTOP, preferably while its
// transaction holds a kafka2pg.offsets row lock (between the offsets update and
// COMMIT), else while it has a write transaction open: it freezes, looks,
// and if the moment is wrong thaws and tries again, a bounded number of
// times. It returns how the bridge was caught, for the log.
func (s *scenario) freezeMidTransaction(t testing.TB, b *bridge) string {
	t.Helper()
	// The same join the bridge's claim uses to find a zombie: the row's xmax
	// is a transaction that is still running.
	const rowLocks = `SELECT count(*) FROM kafka2pg.offsets o
JOIN pg_locks l ON l.locktype = 'transactionid' AND l.transactionid = o.xmax
               AND l.mode = 'ExclusiveLock' AND l.granted
WHERE o.consumer_group = $1 AND l.pid <> pg_backend_pid()`
	const openWrites = `SELECT count(*) FROM pg_stat_activity
WHERE datname = current_database() AND pid <> pg_backend_pid() AND backend_xid IS NOT NULL`
	const attempts = 200
	for attempt := 1; ; attempt++ {
		b.signal(t, syscall.SIGSTOP)
		// Let Postgres finish what the bridge sent before it stopped (a
		// COMMIT in flight), so what is left is held by a frozen process.
		time.Sleep(20 * time.Millisecond)
		var locks, writes int64
		if err := s.db.QueryRow(t.Context(), rowLocks, s.group).Scan(&locks); err != nil {
			t.Fatalf("%s: %v", rowLocks, err)
		}
		if err := s.db.QueryRow(t.Context(), openWrites).Scan(&writes); err != nil {
			t.Fatalf("%s: %v", openWrites, err)
		}
		switch {
		case locks > 0:
			return fmt.Sprintf("holding %d kafka2pg.offsets row locks in an open transaction (attempt %d)", locks, attempt)
		case attempt == attempts && writes > 0:
			return fmt.Sprintf("with %d write transactions open but no offsets row lock (after %d attempts)", writes, attempt)
		case attempt == attempts:
			return fmt.Sprintf("between transactions (no open write transaction after %d attempts)", attempt)
		}
		b.signal(t, syscall.SIGCONT)
		time.Sleep(randomDuration(time.Millisecond, 30*time.Millisecond))
	}
}
