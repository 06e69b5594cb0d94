package ingest_test

import (
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/kafka2pg/kafka2pg/decode"
	"github.com/kafka2pg/kafka2pg/ingest"
	"github.com/kafka2pg/kafka2pg/internal/pgtest"
	"github.com/kafka2pg/kafka2pg/stream"
)

// The write deadline, against a real Postgres made to stop answering: a
// table locked by another session, a backend frozen with SIGSTOP (as a
// paused VM or a hung pooler would leave it). In every case the write must
// fail at its deadline, naming the step it waited on, and its connection
// must be closed, never returned to the pool: the next write runs on a new
// backend.

const testWriteTimeout = time.Second

// deadlineWriter is a Writer into "orders" with a short write deadline,
// its table ready.
func deadlineWriter(t *testing.T, pool *pgxpool.Pool, mapper ingest.RowMapper) *ingest.Writer {
	t.Helper()
	return readyWriter(t, pool, ingest.Config{Group: "g", WriteTimeout: testWriteTimeout, ClaimLockTimeout: 300 * time.Millisecond,
		Sinks: map[string]ingest.Sink{topic: {Table: decode.RawTable("public", topic, decode.ValueJSON), Mapper: mapper}}})
}

// admin is a connection of the test's own, outside the pool under test.
func admin(t *testing.T, url string) *pgx.Conn {
	t.Helper()
	c, err := pgx.Connect(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	return c
}

// assertClosed checks that the connection of backend pid is out of the
// pool and that the backend ended: the client closed it.
func assertClosed(t *testing.T, pool *pgxpool.Pool, adm *pgx.Conn, pid uint32) {
	t.Helper()
	poll(t, "the pool holds no connection (the timed-out one is destroyed)", func() bool { return pool.Stat().TotalConns() == 0 })
	poll(t, "the backend of the timed-out connection ends", func() bool {
		var n int
		if err := adm.QueryRow(t.Context(), `SELECT count(*) FROM pg_stat_activity WHERE pid = $1`, pid).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n == 0
	})
}

// assertDeadline checks that err is a *DeadlineError at step, returned at
// its deadline and not much later.
func assertDeadline(t *testing.T, err error, step ingest.Step, deadline, elapsed time.Duration) {
	t.Helper()
	var de *ingest.DeadlineError
	if !errors.As(err, &de) {
		t.Fatalf("error %v (after %s), want a *DeadlineError", err, elapsed)
	}
	if de.Step != step || de.Partition != 0 || de.Topic != topic || de.Deadline != deadline {
		t.Errorf("DeadlineError %+v, want step %q on %s/0 with a deadline of %s", de, step, topic, deadline)
	}
	if !errors.Is(err, context.DeadlineExceeded) || !ingest.Retryable(err) {
		t.Errorf("%v: want errors.Is context.DeadlineExceeded and Retryable", err)
	}
	if elapsed < deadline || elapsed > deadline+2*time.Second {
		t.Errorf("failed after %s, want at its deadline of %s", elapsed, deadline)
	}
	t.Logf("deadline passed after %s at step %q: %v", elapsed.Round(time.Millisecond), de.Step, err)
}

// canFreeze skips the test unless it may freeze the backend pid: the
// server runs on this machine, and the test may signal it.
func canFreeze(t *testing.T, pid uint32) {
	t.Helper()
	if _, _, local := pgtest.Env(t); !local {
		t.Skip("freezing a backend needs the Postgres of scripts/pg-up.sh on this machine: leave KAFKA2PG_TEST_PG_URL unset or point it there")
	}
	if err := syscall.Kill(int(pid), 0); err != nil {
		t.Skipf("signal backend %d: %v (run the tests as root or as the server's OS user)", pid, err)
	}
}

// freeze stops the Postgres backend pid with SIGSTOP until thaw (or the
// test's end) continues it. Call canFreeze first. Safe on any goroutine.
func freeze(t *testing.T, pid uint32) (thaw func()) {
	if err := syscall.Kill(int(pid), syscall.SIGSTOP); err != nil {
		t.Errorf("SIGSTOP of backend %d: %v", pid, err)
	}
	var once sync.Once
	thaw = func() { once.Do(func() { _ = syscall.Kill(int(pid), syscall.SIGCONT) }) }
	t.Cleanup(thaw)
	return thaw
}

func TestAWriteBehindALockedTableFailsAtItsDeadlineAndClosesItsConnection(t *testing.T) {
	pool, url := ingest.OnePool(t, nil)
	w := deadlineWriter(t, pool, decode.RawMapper{Format: decode.ValueJSON})
	ctx := t.Context()
	c := claim(t, w, 0)
	pid := ingest.BackendPID(t, pool)

	locker := admin(t, url)
	if _, err := locker.Exec(ctx, `BEGIN; LOCK TABLE orders IN ACCESS EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	type result struct {
		err     error
		elapsed time.Duration
	}
	done := make(chan result, 1)
	go func() {
		start := time.Now()
		err := w.Write(ctx, batch(0, c.Epoch, 0, 100))
		done <- result{err, time.Since(start)}
	}()
	var seen ingest.WriteInFlight
	poll(t, "the write shows in flight, waiting at its COPY", func() bool {
		f := w.InFlight()
		if len(f) == 1 && f[0].Step == ingest.StepCopy {
			seen = f[0]
			return true
		}
		return false
	})
	if seen.Topic != topic || seen.Partition != 0 || seen.Overdue(time.Now()) || seen.Deadline.Sub(seen.Began) != testWriteTimeout {
		t.Errorf("in flight: %+v, want %s/0 with a deadline %s after its start, not overdue yet", seen, topic, testWriteTimeout)
	}
	r := <-done
	assertDeadline(t, r.err, ingest.StepCopy, testWriteTimeout, r.elapsed)
	if f := w.InFlight(); len(f) != 0 {
		t.Errorf("in flight after the write failed: %+v", f)
	}
	assertClosed(t, pool, locker, pid)

	// The lock goes; the partition claims again (what the reader does
	// after any failed write) and the batch lands, on a new backend.
	if _, err := locker.Exec(ctx, `COMMIT`); err != nil {
		t.Fatal(err)
	}
	c = claim(t, w, 0)
	if c.NextOffset != -1 {
		t.Fatalf("claimed next_offset %d after a write that failed before COMMIT, want -1 (nothing stored)", c.NextOffset)
	}
	if err := w.Write(ctx, batch(0, c.Epoch, 0, 100)); err != nil {
		t.Fatalf("the write after the lock went: %v", err)
	}
	if n := queryInt(t, pool, `SELECT count(DISTINCT kafka_offset) FROM orders`); n != 100 {
		t.Errorf("%d rows, want 100", n)
	}
	if again := ingest.BackendPID(t, pool); again == pid {
		t.Errorf("the next write ran on backend %d, the timed-out one", pid)
	}
}

// freezingMapper freezes the backend of *pid while the COPY streams, at
// the record of offset at, once. It is a RowMapper only, so the COPY asks
// it for every row as it streams.
type freezingMapper struct {
	m    decode.RawMapper
	t    *testing.T
	pid  *uint32
	at   int64
	once sync.Once
}

func (m *freezingMapper) Row(r *stream.Record, dst []any) ([]any, error) {
	if r.Offset == m.at {
		m.once.Do(func() { freeze(m.t, *m.pid) })
	}
	return m.m.Row(r, dst)
}

func TestABackendFrozenMidCopyFailsTheWriteAtItsDeadline(t *testing.T) {
	pool, url := ingest.OnePool(t, nil)
	m := &freezingMapper{m: decode.RawMapper{Format: decode.ValueJSON}, t: t, pid: new(uint32), at: 1000}
	w := deadlineWriter(t, pool, m)
	ctx := t.Context()
	c := claim(t, w, 0)
	*m.pid = ingest.BackendPID(t, pool)
	canFreeze(t, *m.pid)

	// 20,000 rows: more than the socket buffers hold, so the COPY blocks
	// writing to the frozen backend, not only waiting for its answer. And
	// twice the rows the deadline is meant for: twice the deadline.
	start := time.Now()
	err := w.Write(ctx, batch(0, c.Epoch, 0, 20000))
	assertDeadline(t, err, ingest.StepCopy, 2*testWriteTimeout, time.Since(start))
	_ = syscall.Kill(int(*m.pid), syscall.SIGCONT)
	assertClosed(t, pool, admin(t, url), *m.pid)

	c = claim(t, w, 0)
	if err := w.Write(ctx, batch(0, c.Epoch, 0, 20000)); err != nil {
		t.Fatalf("the write after the backend was continued: %v", err)
	}
	if n := queryInt(t, pool, `SELECT count(DISTINCT kafka_offset) FROM orders`); n != 20000 {
		t.Errorf("%d rows, want 20000", n)
	}
}

// commitFreezer freezes the backend of a connection as it sends COMMIT,
// once armed, once.
type commitFreezer struct {
	t     *testing.T
	armed atomic.Bool
	once  sync.Once
	pid   uint32
}

func (f *commitFreezer) TraceQueryStart(ctx context.Context, conn *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	if data.SQL == "commit" && f.armed.Load() {
		f.once.Do(func() {
			f.pid = conn.PgConn().PID()
			freeze(f.t, f.pid)
		})
	}
	return ctx
}

func (f *commitFreezer) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func TestACommitPastItsDeadlineIsSettledByTheNextClaim(t *testing.T) {
	fr := &commitFreezer{t: t}
	pool, url := ingest.OnePool(t, fr)
	w := deadlineWriter(t, pool, decode.RawMapper{Format: decode.ValueJSON})
	ctx := t.Context()
	c := claim(t, w, 0)
	canFreeze(t, ingest.BackendPID(t, pool))
	fr.armed.Store(true)

	start := time.Now()
	err := w.Write(ctx, batch(0, c.Epoch, 0, 100))
	assertDeadline(t, err, ingest.StepCommit, testWriteTimeout, time.Since(start))
	// The backend gets the COMMIT when it runs again, and may commit: the
	// outcome is unknown to the writer, whose connection is gone.
	_ = syscall.Kill(int(fr.pid), syscall.SIGCONT)
	assertClosed(t, pool, admin(t, url), fr.pid)

	c = claim(t, w, 0)
	committed := c.NextOffset == 100
	if !committed && c.NextOffset != -1 {
		t.Fatalf("claimed next_offset %d, want -1 or 100", c.NextOffset)
	}
	t.Logf("the COMMIT sent past the deadline committed: %v", committed)
	if committed {
		// A blind retry of the batch is refused by the fence.
		if err := w.Write(ctx, batch(0, c.Epoch, 0, 100)); !errors.Is(err, stream.ErrFenced) {
			t.Fatalf("a blind retry of a committed batch: %v, want ErrFenced", err)
		}
	} else if err := w.Write(ctx, batch(0, c.Epoch, 0, 100)); err != nil {
		t.Fatal(err)
	}
	if err := w.Write(ctx, batch(0, c.Epoch, 100, 200)); err != nil {
		t.Fatal(err)
	}
	if n := queryInt(t, pool, `SELECT count(*) FROM orders`); n != 200 {
		t.Errorf("%d rows, want 200: every offset once", n)
	}
	if n := queryInt(t, pool, `SELECT count(DISTINCT kafka_offset) FROM orders`); n != 200 {
		t.Errorf("%d distinct offsets, want 200", n)
	}
}

func TestAClaimOnAFrozenBackendFailsAtItsDeadline(t *testing.T) {
	pool, url := ingest.OnePool(t, nil)
	w := deadlineWriter(t, pool, decode.RawMapper{Format: decode.ValueJSON})
	pid := ingest.BackendPID(t, pool)
	canFreeze(t, pid)
	thaw := freeze(t, pid)

	start := time.Now()
	_, err := w.Claim(t.Context(), topic, []int32{0})
	elapsed := time.Since(start)
	var de *ingest.DeadlineError
	if !errors.As(err, &de) || de.Step != ingest.StepClaim || de.Partition != 0 || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("claim on a frozen backend: %v, want a *DeadlineError of step claim on partition 0", err)
	}
	// A claim's deadline: its lock waits (3 × 300ms) and the write timeout.
	if want := 3*300*time.Millisecond + testWriteTimeout; elapsed < want || elapsed > want+2*time.Second {
		t.Errorf("the claim failed after %s, want at its deadline of %s", elapsed, want)
	}
	t.Logf("claim deadline passed after %s: %v", elapsed.Round(time.Millisecond), err)
	thaw()
	assertClosed(t, pool, admin(t, url), pid)
	if _, err := w.Claim(t.Context(), topic, []int32{0}); err != nil {
		t.Fatalf("claim on a new connection: %v", err)
	}
}

// A combined transaction (TableWriters) past its deadline fails every batch
// in it, each with a DeadlineError naming its own partition.
func TestACombinedTransactionPastItsDeadlineFailsEachOfItsBatches(t *testing.T) {
	url, pool := pgtest.MigratedPool(t)
	w, err := ingest.New(pool, ingest.Config{Group: "g", WriteTimeout: testWriteTimeout, TableWriters: 1,
		Sinks: map[string]ingest.Sink{topic: {Table: decode.RawTable("public", topic, decode.ValueJSON), Mapper: decode.RawMapper{Format: decode.ValueJSON}}}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	if err := w.EnsureTables(ctx, true); err != nil {
		t.Fatal(err)
	}
	locker := admin(t, url)
	if _, err := locker.Exec(ctx, `BEGIN; LOCK TABLE orders IN ACCESS EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	// Partition 0 takes the table's one writer slot and waits on the
	// lock; 1 and 2 wait in the lane, then share the next transaction.
	epochs := map[int32]int64{}
	for p := range int32(3) {
		epochs[p] = claim(t, w, p).Epoch
	}
	errs := make([]error, 3)
	var wg sync.WaitGroup
	wg.Go(func() { errs[0] = w.Write(ctx, batch(0, epochs[0], 0, 100)) })
	poll(t, "partition 0 writes", func() bool { return len(w.InFlight()) == 1 })
	for p := int32(1); p < 3; p++ {
		wg.Go(func() { errs[p] = w.Write(ctx, batch(p, epochs[p], 0, 100)) })
	}
	poll(t, "partitions 1 and 2 wait in the lane", func() bool { return ingest.LaneWaiting(w, `"public"."orders"`) == 2 })
	poll(t, "partitions 1 and 2 write in one transaction", func() bool {
		f := w.InFlight()
		return len(f) == 2 && f[0].Partition == 1 && f[1].Partition == 2 && f[0].Began == f[1].Began
	})
	wg.Wait()
	for p, err := range errs {
		var de *ingest.DeadlineError
		if !errors.As(err, &de) || de.Partition != int32(p) || de.Topic != topic {
			t.Errorf("partition %d: %v, want a DeadlineError naming it", p, err)
		}
	}
	if _, err := locker.Exec(ctx, `COMMIT`); err != nil {
		t.Fatal(err)
	}
	for p := range int32(3) {
		if err := w.Write(ctx, batch(p, claim(t, w, p).Epoch, 0, 100)); err != nil {
			t.Fatalf("partition %d after the lock went: %v", p, err)
		}
	}
	if n := queryInt(t, pool, `SELECT count(*) FROM orders`); n != 300 {
		t.Errorf("%d rows, want 300", n)
	}
}

// A connection that cannot be made within connect_timeout fails a claim
// with a context.DeadlineExceeded of its own: that is a connection failure,
// long before the claim's deadline, not a claim past its deadline.
func TestAConnectTimeoutIsNotAClaimPastItsDeadline(t *testing.T) {
	// A listener that accepts and never answers: the startup message waits.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			t.Cleanup(func() { c.Close() })
		}
	}()
	pool, err := pgxpool.New(t.Context(), "postgres://nobody@"+ln.Addr().String()+"/db?sslmode=disable&connect_timeout=1")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	w, err := ingest.New(pool, ingest.Config{Group: "g", WriteTimeout: time.Minute,
		Sinks: map[string]ingest.Sink{topic: {Table: decode.RawTable("public", topic, decode.ValueJSON), Mapper: decode.RawMapper{Format: decode.ValueJSON}}}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = w.Claim(t.Context(), topic, []int32{0})
	var de *ingest.DeadlineError
	if err == nil || errors.As(err, &de) {
		t.Fatalf("claim through a connect timeout: %v, want a connection error, not a *DeadlineError", err)
	}
	if got := ingest.Cause(err); got != ingest.CauseConnection && got != ingest.CauseTimeout {
		t.Errorf("Cause(%v) = %q", err, got)
	}
}
