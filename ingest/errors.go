package ingest

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/kafka2pg/kafka2pg/stream"
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
	if refusedCertificate(err) {
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

// Causes of a failed write, as Cause names them: the values of the cause
// label of kafka2pg_ingest_write_errors_total.
const (
	CauseFenced     = "fenced"     // another owner holds the partition (stream.ErrFenced)
	CauseTimeout    = "timeout"    // a deadline, statement_timeout or lock_timeout
	CauseConnection = "connection" // the connection or the server: SQLSTATE 08, 53, 57P, 58, network errors
	CauseReadOnly   = "read_only"  // SQLSTATE 25006: a standby, or a read-only database
	CauseRefused    = "refused"    // the role: authentication (28xxx), a privilege (42501), a certificate
	CauseData       = "data"       // the rows or the table: SQLSTATE 22, 23, 42 (but 42501)
	CauseOther      = "other"
)

// Cause sorts a failed write (or claim) by what went wrong, for metrics,
// logs and the decision to give up: only CauseRefused is permanent.
func Cause(err error) string {
	var pgErr *pgconn.PgError
	var late *DeadlineError
	switch {
	case errors.Is(err, stream.ErrFenced):
		return CauseFenced
	case errors.As(err, &late):
		// Whatever the cancelled statement reported, the deadline ended it.
		return CauseTimeout
	case refusedCertificate(err):
		return CauseRefused
	case errors.As(err, &pgErr):
		code := pgErr.Code
		switch {
		case code == readOnlyTransaction:
			return CauseReadOnly
		case code == "42501" || strings.HasPrefix(code, "28"):
			return CauseRefused
		case code == "57014" || code == "55P03":
			return CauseTimeout
		case strings.HasPrefix(code, "08") || strings.HasPrefix(code, "53") || strings.HasPrefix(code, "57") || strings.HasPrefix(code, "58"):
			return CauseConnection
		case strings.HasPrefix(code, "22") || strings.HasPrefix(code, "23") || strings.HasPrefix(code, "42"):
			return CauseData
		}
		return CauseOther
	case errors.Is(err, context.DeadlineExceeded) || pgconn.Timeout(err):
		return CauseTimeout
	case Retryable(err):
		return CauseConnection
	}
	return CauseOther
}

// Permanent reports whether retrying err cannot help: Postgres refused the
// role or a privilege (CauseRefused). The bridge gives up on such errors
// after a short grace, for the grants and passwords that a deployment is
// still rolling out.
func Permanent(err error) bool { return Cause(err) == CauseRefused }

// refusedCertificate reports whether err is a certificate the client cannot
// verify: waiting does not make it verifiable.
func refusedCertificate(err error) bool {
	var unknownCA x509.UnknownAuthorityError
	var invalid x509.CertificateInvalidError
	var hostname x509.HostnameError
	var verify *tls.CertificateVerificationError
	return errors.As(err, &unknownCA) || errors.As(err, &invalid) || errors.As(err, &hostname) || errors.As(err, &verify)
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
