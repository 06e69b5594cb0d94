// Package redact makes errors and URLs fit to show: passwords hidden, and
// pgconn's report of a failed connection cut to the attempt that matters,
// on one line. The bridge's readiness and its errors go through it, and so
// does everything the kafka2pg command prints.
package redact

import (
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
)

// URL hides the password of a URL (or of a key=value connection string).
func URL(s string) string {
	if u, err := url.Parse(s); err == nil && u.User != nil {
		if _, ok := u.User.Password(); ok {
			u.User = url.UserPassword(u.User.Username(), "xxxxx")
			return u.String()
		}
	}
	return kvPassword.ReplaceAllString(s, "${1}xxxxx")
}

var kvPassword = regexp.MustCompile(`(password=)\S+`)
var urlPassword = regexp.MustCompile(`(://[^:/@\s]+:)[^@\s]+@`)

// Err is an error as a user reads it: URL passwords a driver may have put
// in it hidden, and pgconn's report of a failed connection cut to the
// attempt that matters, on one line. It wraps err, so errors.Is and As see
// through it.
func Err(err error) error {
	if err == nil {
		return nil
	}
	s := err.Error()
	r := oneLineConnectError(s, err)
	r = urlPassword.ReplaceAllString(r, "${1}xxxxx@")
	r = kvPassword.ReplaceAllString(r, "${1}xxxxx")
	if r == s {
		return err
	}
	return &shownError{msg: r, err: err}
}

// shownError is an error with a message rewritten for display.
type shownError struct {
	msg string
	err error
}

func (e *shownError) Error() string { return e.msg }
func (e *shownError) Unwrap() error { return e.err }

// oneLineConnectError rewrites, in s (err's message), pgconn's error of a
// failed connection. pgconn tries every address of every host, with TLS and
// then without under sslmode=prefer, and joins the errors of all the
// attempts on lines of their own: a wrong password read "tls error: server
// refused TLS connection" first, and a literal \n\t in a log line. What
// matters is the last attempt the server answered (it names the reason:
// password authentication failed, no such database), else the last one.
func oneLineConnectError(s string, err error) string {
	var ce *pgconn.ConnectError
	if errors.As(err, &ce) && ce.Config != nil {
		if joined, ok := ce.Unwrap().(interface{ Unwrap() []error }); ok {
			if attempts := joined.Unwrap(); len(attempts) > 1 {
				pick := attempts[len(attempts)-1]
				for _, a := range slices.Backward(attempts) {
					var pgErr *pgconn.PgError
					if errors.As(a, &pgErr) {
						pick = a
						break
					}
				}
				short := fmt.Sprintf("failed to connect to `user=%s database=%s`: %s", ce.Config.User, ce.Config.Database, pick.Error())
				s = strings.Replace(s, ce.Error(), short, 1)
			}
		}
	}
	// Whatever else came in several lines still goes on one.
	return strings.ReplaceAll(strings.ReplaceAll(s, "\n\t", "; "), "\n", "; ")
}
