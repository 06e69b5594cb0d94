package integration_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// Writes that stall and writes that fail again and again: /readyz must
// say so, and the retries must back off.

func TestReadinessIsLostWhileALockStallsTheWritesAndComesBack(t *testing.T) {
	s := newScenario(t, 2)
	s.produce(t, 200)
	addr := freeAddr(t)
	readyz := "http://" + addr + "/readyz"
	b := s.start(t, "stall", "--metrics-addr="+addr, "--ready-stall-timeout", "2s")
	s.waitProgress(t, nil, time.Minute, b)
	waitHTTPStatus(t, readyz, http.StatusOK, time.Minute, b)

	tx := lockTable(t, s)
	locked := time.Now()
	s.produce(t, 200)
	var body string
	pollUntil(t, 30*time.Second, "/readyz to turn 503 while the lock is held", func() (bool, string) {
		requireRunning(t, b)
		var code int
		code, body = scrape(readyz)
		return code == http.StatusServiceUnavailable && strings.Contains(body, "committed no write"), fmt.Sprintf("%d %s", code, body)
	})
	unready := time.Since(locked)
	t.Logf("unready %v after the lock: %s", unready.Round(100*time.Millisecond), strings.TrimSpace(body))
	if !strings.Contains(body, "partition "+s.topic+"/") || !strings.Contains(body, "a write in flight") {
		t.Errorf("/readyz does not say which partition and what it waits on: %s", body)
	}
	if unready > 10*time.Second {
		t.Errorf("unready %v after the lock, want about --ready-stall-timeout (2s)", unready)
	}
	for time.Since(locked) < 6*time.Second { // hold the lock a while: the schedule
		if code, body := scrape(readyz); code != http.StatusServiceUnavailable {
			t.Fatalf("/readyz while the lock is held: %d %s, want 503", code, body)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if err := tx.Commit(t.Context()); err != nil {
		t.Fatal(err)
	}
	released := time.Now()
	waitHTTPStatus(t, readyz, http.StatusOK, 30*time.Second, b)
	t.Logf("ready again %v after the lock was released", time.Since(released).Round(100*time.Millisecond))
	if code, _ := scrape("http://" + addr + "/healthz"); code != http.StatusOK {
		t.Errorf("/healthz: %d, want 200", code)
	}
	b.signal(t, syscall.SIGTERM)
	b.requireExitZero(t, time.Minute)
	s.verifyFinalState(t)
}

// readyWithin is how soon /readyz must turn 503 after a write stops getting
// answers, on the default write timeout (2 minutes) and stall threshold
// (60 s): the write's step deadline, from what the writes before it took,
// cuts it in seconds, and the failing partition is not ready until it
// commits again.
const readyWithin = 15 * time.Second

func TestReadinessIsLostWithinSecondsOfAWriteThatGetsNoAnswerOnTheDefaults(t *testing.T) {
	s := newScenario(t, 2)
	s.produce(t, 200)
	addr := freeAddr(t)
	readyz := "http://" + addr + "/readyz"
	b := s.start(t, "hung", "--metrics-addr="+addr)
	s.waitProgress(t, nil, time.Minute, b)
	// More writes, for the estimates.
	for range 5 {
		at := s.durableOffsets(t)
		s.produce(t, 100)
		s.waitProgress(t, at, time.Minute, b)
	}
	waitHTTPStatus(t, readyz, http.StatusOK, time.Minute, b)

	tx := lockTable(t, s)
	locked := time.Now()
	s.produce(t, 200)
	var body string
	pollUntil(t, time.Minute, "/readyz to turn 503 while the lock is held", func() (bool, string) {
		requireRunning(t, b)
		var code int
		code, body = scrape(readyz)
		return code == http.StatusServiceUnavailable, fmt.Sprintf("%d %s", code, body)
	})
	unready := time.Since(locked)
	t.Logf("unready %v after the lock: %s", unready.Round(100*time.Millisecond), strings.TrimSpace(body))
	if unready > readyWithin {
		t.Errorf("unready %v after the lock, want within %v", unready.Round(100*time.Millisecond), readyWithin)
	}
	// Through the re-claims and the retries, each cut at a longer
	// deadline: not ready until a write commits.
	for time.Since(locked) < 25*time.Second { // hold the lock a while: the schedule
		if code, body := scrape(readyz); code != http.StatusServiceUnavailable {
			t.Fatalf("/readyz %v after the lock: %d %s, want 503 while it is held", time.Since(locked).Round(100*time.Millisecond), code, body)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if err := tx.Commit(t.Context()); err != nil {
		t.Fatal(err)
	}
	waitHTTPStatus(t, readyz, http.StatusOK, time.Minute, b)
	b.signal(t, syscall.SIGTERM)
	b.requireExitZero(t, time.Minute)
	s.verifyFinalState(t)
}

func TestTheBackoffGrowsWithTheFailureStreakNotWithOneReclaim(t *testing.T) {
	s := newScenario(t, 4)
	addr := freeAddr(t)
	metrics := "http://" + addr + "/metrics"
	b := s.start(t, "streak", append([]string{"--metrics-addr=" + addr, "--progress-interval", "2s"}, fastGroupFlags...)...)
	prod := s.startProducer(t, 40, 20*time.Millisecond, 1_000_000)
	s.waitProgress(t, nil, time.Minute, b)

	// Every COPY into the table fails as a cut connection would, while the
	// claims (on kafka2pg.offsets) go through.
	fail := pgx.Identifier{"public", s.table + "_fail"}.Sanitize()
	for _, q := range []string{
		"CREATE FUNCTION " + fail + "() RETURNS trigger LANGUAGE plpgsql AS $$BEGIN RAISE EXCEPTION 'injected: connection cut' USING ERRCODE = '08006'; END$$",
		"CREATE TRIGGER fail BEFORE INSERT ON " + tableName(s.table) + " FOR EACH STATEMENT EXECUTE FUNCTION " + fail + "()",
	} {
		if _, err := s.db.Exec(t.Context(), q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	connectionErrors := func() float64 {
		_, body := scrape(metrics)
		v, _ := metricSum(body, "kafka2pg_ingest_write_errors_total", `cause="connection"`)
		return v
	}
	began, before := time.Now(), connectionErrors()
	const window = 10 * time.Second
	for time.Since(began) < window { // the fault's length: the schedule
		requireRunning(t, b)
		time.Sleep(100 * time.Millisecond)
	}
	failed := connectionErrors() - before
	if _, err := s.db.Exec(t.Context(), "DROP TRIGGER fail ON "+tableName(s.table)); err != nil {
		t.Fatal(err)
	}
	// With a backoff that doubles from 100ms (each wait at least half of
	// it, the jitter) a partition fails at most 10 times in 10 s; a backoff
	// that started again at 100ms after each successful re-claim failed
	// some 80 times.
	const most = 4 * 11
	t.Logf("%v failed writes (cause connection) in %v over %d partitions", failed, window, s.partitions)
	if failed < float64(s.partitions) || failed > most {
		t.Errorf("%v failed writes in %v over %d partitions, want between %d and %d", failed, window, s.partitions, s.partitions, most)
	}
	at := s.durableOffsets(t)
	s.waitProgress(t, at, time.Minute, b)
	if !b.logged("write_errors_since_last=\"connection=") {
		t.Errorf("no progress line says the failed writes were connection trouble")
	}
	if n := strings.Count(logOf(t, b), "write to Postgres failed"); n > 4*int(s.partitions) {
		t.Errorf("%d lines about failed writes for %v failures: they are not rate-limited", n, failed)
	}
	prod.stopAndCheck(t)
	b.signal(t, syscall.SIGTERM)
	b.requireExitZero(t, time.Minute)
	s.runUntilCaughtUp(t, "final", time.Minute, fastGroupFlags...)
	s.verifyFinalState(t)
}

// lockTable takes an ACCESS EXCLUSIVE lock on the scenario's table in a
// transaction of its own, which the test commits to release it (or which
// is rolled back when the test ends).
func lockTable(t *testing.T, s *scenario) pgx.Tx {
	t.Helper()
	tx, err := s.db.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tx.Rollback(context.Background()) })
	if _, err := tx.Exec(t.Context(), "LOCK TABLE "+tableName(s.table)+" IN ACCESS EXCLUSIVE MODE"); err != nil {
		t.Fatal(err)
	}
	return tx
}
