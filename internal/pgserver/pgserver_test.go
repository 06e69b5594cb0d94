package pgserver

import (
	"context"
	"errors"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// TestLossyFailover makes a primary and an asynchronous standby, stops the
// standby's walreceiver until the primary holds WAL it cannot send, commits
// a marker row, kills the primary and promotes the standby: the promoted
// standby must lack the marker and accept writes.
func TestLossyFailover(t *testing.T) {
	t.Parallel()
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
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	primary, err := set.Primary(ctx, "primary", "")
	if err != nil {
		t.Fatal(err)
	}
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
