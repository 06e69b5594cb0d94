package trouble

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"
)

func TestAStreakIsLoggedOnceAnIntervalWithItsCountAndTheTimeSinceTheLastSuccess(t *testing.T) {
	var buf bytes.Buffer
	l := New(slog.New(slog.NewTextHandler(&buf, nil)), "postgres unreachable; retrying", 30*time.Second)
	clock := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	l.now = func() time.Time { return clock }
	l.lastOK = clock
	boom := errors.New("connection refused")

	for range 100 { // 100 failures over 50 s: the first, then one line at 30 s
		clock = clock.Add(500 * time.Millisecond)
		l.Fail(boom, "partition", 3)
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("%d lines for 100 failures in 50 s, want 2 (the first, then one 30 s later):\n%s", len(lines), buf.String())
	}
	for _, want := range []string{"level=WARN", `msg="postgres unreachable; retrying"`, `error="connection refused"`, "since_last_success=1s", "partition=3"} {
		if !strings.Contains(lines[0], want) {
			t.Errorf("first line lacks %s: %s", want, lines[0])
		}
	}
	for _, want := range []string{"failures=60", "failing_for=30s", "since_last_success=31s"} {
		if !strings.Contains(lines[1], want) {
			t.Errorf("second line lacks %s: %s", want, lines[1])
		}
	}
	if st := l.State(); !st.Failing || st.Failures != 100 || st.LastErr != boom {
		t.Errorf("state %+v, want failing with 100 failures and the last error", st)
	}

	buf.Reset()
	l.OK()
	if out := buf.String(); !strings.Contains(out, "level=INFO") || !strings.Contains(out, "recovered") || !strings.Contains(out, "failures=100") {
		t.Errorf("recovery line: %s", out)
	}
	if st := l.State(); st.Failing || st.Failures != 0 {
		t.Errorf("state after OK %+v, want not failing", st)
	}
	buf.Reset()
	clock = clock.Add(time.Second)
	l.Fail(boom)
	if !strings.Contains(buf.String(), "level=WARN") {
		t.Errorf("the first failure of a new streak was not logged: %q", buf.String())
	}
}
