package main

import (
	"bytes"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/url"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/kafka2pg/kafka2pg/internal/pgtest"
	"github.com/kafka2pg/kafka2pg/internal/redact"
)

// The memory limit and GOGC lines are start-up detail: at debug level,
// absent at the default info.
func TestMemoryLimitLinesAreDebug(t *testing.T) {
	t.Setenv("GOGC", "")
	prevLimit, prevGC := debug.SetMemoryLimit(-1), debug.SetGCPercent(100)
	t.Cleanup(func() { debug.SetMemoryLimit(prevLimit); debug.SetGCPercent(prevGC) })
	o := &runOptions{memoryLimitAuto: true}
	o.cfg.Kafka.MaxBufferedBytes = 64 << 20
	for _, c := range []struct {
		level slog.Level
		want  bool
	}{{slog.LevelInfo, false}, {slog.LevelDebug, true}} {
		var buf bytes.Buffer
		setMemoryLimit(o, slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: c.level})))
		got := strings.Contains(buf.String(), "soft memory limit set") && strings.Contains(buf.String(), "GOGC set")
		if got != c.want || (!c.want && buf.Len() > 0) {
			t.Errorf("at level %s the log is %q; want the limit and GOGC lines: %v", c.level, buf.String(), c.want)
		}
	}
}

// pgconn reports a failed connection as every attempt on a line of its
// own, the TLS refusal of sslmode=prefer first. The error a user reads is
// one line naming what the server said, with the password hidden.
func TestAFailedConnectionIsOneLineNamingTheReason(t *testing.T) {
	u, err := url.Parse(pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	role := fmt.Sprintf("k2p_no_such_role_%d", rand.Uint32())
	u.User = url.UserPassword(role, "s3cret-Pa55")
	q := u.Query()
	q.Set("sslmode", "prefer") // the test server has no TLS: refused, then plain text
	u.RawQuery = q.Encode()
	conn, err := pgx.Connect(t.Context(), u.String())
	if err == nil {
		conn.Close(t.Context())
		t.Fatalf("connected as %s, which does not exist", role)
	}
	if !strings.Contains(err.Error(), "\n") {
		t.Fatalf("pgconn's error is one line (one attempt?), so this test proves nothing: %v", err)
	}
	got := redact.Err(fmt.Errorf("migrate the kafka2pg schema: %w", err)).Error()
	want := fmt.Sprintf(`FATAL: role "%s" does not exist (SQLSTATE 28000)`, role)
	if strings.ContainsAny(got, "\n\t") || !strings.Contains(got, want) || strings.Contains(got, "tls error") ||
		!strings.HasPrefix(got, "migrate the kafka2pg schema: failed to connect to `user="+role) {
		t.Errorf("redact.Err(connect error) = %q\nwant one line that starts with the operation and ends in %q, without the TLS attempt", got, want)
	}
	if strings.Contains(got, "s3cret-Pa55") {
		t.Errorf("the password is in %q", got)
	}
}
