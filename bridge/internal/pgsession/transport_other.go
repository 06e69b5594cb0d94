//go:build !linux

package pgsession

import (
	"syscall"
	"time"
)

// setUserTimeout does nothing where TCP_USER_TIMEOUT does not exist; the
// keepalives and the writes' deadlines still apply.
func setUserTimeout(time.Duration) func(network, address string, c syscall.RawConn) error {
	return func(string, string, syscall.RawConn) error { return nil }
}
