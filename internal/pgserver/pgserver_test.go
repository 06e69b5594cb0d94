package pgserver

import (
	"context"
	"errors"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// newTestPrimary makes a set that the test's end closes, and its primary.
func newTestPrimary(ctx context.Context, t *testing.T) (*Set, *Server) {
	t.Helper()
	set, err := NewSet("")
	if errors.Is(err, ErrNoServerBinaries) {
		t.Skipf("%v: the test runs servers of its own", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := set.Close(); err != nil {
			t.Error(err)
		}
	})
	primary, err := set.Primary(ctx, "primary", "")
	if err != nil {
		t.Fatal(err)
	}
	return set, primary
}

// TestLossyFailover makes a primary and an asynchronous standby, stops the
// standby's walreceiver until the primary holds WAL it cannot send, commits
// a marker row, kills the primary and promotes the standby: the promoted
// standby must lack the marker and accept writes.
func TestLossyFailover(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	_, primary := newTestPrimary(ctx, t)
	conn, err := pgx.Connect(ctx, primary.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, `CREATE TABLE t (id bigint, pad text)`); err != nil {
		t.Fatal(err)
	}
	standby, err := primary.Standby(ctx, "standby")
	if err != nil {
		t.Fatal(err)
	}
	walReceiver, err := standby.WaitStreaming(ctx, primary)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(walReceiver, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Kill(walReceiver, syscall.SIGCONT) })
	// Each look commits about 2 MB of WAL, until the connection's buffers
	// are full.
	u, err := primary.WaitUnsent(ctx, time.Minute, func() error {
		_, err := conn.Exec(ctx, `INSERT INTO t SELECT g, repeat('x', 1000) FROM generate_series(1, 2000) g`)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `INSERT INTO t VALUES (-1, 'marker')`); err != nil {
		t.Fatal(err)
	}
	var before int64
	if err := primary.QueryRow(ctx, `SELECT count(*) FROM t`, nil, &before); err != nil {
		t.Fatal(err)
	}
	if err := primary.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(walReceiver, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	if err := standby.WaitReplayed(ctx); err != nil {
		t.Fatal(err)
	}
	if err := standby.Promote(ctx); err != nil {
		t.Fatal(err)
	}
	var after, markers int64
	if err := standby.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE id = -1) FROM t`, nil, &after, &markers); err != nil {
		t.Fatal(err)
	}
	t.Logf("sent_lsn %s with %d bytes unsent; %d rows on the primary, %d on the promoted standby", u.SentLSN, u.Bytes, before, after)
	if markers != 0 || after >= before {
		t.Fatalf("the promoted standby holds %d rows (%d markers) of the primary's %d: the failover lost nothing", after, markers, before)
	}
	var inserted int64
	if err := standby.QueryRow(ctx, `INSERT INTO t VALUES (-2, 'after') RETURNING id`, nil, &inserted); err != nil {
		t.Fatalf("the promoted standby takes no writes: %v", err)
	}
}

// TestRestoreBaseBackup takes a base backup, commits a row after it, stops
// the primary cleanly and starts the backup on the primary's port in its
// place: the restored server must lack the row, take writes, and log.
func TestRestoreBaseBackup(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	set, primary := newTestPrimary(ctx, t)
	exec := func(s *Server, q string) {
		t.Helper()
		conn, err := s.Connect(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(context.WithoutCancel(ctx))
		if _, err := conn.Exec(ctx, q); err != nil {
			t.Fatalf("server %s: %s: %v", s.Name, q, err)
		}
	}
	exec(primary, `CREATE TABLE t (id bigint); INSERT INTO t VALUES (1)`)
	backup, err := primary.BaseBackup(ctx, "backup")
	if err != nil {
		t.Fatal(err)
	}
	if backup.Port == primary.Port {
		t.Fatalf("the backup listens on the primary's port %d", primary.Port)
	}
	exec(primary, `INSERT INTO t VALUES (2)`)
	if err := primary.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if err := backup.SetPort(primary.Port); err != nil {
		t.Fatal(err)
	}
	if err := backup.Start(ctx); err != nil {
		t.Fatal(err)
	}
	var ids []int64
	if err := backup.QueryRow(ctx, `SELECT array_agg(id ORDER BY id) FROM t`, nil, &ids); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(ids, []int64{1}) {
		t.Fatalf("the restored backup holds ids %v, want [1]: the row committed after the backup must be missing", ids)
	}
	exec(backup, `INSERT INTO t VALUES (3)`)
	if got := backup.Addr(); got != primary.Addr() {
		t.Errorf("the restored backup's address is %s, want the primary's %s", got, primary.Addr())
	}
	if log := backup.LogTail(20); !strings.Contains(log, "database system is ready to accept connections") {
		t.Errorf("the last lines of the backup's log %s lack the server's start:\n%s", backup.LogPath(), log)
	}
	if n := len(set.Servers()); n != 2 {
		t.Errorf("the set holds %d servers, want 2", n)
	}
}
