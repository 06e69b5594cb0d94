package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"
)

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
		if got := o.cfg.StatementTimeout(); got != tc.want {
			t.Errorf("%v: statement_timeout %s, want %s", tc.args, got, tc.want)
		}
	}
}
