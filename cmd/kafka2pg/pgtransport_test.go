package main

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/kafka2pg/kafka2pg/ingest"
	"github.com/kafka2pg/kafka2pg/internal/pgtest"
)

func TestAConnectionGetsAConnectTimeoutUnlessTheURLSetsOne(t *testing.T) {
	for _, tc := range []struct {
		url  string
		want time.Duration
	}{
		{url: "postgres://u@h/db", want: defaultConnectTimeout},
		{url: "postgres://u@h/db?connect_timeout=3", want: 3 * time.Second},
	} {
		cc, err := pgconn.ParseConfig(tc.url)
		if err != nil {
			t.Fatalf("parse %s: %v", tc.url, err)
		}
		if err := configureConn(cc, "test", 0); err != nil {
			t.Fatalf("configureConn(%s): %v", tc.url, err)
		}
		if cc.ConnectTimeout != tc.want {
			t.Errorf("%s: connect timeout %v, want %v", tc.url, cc.ConnectTimeout, tc.want)
		}
		if cc.DialFunc == nil {
			t.Errorf("%s: no dialer with keepalives and TCP_USER_TIMEOUT", tc.url)
		}
	}
}

func TestSessionsThatCannotWriteAreDiscarded(t *testing.T) {
	for _, tc := range []struct {
		code string
		want bool
	}{
		{"25006", true}, {"08006", true}, {"08P01", true}, {"57P01", true}, {"57P03", true},
		{"23505", false}, {"42P01", false}, {"40001", false}, {"57014", false},
	} {
		if got := ingest.DiscardsSession(&pgconn.PgError{Code: tc.code}); got != tc.want {
			t.Errorf("DiscardsSession(%s) = %v, want %v", tc.code, got, tc.want)
		}
	}
}

// A session that went read-only (as every session opened while a database
// had default_transaction_read_only on stays, after the reset) must leave
// the pool at its first refused write, so that the next write gets a
// session that can write.
func TestAReadOnlySessionLeavesThePoolAtItsFirstRefusedWrite(t *testing.T) {
	url := pgtest.URL(t)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	pool, err := newPool(ctx, url+"&pool_max_conns=1", "test")
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()

	c, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	firstPID := c.Conn().PgConn().PID()
	if _, err := c.Exec(ctx, "SET SESSION default_transaction_read_only = on"); err != nil {
		t.Fatal(err)
	}
	_, err = c.Exec(ctx, "CREATE TABLE t (x int)")
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "25006" {
		t.Fatalf("CREATE TABLE in a read-only session: %v, want SQLSTATE 25006", err)
	}
	if !c.Conn().IsClosed() {
		t.Errorf("the read-only session is still open after SQLSTATE 25006: it would go back to the pool")
	}
	c.Release()

	var readOnly string
	var pid uint32
	if err := pool.QueryRow(ctx, "SELECT current_setting('default_transaction_read_only'), pg_backend_pid()").Scan(&readOnly, &pid); err != nil {
		t.Fatal(err)
	}
	if readOnly != "off" || pid == firstPID {
		t.Errorf("next session: default_transaction_read_only=%s, backend %d (the refused one was %d): want off on a new backend", readOnly, pid, firstPID)
	}
	if _, err := pool.Exec(ctx, "CREATE TABLE t (x int)"); err != nil {
		t.Errorf("write after the read-only session left: %v", err)
	}
}
