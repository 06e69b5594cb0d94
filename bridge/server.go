package bridge

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// serverWatch notices that the pool's new connections reach another
// Postgres server than before: a failover to a standby, a restored backup,
// or a restart. Any of them may hold older positions than the partitions
// left (an asynchronous standby lacks the commits it was never sent), and
// a partition with nothing to write would learn of it only at its next
// record. So the watch tells the reader to compare every position at once.
//
// A server is known by what any role may read: the postmaster's start
// time, which differs between any two servers and after any restart; and,
// where the role may read the control file (a superuser, pg_monitor), the
// system identifier and the timeline, which name a failover outright.
type serverWatch struct {
	log *slog.Logger

	mu      sync.Mutex
	seen    serverID // zero until the first connection
	changed func()   // nil until the reader exists
}

// serverID is what tells one Postgres server from another.
type serverID struct {
	started  time.Time // pg_postmaster_start_time()
	system   string    // pg_control_system().system_identifier; "" when not readable
	timeline int64     // pg_control_checkpoint().timeline_id; 0 when not readable
	addr     string    // the server's address and port, for the log
}

func (id serverID) String() string {
	s := fmt.Sprintf("%s started %s", id.addr, id.started.UTC().Format(time.RFC3339Nano))
	if id.system != "" {
		s += fmt.Sprintf(", system %s timeline %d", id.system, id.timeline)
	}
	return s
}

// identifySQL reads the start time and whether the control file may be read.
const identifySQL = `SELECT pg_postmaster_start_time(), coalesce(host(inet_server_addr()), 'local') || ':' || coalesce(inet_server_port(), 0),
	has_function_privilege('pg_control_system()', 'EXECUTE') AND has_function_privilege('pg_control_checkpoint()', 'EXECUTE')`

// identifyTimeout bounds the identification of a new connection: a server
// that does not answer it will not answer the writes either.
const identifyTimeout = 10 * time.Second

// onChange sets what runs when a connection finds another server.
func (w *serverWatch) onChange(f func()) {
	w.mu.Lock()
	w.changed = f
	w.mu.Unlock()
}

// observe is part of the pool's AfterConnect: it identifies the server of
// a new connection and compares it with the last one seen. It fails the
// connection only when the connection itself failed.
func (w *serverWatch) observe(ctx context.Context, conn *pgx.Conn) error {
	ctx, cancel := context.WithTimeout(ctx, identifyTimeout)
	defer cancel()
	var id serverID
	var control bool
	if err := conn.QueryRow(ctx, identifySQL).Scan(&id.started, &id.addr, &control); err != nil {
		return w.failed(conn, err)
	}
	if control {
		err := conn.QueryRow(ctx, `SELECT s.system_identifier::text, c.timeline_id FROM pg_control_system() s, pg_control_checkpoint() c`).
			Scan(&id.system, &id.timeline)
		if err != nil {
			return w.failed(conn, err)
		}
	}
	w.mu.Lock()
	was, changed := w.seen, w.changed
	w.seen = id
	w.mu.Unlock()
	if was.started.IsZero() || was.same(id) {
		return nil
	}
	w.log.Warn("Postgres server changed (a failover, a restore or a restart?); checking every owned partition's durable position now",
		"was", was.String(), "now", id.String())
	if changed != nil {
		changed()
	}
	return nil
}

// same reports whether id is the server w was: the same start time, and
// the same system and timeline where both were read.
func (id serverID) same(o serverID) bool {
	if !id.started.Equal(o.started) {
		return false
	}
	if id.system != "" && o.system != "" {
		return id.system == o.system && id.timeline == o.timeline
	}
	return true
}

// failed decides what an identification error means: a closed connection
// fails, anything else (a privilege, a function a proxy hides) only loses
// the watch this connection.
func (w *serverWatch) failed(conn *pgx.Conn, err error) error {
	if conn.IsClosed() {
		return fmt.Errorf("identify the Postgres server: %w", err)
	}
	w.log.Debug("identify the Postgres server", "error", err.Error())
	return nil
}
