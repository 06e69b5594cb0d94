package pgsession

import (
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// setUserTimeout is a net.Dialer Control that sets TCP_USER_TIMEOUT on TCP
// sockets.
func setUserTimeout(d time.Duration) func(network, address string, c syscall.RawConn) error {
	return func(network, _ string, c syscall.RawConn) error {
		if !isTCP(network) {
			return nil
		}
		var serr error
		err := c.Control(func(fd uintptr) {
			serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_USER_TIMEOUT, int(d.Milliseconds()))
		})
		if err != nil {
			return err
		}
		return serr
	}
}
