package pgsession

import (
	"context"
	"net"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/kafka2pg/kafka2pg/ingest"
	"github.com/kafka2pg/kafka2pg/pgcopy"
)

// The transport of every Postgres connection kafka2pg opens. A connection
// that stops answering without a reset (a hung pooler, a load balancer or a
// NAT that dropped its state, a host that went away) must fail, not hang:
// a connect has a deadline, idle connections are probed by TCP keepalives,
// and unacknowledged data fails the connection after tcpUserTimeout. A
// server that acknowledges but never answers is the write deadline's
// (--pg-write-timeout, ingest.Config.WriteTimeout).
const (
	// defaultConnectTimeout bounds each host's connect, TLS and
	// authentication when the URL sets no connect_timeout; with several
	// hosts in the URL the next one is tried after it.
	defaultConnectTimeout = 10 * time.Second
	tcpKeepAliveIdle      = 15 * time.Second
	tcpKeepAliveInterval  = 5 * time.Second
	tcpKeepAliveCount     = 3
	// tcpUserTimeout is how long sent data may stay unacknowledged before
	// the kernel fails the connection (Linux TCP_USER_TIMEOUT); without it
	// a write to a vanished host is retransmitted for some 15 minutes.
	tcpUserTimeout = 30 * time.Second
)

// Configure is what every kafka2pg connection to Postgres gets: the
// session parameters (Params), statement_timeout and lock_timeout at
// statementTimeout (Timeouts), and the transport (pgTransport).
func Configure(cc *pgconn.Config, app string, statementTimeout time.Duration) error {
	if err := Params(cc, app); err != nil {
		return err
	}
	Timeouts(cc, statementTimeout)
	pgTransport(cc)
	return nil
}

// pgTransport sets the connect timeout (unless the URL or PGCONNECT_TIMEOUT
// sets a positive connect_timeout), the dialer with keepalives and
// TCP_USER_TIMEOUT, and the discarding of sessions that can no longer
// write (ingest.DiscardsSession): a read-only session, as a standby or a
// database switched to default_transaction_read_only opens, or one the
// server is shutting down, is closed at its error instead of going back to
// the pool, so that a failover or a reset heals with the next connection.
func pgTransport(cc *pgconn.Config) {
	if cc.ConnectTimeout <= 0 {
		cc.ConnectTimeout = defaultConnectTimeout
	}
	d := &net.Dialer{
		KeepAliveConfig: net.KeepAliveConfig{Enable: true, Idle: tcpKeepAliveIdle, Interval: tcpKeepAliveInterval, Count: tcpKeepAliveCount},
		Control:         setUserTimeout(tcpUserTimeout),
	}
	cc.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		return d.DialContext(ctx, network, addr)
	}
	prev := cc.OnPgError
	cc.OnPgError = func(c *pgconn.PgConn, e *pgconn.PgError) bool {
		if ingest.DiscardsSession(e) {
			return false // pgconn closes the connection
		}
		return prev == nil || prev(c, e)
	}
}

// isTCP reports whether a dialer's network is TCP (not a Unix socket).
func isTCP(network string) bool { return strings.HasPrefix(network, "tcp") }

// RegisterCodecs is the AfterConnect of every pool that COPYs rows (run,
// dead-letters replay): numeric values encoded without math/big, and
// timetz, which pgx lacks (pgvalue.TimeTZ, which format debezium sinks
// decode).
func RegisterCodecs(_ context.Context, conn *pgx.Conn) error {
	pgcopy.RegisterNumericCodec(conn.TypeMap())
	pgcopy.RegisterTimeTZ(conn.TypeMap())
	return nil
}
