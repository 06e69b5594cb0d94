package integration_test

import (
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kafka2pg/kafka2pg/internal/pgtest"
)

// Fault cases 2 and 3: Postgres goes away under the bridge, whole or one
// connection at a time.

// TestFault02PostgresImmediateShutdown stops Postgres with `pg_ctl stop -m
// immediate` (a crash: no checkpoint, every connection cut) in the middle of
// the stream, and starts it again a few seconds later. The bridge must stay
// up, answer 503 on /readyz while Postgres is gone and 200 once it is back,
// and resume from the offsets Postgres recovered.
func TestFault02PostgresImmediateShutdown(t *testing.T) {
	requireFullFaults(t)
	if _, _, ok := pgtest.Env(t); !ok {
		t.Skipf("needs the Postgres of scripts/pg-up.sh (make pg-up), which the test stops and starts; %s points elsewhere", pgtest.EnvURL)
	}
	fc := newFaultCase(t, "2", "Postgres immediate shutdown and restart", 4, nil)
	s := fc.s
	const trials = 3
	fc.inject("pg_ctl stop -m immediate mid-stream, down 3-6 s, pg_ctl start")
	addr := freePort(t)
	readyz := "http://" + addr + "/readyz"
	flags := faultFlags(s.kafka)
	b := s.start(t, "A", append([]string{"--metrics-addr=" + addr}, flags...)...)
	prod := fc.feed.start(t, 20, 20*time.Millisecond, 1_000_000)
	s.waitProgress(t, nil, 30*time.Second, b)
	waitHTTPStatus(t, readyz, 200, 30*time.Second, b)

	var notReadyAfter, readyAfter []string
	for i := range trials {
		at := s.runFor(t, randomDuration(time.Second, 3*time.Second), b)
		t.Logf("trial %d: stopping Postgres (immediate); durable next_offset %s", i, formatOffsets(at))
		pgtest.PgCtl(t, "stop", "-m", "immediate")
		stopped := time.Now()
		waitHTTPStatus(t, readyz, 503, 30*time.Second, b)
		notReadyAfter = append(notReadyAfter, time.Since(stopped).Round(100*time.Millisecond).String())
		down := randomDuration(3*time.Second, 6*time.Second)
		for time.Since(stopped) < down {
			requireRunning(t, b)
			if code, err := httpStatus(readyz); err != nil || code != 503 {
				t.Fatalf("trial %d: /readyz while Postgres is down: status %d, %v; want 503", i, code, err)
			}
			time.Sleep(200 * time.Millisecond) // the outage's length is the schedule
		}
		pgtest.PgCtl(t, "start", "-w")
		started := time.Now()
		s.db.Reset() // the pool's connections died with the server
		s.waitProgress(t, at, 2*time.Minute, b)
		waitHTTPStatus(t, readyz, 200, time.Minute, b)
		readyAfter = append(readyAfter, time.Since(started).Round(100*time.Millisecond).String())
		fc.trial()
	}
	fc.note(t, "the bridge stayed up; /readyz answered 503 %v after each stop and 200 again %v after each start (while every partition advanced)",
		notReadyAfter, readyAfter)
	prod.stopAndCheck(t)
	b.signal(t, syscall.SIGTERM)
	b.requireExitZero(t, time.Minute)
	fc.finish(t, nil, flags...)
}

// TestFault03ConnectionTerminated terminates the bridge's Postgres backend
// (pg_terminate_backend) in the middle of its COPY, and in the middle of
// its COMMIT: the ambiguous commit, where the bridge cannot know whether the
// transaction committed and must re-read its offsets from Postgres rather
// than retry. Both outcomes are provoked:
//   - rolled back: a deferred constraint trigger on kafka2pg.offsets makes
//     COMMIT sleep before it commits, and the backend dies in that sleep;
//   - committed (full matrix only, it changes a server setting):
//     synchronous_standby_names names a standby that does not exist, so
//     COMMIT waits for it after the commit is durable locally, and the
//     backend dies in that wait.
//
// The COPY is caught the same way, with a statement trigger on the target
// table. The bridge must stay up and every partition must move on.
func TestFault03ConnectionTerminated(t *testing.T) {
	parallel(t)
	fc := newFaultCase(t, "3", "connection terminated during COPY and COMMIT", 3, nil)
	s := fc.s
	modes := []string{"copy", "commit", "copy", "commit"}
	if fullFaults() {
		modes = []string{"copy", "commit", "commit-durable", "copy", "commit", "commit-durable", "copy", "commit", "commit-durable"}
	}
	fc.inject("pg_terminate_backend of the bridge's backend while it sleeps in a trigger during COPY, during COMMIT before the commit (rolled back), and (full matrix) while COMMIT waits for a synchronous standby after the commit is durable (committed)")
	flags := faultFlags(s.kafka)
	b := s.start(t, "A", flags...)
	prod := fc.feed.start(t, 20, 20*time.Millisecond, 1_000_000)
	s.waitProgress(t, nil, 30*time.Second, b)
	installSlowTriggers(t, fc)

	outcomes := map[string][]string{}
	for i, mode := range modes {
		at := s.runFor(t, 500*time.Millisecond, b)
		pids, outcome := terminateDuring(t, fc, mode, b)
		outcomes[mode] = append(outcomes[mode], outcome)
		t.Logf("trial %d (%s): terminated backends %v: %s", i, mode, pids, outcome)
		s.waitProgress(t, at, time.Minute, b)
		fc.trial()
	}
	for _, mode := range []string{"copy", "commit", "commit-durable"} {
		if len(outcomes[mode]) > 0 {
			fc.note(t, "%s: %s", mode, strings.Join(outcomes[mode], ", "))
		}
	}
	fc.note(t, "the bridge stayed up and every partition advanced after every termination")
	prod.stopAndCheck(t)
	b.signal(t, syscall.SIGTERM)
	b.requireExitZero(t, time.Minute)
	fc.finish(t, nil, flags...)
}

// installSlowTriggers adds, in the test's database, a switchboard table and
// two triggers that sleep while their switch is on: one before each COPY
// into the target table, one deferred to COMMIT of any transaction that
// updated kafka2pg.offsets.
func installSlowTriggers(t testing.TB, fc *faultCase) {
	t.Helper()
	stmts := []string{
		`CREATE TABLE public.k2p_fault_switch (slow_copy boolean NOT NULL, slow_commit boolean NOT NULL)`,
		`INSERT INTO public.k2p_fault_switch VALUES (false, false)`,
		`CREATE FUNCTION public.k2p_fault_slow_copy() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  -- Sleep while the switch is on (at most 10 s): the test kills the
  -- backend in here; the others go on as soon as it turns the switch off.
  WHILE (SELECT slow_copy FROM public.k2p_fault_switch) AND clock_timestamp() < statement_timestamp() + interval '10 s' LOOP
    PERFORM pg_sleep(0.02);
  END LOOP;
  RETURN NULL;
END $$`,
		`CREATE FUNCTION public.k2p_fault_slow_commit() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  -- Sleep while the switch is on (at most 10 s): the test kills the
  -- backend in here; the others go on as soon as it turns the switch off.
  WHILE (SELECT slow_commit FROM public.k2p_fault_switch) AND clock_timestamp() < statement_timestamp() + interval '10 s' LOOP
    PERFORM pg_sleep(0.02);
  END LOOP;
  RETURN NULL;
END $$`,
		`CREATE TRIGGER k2p_fault_slow_copy BEFORE INSERT ON ` + tableName(fc.s.table) + `
FOR EACH STATEMENT EXECUTE FUNCTION public.k2p_fault_slow_copy()`,
		`CREATE CONSTRAINT TRIGGER k2p_fault_slow_commit AFTER UPDATE ON kafka2pg.offsets
DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION public.k2p_fault_slow_commit()`,
	}
	for _, q := range stmts {
		if _, err := fc.s.db.Exec(t.Context(), q); err != nil {
			t.Fatalf("install fault triggers: %s: %v", q, err)
		}
	}
}

// terminateDuring turns the fault on, waits for a bridge backend caught in
// it, terminates it, and turns the fault off. It returns the terminated
// pids and what became of their transactions.
func terminateDuring(t testing.TB, fc *faultCase, mode string, b *bridge) ([]int32, string) {
	t.Helper()
	db := fc.s.db
	exec := func(q string) {
		t.Helper()
		if _, err := db.Exec(t.Context(), q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	var on, off, caught string
	switch mode {
	case "copy":
		on, off = `UPDATE public.k2p_fault_switch SET slow_copy = true`, `UPDATE public.k2p_fault_switch SET slow_copy = false`
		caught = `query ILIKE 'copy %' AND wait_event = 'PgSleep'`
	case "commit":
		on, off = `UPDATE public.k2p_fault_switch SET slow_commit = true`, `UPDATE public.k2p_fault_switch SET slow_commit = false`
		caught = `lower(btrim(query, ' ;')) = 'commit' AND wait_event = 'PgSleep'`
	case "commit-durable":
		on, off = `ALTER SYSTEM SET synchronous_standby_names = 'k2p_fault_no_such_standby'`, `ALTER SYSTEM RESET synchronous_standby_names`
		caught = `wait_event = 'SyncRep'`
	default:
		t.Fatalf("terminateDuring: unknown mode %q", mode)
	}
	reload := func() {
		if mode == "commit-durable" {
			exec(`SELECT pg_reload_conf()`)
		}
	}
	exec(on)
	reload()
	switched := true
	switchOff := func() {
		if switched {
			exec(off)
			reload()
			switched = false
		}
	}
	// A failing test must not leave the server waiting for a standby.
	defer switchOff()

	find := `SELECT pid, (SELECT coalesce(sum(next_offset), 0) FROM kafka2pg.offsets) FROM pg_stat_activity
WHERE datname = current_database() AND application_name = 'kafka2pg' AND state = 'active' AND ` + caught
	var pids []int32
	var durableBefore int64
	pollUntil(t, 30*time.Second, "a bridge backend caught in the "+mode+" fault", func() (bool, string) {
		requireRunning(t, b)
		rows, err := db.Query(t.Context(), find)
		if err != nil {
			return false, err.Error()
		}
		defer rows.Close()
		for rows.Next() {
			var pid int32
			if err := rows.Scan(&pid, &durableBefore); err != nil {
				return false, err.Error()
			}
			pids = append(pids, pid)
		}
		return len(pids) > 0, fmt.Sprintf("%v", rows.Err())
	})
	// Only the first: the others finish normally when the switch is off.
	var terminated bool
	term := `SELECT pg_terminate_backend($1)`
	if err := db.QueryRow(t.Context(), term, pids[0]).Scan(&terminated); err != nil || !terminated {
		t.Fatalf("%s (pid %d): %v, %v", term, pids[0], terminated, err)
	}
	pollUntil(t, 10*time.Second, fmt.Sprintf("backend %d to end", pids[0]), func() (bool, string) {
		var n int
		if err := db.QueryRow(t.Context(), `SELECT count(*) FROM pg_stat_activity WHERE pid = $1`, pids[0]).Scan(&n); err != nil {
			return false, err.Error()
		}
		return n == 0, fmt.Sprintf("%d backends with pid %d", n, pids[0])
	})
	outcome := "rolled back"
	if mode == "commit-durable" {
		// The transaction committed locally before the wait: its offsets
		// must be visible once the wait is over.
		var after int64
		if err := db.QueryRow(t.Context(), `SELECT coalesce(sum(next_offset), 0) FROM kafka2pg.offsets`).Scan(&after); err != nil {
			t.Fatal(err)
		}
		outcome = fmt.Sprintf("committed (sum of next_offset %d while it waited, %d after)", durableBefore, after)
	}
	switchOff()
	return pids[:1], outcome
}
