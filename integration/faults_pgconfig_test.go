package integration_test

import (
	"fmt"
	"net/url"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// Fault cases 17-19: Postgres is up and answering, but a setting makes it
// refuse the bridge's work: a database switched to read-only (as a failover
// to a standby or an operator's ALTER DATABASE does), a connection limit of
// one, a statement_timeout meant for interactive queries. Settings made
// with ALTER DATABASE or ALTER ROLE reach only sessions opened afterwards,
// so each case also terminates the bridge's backends, as a failover would.

// terminateBridgeBackends ends every backend of the bridges on the
// scenario's database, so that their next sessions see the settings.
func terminateBridgeBackends(t testing.TB, s *scenario) int {
	t.Helper()
	var n int
	err := s.db.QueryRow(t.Context(), `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
WHERE datname = current_database() AND application_name = 'kafka2pg' AND pid <> pg_backend_pid()`).Scan(&n)
	if err != nil {
		t.Fatalf("terminate the bridge's backends: %v", err)
	}
	return n
}

// databaseName is the name of the scenario's database.
func databaseName(t testing.TB, s *scenario) pgx.Identifier {
	t.Helper()
	u, err := url.Parse(s.pgURL)
	if err != nil {
		t.Fatal(err)
	}
	return pgx.Identifier{strings.TrimPrefix(u.Path, "/")}
}

// exec runs statements on the scenario's database as its admin.
func (s *scenario) exec(t testing.TB, stmts ...string) {
	t.Helper()
	for _, q := range stmts {
		if _, err := s.db.Exec(t.Context(), q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}

// TestFault17ReadOnlyDatabase switches the database to read-only for new
// sessions and cuts the bridge's sessions, so that every session it opens
// meanwhile is read-only, then switches it back. A session that refused a
// write as read-only (SQLSTATE 25006) must leave the pool, so that the
// reset heals at once: within 5 s, where pooled read-only sessions kept
// failing for 21-60 s.
func TestFault17ReadOnlyDatabase(t *testing.T) {
	requireFullFaults(t)
	fc := newFaultCase(t, "17", "database switched to read-only and back", 4, nil)
	s := fc.s
	fc.inject("ALTER DATABASE ... SET default_transaction_read_only = on and pg_terminate_backend of the bridge's sessions, for 10 s; then RESET")
	addr := freePort(t)
	readyz := "http://" + addr + "/readyz"
	flags := faultFlags(s.kafka, "--ready-stall-timeout", "3s", "--retry-backoff-max", "2s")
	b := s.start(t, "A", append([]string{"--metrics-addr=" + addr}, flags...)...)
	prod := fc.feed.start(t, 20, 20*time.Millisecond, 1_000_000)
	s.waitProgress(t, nil, 30*time.Second, b)
	waitHTTPStatus(t, readyz, 200, 30*time.Second, b)

	db := databaseName(t, s).Sanitize()
	const trials = 2
	var recoveries []string
	for i := range trials {
		s.exec(t, "ALTER DATABASE "+db+" SET default_transaction_read_only = on")
		cut := terminateBridgeBackends(t, s)
		t.Logf("trial %d: read-only; cut %d bridge sessions", i, cut)
		waitHTTPStatus(t, readyz, 503, 30*time.Second, b)
		time.Sleep(10 * time.Second) // the outage's length is the schedule
		requireRunning(t, b)
		at := s.durableOffsets(t)
		s.exec(t, "ALTER DATABASE "+db+" RESET default_transaction_read_only")
		reset := time.Now()
		s.waitProgress(t, at, 30*time.Second, b)
		took := time.Since(reset)
		recoveries = append(recoveries, took.Round(100*time.Millisecond).String())
		// The backoff is capped at 2 s here: a partition retries within 2 s
		// of the reset, and its write takes well under a second.
		if took > 5*time.Second {
			t.Errorf("trial %d: every partition advanced %v after the reset; want within 5 s", i, took.Round(100*time.Millisecond))
		}
		waitHTTPStatus(t, readyz, 200, 30*time.Second, b)
		fc.trial()
	}
	fc.note(t, "/readyz 503 while read-only; every partition advanced %v after each reset (--retry-backoff-max 2s)", recoveries)
	prod.stopAndCheck(t)
	b.signal(t, syscall.SIGTERM)
	b.requireExitZero(t, time.Minute)
	fc.finish(t, nil, flags...)
}

// TestFault18ConnectionLimitOne runs the bridge as a role (not a
// superuser, whom limits do not bind) that may hold one connection, while
// the bridge would use four: the writes of its partitions share the one
// session it gets, and none is lost or duplicated.
func TestFault18ConnectionLimitOne(t *testing.T) {
	requireFullFaults(t)
	fc := newFaultCase(t, "18", "connection limit 1", 4, nil)
	s := fc.s
	fc.inject("ALTER ROLE ... CONNECTION LIMIT 1 for the bridge's role (--pg-max-conns 4) and pg_terminate_backend of its sessions, for 15 s; then the limit lifted")
	role := pgx.Identifier{fmt.Sprintf("k2p_limited_%s", strings.TrimPrefix(s.table, "it_"))}
	db := databaseName(t, s).Sanitize()
	s.exec(t, "CREATE ROLE "+role.Sanitize()+" LOGIN",
		"ALTER DATABASE "+db+" OWNER TO "+role.Sanitize(),
		"GRANT ALL ON SCHEMA public TO "+role.Sanitize())
	t.Cleanup(func() {
		// The database is dropped with the test; the role must go after it
		// no longer owns anything there.
		ctx := t.Context()
		_, _ = s.db.Exec(ctx, "ALTER DATABASE "+db+" OWNER TO CURRENT_USER")
		_, _ = s.db.Exec(ctx, "DROP OWNED BY "+role.Sanitize())
		_, _ = s.db.Exec(ctx, "DROP ROLE "+role.Sanitize())
	})
	u, err := url.Parse(s.pgURL)
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.User(role[0])
	roleURL := u.String()

	flags := faultFlags(s.kafka, "--pg-max-conns", "4", "--retry-backoff-max", "2s")
	b := s.start(t, "A", append(flags, "--pg-url", roleURL)...)
	prod := fc.feed.start(t, 20, 20*time.Millisecond, 1_000_000)
	s.waitProgress(t, nil, 30*time.Second, b)

	s.exec(t, "ALTER ROLE "+role.Sanitize()+" CONNECTION LIMIT 1")
	cut := terminateBridgeBackends(t, s)
	limited := time.Now()
	at := s.durableOffsets(t)
	// Every partition must go on writing through the one session.
	s.waitProgress(t, at, 45*time.Second, b)
	progressed := time.Since(limited)
	for time.Since(limited) < 15*time.Second {
		requireRunning(t, b)
		time.Sleep(100 * time.Millisecond) // the limit's length is the schedule
	}
	var sessions int
	if err := s.db.QueryRow(t.Context(), `SELECT count(*) FROM pg_stat_activity WHERE usename = $1`, role[0]).Scan(&sessions); err != nil {
		t.Fatal(err)
	}
	if sessions > 1 {
		t.Errorf("%d sessions of the limited role; the limit is 1", sessions)
	}
	s.exec(t, "ALTER ROLE "+role.Sanitize()+" CONNECTION LIMIT -1")
	s.waitProgress(t, s.durableOffsets(t), 30*time.Second, b)
	fc.trial()
	fc.note(t, "cut %d sessions; under the limit every partition advanced %v later through one session", cut, progressed.Round(100*time.Millisecond))
	prod.stopAndCheck(t)
	b.signal(t, syscall.SIGTERM)
	b.requireExitZero(t, time.Minute)
	fc.finish(t, nil, flags...)
}

// TestFault19StatementTimeout sets a statement_timeout of 1 ms on the
// database, as an operator protecting it from runaway queries might: the
// bridge's transactions are bounded by its own write deadline, and a
// database default meant for interactive sessions must not cancel its
// COPYs.
func TestFault19StatementTimeout(t *testing.T) {
	requireFullFaults(t)
	fc := newFaultCase(t, "19", "statement_timeout 1 ms on the database", 4, nil)
	s := fc.s
	fc.inject("ALTER DATABASE ... SET statement_timeout = '1ms' and pg_terminate_backend of the bridge's sessions, for 10 s; then RESET")
	flags := faultFlags(s.kafka, "--retry-backoff-max", "2s")
	b := s.start(t, "A", flags...)
	prod := fc.feed.start(t, 20, 20*time.Millisecond, 1_000_000)
	s.waitProgress(t, nil, 30*time.Second, b)

	db := databaseName(t, s).Sanitize()
	s.exec(t, "ALTER DATABASE "+db+" SET statement_timeout = '1ms'")
	cut := terminateBridgeBackends(t, s)
	set := time.Now()
	at := s.durableOffsets(t)
	s.waitProgress(t, at, 30*time.Second, b)
	progressed := time.Since(set)
	for time.Since(set) < 10*time.Second {
		requireRunning(t, b)
		time.Sleep(100 * time.Millisecond) // the setting's length is the schedule
	}
	s.exec(t, "ALTER DATABASE "+db+" RESET statement_timeout")
	s.waitProgress(t, s.durableOffsets(t), 30*time.Second, b)
	fc.trial()
	fc.note(t, "cut %d sessions; with statement_timeout 1ms every partition advanced %v later", cut, progressed.Round(100*time.Millisecond))
	prod.stopAndCheck(t)
	b.signal(t, syscall.SIGTERM)
	b.requireExitZero(t, time.Minute)
	fc.finish(t, nil, flags...)
}
