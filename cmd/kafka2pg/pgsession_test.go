package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
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
