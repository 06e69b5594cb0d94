package bridge

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/kafka2pg/kafka2pg/internal/pgtest"
)

// The watch names a server by what any role may read; a connection to the
// server it saw last is no news, one to another server (here: the same
// server seen as if it had started at another time, as a promoted standby
// or a restored backup has) is, once, with a WARN and the callback.
func TestServerWatchNoticesAnotherServer(t *testing.T) {
	var logs bytes.Buffer
	w := &serverWatch{log: slog.New(slog.NewTextHandler(&logs, nil))}
	changes := 0
	w.onChange(func() { changes++ })
	conn := pgtest.Conn(t)
	for range 2 {
		if err := w.observe(t.Context(), conn); err != nil {
			t.Fatal(err)
		}
	}
	if changes != 0 || w.seen.started.IsZero() {
		t.Fatalf("after two connections to one server: %d changes, seen %+v; want 0 and a start time", changes, w.seen)
	}
	if w.seen.system == "" || w.seen.timeline < 1 {
		t.Errorf("seen %+v: a superuser reads the system identifier and the timeline", w.seen)
	}
	w.mu.Lock()
	w.seen.started = w.seen.started.Add(-time.Hour)
	w.mu.Unlock()
	if err := w.observe(t.Context(), conn); err != nil {
		t.Fatal(err)
	}
	if changes != 1 || !strings.Contains(logs.String(), "Postgres server changed") {
		t.Fatalf("after a connection to another server: %d changes, logs %q; want 1 and a WARN", changes, logs.String())
	}
	if err := w.observe(t.Context(), conn); err != nil || changes != 1 {
		t.Fatalf("the same server again: %d changes (%v), want still 1", changes, err)
	}
}

// A role that may not read the control file is known by the start time
// alone; a timeline that moved names a failover even at one start time.
func TestServerIdentity(t *testing.T) {
	at := time.Unix(1764495120, 0)
	for _, tc := range []struct {
		name string
		a, b serverID
		same bool
	}{
		{"one start time, no control file", serverID{started: at}, serverID{started: at}, true},
		{"another start time", serverID{started: at}, serverID{started: at.Add(time.Second)}, false},
		{"another timeline", serverID{started: at, system: "7", timeline: 1}, serverID{started: at, system: "7", timeline: 2}, false},
		{"another system", serverID{started: at, system: "7", timeline: 1}, serverID{started: at, system: "8", timeline: 1}, false},
		{"control file read by one side only", serverID{started: at, system: "7", timeline: 1}, serverID{started: at}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.a.same(tc.b); got != tc.same {
				t.Errorf("%v.same(%v) = %v, want %v", tc.a, tc.b, got, tc.same)
			}
		})
	}
}
