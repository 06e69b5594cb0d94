package main

import (
	"bytes"
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/kafka2pg/kafka2pg/ingest"
	"github.com/kafka2pg/kafka2pg/internal/pgtest"
	"github.com/kafka2pg/kafka2pg/schema"
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
		err = sessionParams(cc, "kafka2pg")
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

// A URL that asks for another client encoding stops every command that
// writes or reads records' text before it connects (the port is closed:
// only the setting can be the error).
func TestAnotherClientEncodingStopsBeforeConnecting(t *testing.T) {
	url := "postgres://app@127.0.0.1:1/db?connect_timeout=2&client_encoding=LATIN1"
	t.Setenv("KAFKA2PG_PG_URL", "")
	t.Setenv("DATABASE_URL", "")
	for _, args := range [][]string{
		{"run", "--pg-url", url, "--kafka-brokers", "127.0.0.1:1", "--kafka-group", "g", "--topic", "t", "--metrics-addr="},
		{"check", "--pg-url", url, "--kafka-brokers", "127.0.0.1:1", "--kafka-group", "g", "--topic", "t"},
		{"status", "--pg-url", url},
		{"offsets", "show", "--pg-url", url},
		{"offsets", "reset", "--pg-url", url, "--kafka-brokers", "127.0.0.1:1", "--kafka-group", "g", "--to", "earliest"},
		{"dead-letters", "list", "--pg-url", url},
	} {
		var stdout, stderr bytes.Buffer
		// Without the check, run would retry the closed ports until told
		// to stop.
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		code := dispatch(ctx, args, &stdout, &stderr)
		cancel()
		out := stdout.String() + stderr.String()
		if code == exitOK || !strings.Contains(out, `client_encoding is "LATIN1"`) {
			t.Errorf("%v: exit %d, want a failure naming client_encoding:\n%s", args, code, out)
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
		sessionTimeouts(cc, tc.d)
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
	sink := map[string]ingest.Sink{"t": {Table: schema.RawTable("public", "t", schema.ValueJSON), Mapper: schema.RawMapper{Format: schema.ValueJSON}}}
	b := &stream.Batch{Topic: "t", FirstOffset: 0, NextOffset: 10000}
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
	pool, err := newPool(ctx, url, "test")
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
	if n != 10000 || st != "4min" || lt != "4min" {
		t.Errorf("%d rows with statement_timeout %s and lock_timeout %s, want 10000 with 4min (the longest write deadline by default)", n, st, lt)
	}
}

// run's sessions start with the longest deadline its writer can give: a
// combined transaction's at the defaults, a full batch's isolation's with
// --table-writers 0, scaled with --pg-write-timeout and --batch-max-rows.
func TestRunsStatementTimeoutFollowsItsWriteDeadlines(t *testing.T) {
	t.Setenv("KAFKA2PG_PG_URL", "postgres://u@db/x")
	for _, tc := range []struct {
		args []string
		want time.Duration
	}{
		{nil, 20 * time.Minute},
		{[]string{"--table-writers", "0"}, 4 * time.Minute},
		{[]string{"--table-writers", "0", "--pg-write-timeout", "30s"}, time.Minute},
		{[]string{"--pg-write-timeout", "30s", "--batch-max-rows", "50000"}, time.Minute},
	} {
		_, o := parseRunForTest(t, append([]string{"--topic", "t"}, tc.args...)...)
		if got := o.writerConfig().StatementTimeout(); got != tc.want {
			t.Errorf("%v: statement_timeout %s, want %s", tc.args, got, tc.want)
		}
	}
}
