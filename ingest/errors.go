package ingest

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
)

// Retryable reports whether err is trouble of the connection or the server
// (SQLSTATE classes 08, 53, 57, 58, serialization failures, deadlocks, lock
// timeouts, a read-only server) rather than of the data. Such errors are
// retried with backoff and never dead-lettered.
func Retryable(err error) bool {
	if err == nil {
		return false
	}
	// A certificate Postgres presents that we cannot verify will not
	// become verifiable by waiting: fail fast with the reason.
	var unknownCA x509.UnknownAuthorityError
	var invalid x509.CertificateInvalidError
	var hostname x509.HostnameError
	var verify *tls.CertificateVerificationError
	if errors.As(err, &unknownCA) || errors.As(err, &invalid) || errors.As(err, &hostname) || errors.As(err, &verify) {
		return false
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code[:2] {
		case "08", "53", "57", "58":
			return true
		}
		switch pgErr.Code {
		case "40001", "40P01", "55P03", "25006":
			return true
		}
		return false
	}
	if pgconn.SafeToRetry(err) || pgconn.Timeout(err) {
		return true
	}
	var netErr net.Error
	var connErr *pgconn.ConnectError
	return errors.As(err, &netErr) || errors.As(err, &connErr) || errors.Is(err, net.ErrClosed)
}

// DiscardsSession reports whether a Postgres error means its session can
// no longer write and must not go back to the pool: SQLSTATE 25006 (the
// session is read-only: a standby, or a database set to
// default_transaction_read_only when the session began, which a reset does
// not change for open sessions), class 08 (connection exceptions) and 57P
// (the server is shutting down or cannot connect now).
func DiscardsSession(e *pgconn.PgError) bool {
	return e.Code == readOnlyTransaction || strings.HasPrefix(e.Code, "08") || strings.HasPrefix(e.Code, "57P")
}

// readOnlyTransaction is SQLSTATE 25006 read_only_sql_transaction.
const readOnlyTransaction = "25006"
