package integration_test

import (
	"fmt"
	"math/rand/v2"
	"net"
	"net/url"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/kafka2pg/kafka2pg/internal/pgtest"
)

// The bridge's life from the outside: what stops it for good and how fast
// (a missing topic, a refused privilege, a taken port, --until-caught-up
// with a server down), and how it stops when asked to (SIGTERM during a
// group join, a second SIGTERM during a slow flush).

// requireExit waits up to within for the bridge to end with exit status
// code, and returns how long it ran and its log.
func requireExit(t testing.TB, b *bridge, code int, within time.Duration) (time.Duration, string) {
	t.Helper()
	if !b.wait(within) {
		b.kill(t)
		t.Fatalf("bridge %s still running %v after start; killed it", b.name, within)
	}
	took := b.ended.Sub(b.started)
	out := logOf(t, b)
	if got := b.state.ExitCode(); got != code {
		t.Fatalf("bridge %s: %s after %v, want exit status %d; log:\n%s", b.name, b.status(), took.Round(time.Millisecond), code, out)
	}
	for _, bad := range []string{"panic:", "goroutine "} {
		if strings.Contains(out, bad) {
			t.Fatalf("bridge %s crashed (%q in its log):\n%s", b.name, bad, out)
		}
	}
	t.Logf("bridge %s: %s after %v: %s", b.name, b.status(), took.Round(time.Millisecond), lastLine(out))
	return took, out
}

// requireLogHas fails unless the log contains every one of want.
func requireLogHas(t testing.TB, out string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(out, w) {
			t.Fatalf("the log lacks %q:\n%s", w, out)
		}
	}
}

// errorLines counts the lines of the log at level ERROR.
func errorLines(out string) int {
	return strings.Count(out, "level=ERROR")
}

// closedAddr returns a 127.0.0.1 address that refuses connections.
func closedAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// tableExists reports whether public.table exists.
func tableExists(t testing.TB, s *scenario, table string) bool {
	t.Helper()
	var name *string
	if err := s.db.QueryRow(t.Context(), `SELECT to_regclass($1)::text`, pgx.Identifier{"public", table}.Sanitize()).Scan(&name); err != nil {
		t.Fatal(err)
	}
	return name != nil
}

func TestAMissingTopicStopsTheBridgeBeforeATableIsCreated(t *testing.T) {
	parallel(t)
	s := newScenario(t, 1)
	missing := fmt.Sprintf("kafka2pg-missing-%08x", rand.Uint32())
	b := startBridge(t, "missing-topic", bridgeArgs(s.kafka.Brokers(), missing, s.table, "--pg-url", s.pgURL, "--fatal-retry-timeout", "2s")...)
	took, out := requireExit(t, b, 1, time.Minute)
	requireLogHas(t, out, missing, "does not exist", "--fatal-retry-timeout", "correct reader.Config.Topics", "--topic")
	if took < 2*time.Second {
		t.Errorf("exited after %v: a missing topic is retried for --fatal-retry-timeout (2s) first", took)
	}
	if n := errorLines(out); n != 1 {
		t.Errorf("%d ERROR lines, want one clear one", n)
	}
	if tableExists(t, s, s.table) {
		t.Errorf("table %s was created for a topic that does not exist", s.table)
	}
}

func TestARoleWithoutInsertIsFatalAndTheMessageNamesTheGrant(t *testing.T) {
	parallel(t)
	admin := pgtest.URL(t)
	s := newScenarioOn(t, 2, admin)
	// The owner creates the table (a run over the empty topic), then the
	// bridge's role gets everything but INSERT on it.
	owner := s.start(t, "owner", "--until-caught-up")
	owner.requireExitZero(t, time.Minute)
	s.produce(t, 200)
	role := fmt.Sprintf("k2p_noinsert_%08x", rand.Uint32())
	password := fmt.Sprintf("pw%08x", rand.Uint32())
	r := pgx.Identifier{role}.Sanitize()
	dbName := strings.TrimPrefix(mustParseURL(t, admin).Path, "/")
	for _, q := range []string{
		"CREATE ROLE " + r + " LOGIN PASSWORD '" + password + "'",
		"GRANT CONNECT ON DATABASE " + pgx.Identifier{dbName}.Sanitize() + " TO " + r,
		"GRANT USAGE ON SCHEMA kafka2pg TO " + r,
		"GRANT SELECT, INSERT, UPDATE ON kafka2pg.offsets TO " + r,
		"GRANT SELECT, INSERT, DELETE ON kafka2pg.dead_letters TO " + r,
		"GRANT USAGE ON SCHEMA public TO " + r,
		"GRANT SELECT, UPDATE ON " + pgx.Identifier{"public", s.table}.Sanitize() + " TO " + r,
	} {
		if _, err := s.db.Exec(t.Context(), q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	t.Cleanup(func() {
		ctx := t.Context()
		s.db.Exec(ctx, "DROP OWNED BY "+r)
		s.db.Exec(ctx, "DROP ROLE "+r)
	})
	u := mustParseURL(t, admin)
	u.User = url.UserPassword(role, password)
	sc := *s
	sc.pgURL = u.String()
	b := sc.start(t, "no-insert", "--migrate=false", "--create-tables=false", "--fatal-retry-timeout", "2s")
	took, out := requireExit(t, b, 1, time.Minute)
	requireLogHas(t, out, "permission denied for table "+s.table, "GRANT SELECT, INSERT, UPDATE ON "+s.table+" TO "+role, "--fatal-retry-timeout")
	if took < 2*time.Second {
		t.Errorf("exited after %v: a refused privilege is retried for --fatal-retry-timeout (2s) first", took)
	}
	if n := errorLines(out); n != 1 {
		t.Errorf("%d ERROR lines, want one clear one", n)
	}
	if strings.Contains(out, password) {
		t.Errorf("the log shows the role's password")
	}
	if n := countRows(t, s.db, s.table); n != 0 {
		t.Errorf("%d rows written by a role without INSERT", n)
	}
}

func TestATakenMetricsPortExitsTwoAtOnce(t *testing.T) {
	s := newScenario(t, 1)
	s.produce(t, 10)
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	for _, tc := range []struct {
		name  string
		extra []string
	}{
		{"run", nil},
		{"run --until-caught-up", []string{"--until-caught-up"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := s.start(t, "taken-port", append([]string{"--metrics-addr=" + taken.Addr().String()}, tc.extra...)...)
			took, out := requireExit(t, b, 2, 30*time.Second)
			requireLogHas(t, out, "--metrics-addr "+taken.Addr().String(), "address already in use", "--metrics-addr ''")
			if took > 3*time.Second {
				t.Errorf("exited after %v, want at once", took)
			}
			if strings.Contains(out, "partitions assigned") || strings.Contains(out, "migrat") {
				t.Errorf("the bridge went on before it had its port:\n%s", out)
			}
		})
	}
}

func TestUntilCaughtUpGivesUpWhenAServerIsDown(t *testing.T) {
	s := newScenario(t, 1)
	s.produce(t, 10)
	down := closedAddr(t)
	for _, tc := range []struct {
		name  string
		args  []string
		names string // what the message must name
	}{
		{"postgres down", bridgeArgs(s.kafka.Brokers(), s.topic, s.table, "--pg-url", "postgres://kafka2pg@"+down+"/x?sslmode=disable"), "connection refused"},
		{"kafka down", bridgeArgs(down, s.topic, s.table, "--pg-url", s.pgURL), "check the topics " + s.topic + " on " + down},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := startBridge(t, strings.ReplaceAll(tc.name, " ", "-"), append(tc.args, "--until-caught-up", "--caught-up-timeout", "3s")...)
			took, out := requireExit(t, b, 1, time.Minute)
			requireLogHas(t, out, "--caught-up-timeout", tc.names, "connection refused")
			if took < 3*time.Second || took > 20*time.Second {
				t.Errorf("exited after %v, want soon after --caught-up-timeout (3s)", took)
			}
			if n := errorLines(out); n != 1 {
				t.Errorf("%d ERROR lines, want one clear one", n)
			}
		})
	}
}

func TestSigtermDuringAGroupJoinExitsWithinTheShutdownTimeout(t *testing.T) {
	s := newScenario(t, 2)
	s.produce(t, 100)
	// A joins with the default session and rebalance timeouts, then is
	// frozen: B's join waits for A to rejoin until A's session expires.
	a := s.start(t, "A")
	if !a.waitLog("partitions assigned", time.Minute) {
		t.Fatalf("A never joined (%s)", a.status())
	}
	s.waitProgress(t, nil, time.Minute, a)
	a.signal(t, syscall.SIGSTOP)
	t.Cleanup(func() { a.signal(t, syscall.SIGCONT) })
	b := s.start(t, "B", "--shutdown-timeout", "3s")
	if !b.waitLog("kafka2pg running", time.Minute) {
		t.Fatalf("B never started (%s)", b.status())
	}
	time.Sleep(time.Second) // B is in its JoinGroup, which waits for A: the schedule
	if b.logged("partitions assigned") {
		t.Fatalf("B joined while A was frozen: no join to interrupt")
	}
	sent := time.Now()
	b.signal(t, syscall.SIGTERM)
	if !b.wait(30 * time.Second) {
		b.kill(t)
		t.Fatalf("B still running 30 s after SIGTERM during its join")
	}
	took := b.ended.Sub(sent)
	t.Logf("B exited %s %v after SIGTERM during its group join", b.status(), took.Round(time.Millisecond))
	// A member that never got its first assignment has nothing to flush or
	// hand over: it gives its leave a second, not the whole deadline.
	if took > 3*time.Second {
		t.Errorf("B took %v to exit after SIGTERM during its first join, want within --shutdown-timeout (3s)", took)
	}
	if code := b.state.ExitCode(); code != 0 {
		t.Errorf("B: %s, want exit status 0 (a graceful stop)", b.status())
	}
}

func TestASecondSigtermDuringASlowFlushStopsAtOnceAndKeepsNothingHalfWritten(t *testing.T) {
	s := newScenario(t, 1)
	s.produce(t, 100)
	addr := freeAddr(t)
	b := s.start(t, "slow", append([]string{"--metrics-addr=" + addr}, fastGroupFlags...)...)
	s.waitProgress(t, nil, time.Minute, b)
	slow := pgx.Identifier{"public", s.table + "_slow"}.Sanitize()
	for _, q := range []string{
		"CREATE FUNCTION " + slow + "() RETURNS trigger LANGUAGE plpgsql AS $$BEGIN PERFORM pg_sleep(120); RETURN NULL; END$$",
		"CREATE TRIGGER slow BEFORE INSERT ON " + tableName(s.table) + " FOR EACH STATEMENT EXECUTE FUNCTION " + slow + "()",
	} {
		if _, err := s.db.Exec(t.Context(), q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	s.produce(t, 100)
	pollUntil(t, time.Minute, "the bridge's COPY to sleep in the trigger", func() (bool, string) {
		requireRunning(t, b)
		var n int
		err := s.db.QueryRow(t.Context(), `SELECT count(*) FROM pg_stat_activity WHERE application_name = 'kafka2pg' AND wait_event = 'PgSleep'`).Scan(&n)
		return err == nil && n > 0, fmt.Sprintf("%d sleeping, %v", n, err)
	})
	before := countRows(t, s.db, s.table)
	b.signal(t, syscall.SIGTERM)
	time.Sleep(time.Second) // the graceful stop waits for the flush: the schedule
	requireRunning(t, b)
	if code, body := scrape("http://" + addr + "/healthz"); code != 200 {
		t.Errorf("/healthz during the shutdown flush: %d %s, want 200", code, body)
	}
	if code, body := scrape("http://" + addr + "/readyz"); code != 503 || !strings.Contains(body, "stopping") {
		t.Errorf("/readyz during the shutdown flush: %d %s, want 503 stopping", code, body)
	}
	sent := time.Now()
	b.signal(t, syscall.SIGTERM)
	if !b.wait(10 * time.Second) {
		t.Fatalf("still running 10 s after the second SIGTERM")
	}
	took := b.ended.Sub(sent)
	t.Logf("exited %s %v after the second SIGTERM", b.status(), took.Round(time.Millisecond))
	if code := b.state.ExitCode(); code != 143 {
		t.Errorf("%s after the second SIGTERM, want exit status 143", b.status())
	}
	if took > 2*time.Second {
		t.Errorf("exited %v after the second SIGTERM, want within 2 s", took)
	}
	// The sleeping backend's transaction must roll back: end it (Postgres
	// notices the closed connection only after the sleep), and look.
	if _, err := s.db.Exec(t.Context(), `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'kafka2pg' AND datname = current_database()`); err != nil {
		t.Fatal(err)
	}
	pollUntil(t, time.Minute, "the bridge's backends to end", func() (bool, string) {
		var n int
		err := s.db.QueryRow(t.Context(), `SELECT count(*) FROM pg_stat_activity WHERE application_name = 'kafka2pg' AND datname = current_database()`).Scan(&n)
		return err == nil && n == 0, fmt.Sprintf("%d left, %v", n, err)
	})
	if _, err := s.db.Exec(t.Context(), "DROP TRIGGER slow ON "+tableName(s.table)); err != nil {
		t.Fatal(err)
	}
	if after := countRows(t, s.db, s.table); after != before {
		t.Errorf("%d rows after the hard stop, %d before: the interrupted batch was half-written", after, before)
	}
	if durable := totalDurable(s.durableOffsets(t)); int(durable) != before {
		t.Errorf("next_offset sums to %d with %d rows: rows and offsets disagree", durable, before)
	}
	// The hard stop left the group without a word: the next member waits
	// for the session timeout (6 s here).
	s.runUntilCaughtUp(t, "final", time.Minute, fastGroupFlags...)
	s.verifyFinalState(t)
}
