package pgsession

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/kafka2pg/kafka2pg/decode"
	"github.com/kafka2pg/kafka2pg/ingest"
	"github.com/kafka2pg/kafka2pg/internal/pgtest"
	"github.com/kafka2pg/kafka2pg/stream"
)

func TestSessionParamsAskForUTF8(t *testing.T) {
	for _, tc := range []struct {
		url, wantApp, wantErr string
	}{
		{url: "postgres://u@h/db", wantApp: "kafka2pg"},
		{url: "postgres://u@h/db?application_name=etl", wantApp: "etl"},
		{url: "postgres://u@h/db?client_encoding=utf-8", wantApp: "kafka2pg"},
		{url: "postgres://u@h/db?client_encoding=Unicode", wantApp: "kafka2pg"},
		{url: "postgres://u@h/db?client_encoding=LATIN1", wantErr: `client_encoding is "LATIN1"`},
		{url: "postgres://u@h/db?client_encoding=SQL_ASCII", wantErr: `client_encoding is "SQL_ASCII"`},
	} {
		cc, err := pgconn.ParseConfig(tc.url)
		if err != nil {
			t.Fatal(err)
		}
		err = Params(cc, "kafka2pg")
		switch {
		case tc.wantErr != "":
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), "set it to UTF8") {
				t.Errorf("%s: %v, want an error saying %s and the fix", tc.url, err, tc.wantErr)
			}
		case err != nil:
			t.Errorf("%s: %v", tc.url, err)
		case cc.RuntimeParams["client_encoding"] != "UTF8" || cc.RuntimeParams["application_name"] != tc.wantApp:
			t.Errorf("%s: session parameters %v, want client_encoding UTF8 and application_name %s", tc.url, cc.RuntimeParams, tc.wantApp)
		}
	}
}

func TestSessionTimeoutsOutlastTheWriteDeadlineUnlessTheURLSetsThem(t *testing.T) {
	for _, tc := range []struct {
		url, wantStatement, wantLock string
		d                            time.Duration
	}{
		{url: "postgres://u@h/db", d: 4 * time.Minute, wantStatement: "240000", wantLock: "240000"},
		{url: "postgres://u@h/db?statement_timeout=5s", d: 4 * time.Minute, wantStatement: "5s", wantLock: "240000"},
		{url: "postgres://u@h/db?options=-c%20lock_timeout%3D1s", d: 4 * time.Minute, wantStatement: "240000"},
		{url: "postgres://u@h/db", d: 0},
	} {
		cc, err := pgconn.ParseConfig(tc.url)
		if err != nil {
			t.Fatal(err)
		}
		Timeouts(cc, tc.d)
		if got := cc.RuntimeParams["statement_timeout"]; got != tc.wantStatement {
			t.Errorf("%s, %s: statement_timeout %q, want %q", tc.url, tc.d, got, tc.wantStatement)
		}
		if got := cc.RuntimeParams["lock_timeout"]; got != tc.wantLock {
			t.Errorf("%s, %s: lock_timeout %q, want %q", tc.url, tc.d, got, tc.wantLock)
		}
	}
}

// A statement_timeout set on the database for interactive sessions (1 ms
// here) fails a plain session's writes, and must not fail kafka2pg's: its
// sessions start with the writer's own.
func TestADatabaseStatementTimeoutOf1msDoesNotFailTheWrites(t *testing.T) {
	url, plain := pgtest.MigratedPool(t)
	ctx := t.Context()
	var db string
	if err := plain.QueryRow(ctx, `SELECT current_database()`).Scan(&db); err != nil {
		t.Fatal(err)
	}
	if _, err := plain.Exec(ctx, `ALTER DATABASE `+pgx.Identifier{db}.Sanitize()+` SET statement_timeout = '1ms'`); err != nil {
		t.Fatal(err)
	}
	plain.Reset() // new sessions take the database's setting
	sink := map[string]ingest.Sink{"t": {Table: decode.RawTable("public", "t", decode.ValueJSON), Mapper: decode.RawMapper{Format: decode.ValueJSON}}}
	b := &stream.Batch{Topic: "t", PrevOffset: -1, FirstOffset: 0, NextOffset: 10000}
	for o := range int64(10000) {
		b.Records = append(b.Records, stream.Record{Topic: "t", Offset: o, Value: []byte(`{"n":` + strconv.FormatInt(o, 10) + `}`)})
	}
	write := func(pool *pgxpool.Pool) error {
		w, err := ingest.New(pool, ingest.Config{Group: "g", Sinks: sink})
		if err != nil {
			t.Fatal(err)
		}
		if err := w.EnsureTables(ctx, true); err != nil {
			return err
		}
		pos, err := w.Claim(ctx, "t", []int32{0})
		if err != nil {
			return err
		}
		b.Epoch = pos[0].Epoch
		return w.Write(ctx, b)
	}

	var pgErr *pgconn.PgError
	if err := write(plain); !errors.As(err, &pgErr) || pgErr.Code != "57014" {
		t.Fatalf("a write on a plain session: %v, want it cancelled by the database's statement_timeout (57014)", err)
	}
	pool, err := NewPool(ctx, url, "test")
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	if err := write(pool); err != nil {
		t.Fatalf("a write on kafka2pg's session: %v", err)
	}
	var n int64
	var st, lt string
	if err := pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM t), current_setting('statement_timeout'), current_setting('lock_timeout')`).Scan(&n, &st, &lt); err != nil {
		t.Fatal(err)
	}
	if n != 10000 || st != "20min" || lt != "20min" {
		t.Errorf("%d rows with statement_timeout %s and lock_timeout %s, want 10000 with 20min (the longest write deadline by default: a combined transaction's)", n, st, lt)
	}
}

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
		if err := Configure(cc, "test", 0); err != nil {
			t.Fatalf("Configure(%s): %v", tc.url, err)
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
	pool, err := NewPool(ctx, url+"&pool_max_conns=1", "test")
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
